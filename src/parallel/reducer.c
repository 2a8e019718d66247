// SPDX-License-Identifier: MIT
/* DDP reducer: buckets over the flat gradient buffer, launched from the model's gradient-ready
 * hook. Invariant: buckets are launched strictly in index order (bucket 0 holds the last
 * registered tensors, which backward finishes first), so every rank issues the same collectives
 * in the same order even if tensors become ready in a different order on different ranks. */
#include "parallel/reducer_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/device.h>
#include <ddpc/timer.h>

#include <stdio.h>
#include <string.h>

ddpc_reducer_config ddpc_reducer_config_default(void)
{
    return (ddpc_reducer_config){.bucket_cap_mb = 25.0,
                                 .first_bucket_mb = 1.0,
                                 .comm_dtype = DDPC_DTYPE_F32,
                                 .broadcast_params = true,
                                 .broadcast_buffers = true};
}

static ddpc_status check_config(const ddpc_reducer_config *c)
{
    if (!(c->bucket_cap_mb > 0) || !(c->first_bucket_mb > 0))
        return ddpc_errorf(DDPC_EINVAL,
                           "reducer: bucket_cap_mb (%g) and first_bucket_mb (%g) must "
                           "be positive",
                           c->bucket_cap_mb, c->first_bucket_mb);
    if (c->comm_dtype != DDPC_DTYPE_F32 && c->comm_dtype != DDPC_DTYPE_BF16 &&
        c->comm_dtype != DDPC_DTYPE_F16)
        return ddpc_errorf(DDPC_EINVAL,
                           "reducer: gradients can be communicated as f32, bf16 or "
                           "f16, not %s",
                           ddpc_dtype_name(c->comm_dtype));
    if (c->zero_stage < 0 || c->zero_stage > 3)
        return ddpc_errorf(DDPC_EINVAL, "reducer: zero_stage %d is not 0, 1, 2 or 3",
                           c->zero_stage);
    return DDPC_OK;
}

void ddpc__reducer_keep_error(ddpc_reducer *r, ddpc_status st)
{
    if (st != DDPC_OK && r->error == DDPC_OK) {
        r->error = st;
        snprintf(r->message, sizeof r->message, "%s", ddpc_last_error());
    }
}

/* Sends bucket b: converts to the communication dtype if compressing (on the model's device,
 * in its kernels' order, so the collective reads converted values), then all-reduces (AVG). */
static void launch(ddpc_reducer *r, ddpc__bucket *b)
{
    if (r->cfg.zero_stage >= 1) {
        size_t bi = (size_t)(b - r->buckets);
        if (!(r->cfg.zero_stage >= 2 && ddpc__reducer_launch_pooled(r, bi)))
            ddpc__reducer_launch_scatter(r, bi);
        b->launched = true;
        return;
    }
    float *g = ddpc_model_device_grads(r->model) + b->lo;
    size_t n = b->hi - b->lo;
    const void *buf = g;
    if (r->cfg.comm_dtype != DDPC_DTYPE_F32) {
        ddpc_model_backend(r->model)->f32_to_half_array(b->comm, g, n,
                                                        r->cfg.comm_dtype == DDPC_DTYPE_BF16);
        buf = b->comm;
    }
    ddpc__reducer_keep_error(r, ddpc_pg_iall_reduce(r->pg, buf, (void *)buf, n, r->cfg.comm_dtype,
                                                    DDPC_REDUCE_AVG, &b->work));
    b->launched = true;
}

/* Launches every complete bucket whose predecessors are all launched. */
static void launch_ready(ddpc_reducer *r)
{
    while (r->next_launch < r->n_buckets && r->buckets[r->next_launch].pending == 0)
        launch(r, &r->buckets[r->next_launch++]);
}

static void on_grad_ready(void *ctx, size_t tensor)
{
    ddpc_reducer *r = ctx;
    if (!r->sync || tensor >= r->n_tensors || r->ready[tensor])
        return;
    r->ready[tensor] = 1;
    r->buckets[r->bucket_of[tensor]].pending--;
    launch_ready(r);
}

