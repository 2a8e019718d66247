// SPDX-License-Identifier: MIT
/* ZeRO stages 2 and 3: the gradient pool. In a synchronised backward the model's grad-use hook
 * points each bucket's gradients at one of DDPC__GPOOL buffers, where backward sums them and the
 * bucket is then reduce-scattered in place; only this rank's averaged chunk is copied into the
 * flat gradient buffer. So the flat buffer's other parts are never written and hold no memory,
 * and no page is faulted in or given back per step (what PyTorch's caching allocator achieves for
 * DeepSpeed's buckets). Invariant: a buffer is reused only after its reduce-scatter finished and
 * the chunk was copied out; when all are busy with buckets still summing, the bucket falls back
 * to the flat buffer (released again after its reduce-scatter). The pool is the model's device
 * memory and every fill and copy goes through reducer_mem.c, so on a GPU the same code runs on
 * device buffers. With bf16/f16 communication there is no pool, but the hook stays: it backs each
 * bucket's range of the flat buffer before backward writes it (reducer_back.c), as it does for a
 * no_sync pass and the pool's overflow. */
#include "parallel/reducer_impl.h"

#include <ddpc/alloc.h>

/* Waits for the reduce-scatter of the bucket in buffer i, copies this rank's chunk into the flat
 * gradient buffer and frees the buffer. */
static void finish_pooled(ddpc_reducer *r, int i)
{
    ddpc__bucket *b = &r->buckets[r->gpool_bucket[i]];
    ddpc_status st = ddpc_work_wait(b->work);
    ddpc__reducer_keep_error(r, st);
    r->stats.comm_s += ddpc_work_seconds(b->work);
    ddpc_work_destroy(b->work);
    b->work = NULL;
    if (st == DDPC_OK)
        ddpc__zmem_copy(r, ddpc__zmem_grads(r) + b->own.lo,
                        r->gpool[i] + (size_t)r->rank * b->chunk, b->own.len);
    r->gpool_bucket[i] = -1;
}

/* The buffer whose launched bucket has the lowest index (the first to finish); -1 if none. */
static int oldest_launched(const ddpc_reducer *r)
{
    int best = -1;
    for (int i = 0; i < DDPC__GPOOL; i++) {
        long b = r->gpool_bucket[i];
        if (b >= 0 && r->buckets[b].work && (best < 0 || b < r->gpool_bucket[best]))
            best = i;
    }
    return best;
}

/* A free buffer, after waiting for a launched one if need be; -1 when all are still summing. */
static int take_buffer(ddpc_reducer *r)
{
    for (int i = 0; i < DDPC__GPOOL; i++)
        if (r->gpool_bucket[i] < 0)
            return i;
    int i = oldest_launched(r);
    if (i >= 0)
        finish_pooled(r, i);
    return i;
}

/* Backward writes bucket b's gradients into the flat buffer (NULL: the model's own pointer),
 * backed first. */
static float *flat(ddpc_reducer *r, const ddpc__bucket *b)
{
    ddpc__reducer_back_bucket(r, b, ddpc__zmem_grads(r));
    return NULL;
}

static float *on_grad_use(void *ctx, size_t tensor)
{
    ddpc_reducer *r = ctx;
    if (tensor >= r->n_tensors)
        return NULL;
    long bi = (long)r->bucket_of[tensor];
    ddpc__bucket *b = &r->buckets[bi];
    /* A no_sync pass, bf16/f16 communication (no pool), the pool's overflow: the flat buffer. */
    if (!r->pool_on || r->gpool_of[bi] == -2 || b->launched)
        return flat(r, b);
    if (r->gpool_of[bi] < 0) {
        int i = take_buffer(r);
        if (i < 0) { /* every buffer holds a bucket still summing: this one uses the flat buffer */
            r->gpool_of[bi] = -2;
            r->flat_dirty = true;
            return flat(r, b);
        }
        size_t n = b->hi - b->lo, padded = b->chunk * (size_t)r->world;
        /* Micro-batches before this pass (no_sync) summed into the flat buffer: go on from it,
         * then give the flat copy back (only the owned chunk is written there again). */
        if (r->accumulated && ddpc__reducer_back_bucket(r, b, ddpc__zmem_grads(r))) {
            ddpc__zmem_copy(r, r->gpool[i], ddpc__zmem_grads(r) + b->lo, n);
            (void)ddpc__reducer_release_others(r, b, ddpc__zmem_grads(r)); /* kept: finish */
        } else {
            ddpc__zmem_zero(r, r->gpool[i], n);
        }
        ddpc__zmem_zero(r, r->gpool[i] + n, padded - n);
        r->gpool_of[bi] = i;
        r->gpool_bucket[i] = bi;
    }
    return r->gpool[r->gpool_of[bi]] + (ddpc_model_tensor(r->model, tensor)->offset - b->lo);
}

