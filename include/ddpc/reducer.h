// SPDX-License-Identifier: MIT
/* The DDP gradient reducer: keeps N model replicas equal by averaging their gradients, as
 * PyTorch's DistributedDataParallel does. Buckets are contiguous ranges of the model's flat
 * gradient buffer in the order backward produces them (last tensors first); each bucket's
 * all-reduce is launched on the process group's comm thread as soon as its last tensor is ready,
 * while backward goes on, and in bucket order on every rank. One thread at a time. */
#ifndef DDPC_REDUCER_H
#define DDPC_REDUCER_H

#include <ddpc/comm.h>
#include <ddpc/nn.h>
#include <ddpc/optim.h>
#include <ddpc/status.h>

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    double bucket_cap_mb;        /* bucket size limit (default 25, as PyTorch) */
    double first_bucket_mb;      /* smaller first bucket so communication starts early (default 1) */
    bool find_unused_parameters; /* tensors backward never reached count as ready (zero gradient);
                                    without it they are an error naming them */
    ddpc_dtype comm_dtype;       /* F32 (default), or BF16 / F16 to halve the bytes sent */
    bool broadcast_params;       /* copy rank 0's parameters (and buffers) to every rank at create
                                    (default on) */
    bool broadcast_buffers;      /* copy rank 0's model buffers (BatchNorm running statistics) to
                                    every rank before each step's first forward and before
                                    evaluation (ddpc_reducer_sync_buffers), as torch DDP's
                                    broadcast_buffers does (default on) */
    bool sync_batchnorm;         /* SyncBatchNorm: batch statistics over every rank's batch, through
                                    the model's stat-sync hook (default off) */
    const char *fingerprint;     /* extra text every rank must agree on (e.g. the config), borrowed;
                                    NULL for none */
    /* The group for what is on the host (the fingerprint check, a device model's SyncBatchNorm
     * batch size; its sums are the model's memory, on pg), borrowed until destroy; NULL: pg itself.
     * A model on a GPU gives ddpc_reducer_create a group on device buffers
     * (ddpc_pg_config.cuda) for its memory and this one, the same ranks in the same order on
     * host buffers, for the rest. */
    ddpc_pg *host_pg;
    /* ZeRO stage. 0: all-reduce (DDP). 1: partitions every bucket [lo, hi) into world chunks of
     * ceil((hi - lo) / world) floats, rank r owning chunk r (ddpc_reducer_shard), reduce-scatters
     * each bucket instead of all-reducing it, so only the owned chunks of the gradient buffer hold
     * the average, and gathers the owners' parameters (ddpc_reducer_gather_params). 2: also
     * releases the rest of the gradient buffer (zero, no physical memory) as each bucket ends.
     * 3: also parameters: outside the owned chunks a bucket's parameters are gathered when
     * forward or backward first reads one of its tensors (the next bucket is prefetched), kept
     * while one of the two buckets used last, and released after. */
    int zero_stage;
} ddpc_reducer_config;

ddpc_reducer_config ddpc_reducer_config_default(void);

typedef struct {
    size_t num_buckets;
    double exposed_s;  /* total time ddpc_reducer_finish blocked waiting for communication */
    double comm_s;     /* total time the buckets' collectives took on the comm thread */
    uint64_t steps;    /* synchronised steps so far */
} ddpc_reducer_stats;

typedef struct ddpc_reducer ddpc_reducer;

/* Builds the buckets, compares the model fingerprint (every tensor's name and shape, then
 * cfg->fingerprint line by line) across ranks — a mismatch is DDPC_EINVAL naming the first
 * difference and the ranks — broadcasts rank 0's parameters, and installs itself as the model's
 * gradient-ready hook. pg moves the model's memory (its device's: ddpc_model_device_grads and
 * the like), so for a model on a GPU it is a group on device buffers, with cfg->host_pg beside
 * it; a host_pg whose rank or world size differs from pg's is DDPC_EINVAL. Borrows pg and model
 * until destroy. Collective: every rank calls it. */
ddpc_status ddpc_reducer_create(ddpc_pg *pg, ddpc_model *model, const ddpc_reducer_config *cfg,
                                ddpc_reducer **out);
