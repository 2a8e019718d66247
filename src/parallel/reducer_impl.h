// SPDX-License-Identifier: MIT
/* Private to the reducer: the bucket table and the per-step readiness state. A bucket is the
 * gradient range [lo, hi) holding whole tensors; bucket_of maps a tensor to its bucket. */
#ifndef DDPC_PARALLEL_REDUCER_IMPL_H
#define DDPC_PARALLEL_REDUCER_IMPL_H

#include <ddpc/reducer.h>

#include <stdint.h>

/* ZeRO's buffers of the largest bucket: stage 3's parameter slots, stage 2's gradient pool. */
#define DDPC__PSLOTS 3
#define DDPC__GPOOL 4

typedef struct {
    size_t lo, hi;          /* float range of the gradient buffer */
    size_t n_tensors;       /* tensors in the bucket */
    size_t pending;         /* tensors not yet ready in this step */
    bool launched;
    ddpc_work *work;        /* in flight, or NULL */
    uint16_t *comm;         /* (hi - lo) bf16/f16 staging when compressing, else NULL */
    size_t chunk;           /* ZeRO: ceil((hi - lo) / world), the floats of each rank's chunk */
    ddpc_range own;         /* ZeRO: this rank's chunk [lo + rank*chunk, ...) clipped to hi */
} ddpc__bucket;

struct ddpc_reducer {
    ddpc_pg *pg;            /* moves the model's memory (device buffers for a model on a GPU) */
    ddpc_pg *host;          /* host data: cfg.host_pg, else pg */
    ddpc_model *model;
    ddpc_reducer_config cfg;
    ddpc__bucket *buckets;  /* (n_buckets), bucket 0 = the last registered tensors */
    size_t n_buckets;
    size_t *bucket_of;      /* (n_tensors) */
    uint8_t *ready;         /* (n_tensors) ready in this step */
    size_t n_tensors;
    size_t next_launch;     /* buckets [0, next_launch) have been launched this step */
    bool sync, step_open;
    ddpc_status error;      /* first error raised inside the hook */
    char message[512];
    ddpc_reducer_stats stats;
    /* ZeRO (zero_stage >= 1): the owned chunks in ascending flat order, and two staging slots of
     * `slot_floats` floats (the largest bucket padded to world chunks) that reduce-scatters and
     * parameter gathers alternate between; slot_bucket[s] is the bucket in flight there or -1. */
    int rank, world;
    ddpc_range *shard;
    size_t n_shard;
    ddpc_range whole; /* below stage 1: the shard is everything */
    float *slot[2];
    size_t slot_floats;
    long slot_bucket[2];
    /* ZeRO-3: a bucket's parameters are whole only in a slot: slot_of[b] (or -1), the bucket in
     * each slot (pslot_bucket, -1 free); the two buckets used last (lru, most recent first) are
     * kept, the third slot takes the prefetch of the bucket fetched next in the recorded order
     * (prefetch, in prefetch_slot, in flight as prefetch_work). pinned: every bucket is whole
     * in the flat buffer (evaluation) and the hook does nothing. */
    float *pslot[DDPC__PSLOTS];
    long pslot_bucket[DDPC__PSLOTS];
    long *slot_of;
    long lru[2];
    long prefetch;
    int prefetch_slot;
    ddpc_work *prefetch_work;
    bool pinned;
    /* The buckets in the order the first step fetched them (order_len of order_cap), and the
     * position the current step has reached in it; recording until that step ends. */
    long *order;
    size_t order_len, order_cap, order_pos;
    bool recording;
    /* ZeRO-2 and 3: a synchronised backward (pool_on) accumulates each bucket's gradient in a
     * pool buffer (gpool_of[b], -1 none yet, -2 the flat buffer: the pool was full) and
     * reduce-scatters it in place, so the flat gradient buffer holds only the owned chunks and is
     * never faulted in; gpool_bucket[i] is the bucket in buffer i or -1. flat_dirty: the flat
     * buffer holds more than the owned chunks (a no_sync pass or the pool's overflow). */
    float *gpool[DDPC__GPOOL];
    long gpool_bucket[DDPC__GPOOL];
    long *gpool_of;
    bool pool_on, flat_dirty;
    bool accumulated; /* a no_sync pass summed into the flat buffer since the last zeroing */
};

/* Splits the model's tensors, from the last registered to the first, into buckets of at most
 * cfg.bucket_cap_mb (the first at most cfg.first_bucket_mb); a tensor larger than the cap gets a
 * bucket of its own. Allocates the tables. */
ddpc_status ddpc__reducer_build_buckets(ddpc_reducer *r);
/* Keeps the first error raised where no caller can receive it (hooks, the comm thread's work)
 * in r->error and r->message; DDPC_OK is ignored. */
