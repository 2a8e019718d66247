// SPDX-License-Identifier: MIT
/* The optimizer object: config defaults and validation, state allocation, the step dispatch and the
 * checkpoint accessors. The update math lives in sgd.c and adamw.c.
 * Invariant: a created optimizer always has a valid config and all its state buffers allocated. */
#include "optim/optim_impl.h"

#include <ddpc/alloc.h>

#include <math.h>
#include <string.h>
#include <strings.h>

ddpc_optim_config ddpc_optim_config_default(void)
{
    return (ddpc_optim_config){
        .type = DDPC_OPTIM_SGD,
        .lr = 0.01f,
        .momentum = 0.0f,
        .dampening = 0.0f,
        .nesterov = false,
        .weight_decay = 0.0f,
        .beta1 = 0.9f,
        .beta2 = 0.999f,
        .eps = 1e-8f,
    };
}

const char *ddpc_optim_type_name(ddpc_optim_type t)
{
    switch (t) {
    case DDPC_OPTIM_SGD:
        return "sgd";
    case DDPC_OPTIM_ADAMW:
        return "adamw";
    }
    return "unknown";
}

ddpc_status ddpc_optim_type_from_name(const char *name, ddpc_optim_type *out)
{
    if (!name || !out)
        return ddpc_errorf(DDPC_EINVAL, "ddpc_optim_type_from_name: name and out must be non-NULL");
    if (strcasecmp(name, "sgd") == 0)
        *out = DDPC_OPTIM_SGD;
    else if (strcasecmp(name, "adamw") == 0)
        *out = DDPC_OPTIM_ADAMW;
    else
        return ddpc_errorf(DDPC_EINVAL, "unknown optimizer '%s' (expected 'sgd' or 'adamw')", name);
    return DDPC_OK;
}

/* True for a finite x >= 0 (NaN fails). */
static bool nonneg(float x)
{
    return x >= 0.0f && isfinite(x);
}

static ddpc_status check_sgd(const ddpc_optim_config *c)
{
    if (!nonneg(c->momentum))
        return ddpc_errorf(DDPC_EINVAL, "SGD momentum %g must be finite and >= 0", (double)c->momentum);
    if (!nonneg(c->dampening))
        return ddpc_errorf(DDPC_EINVAL, "SGD dampening %g must be finite and >= 0",
                           (double)c->dampening);
    if (c->nesterov && (c->momentum <= 0.0f || c->dampening != 0.0f))
        return ddpc_errorf(DDPC_EINVAL, "SGD nesterov needs momentum > 0 and dampening 0 "
                           "(got momentum %g, dampening %g)",
                           (double)c->momentum, (double)c->dampening);
    return DDPC_OK;
}

static ddpc_status check_adamw(const ddpc_optim_config *c)
{
    if (!(c->beta1 >= 0.0f && c->beta1 < 1.0f))
        return ddpc_errorf(DDPC_EINVAL, "AdamW beta1 %g must be in [0, 1)", (double)c->beta1);
    if (!(c->beta2 >= 0.0f && c->beta2 < 1.0f))
        return ddpc_errorf(DDPC_EINVAL, "AdamW beta2 %g must be in [0, 1)", (double)c->beta2);
    if (!nonneg(c->eps))
        return ddpc_errorf(DDPC_EINVAL, "AdamW eps %g must be finite and >= 0", (double)c->eps);
    return DDPC_OK;
}

static ddpc_status check_config(const ddpc_optim_config *c)
{
    if (!nonneg(c->lr))
        return ddpc_errorf(DDPC_EINVAL, "optimizer lr %g must be finite and >= 0", (double)c->lr);
    if (!nonneg(c->weight_decay))
        return ddpc_errorf(DDPC_EINVAL, "optimizer weight_decay %g must be finite and >= 0",
                           (double)c->weight_decay);
    switch (c->type) {
    case DDPC_OPTIM_SGD:
        return check_sgd(c);
    case DDPC_OPTIM_ADAMW:
        return check_adamw(c);
    }
    return ddpc_errorf(DDPC_EINVAL, "unknown optimizer type %d", (int)c->type);
}

ddpc_status ddpc_optim_create(ddpc_optim **out, const ddpc_optim_config *cfg, size_t n)
{
    return ddpc_optim_create_on(out, cfg, n, NULL);
}