void ddpc_reducer_prepare(ddpc_reducer *r, bool sync)
{
    r->sync = sync;
    ddpc__reducer_pool_prepare(r, sync);
    if (!sync || r->step_open)
        return;
    /* A new synchronised pass: every tensor pending again. */
    r->step_open = true;
    memset(r->ready, 0, r->n_tensors);
    for (size_t b = 0; b < r->n_buckets; b++) {
        r->buckets[b].pending = r->buckets[b].n_tensors;
        r->buckets[b].launched = false;
    }
    r->next_launch = 0;
}

void ddpc_reducer_mark_all_ready(ddpc_reducer *r)
{
    ddpc_reducer_prepare(r, true);
    for (size_t t = 0; t < r->n_tensors; t++)
        on_grad_ready(r, t);
}

/* Names of the tensors backward never reached, for the error message. */
static void list_unused(const ddpc_reducer *r, char *out, size_t cap)
{
    size_t len = 0, shown = 0, missing = 0;
    out[0] = '\0';
    for (size_t t = 0; t < r->n_tensors; t++) {
        if (r->ready[t])
            continue;
        missing++;
        if (shown < 8 && len + 80 < cap) {
            len += (size_t)snprintf(out + len, cap - len, "%s%s", shown ? ", " : "",
                                    ddpc_model_tensor(r->model, t)->name);
            shown++;
        }
    }
    if (missing > shown && len + 32 < cap)
        snprintf(out + len, cap - len, " and %zu more", missing - shown);
}

ddpc_status ddpc_reducer_finish(ddpc_reducer *r)
{
    ddpc_reducer_prepare(r, true);
    bool unused = false;
    for (size_t t = 0; t < r->n_tensors; t++)
        unused |= !r->ready[t];
    char names[512] = "";
    if (unused && !r->cfg.find_unused_parameters)
        list_unused(r, names, sizeof names);
    /* Communicate everything even on error so that the other ranks are not left waiting. */
    for (size_t t = 0; t < r->n_tensors; t++)
        on_grad_ready(r, t);
    double t0 = ddpc_time_now();
    if (r->cfg.zero_stage >= 1) {
        ddpc__reducer_drain_scatter(r);
        if (r->gpool_of)
            ddpc__reducer_drain_pooled(r);
    }
    ddpc_status st = DDPC_OK;
    for (size_t b = 0; b < r->n_buckets; b++) {
        ddpc__bucket *bk = &r->buckets[b];
        if (!bk->work)
            continue;
        ddpc_status ws = ddpc_work_wait(bk->work);
        if (ws != DDPC_OK && st == DDPC_OK) {
            st = ws;
            snprintf(r->message, sizeof r->message, "%s", ddpc_last_error());
        }
        r->stats.comm_s += ddpc_work_seconds(bk->work);
        ddpc_work_destroy(bk->work);
        bk->work = NULL;
        if (ws == DDPC_OK && r->cfg.comm_dtype != DDPC_DTYPE_F32)
            ddpc_model_backend(r->model)->half_to_f32_array(
                ddpc_model_device_grads(r->model) + bk->lo, bk->comm, bk->hi - bk->lo,
                r->cfg.comm_dtype == DDPC_DTYPE_BF16);
    }
    r->stats.exposed_s += ddpc_time_now() - t0;
    r->stats.steps++;
    r->step_open = false;
    r->sync = false;
    if (r->error != DDPC_OK && st == DDPC_OK)
        st = r->error;
    r->error = DDPC_OK;
    if (st != DDPC_OK)
        return ddpc_errorf(st, "%s", r->message);
    if (unused && !r->cfg.find_unused_parameters)
        return ddpc_errorf(DDPC_EINVAL,
                           "these parameters received no gradient in this step: %s "
                           "(set find_unused_parameters: true if that is intended)",
                           names);
    return DDPC_OK;
}

ddpc_reducer_stats ddpc_reducer_stats_of(const ddpc_reducer *r)
{
    ddpc_reducer_stats s = r->stats;
    s.num_buckets = r->n_buckets;
    return s;
}

ddpc_pg *ddpc_reducer_pg(const ddpc_reducer *r)
{
    return r->host;
}

ddpc_pg *ddpc_reducer_device_pg(const ddpc_reducer *r)
{
    return r->pg;
}

/* SyncBatchNorm's sums, the model's stat-sync hook: the model's memory on the model's group (the
 * GPUs' for a model there, so the statistics never visit the host; on the CPU they carry their
 * count), a device model's batch size (host) on the host group. */