void ddpc__reducer_keep_error(ddpc_reducer *r, ddpc_status st);
/* Gives back the parts of bucket b's range of buf (the flat parameter or gradient buffer, on the
 * model's device) outside this rank's chunk: they read as zeros (ddpc__zmem_release). A failure
 * is kept in r->error and returned. */
ddpc_status ddpc__reducer_release_others(ddpc_reducer *r, const ddpc__bucket *b, float *buf);
/* Copies this rank's chunk of bucket b's parameters into slot (padded with zeros) and launches
 * the all-gather that fills the rest of the slot. */
ddpc_status ddpc__reducer_launch_gather(ddpc_reducer *r, const ddpc__bucket *b, float *slot,
                                        ddpc_work **work);
/* ZeRO: computes every bucket's chunk, the shard list and the staging slots (stage >= 1). */
ddpc_status ddpc__reducer_build_shard(ddpc_reducer *r);
/* Stage >= 2: launches bucket b's reduce-scatter through a staging slot, first finishing the
 * bucket that held the slot. Errors are kept in r->error. */
void ddpc__reducer_launch_scatter(ddpc_reducer *r, size_t b);
/* Stage >= 2: waits for the reduce-scatters still in flight and finishes them in bucket order. */
void ddpc__reducer_drain_scatter(ddpc_reducer *r);
/* Stage 3: allocates the parameter slots and tables, installs the param-use hook and releases
 * every bucket's parameters but the owned chunks. */
ddpc_status ddpc__reducer_build_zero3(ddpc_reducer *r);
/* Stage 2 and up with f32 communication: the gradient pool and its hook (reducer_gpool.c). */
ddpc_status ddpc__reducer_build_gpool(ddpc_reducer *r);
/* Launches bucket b's in-place reduce-scatter when it was summed in the pool; false if not. */
bool ddpc__reducer_launch_pooled(ddpc_reducer *r, size_t b);
/* Waits for the pooled reduce-scatters in flight, copies out the owned chunks, empties the pool. */
void ddpc__reducer_drain_pooled(ddpc_reducer *r);
/* Before each backward: a synchronised one sums in the pool, a no_sync one in the flat buffer. */
void ddpc__reducer_pool_prepare(ddpc_reducer *r, bool sync);
/* Zeroes the flat gradient buffer for a new step (owned chunks only when nothing else was
 * written). */
void ddpc__reducer_pool_zero(ddpc_reducer *r);
/* ZeRO's door to model memory (reducer_mem.c): the model's device buffers (the host ones on the
 * CPU), and allocation (zeroed), copies and fills of `floats` floats through the model's kernel
 * table. release: the range reads as zeros afterwards and its memory goes back (CPU pages; GPU
 * granules where the device has virtual memory management); back: a released range must be
 * backed again before anything touches it on a device. Both return the table's status (its
 * message names the failure: out of device memory, or the driver's refusal). */
bool ddpc__zmem_on_device(const ddpc_reducer *r);
float *ddpc__zmem_params(const ddpc_reducer *r);
float *ddpc__zmem_grads(const ddpc_reducer *r);
float *ddpc__zmem_alloc(const ddpc_reducer *r, size_t floats);
void ddpc__zmem_free(const ddpc_reducer *r, void *p);
void ddpc__zmem_copy(const ddpc_reducer *r, float *dst, const float *src, size_t floats);
void ddpc__zmem_zero(const ddpc_reducer *r, float *p, size_t floats);
ddpc_status ddpc__zmem_release(const ddpc_reducer *r, float *p, size_t floats);
ddpc_status ddpc__zmem_back(const ddpc_reducer *r, float *p, size_t floats);
/* reducer_back.c: ZeRO-2/3 back a released range of buf (the flat gradient or parameter buffer)
 * before writing or reading it; a failure (out of device memory, the driver's refusal) is kept
 * in r->error (false), so the step's ddpc_reducer_finish returns it. The owned chunks stay
 * backed: every release of a whole buffer is followed by back_shard. */
bool ddpc__reducer_back(ddpc_reducer *r, float *buf, size_t lo, size_t floats);
bool ddpc__reducer_back_bucket(ddpc_reducer *r, const ddpc__bucket *b, float *buf);
void ddpc__reducer_back_shard(ddpc_reducer *r, float *buf);
/* Releases the whole of buf but the owned chunks (which stay backed); a failure is kept in
 * r->error and returned. */
ddpc_status ddpc__reducer_release_all_but_shard(ddpc_reducer *r, float *buf);
/* Frees the shard tables and slots. */
void ddpc__reducer_free_shard(ddpc_reducer *r);
/* Compares every tensor's name and shape and cfg.fingerprint's lines across ranks. */
ddpc_status ddpc__reducer_check_fingerprint(ddpc_reducer *r);

#endif