ddpc_status ddpc_optim_create_on(ddpc_optim **out, const ddpc_optim_config *cfg, size_t n,
                                 const ddpc_kernel_table *k)
{
    if (!out || !cfg)
        return ddpc_errorf(DDPC_EINVAL, "ddpc_optim_create: out and cfg must be non-NULL");
    DDPC_TRY(check_config(cfg));
    ddpc_optim *o = ddpc_calloc(1, sizeof *o);
    if (!o)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory allocating the %s optimizer",
                           ddpc_optim_type_name(cfg->type));
    o->cfg = *cfg;
    o->n = n;
    o->nstate = ddpc_optim_state_buffers(cfg->type);
    if (cfg->type == DDPC_OPTIM_SGD) {
        o->state_name[0] = "momentum";
    } else {
        o->state_name[0] = "exp_avg";
        o->state_name[1] = "exp_avg_sq";
    }
    o->k = k ? k : ddpc_kernel_table_cpu();
    bool device = o->k->kind != DDPC_DEVICE_CPU;
    for (size_t i = 0; i < o->nstate; i++) {
        o->state[i] = ddpc_calloc(n, sizeof(float));
        o->kstate[i] = device ? o->k->alloc(n * sizeof(float)) : o->state[i];
        if (!o->state[i] || !o->kstate[i]) {
            const char *what = o->state_name[i];
            ddpc_optim_destroy(o);
            return ddpc_errorf(DDPC_ENOMEM, "out of memory allocating %s optimizer state '%s' "
                               "(%zu floats)", ddpc_optim_type_name(cfg->type), what, n);
        }
    }
    *out = o;
    return DDPC_OK;
}

void ddpc_optim_destroy(ddpc_optim *o)
{
    if (!o)
        return;
    for (size_t i = 0; i < DDPC_OPTIM_MAX_STATE; i++) {
        if (o->k && o->k->kind != DDPC_DEVICE_CPU)
            o->k->free(o->kstate[i]);
        ddpc_free(o->state[i]);
    }
    ddpc_free(o);
}

void ddpc_optim_step(ddpc_optim *o, float *params, const float *grads, const uint8_t *decay_mask,
                     float lr)
{
    ddpc_range all = {0, o->n};
    ddpc_optim_step_ranges(o, params, grads, decay_mask, &all, 1, lr);
}

/* The update of state elements [off, off + n) on the optimizer's device. */
static void device_update(ddpc_optim *o, size_t off, size_t n, float *params, const float *grads,
                          const uint8_t *mask, float lr)
{
    if (o->cfg.type == DDPC_OPTIM_SGD) {
        ddpc_sgd_coef c = ddpc__sgd_coef_of(o, lr);
        o->k->sgd_update(params, grads, o->kstate[0] ? o->kstate[0] + off : NULL, mask,
                         (int64_t)n, &c);
    } else {
        ddpc_adamw_coef c = ddpc__adamw_coef_of(o, lr);
        o->k->adamw_update(params, grads, o->kstate[0] + off, o->kstate[1] + off, mask,
                           (int64_t)n, &c);
    }
}

void ddpc_optim_step_ranges(ddpc_optim *o, float *params, const float *grads,
                            const uint8_t *decay_mask, const ddpc_range *ranges, size_t n_ranges,
                            float lr)
{
    o->step++;
    size_t off = 0;
    for (size_t i = 0; i < n_ranges && off < o->n; i++) {
        size_t lo = ranges[i].lo, len = ranges[i].len;
        if (len > o->n - off)
            len = o->n - off;
        const uint8_t *mask = decay_mask ? decay_mask + lo : NULL;
        if (o->k->kind != DDPC_DEVICE_CPU)
            device_update(o, off, len, params + lo, grads + lo, mask, lr);
        else if (o->cfg.type == DDPC_OPTIM_SGD)
            ddpc__sgd_update(o, off, len, params + lo, grads + lo, mask, lr);
        else
            ddpc__adamw_update(o, off, len, params + lo, grads + lo, mask, lr);
        off += len;
    }
}

void ddpc_optim_reset(ddpc_optim *o)
{
    for (size_t i = 0; i < o->nstate; i++) {
        memset(o->state[i], 0, o->n * sizeof(float));
        if (o->kstate[i] != o->state[i])
            o->k->fill_f32(o->kstate[i], 0.0f, (int64_t)o->n);
    }
    o->step = 0;
}

void ddpc_optim_to_host(ddpc_optim *o)
{
    for (size_t i = 0; i < o->nstate; i++)
        if (o->kstate[i] != o->state[i])
            o->k->to_host(o->state[i], o->kstate[i], o->n * sizeof(float));
}

void ddpc_optim_to_device(ddpc_optim *o)
{
    for (size_t i = 0; i < o->nstate; i++)
        if (o->kstate[i] != o->state[i])
            o->k->to_device(o->kstate[i], o->state[i], o->n * sizeof(float));
}

size_t ddpc_optim_numel(const ddpc_optim *o)
{
    return o->n;
}

const ddpc_optim_config *ddpc_optim_config_of(const ddpc_optim *o)
{
    return &o->cfg;
}

int64_t ddpc_optim_step_count(const ddpc_optim *o)
{
    return o->step;
}

void ddpc_optim_set_step_count(ddpc_optim *o, int64_t t)
{
    o->step = t;
}

size_t ddpc_optim_state_buffers(ddpc_optim_type t)
{
    return t == DDPC_OPTIM_SGD ? 1 : 2;
}

size_t ddpc_optim_num_state(const ddpc_optim *o)
{
    return o->nstate;
}

float *ddpc_optim_state(ddpc_optim *o, size_t i, const char **name)
{
    if (i >= o->nstate)
        return NULL;
    if (name)
        *name = o->state_name[i];
    return o->state[i];
}
