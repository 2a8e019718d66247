// SPDX-License-Identifier: MIT
/* ZeRO stage 3: parameters gathered when used, from the model's param-use hook. A gathered
 * bucket lives in one of three slots and the hook points the model's reads there, so the flat
 * parameter buffer only ever holds this rank's own chunks: nothing is faulted in or given back
 * per step. Invariant: every rank runs the same forward/backward code, so the hook sees the same
 * sequence of tensors everywhere and issues the same gathers in the same order (prefetches
 * included: they depend on that sequence only). The first step records the order in which
 * buckets are fetched; later steps prefetch the next one of that order, as FSDP does (kernels
 * read a weight and its bias in either order, so bucket indices alone do not tell the
 * direction). At most two buckets are kept (lru) plus the one being prefetched. The slots are the
 * model's device memory (reducer_mem.c): on a GPU the hook hands the kernels device pointers. */
#include "parallel/reducer_impl.h"

#include <ddpc/alloc.h>


/* Gives back bucket b's parameters outside its owned chunk in the flat buffer (a failure is kept
 * in r->error, for the step's finish). */
static void release_flat(ddpc_reducer *r, size_t b)
{
    (void)ddpc__reducer_release_others(r, &r->buckets[b], ddpc__zmem_params(r));
}

/* A slot neither kept nor prefetching; -1 when all three are busy (never, by the lru rule). */
static int free_slot(const ddpc_reducer *r)
{
    for (int s = 0; s < DDPC__PSLOTS; s++)
        if (r->pslot_bucket[s] < 0)
            return s;
    return -1;
}

/* Launches the all-gather of bucket b into parameter slot s, which it then holds. */
static ddpc_status launch_gather(ddpc_reducer *r, long b, int s, ddpc_work **work)
{
    r->pslot_bucket[s] = b;
    return ddpc__reducer_launch_gather(r, &r->buckets[b], r->pslot[s], work);
}

static void forget(ddpc_reducer *r, long b)
{
    if (b >= 0 && r->slot_of[b] >= 0) {
        r->pslot_bucket[r->slot_of[b]] = -1;
        r->slot_of[b] = -1;
    }
}

/* Waits for the prefetch and drops it, or keeps it as bucket `keep`'s when it is that one. */
static void settle_prefetch(ddpc_reducer *r, long keep)
{
    if (r->prefetch < 0)
        return;
    long pf = r->prefetch;
    int s = r->prefetch_slot;
    r->prefetch = -1;
    ddpc_status st = ddpc_work_wait(r->prefetch_work);
    ddpc_work_destroy(r->prefetch_work);
    r->prefetch_work = NULL;
    ddpc__reducer_keep_error(r, st);
    if (pf == keep && st == DDPC_OK)
        r->slot_of[pf] = s;
    else
        r->pslot_bucket[s] = -1;
}

/* Makes bucket b whole in a slot: the prefetch when that is b, else a gather now. */
static void fetch(ddpc_reducer *r, long b)
{
    settle_prefetch(r, b);
    if (r->slot_of[b] >= 0)
        return;
    int s = free_slot(r);
    ddpc_work *w = NULL;
    ddpc_status st = s < 0 ? ddpc_errorf(DDPC_EINTERNAL, "ZeRO-3: no free parameter slot")
                           : launch_gather(r, b, s, &w);
    ddpc__reducer_keep_error(r, st);
    if (st != DDPC_OK)
        return;
    st = ddpc_work_wait(w);
    ddpc_work_destroy(w);
    ddpc__reducer_keep_error(r, st);
    r->slot_of[b] = s;
}

/* Where bucket b's fetch is in the recorded order at or after the cursor; -1 when absent. */
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
    int s = free_slot(r);
    if (r->slot_of[next] >= 0 || s < 0)
        return;
    ddpc_status st = launch_gather(r, next, s, &r->prefetch_work);
    ddpc__reducer_keep_error(r, st);
    if (st == DDPC_OK) {
        r->prefetch = next;
        r->prefetch_slot = s;
    } else {
        r->pslot_bucket[s] = -1;
    }
}

static float *on_param_use(void *ctx, size_t tensor)
{
    ddpc_reducer *r = ctx;
    if (r->pinned || tensor >= r->n_tensors)
        return NULL;
    long b = (long)r->bucket_of[tensor];
    if (b != r->lru[0]) {
        long prev = r->lru[0], older = r->lru[1];
        /* The bucket used before last goes first: two kept, the third slot for the prefetch. */
        if (older >= 0 && older != b && older != prev)
            forget(r, older);
        bool fetched = r->slot_of[b] < 0;
        if (fetched)
            fetch(r, b);
        r->lru[1] = prev;
        r->lru[0] = b;
        if (fetched)
            follow_order(r, b);
    }
    int s = r->slot_of[b];
    if (s < 0) { /* the gather failed (kept in r->error): read the flat buffer meanwhile */
        ddpc__reducer_back_bucket(r, &r->buckets[b], ddpc__zmem_params(r));
        return NULL;
    }
    return r->pslot[s] + (ddpc_model_tensor(r->model, tensor)->offset - r->buckets[b].lo);
}

void ddpc_reducer_release_params(ddpc_reducer *r)
{
    if (r->cfg.zero_stage < 3)
        return;
    settle_prefetch(r, -1); /* finish it (its values may be stale now) and drop it */
    for (size_t b = 0; b < r->n_buckets; b++) {
        forget(r, (long)b);
        if (r->pinned) /* gather_params wrote every bucket into the flat buffer */
            release_flat(r, b);
    }
    r->lru[0] = r->lru[1] = -1;
    r->pinned = false;
    r->order_pos = 0;
    if (r->order_len > 0) /* a step has run: its fetch order is the one to prefetch by */
        r->recording = false;
}

void ddpc_reducer_params_written(ddpc_reducer *r)
{
    if (r->cfg.zero_stage < 3 || r->pinned)
        return;
    for (size_t b = 0; b < r->n_buckets; b++)
        release_flat(r, b);
}

ddpc_status ddpc__reducer_build_zero3(ddpc_reducer *r)
{
    r->slot_of = ddpc_malloc((r->n_buckets ? r->n_buckets : 1) * sizeof *r->slot_of);
    r->order_cap = 8 * r->n_buckets + 16; /* forward and backward, with room for tied weights */
    r->order = ddpc_calloc(r->order_cap, sizeof *r->order);
    for (int s = 0; s < DDPC__PSLOTS; s++) {
        r->pslot[s] = ddpc__zmem_alloc(r, r->slot_floats);
        if (!r->pslot[s])
            return ddpc_errorf(DDPC_ENOMEM,
                               "out of memory for ZeRO-3's parameter slots (%d x "
                               "%zu floats)",
                               DDPC__PSLOTS, r->slot_floats);
        r->pslot_bucket[s] = -1;
    }
    if (!r->slot_of || !r->order)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for ZeRO-3's tables");
    for (size_t b = 0; b < r->n_buckets; b++)
        r->slot_of[b] = -1;
    r->recording = true;
    r->lru[0] = r->lru[1] = r->prefetch = -1;
    r->pinned = true; /* every rank holds rank 0's parameters now: release all but the chunks */
    ddpc_reducer_release_params(r);
    if (r->error != DDPC_OK)
        return ddpc_errorf(r->error, "%s", r->message);
    ddpc_model_set_param_use_hook(r->model, on_param_use, r);
    return DDPC_OK;
}
