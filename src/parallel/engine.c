// SPDX-License-Identifier: MIT
/* The training step engine. Invariant: between ddpc_engine_zero_grad and ddpc_engine_update the
 * gradient buffer holds the sum over this step's passes of d(loss x weight / accum_steps); after
 * update it is the rank average (what the optimizer consumed). The optimizer math follows torch
 * (optim.h), and clipping is torch.nn.utils.clip_grad_norm_ on the averaged gradients, so every
 * rank computes the same norm, takes the same skip/stop decision and applies the same update. */
#include <ddpc/alloc.h>
#include <ddpc/device.h>
#include <ddpc/comm.h>
#include <ddpc/engine.h>
#include <ddpc/pages.h>
#include <ddpc/timer.h>
#include <ddpc/trace.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "parallel/dp_impl.h"
#include "parallel/engine_defer.h"

struct ddpc_engine {
    ddpc_model *model;
    ddpc_reducer *reducer; /* NULL on one rank */
    ddpc_optim *opt;
    ddpc_engine_config cfg;
    int rank, world;
    int64_t step, skipped;
    ddpc_loss_scale_state scaler; /* {1, 0} without loss scaling */
    /* The flat ranges whose optimizer state this rank holds and updates (ZeRO: the reducer's
     * shard, `owned` floats in all; otherwise `whole`), and the stage in effect (0 on one rank). */
    const ddpc_range *shard;
    size_t n_shard, owned;
    ddpc_range whole;
    int stage;
    /* Per step: whether a pass communicated during its backward, and the first non-finite
     * local loss (for the message). */
    bool synced;
    bool buffers_sent; /* this step broadcast the model buffers already */
    bool bad_loss;
    float bad_loss_value;
    ddpc_engine_timing spent; /* cfg.timing: since the last ddpc_engine_take_timing */
    /* DataParallel (cfg.dp_replicas > 0): the replicas, and whether this step copied the
     * parameters into them yet (at its first pass, after whatever changed them). */
    ddpc__dp *dp;
    bool replicated;
    /* cfg.defer_passes in effect (a device, one rank, stop or loss scaling): the passes' losses
     * and the steps' norms wait on the device for ddpc_engine_read; read_step is the step count
     * at the last read, last_skipped whether the last step was skipped (its norm is NaN). */
    bool deferred, last_skipped;
    ddpc__defer defer;
    int64_t read_step;
    double last_norm; /* without deferral: the last step's norm, for ddpc_engine_read */
};

/* cfg.timing (or a trace recording): adds the seconds since `since` to *acc and traces them as
 * `name` (when given) and returns now; else 0. */
static double lap(const ddpc_engine *e, double *acc, double since, const char *name)
{
    if (!e->cfg.timing && !ddpc_trace_on())
        return 0.0;
    double now = ddpc_time_now();
    if (acc) {
        *acc += now - since;
        ddpc_trace_add(DDPC_TRACE_COMPUTE, name, since, now, -1, NULL, 0);
    }
    return now;
}

const char *ddpc_nonfinite_policy_name(ddpc_nonfinite_policy p)
{
    switch (p) {
    case DDPC_NONFINITE_STOP:
        return "stop";
    case DDPC_NONFINITE_SKIP:
        return "skip";
    default:
        return "unknown";
    }
}

ddpc_engine_config ddpc_engine_config_default(void)
{
    ddpc_engine_config c = {
        .optim = ddpc_optim_config_default(),
        .schedule = ddpc_lr_schedule_default(),
        .lr_scale = 1.0f,
        .grad_clip = 0.0f,
        .accum_steps = 1,
        .num_tasks = 1,
        .on_nonfinite = DDPC_NONFINITE_STOP,
        .loss_scaling = false,
        .loss_scale = ddpc_loss_scale_config_default(),
    };
    return c;
}

/* DataParallel needs one process: no reducer, world 1. */
static ddpc_status check_dp(const ddpc_engine_config *c, const ddpc_reducer *reducer, int world)
{
    if (c->dp_replicas < 0 || c->dp_replicas > DDPC_ENGINE_MAX_REPLICAS)
        return ddpc_errorf(DDPC_EINVAL, "engine: dp_replicas must be in [0, %d], got %d",
                           DDPC_ENGINE_MAX_REPLICAS, c->dp_replicas);
    if (c->dp_replicas > 0 && (reducer || world > 1))
        return ddpc_errorf(DDPC_EINVAL,
                           "engine: DataParallel replicas run in one process, not in a world of "
                           "%d ranks%s",
                           world, reducer ? " with a DDP reducer" : "");
    return DDPC_OK;
}