static ddpc_status sum_stats(void *ctx, double *sums, size_t count, bool host)
{
    ddpc_reducer *r = ctx;
    return ddpc_pg_all_reduce(host ? r->host : r->pg, sums, sums, count, DDPC_DTYPE_F64,
                              DDPC_REDUCE_SUM);
}

static ddpc_status broadcast_buffers(ddpc_reducer *r)
{
    size_t n = ddpc_model_num_buffer_floats(r->model);
    if (n == 0)
        return DDPC_OK;
    float *buf = ddpc_model_device_buffer_data(r->model);
    return ddpc_pg_broadcast(r->pg, buf, n, DDPC_DTYPE_F32, 0);
}

/* host_pg must be the same ranks as pg, in the same order, or host and device data would be
 * summed over different replicas. */
static ddpc_status check_groups(const ddpc_pg *pg, const ddpc_pg *host)
{
    if (ddpc_pg_rank(host) != ddpc_pg_rank(pg) ||
        ddpc_pg_world_size(host) != ddpc_pg_world_size(pg))
        return ddpc_errorf(DDPC_EINVAL,
                           "reducer: the host group is rank %d of %d but the device group rank "
                           "%d of %d (both must span the same ranks in the same order)",
                           ddpc_pg_rank(host), ddpc_pg_world_size(host), ddpc_pg_rank(pg),
                           ddpc_pg_world_size(pg));
    return DDPC_OK;
}

ddpc_status ddpc_reducer_sync_buffers(ddpc_reducer *r)
{
    return r->cfg.broadcast_buffers ? broadcast_buffers(r) : DDPC_OK;
}

ddpc_status ddpc_reducer_create(ddpc_pg *pg, ddpc_model *model, const ddpc_reducer_config *cfg,
                                ddpc_reducer **out)
{
    *out = NULL;
    DDPC_TRY(check_config(cfg));
    if (cfg->host_pg)
        DDPC_TRY(check_groups(pg, cfg->host_pg));
    ddpc_reducer *r = ddpc_calloc(1, sizeof *r);
    if (!r)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory creating the gradient reducer");
    r->pg = pg;
    r->host = cfg->host_pg ? cfg->host_pg : pg;
    r->model = model;
    r->cfg = *cfg;
    ddpc_status st = ddpc__reducer_build_buckets(r);
    if (st == DDPC_OK)
        st = ddpc__reducer_build_shard(r);
    if (st == DDPC_OK)
        st = ddpc__reducer_check_fingerprint(r);
    if (st == DDPC_OK && cfg->broadcast_params)
        st = ddpc_pg_broadcast(pg, ddpc_model_device_params(model), ddpc_model_num_params(model),
                               DDPC_DTYPE_F32, 0);
    if (st == DDPC_OK && cfg->broadcast_params)
        st = broadcast_buffers(r);
    if (st == DDPC_OK && cfg->zero_stage >= 2)
        st = ddpc__reducer_build_gpool(r);
    if (st == DDPC_OK && cfg->zero_stage >= 3)
        st = ddpc__reducer_build_zero3(r);
    if (st != DDPC_OK) {
        ddpc_reducer_destroy(r);
        return st;
    }
    ddpc_model_set_grad_ready_hook(model, on_grad_ready, r);
    if (cfg->sync_batchnorm)
        ddpc_model_set_stat_sync_hook(model, sum_stats, r);
    *out = r;
    return DDPC_OK;
}

void ddpc_reducer_destroy(ddpc_reducer *r)
{
    if (!r)
        return;
    ddpc_model_set_grad_ready_hook(r->model, NULL, NULL);
    ddpc_model_set_stat_sync_hook(r->model, NULL, NULL);
    ddpc_model_set_param_use_hook(r->model, NULL, NULL);
    ddpc_model_set_grad_use_hook(r->model, NULL, NULL);
    ddpc_work_destroy(r->prefetch_work);
    const ddpc_kernel_table *k = ddpc_model_backend(r->model);
    for (size_t b = 0; b < r->n_buckets; b++) {
        ddpc_work_destroy(r->buckets[b].work);
        if (r->buckets[b].comm)
            k->free(r->buckets[b].comm);
    }
    ddpc__reducer_free_shard(r);
    ddpc_free(r->buckets);
    ddpc_free(r->bucket_of);
    ddpc_free(r->ready);
    ddpc_free(r);
}