bool ddpc__reducer_launch_pooled(ddpc_reducer *r, size_t bi)
{
    long i = r->gpool_of ? r->gpool_of[bi] : -1;
    if (i < 0)
        return false;
    ddpc__bucket *b = &r->buckets[bi];
    float *buf = r->gpool[i];
    ddpc__reducer_keep_error(r, ddpc_pg_ireduce_scatter(r->pg, buf,
                                                        buf + (size_t)r->rank * b->chunk, b->chunk,
                                                        DDPC_DTYPE_F32, DDPC_REDUCE_AVG, &b->work));
    return true;
}

void ddpc__reducer_drain_pooled(ddpc_reducer *r)
{
    for (int i; (i = oldest_launched(r)) >= 0;)
        finish_pooled(r, i);
    for (int i = 0; i < DDPC__GPOOL; i++) /* a bucket that never launched (an error) */
        r->gpool_bucket[i] = -1;
    for (size_t b = 0; b < r->n_buckets; b++)
        r->gpool_of[b] = -1;
    r->pool_on = false;
}

void ddpc__reducer_pool_prepare(ddpc_reducer *r, bool sync)
{
    if (!r->gpool_of)
        return;
    if (!sync) {
        r->accumulated = true;
        r->pool_on = false;
        return;
    }
    r->pool_on = true;
}

void ddpc__reducer_pool_zero(ddpc_reducer *r)
{
    float *g = ddpc__zmem_grads(r);
    if (r->accumulated || r->flat_dirty || !r->gpool_of) {
        (void)ddpc__reducer_release_all_but_shard(r, g); /* a failure is kept for finish */
    } else { /* only the owned chunks were written: zero them, nothing to fault in */
        for (size_t i = 0; i < r->n_shard; i++)
            ddpc__zmem_zero(r, g + r->shard[i].lo, r->shard[i].len);
    }
    r->accumulated = r->flat_dirty = false;
}

ddpc_status ddpc__reducer_build_gpool(ddpc_reducer *r)
{
    if (r->cfg.comm_dtype != DDPC_DTYPE_F32) { /* bf16/f16 buckets are staged, without a pool */
        ddpc_model_set_grad_use_hook(r->model, on_grad_use, r); /* backs the flat buffer */
        return DDPC_OK;
    }
    r->gpool_of = ddpc_malloc((r->n_buckets ? r->n_buckets : 1) * sizeof *r->gpool_of);
    if (!r->gpool_of)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for ZeRO's gradient pool table");
    for (size_t b = 0; b < r->n_buckets; b++)
        r->gpool_of[b] = -1;
    for (int i = 0; i < DDPC__GPOOL; i++) {
        r->gpool_bucket[i] = -1;
        r->gpool[i] = ddpc__zmem_alloc(r, r->slot_floats);
        if (!r->gpool[i])
            return ddpc_errorf(DDPC_ENOMEM,
                               "out of memory for ZeRO's gradient pool (%d x %zu "
                               "floats)",
                               DDPC__GPOOL, r->slot_floats);
    }
    ddpc_model_set_grad_use_hook(r->model, on_grad_use, r);
    /* Released once: from now on only the owned chunks are ever written between steps. */
    return ddpc__reducer_release_all_but_shard(r, ddpc__zmem_grads(r));
}
