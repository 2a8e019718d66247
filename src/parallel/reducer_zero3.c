/* ZeRO stage 3: parameters gathered when used and released after, from the model's param-use
 * hook. Invariant: every rank runs the same forward/backward code, so the hook sees the same
 * sequence of tensors everywhere and issues the same gathers in the same order (prefetches
 * included: they depend on that sequence only). The first step records the order in which
 * buckets are fetched; later steps prefetch the next one of that order, as FSDP does (kernels
 * read a weight and its bias in either order, so bucket indices alone do not tell the
 * direction). A bucket's owned chunk is never released, so the optimizer and checkpoints always
 * find this rank's part of the parameters in place. */
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

/* Where bucket b's fetch is in the recorded order: the cursor when it matches, else the next
 * occurrence after it; -1 when b is not there. */
static long find_in_order(const ddpc_reducer *r, long b)
{
    for (size_t i = r->order_pos; i < r->order_len; i++)
        if (r->order[i] == b)
            return (long)i;
    return -1;
}

/* Records the fetch of b in the first step; afterwards, prefetches the bucket fetched next. */
static void follow_order(ddpc_reducer *r, long b)
{
    if (r->recording) {
        if (r->order_len < r->order_cap)
            r->order[r->order_len++] = b;
        return;
    }
    long at = find_in_order(r, b);
    if (at < 0)
        return;
    r->order_pos = (size_t)at + 1;
    if (r->order_pos >= r->order_len || r->prefetch >= 0)
        return;
    long next = r->order[r->order_pos];
    if (r->resident[next])
        return;
    ddpc_status st = launch_gather(r, next, r->pslot[1], &r->prefetch_work);
    keep_error(r, st);
    if (st == DDPC_OK)
        r->prefetch = next;
}

static void on_param_use(void *ctx, size_t tensor)
{
    ddpc_reducer *r = ctx;
    if (r->pinned || tensor >= r->n_tensors)
        return;
    long b = (long)r->bucket_of[tensor];
    if (b == r->lru[0])
        return;
    long prev = r->lru[0], evicted = r->lru[1];
    /* The bucket used before last goes first, so at most two buckets are ever whole here. */
    if (evicted >= 0 && evicted != b && evicted != prev && r->resident[evicted])
        release(r, evicted);
    bool fetched = !r->resident[b];
    if (fetched)
        fetch(r, b);
    r->lru[1] = prev;
    r->lru[0] = b;
    if (fetched)
        follow_order(r, b);
    if (fetched && r->track_params) { /* the prefetch in flight lands in a slot, not here */
        size_t now = ddpc_pages_resident(ddpc_model_params(r->model),
                                         ddpc_model_num_params(r->model) * sizeof(float));
        r->params_peak = now > r->params_peak ? now : r->params_peak;
    }
}

void ddpc_reducer_track_params(ddpc_reducer *r, bool on)
{
    r->track_params = on && r->cfg.zero_stage >= 3;
}

size_t ddpc_reducer_params_peak(const ddpc_reducer *r)
{
    return r->params_peak;
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
    r->order_pos = 0;
    if (r->order_len > 0) /* a step has run: its fetch order is the one to prefetch by */
        r->recording = false;
}

ddpc_status ddpc__reducer_build_zero3(ddpc_reducer *r)
{
    r->resident = ddpc_calloc(r->n_buckets ? r->n_buckets : 1, 1);
    r->order_cap = 8 * r->n_buckets + 16; /* forward and backward, with room for tied weights */
    r->order = ddpc_calloc(r->order_cap, sizeof *r->order);
    r->recording = true;
    for (int s = 0; s < 2; s++)
        r->pslot[s] = ddpc_calloc(r->slot_floats ? r->slot_floats : 1, sizeof(float));
    if (!r->resident || !r->order || !r->pslot[0] || !r->pslot[1])
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
