/* Reading a checkpoint back: ddpc_ckpt_load (model, optimizer state and counters) and
 * ddpc_ckpt_export (the parameters as one safetensors file). Invariant: load is all-or-nothing:
 * the checkpoint is verified and every tensor checked against the model and the optimizer before
 * the first byte is copied, so a refused checkpoint leaves the run as it was. */
#include "train/checkpoint_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/safetensors.h>
#include <ddpc/weights.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Checks that optimizer.safetensors of ckpt fits o and m: same optimizer type, step count equal
 * to state.json's, and exactly one F32 tensor "<param>.<state>" of the parameter's shape per
 * parameter and state buffer. */
static ddpc_status check_optimizer(const ddpc_safetensors *f, const char *file,
                                   const ddpc_model *m, ddpc_optim *o, const ddpc__ckpt_extra *x)
{
    const char *type = ddpc_safetensors_metadata(f, "optimizer");
    const char *want = ddpc_optim_type_name(ddpc_optim_config_of(o)->type);
    if (!type || strcmp(type, want) != 0 || strcmp(x->optim_type, want) != 0)
        return ddpc_errorf(DDPC_EFORMAT, "%s: optimizer is %s, but the run uses %s", file,
                           type ? type : "unknown", want);
    const char *steps = ddpc_safetensors_metadata(f, "step_count");
    if (!steps || strtoll(steps, NULL, 10) != x->optim_step_count || x->optim_step_count < 0)
        return ddpc_errorf(DDPC_EFORMAT, "%s: step_count %s differs from state.json's %" PRId64,
                           file, steps ? steps : "(missing)", x->optim_step_count);
    size_t nt = ddpc_model_num_tensors(m), ns = ddpc_optim_num_state(o);
    if (ddpc_safetensors_count(f) != nt * ns)
        return ddpc_errorf(DDPC_EFORMAT, "%s: holds %zu tensors, but %s state for this model has "
                           "%zu", file, ddpc_safetensors_count(f), want, nt * ns);
    for (size_t k = 0; k < ns; k++) {
        const char *sname = NULL;
        ddpc_optim_state(o, k, &sname);
        for (size_t i = 0; i < nt; i++) {
            const ddpc_param *p = ddpc_model_tensor(m, i);
            char name[DDPC_PARAM_NAME_MAX + 32];
            ddpc_st_info info;
            snprintf(name, sizeof name, "%s.%s", p->name, sname);
            DDPC_TRY(ddpc_safetensors_find(f, name, &info));
            bool same = strcmp(info.dtype, "F32") == 0 && info.ndim == p->ndim;
            for (int d = 0; same && d < p->ndim; d++)
                same = info.shape[d] == p->shape[d];
            if (!same)
                return ddpc_errorf(DDPC_EFORMAT, "%s: tensor '%s' has another dtype or shape than "
                                   "parameter '%s'", file, name, p->name);
        }
    }
    return DDPC_OK;
}

static void copy_optimizer(const ddpc_safetensors *f, const ddpc_model *m, ddpc_optim *o,
                           int64_t step_count)
{
    size_t nt = ddpc_model_num_tensors(m), ns = ddpc_optim_num_state(o);
    for (size_t k = 0; k < ns; k++) {
        const char *sname = NULL;
        float *buf = ddpc_optim_state(o, k, &sname);
        for (size_t i = 0; i < nt; i++) {
            const ddpc_param *p = ddpc_model_tensor(m, i);
            char name[DDPC_PARAM_NAME_MAX + 32];
            ddpc_st_info info;
            snprintf(name, sizeof name, "%s.%s", p->name, sname);
            ddpc_safetensors_find(f, name, &info);
            memcpy(buf + p->offset, info.data, p->numel * sizeof(float));
        }
    }
    ddpc_optim_set_step_count(o, step_count);
}

