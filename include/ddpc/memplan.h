// SPDX-License-Identifier: MIT
/* Memory plan (issue #11): the bytes one rank needs for a data-parallel training run, item by
 * item, from the model's shapes alone — before anything is allocated — at any ZeRO stage and
 * world size. Master weights and gradients are fp32 at every precision. Under ZeRO every gradient
 * bucket of L floats is split into `world` chunks of ceil(L / world) floats and rank r owns chunk
 * r, so a rank owns sum over buckets of ceil(L / world) floats (what rank 0 owns). A pure
 * computation: no allocation, no I/O apart from the printers' FILE. */
#ifndef DDPC_MEMPLAN_H
#define DDPC_MEMPLAN_H

#include <ddpc/comm.h>
#include <ddpc/status.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DDPC_MEMPLAN_MAX_STAGE 3

/* What the plan is computed from. */
typedef struct {
    size_t n;                 /* floats in the flat parameter buffer (ddpc_model_num_params) */
    const size_t *bucket_len; /* (n_buckets) floats of each gradient bucket; borrowed */
    size_t n_buckets;
    int world;             /* ranks, >= 1 */
    int stage;             /* zero.stage, 0..DDPC_MEMPLAN_MAX_STAGE */
    int optim_states;      /* state buffers per parameter (SGD 1, AdamW 2) */
    ddpc_dtype comm_dtype; /* ddp.comm_dtype: BF16/F16 add half-precision bucket staging */
    uint64_t act_bytes[2]; /* activation arena of one micro-batch: [0] without, [1] with
                              activation checkpointing (equal when the model has none) */
    bool checkpointing;    /* the run's model.activation_checkpointing */
    bool can_checkpoint;   /* the model supports it (gpt, cnn) */
    int replicas;          /* DataParallel (parallel.mode dp) replicas in the one process, each
                              with its own parameters, gradients and activation arena; 0 or 1:
                              one model */
} ddpc_memplan_input;

/* Items of a plan, in table order. */
typedef enum {
    DDPC_MEM_PARAMS, /* fp32 parameters (stage 3: the owned shard + the gathered working set) */
    DDPC_MEM_GRADS,  /* fp32 gradients (stages 2, 3: the owned shard) */
    DDPC_MEM_OPTIM,  /* optimizer state (stages 1-3: of the owned shard) */
    DDPC_MEM_ACTIVATIONS, /* activation arena of one micro-batch, as configured */
    DDPC_MEM_COMM,        /* communication buffers */
    DDPC_MEM_ITEMS
} ddpc_memplan_item;

/* Per-rank bytes. */
typedef struct {
    uint64_t bytes[DDPC_MEM_ITEMS];
    uint64_t total;             /* sum of bytes[] */
    uint64_t activations_other; /* the activations with the other checkpointing setting */
    size_t owned;               /* floats of the flat buffers rank 0 owns (n below stage 1) */
    size_t max_bucket_padded;   /* largest bucket rounded up to a multiple of world */
    int stage;                  /* as planned: on one rank every stage runs as stage 0 */
    int replicas;               /* DataParallel replicas counted (1 without) */
} ddpc_memplan;

/* "parameters", "gradients", "optimizer state", "activations", "communication"; "?" outside. */
const char *ddpc_memplan_item_name(ddpc_memplan_item i);

/* Computes the plan of `in` (ZeRO, Rajbhandari et al. 2020, section 5; fp32 AdamW gives 16n,
 * 8n + 8n/world, 4n + 12n/world and 16n/world + working set for stages 0-3):
 *   stage 0: params 4n, grads 4n, optim 4kn, comm 2 bytes per bucketed float for bf16/f16;
 *   stage 1: params 4n, grads 4n, optim 4k owned, comm 2 x 4 x max_bucket_padded;
 *   stage 2: grads 4 owned (each bucket's gradient is freed after its reduce-scatter);
 *   stage 3: params 4 owned + 4 x (two largest buckets: the one in use and the prefetched one).
 * One rank has no reducer: comm 0 and every stage is stage 0. DDPC_EINVAL for a world below 1,
 * a stage outside 0..3 or a negative optim_states. */
ddpc_status ddpc_memplan_compute(const ddpc_memplan_input *in, ddpc_memplan *out);

/* The item with the most bytes (the first of equals). */
ddpc_memplan_item ddpc_memplan_largest(const ddpc_memplan *p);

/* DDPC_OK when the plan of `in` fits in `limit` bytes per rank. Otherwise DDPC_ENOMEM with one
 * sentence naming the total, the limit (as `limit_what` describes it, e.g. "memory.limit_gb is
 * 2"), the largest item and the cheapest change that fits, tried in order: activation
 * checkpointing on (when the model has it), zero.stage 1..3 at this world size, then zero.stage 3
 * (with checkpointing when possible) on more ranks; or that none does. */
ddpc_status ddpc_memplan_check(const ddpc_memplan_input *in, uint64_t limit,
                               const char *limit_what);

/* Human-readable size: "812 B", "3.4 KiB", "1.61 GiB" (3 significant digits) into buf. */
const char *ddpc_memplan_format_bytes(uint64_t bytes, char *buf, size_t cap);

/* Writes the table of `in` at every stage 0..3 (and with/without activation checkpointing when
 * the model supports it), the configured row marked with '*', the limit last; sizes in binary
 * units, or in bytes when `exact`. */
void ddpc_memplan_print_table(FILE *f, const ddpc_memplan_input *in, uint64_t limit,
                              const char *limit_what, bool exact);
/* Writes the configured plan as one line: "memory plan per rank (zero.stage S, W ranks): ...", or
 * with DataParallel replicas "memory plan of the process (zero.stage S, N DataParallel replicas):
 * ...". */
void ddpc_memplan_print_line(FILE *f, const ddpc_memplan *p, int world);

#ifdef __cplusplus
}
#endif
#endif
