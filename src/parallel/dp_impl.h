// SPDX-License-Identifier: MIT
/* DataParallel in one process: torch.nn.DataParallel's step, with CPU threads in place of GPUs.
 * N replicas of one model, replica 0 being the engine's own. Per step: replicate (replica 0's
 * parameters copied into the others), per pass scatter (replica r copies rows r, r + N, ... of the
 * batch: the rows rank r of an N-rank DDP job takes), every replica's forward and backward on its
 * own thread, gather (the loss and counts of all replicas), and before the optimizer reduce
 * (replica 0's gradient = the mean of every replica's). Invariant: from replicate to the next
 * optimizer step every replica holds replica 0's parameters bit for bit. Private to parallel/. */
#ifndef DDPC_PARALLEL_DP_IMPL_H
#define DDPC_PARALLEL_DP_IMPL_H

#include <ddpc/nn.h>
#include <ddpc/status.h>

#include <stdbool.h>
#include <stdint.h>

typedef struct ddpc__dp ddpc__dp;

/* Seconds spent in each part of the DataParallel step since the last take (timing on only). */
typedef struct {
    double replicate_s; /* copying replica 0's parameters into the others */
    double scatter_s;   /* copying every replica's rows out of the batch */
    double forward_s;   /* replica 0's forward passes (on its thread) */
    double backward_s;  /* replica 0's backward passes */
    double wait_s;      /* the rest of the parallel region: waiting for the slowest replica,
                           starting and joining the threads */
    double reduce_s;    /* summing and averaging the gradients into replica 0 */
} ddpc__dp_timing;

/* Creates `replicas` (1 to DDPC_ENGINE_MAX_REPLICAS) replicas of `m`: m itself is replica 0
 * (borrowed until destroy), the others are new models of m's config. Each replica's kernels run
 * on max(1, T / replicas) threads, T being the caller's ddpc_kernels_threads() at each pass, so
 * the replicas together use the caller's threads. DDPC_EINVAL, DDPC_ENOMEM. */
ddpc_status ddpc__dp_create(ddpc_model *m, int replicas, ddpc__dp **out);
/* NULL is a no-op. */
void ddpc__dp_destroy(ddpc__dp *dp);
int ddpc__dp_replicas(const ddpc__dp *dp);
/* Kernel threads of each replica now: max(1, ddpc_kernels_threads() / replicas). */
int ddpc__dp_kernel_threads(const ddpc__dp *dp);

/* Zeroes the gradients of every replica, replica 0 included. */
void ddpc__dp_zero_grad(ddpc__dp *dp);
/* Copies replica 0's parameters and buffers (BatchNorm's running statistics) into every other
 * replica. */
void ddpc__dp_replicate(ddpc__dp *dp);
/* One pass: scatters in's rows, runs replica r's forward (dropout stream streams[r]) and its
 * backward on its own thread, adding d(dloss x loss over all of in's rows x N)/d(params) to its
 * gradients — with equal shares exactly DDP's per-rank dloss; a replica with fewer rows counts
 * less, so the reduced gradient is that of the whole batch's mean. out: the loss averaged over
 * the rows, n_valid and n_correct summed. A replica's error is returned naming the replica.
 * Replicas beyond in->n rows sit the pass out. */
ddpc_status ddpc__dp_pass(ddpc__dp *dp, const ddpc_model_input *in, const uint64_t *streams,
                          float dloss, ddpc_model_output *out);
/* Replica 0's gradient (n_params) = the sum of every replica's over N, as DDP's all-reduce AVG. */
void ddpc__dp_reduce(ddpc__dp *dp);
/* The seconds since the last take (a few clock reads per pass, always on). */
ddpc__dp_timing ddpc__dp_take_timing(ddpc__dp *dp);

#endif