ddpc_status ddpc_engine_create(ddpc_model *m, ddpc_reducer *reducer, int rank, int world,
                               const ddpc_engine_config *c, ddpc_engine **out)
{
    *out = NULL;
    if (!m)
        return ddpc_errorf(DDPC_EINVAL, "engine: no model");
    if (c->accum_steps < 1)
        return ddpc_errorf(DDPC_EINVAL, "engine: accum_steps must be >= 1, got %lld",
                           (long long)c->accum_steps);
    if (c->num_tasks < 1)
        return ddpc_errorf(DDPC_EINVAL, "engine: num_tasks must be >= 1, got %d", c->num_tasks);
    if (!(c->grad_clip >= 0.0f) || !(c->lr_scale >= 0.0f))
        return ddpc_errorf(DDPC_EINVAL, "engine: grad_clip and lr_scale must be >= 0");
    if ((unsigned)c->on_nonfinite >= DDPC_NONFINITE_COUNT)
        return ddpc_errorf(DDPC_EINVAL, "engine: unknown on_nonfinite policy %d",
                           (int)c->on_nonfinite);
    if (world < 1 || rank < 0 || rank >= world)
        return ddpc_errorf(DDPC_EINVAL, "engine: rank %d outside a world of %d", rank, world);
    DDPC_TRY(ddpc_lr_schedule_check(&c->schedule));
    if (c->loss_scaling)
        DDPC_TRY(ddpc_loss_scale_check(&c->loss_scale));
    DDPC_TRY(check_dp(c, reducer, world));
    ddpc_engine *e = ddpc_calloc(1, sizeof *e);
    if (!e)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory creating the engine");
    if (c->dp_replicas > 0) {
        ddpc_status st = ddpc__dp_create(m, c->dp_replicas, &e->dp);
        if (st != DDPC_OK) {
            ddpc_free(e);
            return st;
        }
    }
    e->whole = (ddpc_range){0, ddpc_model_num_params(m)};
    e->shard = &e->whole;
    e->n_shard = 1;
    e->stage = reducer && world > 1 ? ddpc_reducer_zero_stage(reducer) : 0;
    if (e->stage > 0)
        ddpc_reducer_shard(reducer, &e->shard, &e->n_shard);
    for (size_t i = 0; i < e->n_shard; i++)
        e->owned += e->shard[i].len;
    ddpc_status st = ddpc_optim_create_on(&e->opt, &c->optim, e->owned ? e->owned : 1,
                                          ddpc_model_backend(m));
    if (st != DDPC_OK) {
        ddpc__dp_destroy(e->dp);
        ddpc_free(e);
        return st;
    }
    e->model = m;
    e->reducer = reducer;
    e->cfg = *c;
    e->rank = rank;
    e->world = world;
    e->scaler = c->loss_scaling ? ddpc_loss_scale_start(&c->loss_scale)
                                : (ddpc_loss_scale_state){.scale = 1.0f};
    /* Deferral needs the decision of a step without its values: loss scaling decides from the
     * overflow flag it reads anyway, stop can decide later; skip must know before updating. */
    const ddpc_kernel_table *k = ddpc_model_backend(m);
    e->deferred = c->defer_passes > 0 && k->kind != DDPC_DEVICE_CPU && !reducer && !e->dp &&
                  k->grad_norm_clip && (c->loss_scaling || c->on_nonfinite == DDPC_NONFINITE_STOP);
    if (e->deferred && (st = ddpc__defer_init(&e->defer, k, c->defer_passes)) != DDPC_OK) {
        ddpc_engine_destroy(e);
        return st;
    }
    *out = e;
    return DDPC_OK;
}

void ddpc_engine_destroy(ddpc_engine *e)
{
    if (!e)
        return;
    ddpc_optim_destroy(e->opt);
    ddpc__dp_destroy(e->dp);
    if (e->deferred)
        ddpc__defer_fini(&e->defer);
    ddpc_free(e);
}

void ddpc_engine_zero_grad(ddpc_engine *e)
{
    if (e->reducer)
        ddpc_reducer_zero_grads(e->reducer);
    else if (e->dp)
        ddpc__dp_zero_grad(e->dp);
    else
        ddpc_model_zero_grad(e->model);
    e->replicated = false;
    e->synced = false;
    e->bad_loss = false;
    e->buffers_sent = false;
}

