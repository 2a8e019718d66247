// SPDX-License-Identifier: MIT
/* ZeRO's side of the reducer: the partition of every bucket into world equal chunks (rank r owns
 * chunk r), the reduce-scatter of each bucket during backward (stage 1 and up; 2Ψ per step with
 * the gather, as DDP's all-reduce), and the gather of the updated parameters. Invariant: a staging
 * slot is refilled only after the collective that used it has finished and its result was copied
 * out, and slots are used in bucket order, so every rank issues the same collectives in the same
 * order. Padding past a bucket's end is zero in every slot. Model memory (slots included) is
 * reached through reducer_mem.c, so the same code runs on a GPU's buffers. */
#include "parallel/reducer_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/device.h>

#include <stdio.h>

static size_t min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}

ddpc_status ddpc__reducer_build_shard(ddpc_reducer *r)
{
    r->rank = ddpc_pg_rank(r->pg);
    r->world = ddpc_pg_world_size(r->pg);
    r->whole = (ddpc_range){0, ddpc_model_num_params(r->model)};
    r->slot_bucket[0] = r->slot_bucket[1] = -1;
    if (r->cfg.zero_stage < 1)
        return DDPC_OK;
    size_t w = (size_t)r->world, rank = (size_t)r->rank;
    r->shard = ddpc_calloc(r->n_buckets ? r->n_buckets : 1, sizeof *r->shard);
    if (!r->shard)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for the ZeRO shard table");
    /* Buckets run from the highest flat offsets down, so the shard list is filled backwards. */
    for (size_t i = 0; i < r->n_buckets; i++) {
        ddpc__bucket *b = &r->buckets[i];
        b->chunk = (b->hi - b->lo + w - 1) / w;
        size_t lo = min_size(b->lo + rank * b->chunk, b->hi);
        b->own = (ddpc_range){lo, min_size(lo + b->chunk, b->hi) - lo};
        r->shard[r->n_buckets - 1 - i] = b->own;
        if (b->chunk * w > r->slot_floats)
            r->slot_floats = b->chunk * w;
    }
    r->n_shard = r->n_buckets;
    for (int s = 0; s < 2; s++) {
        r->slot[s] = ddpc__zmem_alloc(r, r->slot_floats);
        if (!r->slot[s])
            return ddpc_errorf(DDPC_ENOMEM,
                               "out of memory for ZeRO's staging buffers (2 x %zu "
                               "floats)",
                               r->slot_floats);
    }
    return DDPC_OK;
}

void ddpc__reducer_free_shard(ddpc_reducer *r)
{
    ddpc_free(r->shard);
    for (int s = 0; s < 2; s++)
        ddpc__zmem_free(r, r->slot[s]);
    for (int s = 0; s < DDPC__PSLOTS; s++)
        ddpc__zmem_free(r, r->pslot[s]);
    for (int i = 0; i < DDPC__GPOOL; i++)
        ddpc__zmem_free(r, r->gpool[i]);
    ddpc_free(r->gpool_of);
    ddpc_free(r->slot_of);
    ddpc_free(r->order);
}

ddpc_status ddpc__reducer_release_others(ddpc_reducer *r, const ddpc__bucket *b, float *buf)
{
    size_t end = b->own.lo + b->own.len;
    ddpc_status st = ddpc__zmem_release(r, buf + b->lo, b->own.lo - b->lo);
    if (st == DDPC_OK)
        st = ddpc__zmem_release(r, buf + end, b->hi - end);
    ddpc__reducer_keep_error(r, st);
    return st;
}

ddpc_status ddpc__reducer_launch_gather(ddpc_reducer *r, const ddpc__bucket *b, float *slot,
                                        ddpc_work **work)
{
    float *mine = slot + (size_t)r->rank * b->chunk;
    ddpc__zmem_copy(r, mine, ddpc__zmem_params(r) + b->own.lo, b->own.len);
    ddpc__zmem_zero(r, mine + b->own.len, b->chunk - b->own.len);
    return ddpc_pg_iall_gather(r->pg, mine, slot, b->chunk, DDPC_DTYPE_F32, work);
}

static size_t comm_size(const ddpc_reducer *r)
{
    return r->cfg.comm_dtype == DDPC_DTYPE_F32 ? sizeof(float) : sizeof(uint16_t);
}

/* Waits for the reduce-scatter in slot s, copies this rank's averaged chunk into the gradient
 * buffer and (stage 2 and up) releases the rest of the bucket's gradient. */
static void finish_scatter(ddpc_reducer *r, int s)
{
    ddpc__bucket *b = &r->buckets[r->slot_bucket[s]];
    r->slot_bucket[s] = -1;
    ddpc_status st = ddpc_work_wait(b->work);
    ddpc__reducer_keep_error(r, st);
    r->stats.comm_s += ddpc_work_seconds(b->work);
    ddpc_work_destroy(b->work);
    b->work = NULL;
    float *g = ddpc__zmem_grads(r);
    const char *mine = (const char *)r->slot[s] + (size_t)r->rank * b->chunk * comm_size(r);
    if (st == DDPC_OK && r->cfg.comm_dtype == DDPC_DTYPE_F32)
        ddpc__zmem_copy(r, g + b->own.lo, (const float *)mine, b->own.len);
    else if (st == DDPC_OK) /* bf16/f16: converted on the model's device */
        ddpc_model_backend(r->model)->half_to_f32_array(g + b->own.lo, (const uint16_t *)mine,
                                                        b->own.len,
                                                        r->cfg.comm_dtype == DDPC_DTYPE_BF16);
    if (r->cfg.zero_stage < 2) /* stage 1 keeps the whole gradient buffer, as DeepSpeed does */
        return;
    (void)ddpc__reducer_release_others(r, b, g); /* a failure is kept for finish */
}

