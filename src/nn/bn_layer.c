// SPDX-License-Identifier: MIT
/* BatchNorm layer over the batchnorm kernels: registration, torch's reset, forward with the
 * stat-sync hook in training, backward with the local parameter gradients and the synced input
 * gradient. Invariant: mean/invstd/count hold what the last forward normalised with; the sums
 * never leave the device (a GPU step waits for none of them), the count is known on the host:
 * SyncBatchNorm costs one collective per layer in forward and one in backward, plus (on a device
 * only) one host all-reduce of the batch size per forward. */
#include "nn/bn_layer.h"

#include <ddpc/kernels.h>

#include <stdio.h>
#include <string.h>

ddpc_status ddpc__bn_read_config(ddpc_config *cfg, const char *prefix, bool *on, float *momentum,
                                 float *eps)
{
    char key[DDPC_CONFIG_KEY_MAX];
    double mom, e; /* doubles: 0.1f widened would be written 0.10000000149011612 in config.yaml */
    DDPC_TRY(
        ddpc_config_bool(cfg, ddpc_config_key(key, sizeof key, prefix, "batchnorm"), false, on));
    DDPC_TRY(ddpc_config_float(cfg, ddpc_config_key(key, sizeof key, prefix, "bn_momentum"), 0.1,
                               0.0, 1.0, &mom));
    DDPC_TRY(ddpc_config_float(cfg, ddpc_config_key(key, sizeof key, prefix, "bn_eps"), 1e-5, 1e-12,
                               1.0, &e));
    *momentum = (float)mom;
    *eps = (float)e;
    return DDPC_OK;
}

ddpc_status ddpc__bn_layer_add(ddpc__bn_layer *l, ddpc_model *m, const char *prefix, int i,
                               int64_t c, ddpc__bn_opts opts)
{
    char name[DDPC_PARAM_NAME_MAX];
    l->c = c;
    l->opts = opts;
    snprintf(name, sizeof name, "%s.%d.weight", prefix, i);
    l->w_idx = ddpc__model_add_param(m, name, 1, &c, false);
    snprintf(name, sizeof name, "%s.%d.bias", prefix, i);
    l->b_idx = ddpc__model_add_param(m, name, 1, &c, false);
    snprintf(name, sizeof name, "%s.%d.running_mean", prefix, i);
    l->rmean_idx = ddpc__model_add_buffer(m, name, 1, &c);
    snprintf(name, sizeof name, "%s.%d.running_var", prefix, i);
    l->rvar_idx = ddpc__model_add_buffer(m, name, 1, &c);
    /* The statistics live where the kernels run, the sums too: ranks add them up there. */
    l->k = m->k;
    l->mean = m->k->alloc((size_t)c * sizeof(float));
    l->invstd = m->k->alloc((size_t)c * sizeof(float));
    l->sums = m->k->alloc((size_t)(2 * c + 1) * sizeof(double));
    if (l->w_idx < 0 || l->b_idx < 0 || l->rmean_idx < 0 || l->rvar_idx < 0 || !l->mean ||
        !l->invstd || !l->sums)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory registering batchnorm %s.%d", prefix, i);
    return DDPC_OK;
}

void ddpc__bn_layer_init(const ddpc__bn_layer *l, ddpc_model *m)
{
    /* The host copies: ddpc_model_allocate uploads them after init. */
    ddpc_fill_f32(m->params + m->tensors[l->w_idx].offset, 1.0f, l->c);
    ddpc_fill_f32(m->params + m->tensors[l->b_idx].offset, 0.0f, l->c);
    ddpc_fill_f32(ddpc__host_buffer_ptr(m, l->rmean_idx), 0.0f, l->c);
    ddpc_fill_f32(ddpc__host_buffer_ptr(m, l->rvar_idx), 1.0f, l->c);
}

/* l->count: the elements per channel behind this training forward's statistics, every rank's
 * with SyncBatchNorm. On the CPU the sums are host memory and hold it already (sums[2c], summed
 * with them). On a device reading sums[2c] would be a wait, so the host works it out: every
 * BatchNorm layer of a forward sees the same batch n per rank (only hw differs), so the ranks add
 * up their n once per forward on the host group, and the count is that sum times hw, exact. */