ddpc_status ddpc_engine_sync_buffers(ddpc_engine *e)
{
    return e->reducer ? ddpc_reducer_sync_buffers(e->reducer) : DDPC_OK;
}

/* The hang recorder's phase (ddpc_pg_set_phase): what a rank that never arrives was doing, on
 * the host group and, for a model on a GPU, on the group that moves its memory. */
static void set_phase(ddpc_engine *e, ddpc_phase phase)
{
    if (!e->reducer)
        return;
    ddpc_pg_set_phase(ddpc_reducer_pg(e->reducer), phase);
    if (ddpc_reducer_device_pg(e->reducer) != ddpc_reducer_pg(e->reducer))
        ddpc_pg_set_phase(ddpc_reducer_device_pg(e->reducer), phase);
}

/* Dropout stream: distinct for every pass of every micro-step of every rank, and a function of
 * the step number only, so a resumed run draws the masks the uninterrupted one drew. */
static uint64_t stream_of(const ddpc_engine *e, int64_t micro, int task, int world, int rank)
{
    const ddpc_engine_config *c = &e->cfg;
    return (((uint64_t)e->step * (uint64_t)c->accum_steps + (uint64_t)micro) *
                (uint64_t)c->num_tasks +
            (uint64_t)task) *
               (uint64_t)world +
           (uint64_t)rank;
}

/* A DataParallel pass: replicas copy the parameters at the step's first pass, then each draws
 * the dropout stream of the DDP rank whose rows it takes. */
static ddpc_status dp_pass(ddpc_engine *e, ddpc_model_input *in, int64_t micro, float dloss,
                           ddpc_model_output *out)
{
    int n = ddpc__dp_replicas(e->dp);
    uint64_t streams[DDPC_ENGINE_MAX_REPLICAS];
    for (int k = 0; k < n; k++)
        streams[k] = stream_of(e, micro, in->task, n, k);
    in->rng_stream = streams[0];
    if (!e->replicated)
        ddpc__dp_replicate(e->dp);
    e->replicated = true;
    return ddpc__dp_pass(e->dp, in, streams, dloss, out);
}

