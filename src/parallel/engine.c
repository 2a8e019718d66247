// SPDX-License-Identifier: MIT
/* The training step engine: creation, the passes (forward and backward with DDP's hooks,
 * DataParallel's replicas), and its accessors; the update is engine_update.c. Invariant: between
 * ddpc_engine_zero_grad and ddpc_engine_update the gradient buffer holds the sum over this step's
 * passes of d(loss x weight / accum_steps); after update it is the rank average (what the
 * optimizer consumed). */
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

#include "parallel/engine_impl.h"

double ddpc__engine_lap(ddpc_engine *e, double *acc, double since, const char *name)
{
    if (!e->cfg.timing && !ddpc_trace_on())
        return 0.0;
    ddpc__clock_lap(&e->clock, acc ? (size_t)((char *)acc - (char *)&e->spent) : (size_t)-1);
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
    if (c->timing) /* else the clock stays off (zeroed) */
        ddpc__clock_init(&e->clock, k);
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
    ddpc__clock_fini(&e->clock);
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

/* What a rank that never arrives was doing, on the group that moves its memory too. */
void ddpc__engine_set_phase(ddpc_engine *e, ddpc_phase phase)
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
    ddpc__engine_set_phase(e, DDPC_PHASE_FORWARD);
    double t = ddpc__engine_lap(e, NULL, 0.0, NULL);
    ddpc_status st = ddpc_model_forward(e->model, in, true, out);
    if (st != DDPC_OK) {
        ddpc_model_set_loss_sink(e->model, NULL);
        return st;
    }
    t = ddpc__engine_lap(e, &e->spent.forward_s, t, "forward");
    if (!e->deferred && !isfinite(out->loss) && !e->bad_loss) {
        e->bad_loss = true;
        e->bad_loss_value = out->loss;
    }
    ddpc__engine_set_phase(e, DDPC_PHASE_BACKWARD);
    st = ddpc_model_backward(e->model, dloss);
    ddpc__engine_lap(e, &e->spent.backward_s, t, "backward");
    ddpc_model_set_loss_sink(e->model, NULL);
    return st;
}

ddpc_engine_timing ddpc_engine_take_timing(ddpc_engine *e)
{
    ddpc_engine_timing r = e->spent;
    e->spent = (ddpc_engine_timing){0};
    return r;
}

bool ddpc_engine_take_device_timing(ddpc_engine *e, ddpc_engine_timing *out)
{
    if (!ddpc__clock_on(&e->clock))
        return false;
    *out = ddpc__clock_take(&e->clock);
    return true;
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
