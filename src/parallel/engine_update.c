// SPDX-License-Identifier: MIT
/* The step engine's update: the averaged gradients' norm (all-reduced across ZeRO shards), loss
 * scaling's unscale, clipping as torch.nn.utils.clip_grad_norm_, the optimizer on this rank's
 * shard, ZeRO's parameter gather after it, and the deferred path's later read of norms and
 * losses. Invariant: every rank computes the same norm and takes the same skip/stop decision. */
#include <ddpc/comm.h>
#include <ddpc/device.h>
#include <ddpc/engine.h>

#include <math.h>
#include <stdio.h>

#include "parallel/engine_impl.h"

/* "NaN", "inf" or "-inf" (printf's spelling of NaN varies). */
static const char *nonfinite_name(double v)
{
    return isnan(v) ? "NaN" : v > 0 ? "inf" : "-inf";
}

static ddpc_status nonfinite(ddpc_engine *e, double norm)
{
    char loss[64] = "", grad[32] = "finite";
    if (e->bad_loss)
        snprintf(loss, sizeof loss, "the loss on rank %d is %s and ", e->rank,
                 nonfinite_name(e->bad_loss_value));
    if (!isfinite(norm))
        snprintf(grad, sizeof grad, "%s", nonfinite_name(norm));
    return ddpc_errorf(DDPC_EINVAL,
                       "step %lld: %sthe gradient norm is %s; stopping (on_nonfinite: stop). "
                       "Lower optim.lr or set optim.grad_clip, or set on_nonfinite: skip",
                       (long long)e->step + 1, loss, grad);
}

/* Unscale (loss scaling) and sum of squares of a range of the gradients, on the model's device:
 * the table's kernels on a GPU; on the CPU, whose table leaves these members NULL, optim/'s host
 * loops. */
static bool range_unscale(const ddpc_kernel_table *k, float *g, size_t n, float scale)
{
    return k->unscale ? k->unscale(g, (int64_t)n, scale) : ddpc_grad_unscale(g, n, scale);
}

static double range_sumsq(const ddpc_kernel_table *k, const float *g, size_t n)
{
    return k->sumsq ? k->sumsq(g, (int64_t)n) : ddpc_grad_sumsq(g, n);
}

/* Unscales (loss scaling) and measures the averaged gradients: *norm is their global norm, NaN
 * when any is not finite. At stage 0 every rank holds all of them and computes the norm alone;
 * under ZeRO each rank holds only its shard's average (the reducer reduce-scatters), so the
 * shards' sums of squares (one double each, on the host even for a GPU model) are all-reduced
 * over the host group, and the result is again the same on every rank. */
static ddpc_status grad_norm(ddpc_engine *e, float *g, double *norm)
{
    const ddpc_engine_config *c = &e->cfg;
    const ddpc_kernel_table *k = ddpc_model_backend(e->model);
    if (e->stage == 0) {
        size_t n = ddpc_model_num_params(e->model);
        bool overflow = c->loss_scaling && range_unscale(k, g, n, e->scaler.scale);
        *norm = overflow ? NAN : sqrt(range_sumsq(k, g, n));
        return DDPC_OK;
    }
    bool overflow = false;
    double sumsq = 0.0;
    for (size_t i = 0; i < e->n_shard; i++) {
        float *part = g + e->shard[i].lo;
        if (c->loss_scaling)
            overflow |= range_unscale(k, part, e->shard[i].len, e->scaler.scale);
        sumsq += range_sumsq(k, part, e->shard[i].len);
    }
    if (overflow)
        sumsq = NAN;
    DDPC_TRY(ddpc_pg_all_reduce(ddpc_reducer_pg(e->reducer), &sumsq, &sumsq, 1,
                                DDPC_DTYPE_F64, DDPC_REDUCE_SUM));
    *norm = sqrt(sumsq);
    return DDPC_OK;
}

/* A deferred step on a device: the norm, the clipping and the update without reading anything
 * back, except loss scaling's overflow flag, which decides whether to update (GradScaler reads
 * it too). The norm waits in the record for ddpc_engine_read, and with it the stop check. (A
 * non-finite loss is seen at the read as well; under loss scaling only its gradients count.) */
static void apply_deferred(ddpc_engine *e, ddpc_engine_step_info *info, bool *applied)
{
    const ddpc_engine_config *c = &e->cfg;
    const ddpc_kernel_table *k = ddpc_model_backend(e->model);
    float *g = ddpc_model_device_grads(e->model);
    int64_t n = (int64_t)ddpc_model_num_params(e->model);
    bool overflow = c->loss_scaling && k->unscale(g, n, e->scaler.scale);
    if (c->loss_scaling)
        ddpc_loss_scale_update(&e->scaler, &c->loss_scale, overflow);
    info->grad_norm = NAN; /* not read yet */
    e->last_skipped = overflow;
    if (overflow) {
        info->skipped = true;
        e->skipped++;
        e->step++;
        return;
    }
    k->grad_norm_clip(ddpc__defer_norm(&e->defer), g, n, c->grad_clip);
    ddpc_optim_step_ranges(e->opt, ddpc_model_device_params(e->model), g,
                           ddpc_model_device_decay_mask(e->model), e->shard, e->n_shard, info->lr);
    e->step++;
    *applied = true;
}