ddpc_status ddpc_engine_pass(ddpc_engine *e, ddpc_model_input *in, int64_t micro, float loss_weight,
                             bool sync, ddpc_model_output *out)
{
    const ddpc_engine_config *c = &e->cfg;
    if (e->dp) {
        DDPC_TRY(dp_pass(e, in, micro, loss_weight / (float)c->accum_steps * e->scaler.scale, out));
        if (!isfinite(out->loss) && !e->bad_loss) {
            e->bad_loss = true;
            e->bad_loss_value = out->loss;
        }
        return DDPC_OK;
    }
    in->rng_stream = stream_of(e, micro, in->task, e->world, e->rank);
    if (e->reducer && !e->buffers_sent) { /* DDP: rank 0's buffers before a step's forward */
        DDPC_TRY(ddpc_reducer_sync_buffers(e->reducer));
        e->buffers_sent = true;
    }
    if (e->reducer) /* no_sync unless this backward is the step's only remaining one */
        ddpc_reducer_prepare(e->reducer, sync);
    e->synced = e->synced || sync;
    double *sink = e->deferred ? ddpc__defer_take_pass(&e->defer) : NULL;
    if (e->deferred && !sink)
        return ddpc_errorf(DDPC_EINVAL, "engine: %zu passes (defer_passes) wait to be read; call "
                           "ddpc_engine_read first", e->defer.cap);
    ddpc_model_set_loss_sink(e->model, sink); /* this pass's record; NULL reads the loss now */
    /* GradScaler: scale(loss / accum_steps); the reported loss stays unscaled. Known now, so the
     * forward may compute the loss's gradient with the loss. */
    const float dloss = loss_weight / (float)c->accum_steps * e->scaler.scale;
    ddpc_model_expect_backward(e->model, dloss);
    set_phase(e, DDPC_PHASE_FORWARD);
    double t = lap(e, NULL, 0.0, NULL);
    ddpc_status st = ddpc_model_forward(e->model, in, true, out);
    if (st != DDPC_OK) {
        ddpc_model_set_loss_sink(e->model, NULL);
        return st;
    }
    t = lap(e, &e->spent.forward_s, t, "forward");
    if (!e->deferred && !isfinite(out->loss) && !e->bad_loss) {
        e->bad_loss = true;
        e->bad_loss_value = out->loss;
    }
    set_phase(e, DDPC_PHASE_BACKWARD);
    st = ddpc_model_backward(e->model, dloss);
    lap(e, &e->spent.backward_s, t, "backward");
    ddpc_model_set_loss_sink(e->model, NULL);
    return st;
}

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
    set_phase(e, DDPC_PHASE_OPTIMIZER);
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
    double t = lap(e, NULL, 0.0, NULL);
    if (e->reducer) {
        if (!e->synced) /* several passes fed this step: synchronise everything once */
            ddpc_reducer_mark_all_ready(e->reducer);
        DDPC_TRY(ddpc_reducer_finish(e->reducer));
    }
    t = lap(e, &e->spent.comm_wait_s, t, "comm wait");
    bool applied = false;
    ddpc_status st = apply(e, info, &applied);
    t = lap(e, &e->spent.optimizer_s, t, "optimizer");
    if (st != DDPC_OK || !applied)
        return st;
    /* ZeRO: the owners updated their chunks; the updates are elementwise, so after the gather
     * every rank holds the parameters stage 0 computes. Stage 3 gathers them when next used. */
    if (e->stage >= 3)
        ddpc_reducer_release_params(e->reducer);
    if (e->stage == 1 || e->stage == 2) {
        st = ddpc_reducer_gather_params(e->reducer);
        lap(e, &e->spent.comm_wait_s, t, "comm wait");
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

ddpc_engine_timing ddpc_engine_take_timing(ddpc_engine *e)
{
    ddpc_engine_timing r = e->spent;
    e->spent = (ddpc_engine_timing){0};
    return r;
}

int ddpc_engine_replica_threads(const ddpc_engine *e)
{
    return e->dp ? ddpc__dp_kernel_threads(e->dp) : 0;
}

int64_t ddpc_engine_step(const ddpc_engine *e)
{
    return e->step;
}

int64_t ddpc_engine_skipped(const ddpc_engine *e)
{
    return e->skipped;
}

float ddpc_engine_lr(const ddpc_engine *e, int64_t step)
{
    return ddpc_lr_at(&e->cfg.schedule, e->cfg.optim.lr, step) * e->cfg.lr_scale;
}

ddpc_optim *ddpc_engine_optim(ddpc_engine *e)
{
    return e->opt;
}

const ddpc_engine_config *ddpc_engine_config_of(const ddpc_engine *e)
{
    return &e->cfg;
}

int ddpc_engine_zero_stage(const ddpc_engine *e)
{
    return e->stage;
}

void ddpc_engine_restore(ddpc_engine *e, int64_t step, int64_t skipped)
{
    e->step = step;
    e->skipped = skipped;
    e->read_step = step;
}

ddpc_loss_scale_state ddpc_engine_loss_scale(const ddpc_engine *e)
{
    return e->scaler;
}

void ddpc_engine_restore_loss_scale(ddpc_engine *e, ddpc_loss_scale_state s)
{
    if (e->cfg.loss_scaling)
        e->scaler = s;
}

ddpc_status ddpc_engine_gather_params(ddpc_engine *e)
{
    return e->stage >= 3 ? ddpc_reducer_gather_params(e->reducer) : DDPC_OK;
}

void ddpc_engine_release_params(ddpc_engine *e)
{
    if (e->stage >= 3)
        ddpc_reducer_release_params(e->reducer);
}

void ddpc_engine_params_written(ddpc_engine *e)
{
    if (e->stage >= 3)
        ddpc_reducer_params_written(e->reducer);
}

void ddpc_engine_shard(const ddpc_engine *e, const ddpc_range **ranges, size_t *n_ranges)
{
    *ranges = e->shard;
    *n_ranges = e->n_shard;
}

ddpc_engine_memory ddpc_engine_memory_of(const ddpc_engine *e)
{
    size_t bytes = ddpc_model_num_params(e->model) * sizeof(float);
    bool device = ddpc_model_backend(e->model)->kind != DDPC_DEVICE_CPU;
    ddpc_engine_memory mem = {
        .params = device ? bytes : ddpc_pages_resident(ddpc_model_params(e->model), bytes),
        .grads = device ? bytes : ddpc_pages_resident(ddpc_model_grads(e->model), bytes),
        .optim_state = ddpc_optim_num_state(e->opt) * ddpc_optim_numel(e->opt) * sizeof(float),
        .staging = e->reducer ? ddpc_reducer_staging_bytes(e->reducer) : 0,
    };
    return mem;
}