void ddpc__reducer_launch_scatter(ddpc_reducer *r, size_t bi)
{
    ddpc__bucket *b = &r->buckets[bi];
    int s = (int)(bi % 2);
    if (r->slot_bucket[s] >= 0)
        finish_scatter(r, s);
    /* A bucket whose gradients backward never wrote (unused parameters) may be released. */
    ddpc__reducer_back_bucket(r, b, ddpc__zmem_grads(r));
    const float *g = ddpc__zmem_grads(r) + b->lo;
    size_t n = b->hi - b->lo, es = comm_size(r), padded = b->chunk * (size_t)r->world;
    char *slot = (char *)r->slot[s];
    if (r->cfg.comm_dtype == DDPC_DTYPE_F32) {
        ddpc__zmem_copy(r, r->slot[s], g, n);
        ddpc__zmem_zero(r, r->slot[s] + n, padded - n);
    } else {
        /* The padding's halves zeroed in whole floats through the table, from the float holding
         * half n on (its first half, when n is odd, is half n - 1, which the conversion writes
         * next), then the n halves converted on the model's device. */
        ddpc__zmem_zero(r, r->slot[s] + n / 2, (padded + 1) / 2 - n / 2);
        ddpc_model_backend(r->model)->f32_to_half_array((uint16_t *)slot, g, n,
                                                        r->cfg.comm_dtype == DDPC_DTYPE_BF16);
    }
    ddpc__reducer_keep_error(
        r, ddpc_pg_ireduce_scatter(r->pg, slot, slot + (size_t)r->rank * b->chunk * es, b->chunk,
                                   r->cfg.comm_dtype, DDPC_REDUCE_AVG, &b->work));
    r->slot_bucket[s] = (long)bi;
}

/* The slot holding the earlier bucket (the one to finish first). */
static int earlier_slot(const ddpc_reducer *r)
{
    return r->slot_bucket[0] >= 0 &&
                   (r->slot_bucket[1] < 0 || r->slot_bucket[0] < r->slot_bucket[1])
               ? 0
               : 1;
}

void ddpc__reducer_drain_scatter(ddpc_reducer *r)
{
    int first = earlier_slot(r);
    for (int k = 0; k < 2; k++)
        if (r->slot_bucket[(first + k) % 2] >= 0)
            finish_scatter(r, (first + k) % 2);
}

/* Copies the gathered bucket in slot s into the parameters. */
static ddpc_status finish_gather(ddpc_reducer *r, int s)
{
    ddpc__bucket *b = &r->buckets[r->slot_bucket[s]];
    r->slot_bucket[s] = -1;
    ddpc_status st = ddpc_work_wait(b->work);
    ddpc_work_destroy(b->work);
    b->work = NULL;
    /* Stage 3 released the flat buffer outside the owned chunks: backed again until released. */
    if (st == DDPC_OK && !ddpc__reducer_back_bucket(r, b, ddpc__zmem_params(r)))
        st = DDPC_ENOMEM;
    if (st == DDPC_OK)
        ddpc__zmem_copy(r, ddpc__zmem_params(r) + b->lo, r->slot[s], b->hi - b->lo);
    return st;
}

ddpc_status ddpc_reducer_gather_params(ddpc_reducer *r)
{
    if (r->cfg.zero_stage < 1)
        return DDPC_OK;
    if (r->cfg.zero_stage >= 3) {
        ddpc_reducer_release_params(r); /* nothing half-gathered stays in flight */
        r->pinned = true;
    }
    ddpc_status st = DDPC_OK;
    /* Two buckets in flight: one is copied out while the next is gathered. */
    for (size_t i = 0; i < r->n_buckets; i++) {
        ddpc__bucket *b = &r->buckets[i];
        int s = (int)(i % 2);
        if (r->slot_bucket[s] >= 0) {
            ddpc_status fs = finish_gather(r, s);
            st = st == DDPC_OK ? fs : st;
        }
        ddpc_status ls = ddpc__reducer_launch_gather(r, b, r->slot[s], &b->work);
        if (ls != DDPC_OK) {
            st = st == DDPC_OK ? ls : st;
            break;
        }
        r->slot_bucket[s] = (long)i;
    }
    int first = earlier_slot(r);
    for (int k = 0; k < 2; k++) {
        if (r->slot_bucket[(first + k) % 2] < 0)
            continue;
        ddpc_status fs = finish_gather(r, (first + k) % 2);
        st = st == DDPC_OK ? fs : st;
    }
    return st;
}

void ddpc_reducer_zero_grads(ddpc_reducer *r)
{
    if (r->cfg.zero_stage >= 2)
        ddpc__reducer_pool_zero(r);
    else
        ddpc_model_zero_grad(r->model);
}

void ddpc_reducer_shard(const ddpc_reducer *r, const ddpc_range **ranges, size_t *n_ranges)
{
    *ranges = r->shard ? r->shard : &r->whole;
    *n_ranges = r->shard ? r->n_shard : 1;
}

int ddpc_reducer_zero_stage(const ddpc_reducer *r)
{
    return r->cfg.zero_stage;
}

size_t ddpc_reducer_staging_bytes(const ddpc_reducer *r)
{
    size_t slots = r->shard ? 2 : 0;
    for (int i = 0; i < DDPC__GPOOL; i++)
        slots += r->gpool[i] != NULL;
    for (int s = 0; s < DDPC__PSLOTS; s++)
        slots += r->pslot[s] != NULL;
    return slots * r->slot_floats * sizeof(float);
}
