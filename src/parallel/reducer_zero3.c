/* ZeRO stage 3: parameters gathered when used and released after, from the model's param-use
 * hook. Invariant: every rank runs the same forward/backward code, so the hook sees the same
 * sequence of tensors everywhere and issues the same gathers in the same order (prefetches
 * included: they depend on that sequence only). A bucket's owned chunk is never released, so the
 * optimizer and checkpoints always find this rank's part of the parameters in place. */
#include "parallel/reducer_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/pages.h>

#include <stdio.h>
#include <string.h>

static void keep_error(ddpc_reducer *r, ddpc_status st)
{
    if (st != DDPC_OK && r->error == DDPC_OK) {
        r->error = st;
        snprintf(r->message, sizeof r->message, "%s", ddpc_last_error());
    }
}

/* Gives back bucket b's parameters outside its owned chunk. */
static void release(ddpc_reducer *r, long b)
{
    ddpc__bucket *k = &r->buckets[b];
    float *p = ddpc_model_params(r->model);
    size_t end = k->own.lo + k->own.len;
    ddpc_pages_release(p + k->lo, (k->own.lo - k->lo) * sizeof(float));
    ddpc_pages_release(p + end, (k->hi - end) * sizeof(float));
    r->resident[b] = 0;
}

/* Launches the all-gather of bucket b into slot `slot` (this rank's chunk copied in first). */
static ddpc_status launch_gather(ddpc_reducer *r, long b, float *slot, ddpc_work **work)
{
    ddpc__bucket *k = &r->buckets[b];
    float *mine = slot + (size_t)r->rank * k->chunk;
    memcpy(mine, ddpc_model_params(r->model) + k->own.lo, k->own.len * sizeof(float));
    memset(mine + k->own.len, 0, (k->chunk - k->own.len) * sizeof(float));
    return ddpc_pg_iall_gather(r->pg, mine, slot, k->chunk, DDPC_DTYPE_F32, work);
}

/* Waits for a gather of bucket b in `slot` and writes the other ranks' chunks into the
 * parameters. Never this rank's own chunk: a prefetch may predate the optimizer's update of it. */
static void land_gather(ddpc_reducer *r, long b, const float *slot, ddpc_work *work)
{
    ddpc__bucket *k = &r->buckets[b];
    ddpc_status st = ddpc_work_wait(work);
    ddpc_work_destroy(work);
    keep_error(r, st);
    float *p = ddpc_model_params(r->model);
    size_t end = k->own.lo + k->own.len;
    if (st == DDPC_OK) {
        memcpy(p + k->lo, slot, (k->own.lo - k->lo) * sizeof(float));
        memcpy(p + end, slot + (end - k->lo), (k->hi - end) * sizeof(float));
    }
    r->resident[b] = 1;
}

/* Makes bucket b resident: from the prefetch when that is b, else by a gather now. A prefetch
 * of another bucket is landed first (slots and collectives stay in issue order). */
static void fetch(ddpc_reducer *r, long b)
{
    if (r->prefetch >= 0) {
        long pf = r->prefetch;
        r->prefetch = -1;
        land_gather(r, pf, r->pslot[1], r->prefetch_work);
        r->prefetch_work = NULL;
        if (pf != b && pf != r->lru[0] && pf != r->lru[1])
            release(r, pf); /* the pass turned: the prefetched bucket is not needed now */
        if (pf == b)
            return;
    }
    ddpc_work *w = NULL;
    ddpc_status st = launch_gather(r, b, r->pslot[0], &w);
    keep_error(r, st);
    if (st == DDPC_OK)
        land_gather(r, b, r->pslot[0], w);
}

static void on_param_use(void *ctx, size_t tensor)
{
    ddpc_reducer *r = ctx;
    if (r->pinned || tensor >= r->n_tensors)
        return;
    long b = (long)r->bucket_of[tensor];
    if (b == r->lru[0])
        return;
    if (!r->resident[b])
        fetch(r, b);
    long prev = r->lru[0], evicted = r->lru[1];
    r->lru[1] = prev;
    r->lru[0] = b;
    if (evicted >= 0 && evicted != b && evicted != prev && r->resident[evicted])
        release(r, evicted);
    /* Buckets hold the tensors in reverse: forward walks down the bucket index, backward up. */
    long next = prev >= 0 && b > prev ? b + 1 : b - 1;
    if (r->prefetch < 0 && next >= 0 && next < (long)r->n_buckets && !r->resident[next]) {
        ddpc_status st = launch_gather(r, next, r->pslot[1], &r->prefetch_work);
        keep_error(r, st);
        if (st == DDPC_OK)
            r->prefetch = next;
    }
}

void ddpc_reducer_release_params(ddpc_reducer *r)
{
    if (r->cfg.zero_stage < 3)
        return;
    if (r->prefetch >= 0) { /* finish it (its values may be stale now) and drop it */
        keep_error(r, ddpc_work_wait(r->prefetch_work));
        ddpc_work_destroy(r->prefetch_work);
        r->prefetch_work = NULL;
        r->prefetch = -1;
    }
    for (size_t b = 0; b < r->n_buckets; b++)
        if (r->resident[b] || r->pinned)
            release(r, (long)b);
    r->lru[0] = r->lru[1] = -1;
    r->pinned = false;
}

ddpc_status ddpc__reducer_build_zero3(ddpc_reducer *r)
{
    r->resident = ddpc_calloc(r->n_buckets ? r->n_buckets : 1, 1);
    for (int s = 0; s < 2; s++)
        r->pslot[s] = ddpc_calloc(r->slot_floats ? r->slot_floats : 1, sizeof(float));
    if (!r->resident || !r->pslot[0] || !r->pslot[1])
        return ddpc_errorf(DDPC_ENOMEM,
                           "out of memory for ZeRO-3's parameter slots (2 x %zu "
                           "floats)",
                           r->slot_floats);
    r->lru[0] = r->lru[1] = r->prefetch = -1;
    r->pinned = true; /* every rank holds rank 0's parameters now: release all but the chunks */
    ddpc_reducer_release_params(r);
    ddpc_model_set_param_use_hook(r->model, on_param_use, r);
    return DDPC_OK;
}