static ddpc_status agree_count(ddpc__bn_layer *l, ddpc_model *m, int64_t n, int64_t hw)
{
    if (m->k->kind == DDPC_DEVICE_CPU) {
        l->count = l->sums[2 * l->c];
        return DDPC_OK;
    }
    if (m->stat_rows == 0.0) { /* this forward's first BatchNorm layer */
        m->stat_rows = (double)n;
        ddpc_status st = ddpc__model_sync_stats(m, &m->stat_rows, 1, true);
        if (st != DDPC_OK) {
            m->stat_rows = 0.0;
            return st;
        }
    }
    l->count = m->stat_rows * (double)hw;
    return DDPC_OK;
}

ddpc_status ddpc__bn_layer_forward(ddpc__bn_layer *l, ddpc_model *m, float *y, const float *x,
                                   int64_t n, int64_t hw, bool training)
{
    int64_t c = l->c;
    float *rmean = ddpc__buffer_ptr(m, l->rmean_idx), *rvar = ddpc__buffer_ptr(m, l->rvar_idx);
    if (training) {
        m->k->batchnorm_sums(l->sums, x, n, c, hw);
        bool host_sums = m->k->kind == DDPC_DEVICE_CPU;
        if (host_sums) /* the count travels in the sums: one collective, no second group */
            DDPC_TRY(ddpc__model_sync_stats(m, l->sums, (size_t)(2 * c + 1), false));
        DDPC_TRY(agree_count(l, m, n, hw));
        /* torch refuses this too: one value per channel normalises to 0 and its variance has no
         * unbiased estimate. The count is exact and every rank's, so every rank refuses alike,
         * before the running statistics change. */
        if (l->count <= 1.0) {
            const char *w = m->tensors[l->w_idx].name;
            return ddpc_errorf(DDPC_EINVAL,
                               "BatchNorm %.*s: expected more than 1 value per channel when "
                               "training, got %.0f (a batch of %lld with %lld position%s per "
                               "channel); train with a batch of at least 2, or synchronise the "
                               "statistics across ranks (model.sync_batchnorm)",
                               (int)(strlen(w) - strlen(".weight")), w, l->count, (long long)n,
                               (long long)hw, hw == 1 ? "" : "s");
        }
        if (!host_sums)
            DDPC_TRY(ddpc__model_sync_stats(m, l->sums, (size_t)(2 * c + 1), false));
        m->k->batchnorm_stats(l->mean, l->invstd, rmean, rvar, l->sums, c, l->opts.momentum,
                             l->opts.eps);
    } else {
        m->k->batchnorm_eval_stats(l->mean, l->invstd, rmean, rvar, c, l->opts.eps);
    }
    m->k->batchnorm_apply(y, x, l->mean, l->invstd, ddpc__param_ptr(m, l->w_idx),
                         ddpc__param_ptr(m, l->b_idx), n, c, hw);
    return DDPC_OK;
}

ddpc_status ddpc__bn_layer_backward(ddpc__bn_layer *l, ddpc_model *m, float *d, const float *x,
                                    int64_t n, int64_t hw)
{
    int64_t c = l->c;
    m->k->batchnorm_backward_sums(l->sums, d, x, l->mean, l->invstd, n, c, hw);
    m->k->batchnorm_backward_params(ddpc__grad_ptr(m, l->w_idx), ddpc__grad_ptr(m, l->b_idx),
                                   l->sums, c);
    ddpc__model_grad_ready(m, l->b_idx);
    ddpc__model_grad_ready(m, l->w_idx);
    /* The scale and shift gradients stay local (DDP averages them); dx needs every replica's. */
    m->backward_status = ddpc__model_sync_stats(m, l->sums, (size_t)(2 * c), false);
    if (m->backward_status != DDPC_OK)
        return m->backward_status;
    m->k->batchnorm_backward_input(d, d, x, l->mean, l->invstd, ddpc__param_ptr(m, l->w_idx),
                                  l->sums, l->count, n, c, hw);
    return DDPC_OK;
}

void ddpc__bn_layer_free(ddpc__bn_layer *l)
{
    if (l->k) {
        l->k->free(l->mean);
        l->k->free(l->invstd);
        l->k->free(l->sums);
    }
    l->mean = l->invstd = NULL;
    l->sums = NULL;
}
