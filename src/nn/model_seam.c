// SPDX-License-Identifier: MIT
/* The accessors a model type's members use (ddpc/model_ops.h): registration with the checks a
 * user's names and shapes need, and the hook-honouring parameter and gradient pointers. The
 * built-in types reach the same fields through model_impl.h's inline forms. */
#include "nn/model_impl.h"

#include <string.h>

void *ddpc_model_impl(const ddpc_model *m) { return m->impl; }
void ddpc_model_set_impl(ddpc_model *m, void *impl) { m->impl = impl; }
const void *ddpc_model_type_config(const ddpc_model *m) { return m->type_cfg; }

/* DDPC_EINVAL unless `name` and `shape` can be a new view of `what` (parameter or buffer). */
static ddpc_status check_view(const ddpc_model *m, const char *what, const char *name, int ndim,
                              const int64_t *shape)
{
    if (m->params)
        return ddpc_errorf(DDPC_EINVAL, "model '%s': %s '%s' registered after build (the "
                           "buffers are allocated)", m->cfg.type, what, name ? name : "");
    size_t len = name ? strlen(name) : 0;
    if (len == 0 || len >= DDPC_PARAM_NAME_MAX)
        return ddpc_errorf(DDPC_EINVAL, "model '%s': a %s name must be 1 to %d characters, got "
                           "'%s'", m->cfg.type, what, DDPC_PARAM_NAME_MAX - 1, name ? name : "");
    if (ndim < 1 || ndim > 4 || !shape)
        return ddpc_errorf(DDPC_EINVAL, "model '%s': %s '%s' has %d dimensions (1 to 4 allowed)",
                           m->cfg.type, what, name, ndim);
    for (int i = 0; i < ndim; i++)
        if (shape[i] <= 0)
            return ddpc_errorf(DDPC_EINVAL, "model '%s': %s '%s' has size %lld in dimension %d",
                               m->cfg.type, what, name, (long long)shape[i], i);
    /* One namespace: a state_dict holds parameters and buffers side by side. */
    for (size_t i = 0; i < m->n_tensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0)
            return ddpc_errorf(DDPC_EINVAL, "model '%s': '%s' is registered twice", m->cfg.type,
                               name);
    for (size_t i = 0; i < m->n_buffers; i++)
        if (strcmp(m->buffer_views[i].name, name) == 0)
            return ddpc_errorf(DDPC_EINVAL, "model '%s': '%s' is registered twice", m->cfg.type,
                               name);
    return DDPC_OK;
}

ddpc_status ddpc_model_add_param(ddpc_model *m, const char *name, int ndim, const int64_t *shape,
                                 bool decay, int *index)
{
    DDPC_TRY(check_view(m, "parameter", name, ndim, shape));
    int i = ddpc__model_add_param(m, name, ndim, shape, decay);
    if (i < 0)
        return ddpc_errorf(DDPC_ENOMEM, "model '%s': out of memory registering '%s'",
                           m->cfg.type, name);
    if (index)
        *index = i;
    return DDPC_OK;
}

ddpc_status ddpc_model_add_buffer(ddpc_model *m, const char *name, int ndim, const int64_t *shape,
                                  int *index)
{
    DDPC_TRY(check_view(m, "buffer", name, ndim, shape));
    int i = ddpc__model_add_buffer(m, name, ndim, shape);
    if (i < 0)
        return ddpc_errorf(DDPC_ENOMEM, "model '%s': out of memory registering '%s'",
                           m->cfg.type, name);
    if (index)
        *index = i;
    return DDPC_OK;
}

float *ddpc_model_param_ptr(ddpc_model *m, int index) { return ddpc__param_ptr(m, index); }
float *ddpc_model_grad_ptr(ddpc_model *m, int index) { return ddpc__grad_ptr(m, index); }
void ddpc_model_grad_ready(ddpc_model *m, int index) { ddpc__model_grad_ready(m, index); }
float *ddpc_model_buffer_ptr(ddpc_model *m, int index) { return ddpc__buffer_ptr(m, index); }
float *ddpc_model_host_buffer(ddpc_model *m, int index) { return ddpc__host_buffer_ptr(m, index); }
float *ddpc_model_host_param(ddpc_model *m, int index)
{
    return m->params + m->tensors[index].offset;
}
float *ddpc_model_arena(ddpc_model *m) { return m->arena; }

void ddpc_model_set_probs(ddpc_model *m, const float *probs, size_t count)
{
    m->probs = probs;
    m->probs_count = count;
}

void ddpc_model_set_train_flops(ddpc_model *m, double flops) { m->train_flops_per_sample = flops; }
void ddpc_model_set_outputs_per_sample(ddpc_model *m, int64_t outputs)
{
    m->outputs_per_sample = outputs;
}