/* The update on the averaged gradients; *applied when the parameters changed. */
static ddpc_status apply(ddpc_engine *e, ddpc_engine_step_info *info, bool *applied)
{
    const ddpc_engine_config *c = &e->cfg;
    ddpc_model *m = e->model;
    const ddpc_kernel_table *k = ddpc_model_backend(m);
    ddpc__engine_set_phase(e, DDPC_PHASE_OPTIMIZER);
    float *g = ddpc_model_device_grads(m);
    float lr = ddpc_engine_lr(e, e->step);
    *info = (ddpc_engine_step_info){.step = e->step, .lr = lr, .loss_scale = e->scaler.scale};
    if (e->deferred) {
        apply_deferred(e, info, applied);
        return DDPC_OK;
    }
    /* The norm is identical on every rank, and so is the decision. */
    double norm;
    DDPC_TRY(grad_norm(e, g, &norm));
    e->last_norm = norm;
    bool finite = isfinite(norm) && !(e->bad_loss && e->world == 1);
    info->grad_norm = norm;
    if (c->loss_scaling)
        ddpc_loss_scale_update(&e->scaler, &c->loss_scale, !finite);
    if (!finite && c->on_nonfinite == DDPC_NONFINITE_STOP && !c->loss_scaling)
        return nonfinite(e, norm);
    if (!finite) {
        info->skipped = true;
        e->skipped++;
        e->step++;
        return DDPC_OK;
    }
    /* Clipping after unscaling, as GradScaler's recipe does; only the shard is read from here. */
    for (size_t i = 0; c->grad_clip > 0.0f && i < e->n_shard; i++) {
        if (k->kind == DDPC_DEVICE_CPU) {
            ddpc_grad_clip_scale(g + e->shard[i].lo, e->shard[i].len, norm, c->grad_clip);
            continue;
        }
        float coef = ddpc_grad_clip_coef(norm, c->grad_clip);
        if (coef != 1.0f)
            k->scale(g + e->shard[i].lo, (int64_t)e->shard[i].len, coef);
    }
    ddpc_optim_step_ranges(e->opt, ddpc_model_device_params(m), g,
                           ddpc_model_device_decay_mask(m), e->shard, e->n_shard, lr);
    e->step++;
    *applied = true;
    return DDPC_OK;
}

/* DataParallel: the replicas' gradients averaged into the model's; the step's DataParallel
 * timings join the engine's (cfg.timing); dp.c records its parts in a trace itself. */
static void dp_reduce(ddpc_engine *e)
{
    ddpc__dp_reduce(e->dp);
    ddpc__dp_timing d = ddpc__dp_take_timing(e->dp);
    if (!e->cfg.timing)
        return;
    ddpc_engine_timing *s = &e->spent;
    s->forward_s += d.forward_s;
    s->backward_s += d.backward_s;
    s->replicate_s += d.replicate_s;
    s->scatter_s += d.scatter_s;
    s->replica_wait_s += d.wait_s;
    s->reduce_s += d.reduce_s;
}

ddpc_status ddpc_engine_update(ddpc_engine *e, ddpc_engine_step_info *info)
{
    if (e->dp) /* before the clock: its parts are timed on their own */
        dp_reduce(e);
    double t = ddpc__engine_lap(e, NULL, 0.0, NULL);
    if (e->reducer) {
        if (!e->synced) /* several passes fed this step: synchronise everything once */
            ddpc_reducer_mark_all_ready(e->reducer);
        DDPC_TRY(ddpc_reducer_finish(e->reducer));
    }
    t = ddpc__engine_lap(e, &e->spent.comm_wait_s, t, "comm wait");
    bool applied = false;
    ddpc_status st = apply(e, info, &applied);
    t = ddpc__engine_lap(e, &e->spent.optimizer_s, t, "optimizer");
    if (st != DDPC_OK || !applied)
        return st;
    /* ZeRO: the owners updated their chunks; the updates are elementwise, so after the gather
     * every rank holds the parameters stage 0 computes. Stage 3 gathers them when next used. */
    if (e->stage >= 3)
        ddpc_reducer_release_params(e->reducer);
    if (e->stage == 1 || e->stage == 2) {
        st = ddpc_reducer_gather_params(e->reducer);
        ddpc__engine_lap(e, &e->spent.comm_wait_s, t, "comm wait");
    }
    return st;
}

bool ddpc_engine_deferred(const ddpc_engine *e)
{
    return e->deferred;
}

size_t ddpc_engine_unread(const ddpc_engine *e)
{
    return e->deferred ? e->defer.passes : 0;
}

ddpc_status ddpc_engine_read(ddpc_engine *e, ddpc_model_output *outs, size_t *n, double *grad_norm)
{
    *n = 0;
    if (!e->deferred) {
        *grad_norm = e->last_norm;
        return DDPC_OK;
    }
    double sumsq, running;
    ddpc__defer_read(&e->defer, outs, n, &sumsq, &running);
    int64_t from = e->read_step;
    e->read_step = e->step;
    *grad_norm = e->last_skipped ? NAN : sqrt(sumsq);
    if (e->cfg.loss_scaling) /* overflowing steps were skipped when they ran */
        return DDPC_OK;
    bool bad = !isfinite(running);
    for (size_t i = 0; i < *n; i++)
        bad = bad || !isfinite(outs[i].loss);
    if (!bad)
        return DDPC_OK;
    return ddpc_errorf(DDPC_EINVAL,
                       "steps %lld to %lld: a loss or gradient norm was NaN or inf (a GPU run "
                       "reads them at logged steps); stopping (on_nonfinite: stop). Lower "
                       "optim.lr or set optim.grad_clip, or set on_nonfinite: skip",
                       (long long)from + 1, (long long)e->step);
}