/* Removes the hook, waits for anything in flight and frees. NULL is a no-op. */
void ddpc_reducer_destroy(ddpc_reducer *r);

/* Call before each backward. sync false (no_sync, or a micro-step before the last of a gradient
 * accumulation) lets gradients accumulate locally with no communication; sync true makes this
 * backward's ready tensors launch their buckets. */
void ddpc_reducer_prepare(ddpc_reducer *r, bool sync);
/* After the last backward of a synchronised step: launches what is left (unused tensors, or every
 * bucket when several backward passes fed this step), waits for all buckets and leaves the
 * average over ranks in the gradient buffer, identical on every rank. Errors: the collective's
 * (timeout, peer), or DDPC_EINVAL naming tensors that got no gradient without
 * find_unused_parameters (after communicating, so the other ranks are not left waiting). */
ddpc_status ddpc_reducer_finish(ddpc_reducer *r);
/* Marks every tensor ready now (used when several backward passes — tasks of a multi-task step —
 * feed one step and only the last should communicate). */
void ddpc_reducer_mark_all_ready(ddpc_reducer *r);

ddpc_reducer_stats ddpc_reducer_stats_of(const ddpc_reducer *r);
/* This rank's ZeRO shard: one range of the flat buffers per bucket (its chunk, possibly empty), in
 * ascending flat order; below stage 1, one range covering everything. Valid until destroy. */
void ddpc_reducer_shard(const ddpc_reducer *r, const ddpc_range **ranges, size_t *n_ranges);
/* The zero_stage it was created with. */
int ddpc_reducer_zero_stage(const ddpc_reducer *r);
/* ZeRO stage >= 1, after the owners updated their chunks of the parameters: all-gathers every
 * bucket's chunks so every rank holds all the parameters (stage 3: until
 * ddpc_reducer_release_params; forward and backward then gather nothing). Collective. Errors:
 * the collective's. */
ddpc_status ddpc_reducer_gather_params(ddpc_reducer *r);
/* ZeRO stage 3: forgets every gathered copy (after the owners changed their chunks, or after
 * ddpc_reducer_gather_params): only the owned chunks stay, the rest is released. No-op below. */
void ddpc_reducer_release_params(ddpc_reducer *r);
/* ZeRO stage 3: the flat parameter buffer was written whole (a checkpoint was loaded): gives
 * back everything but the owned chunks. Local, not collective. No-op below stage 3. */
void ddpc_reducer_params_written(ddpc_reducer *r);
/* Zeroes the gradient buffer for a new step; from stage 2 its pages go back to the OS too. */
void ddpc_reducer_zero_grads(ddpc_reducer *r);
/* Bytes of ZeRO's buffers of the largest bucket: two reduce-scatter slots (stage 1 and up), the
 * gradient pool (stage 2 and up) and the parameter slots (stage 3); 0 at stage 0. */
size_t ddpc_reducer_staging_bytes(const ddpc_reducer *r);
/* Broadcasts rank 0's model buffers to every rank when the config says broadcast_buffers and the
 * model has buffers; otherwise does nothing. Collective. Errors: the broadcast's. */
ddpc_status ddpc_reducer_sync_buffers(ddpc_reducer *r);
/* The group for host data (cfg.host_pg, else the reducer's own): what the engine all-reduces
 * on the host (ZeRO's gradient norm) and marks its phases on (borrowed). */
ddpc_pg *ddpc_reducer_pg(const ddpc_reducer *r);
/* The group that moves the model's memory (the pg given to create; borrowed): the same group as
 * ddpc_reducer_pg unless cfg.host_pg was given. */
ddpc_pg *ddpc_reducer_device_pg(const ddpc_reducer *r);

/* The buckets ddpc_reducer_create would build for m under cfg (bucket caps only), without
 * communicating or allocating: bucket_of (num_tensors) receives each tensor's bucket and, when not
 * NULL, len (num_tensors capacity) each bucket's length in floats (its range of the flat buffer).
 * Returns the number of buckets. Works on a shapes-only model (ddpc_model_create_shapes). */
size_t ddpc_reducer_assign_buckets(const ddpc_model *m, const ddpc_reducer_config *cfg,
                                   size_t *bucket_of, size_t *len);

#ifdef __cplusplus
}
#endif
#endif