ddpc_status ddpc_ckpt_load(const char *path, ddpc_model *m, ddpc_optim *o, ddpc_ckpt_state *s)
{
    if (!path || !m)
        return ddpc_errorf(DDPC_EINVAL, "checkpoint load: path or model is NULL");
    if (o && ddpc_optim_numel(o) != ddpc_model_num_params(m))
        return ddpc_errorf(DDPC_EINVAL, "checkpoint load: the optimizer holds %zu parameters but "
                           "the model has %zu", ddpc_optim_numel(o), ddpc_model_num_params(m));
    DDPC_TRY(ddpc_ckpt_verify(path));
    ddpc_ckpt_state st;
    ddpc__ckpt_extra x;
    DDPC_TRY(ddpc__ckpt_state_load(path, &st, &x));
    ddpc_status r = DDPC_OK;
    ddpc_safetensors *f = NULL;
    char file[DDPC__CKPT_PATH_MAX];
    const char *type = ddpc_model_config_of(m)->type;
    if (strcmp(x.model_type, type) != 0 || x.num_params != (int64_t)ddpc_model_num_params(m)) {
        r = ddpc_errorf(DDPC_EFORMAT, "%s: holds a %s model of %" PRId64 " parameters, but the run "
                        "has a %s model of %zu", path, x.model_type, x.num_params, type,
                        ddpc_model_num_params(m));
        goto out;
    }
    if (o) {
        r = ddpc__ckpt_join(file, sizeof file, path, DDPC__CKPT_OPTIM);
        if (r == DDPC_OK)
            r = ddpc_safetensors_open(&f, file);
        if (r == DDPC_OK)
            r = check_optimizer(f, file, m, o, &x);
        if (r != DDPC_OK)
            goto out;
    }
    /* Strict and all-or-nothing itself; after it nothing can fail. */
    r = ddpc_weights_load_opts(m, path, true, NULL, 0);
    if (r == DDPC_OK && o)
        copy_optimizer(f, m, o, x.optim_step_count);
out:
    ddpc_safetensors_close(f);
    if (r == DDPC_OK && s)
        *s = st;
    else
        ddpc_ckpt_state_fini(&st);
    return r;
}

ddpc_status ddpc_ckpt_export(const char *path, const char *out_file)
{
    if (!path || !out_file)
        return ddpc_errorf(DDPC_EINVAL, "checkpoint export: path or output is NULL");
    DDPC_TRY(ddpc_ckpt_verify(path));
    ddpc_ckpt_state st;
    ddpc__ckpt_extra x;
    DDPC_TRY(ddpc__ckpt_state_load(path, &st, &x));
    ddpc_ckpt_state_fini(&st);
    char file[DDPC__CKPT_PATH_MAX];
    DDPC_TRY(ddpc__ckpt_join(file, sizeof file, path, DDPC__CKPT_MODEL));
    ddpc_safetensors *f = NULL;
    DDPC_TRY(ddpc_safetensors_open(&f, file));
    size_t n = ddpc_safetensors_count(f);
    ddpc_st_tensor *ts = ddpc_calloc(n ? n : 1, sizeof *ts);
    ddpc_status r = ts ? DDPC_OK : ddpc_errorf(DDPC_ENOMEM, "out of memory exporting %s", path);
    for (size_t i = 0; i < n && r == DDPC_OK; i++) {
        ddpc_st_info info;
        ddpc_safetensors_info(f, i, &info);
        if (strcmp(info.dtype, "F32") != 0) {
            r = ddpc_errorf(DDPC_EFORMAT, "%s: tensor '%s' is %s, not F32", file, info.name,
                            info.dtype);
            break;
        }
        ts[i].name = info.name;
        ts[i].ndim = info.ndim;
        memcpy(ts[i].shape, info.shape, sizeof info.shape);
        ts[i].data = info.data;
    }
    char step[32];
    snprintf(step, sizeof step, "%" PRId64, st.step);
    const char *keys[] = {"format", "model", "step"};
    const char *vals[] = {"pt", x.model_type, step};
    if (r == DDPC_OK)
        r = ddpc_safetensors_write(out_file, ts, n, keys, vals, 3);
    ddpc_free(ts);
    ddpc_safetensors_close(f);
    return r;
}
