// SPDX-License-Identifier: MIT
/* ddpc samplers: which sample indices one rank visits in one epoch, as a pure function of
 * (config, rank, world, seed, epoch) so every rank computes its share without communication.
 * Kinds: `distributed` (PyTorch's DistributedSampler), `rank_split` (bounded, down-sampled,
 * optionally streaming concatenation of datasets), `case` (exact sequential evaluation shards)
 * and `task_shard` (whole tasks per rank). docs/data.md gives each kind's rules with worked
 * examples. A sampler is used by one thread at a time. */
#ifndef DDPC_SAMPLER_H
#define DDPC_SAMPLER_H

#include <ddpc/status.h>

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    DDPC_SAMPLER_DISTRIBUTED, /* seeded shuffle, padded (or drop_last) to equal shares, strided */
    DDPC_SAMPLER_RANK_SPLIT,  /* concatenation of sources with bounds, down-sampling, streaming */
    DDPC_SAMPLER_CASE,        /* [0, size) in order, contiguous per rank, no padding */
    DDPC_SAMPLER_TASK_SHARD,  /* whole sources (tasks) per rank, balanced by size */
    DDPC_SAMPLER_COUNT
} ddpc_sampler_kind;

/* "distributed", "rank_split", "case", "task_shard"; "unknown" outside the enum. */
const char *ddpc_sampler_kind_name(ddpc_sampler_kind kind);
/* Parses a kind name; anything else is DDPC_EINVAL naming the value. */
ddpc_status ddpc_sampler_kind_parse(const char *name, ddpc_sampler_kind *out);

/* The arrays are read during ddpc_sampler_create only (the sampler keeps copies). Fields a kind
 * does not use are ignored. Indices a sampler yields are global: for sources (datasets or tasks)
 * concatenated in order, source i's local index j is offset_i + j, offset_i = sum of sizes[<i]. */
typedef struct {
    ddpc_sampler_kind kind;
    int rank;             /* 0 <= rank < world */
    int world;            /* >= 1 */
    uint64_t seed;        /* shuffles use seed + epoch, as torch's DistributedSampler does */
    bool shuffle;         /* distributed, rank_split (not streaming), task_shard; default true */
    bool drop_last;       /* distributed, rank_split: drop the tail instead of padding */
    int64_t size;         /* distributed, case: number of samples */
    int num_sources;      /* rank_split, task_shard: number of datasets / tasks, >= 1 */
    const int64_t *sizes; /* rank_split, task_shard: (num_sources) samples per source */
    const int64_t *left_index;  /* rank_split: (num_sources) first local index used; NULL = 0 */
    const int64_t *right_index; /* rank_split: (num_sources) end, exclusive; -1 or NULL = size */
    double down_sample_ratio;   /* rank_split: fraction kept of each source, in (0, 1]; 1 */
    bool streaming;             /* rank_split: single-source batches, round-robin over sources */
    int64_t batch_size;         /* rank_split streaming: batch size, >= 1 */
    /* rank_split in the forms of LeapAI's RankSplitSampler ("the seed"; docs/data.md maps them): */
    int64_t down_sample_stride; /* keep every k-th of each source, [::k]; 0 = use the ratio */
    int64_t first_left_index;   /* source 0 starts at this local position (the seed's left_index);
                                   0 */
    int64_t last_right_index;   /* the last source ends at this position, inclusive, counted after
                                   first_left_index when there is one source (the seed's
                                   right_index); -1 = not used (the default) */
    bool interleave; /* streaming in the seed's order: groups of batch_size sources interleaved
                        one sample at a time, instead of round-robin single-source batches */
} ddpc_sampler_config;

/* distributed, rank 0 of world 1, seed 0, shuffle on, drop_last off, size 0, ratio 1, no stride,
 * last_right_index -1. */
ddpc_sampler_config ddpc_sampler_config_default(void);

typedef struct ddpc_sampler ddpc_sampler;

/* Validates `c` and builds the sampler at epoch 0. Errors are DDPC_EINVAL naming the field
 * (rank outside [0, world), world < 1, a negative size, left_index > right_index, a bound beyond
 * its source, down_sample_ratio outside (0, 1], streaming without batch_size, streaming with
 * shuffle, a negative stride or one given with a ratio other than 1, the seed's bounds given with
 * the per-source arrays, interleave without streaming) or DDPC_ENOMEM. Every buffer is allocated
 * here: set_epoch allocates nothing. */
ddpc_status ddpc_sampler_create(const ddpc_sampler_config *c, ddpc_sampler **out);
/* NULL is a no-op. */
void ddpc_sampler_destroy(ddpc_sampler *s);

/* Recomputes this rank's indices for `epoch` (a negative epoch counts as 0); the same epoch
 * always gives the same list. Allocates nothing. */
void ddpc_sampler_set_epoch(ddpc_sampler *s, int64_t epoch);
/* The epoch of the current list. */
int64_t ddpc_sampler_epoch(const ddpc_sampler *s);
/* Number of indices this rank visits per epoch (the same for every epoch). */
int64_t ddpc_sampler_len(const ddpc_sampler *s);
/* This rank's indices (len) for the current epoch, owned by the sampler, valid until the next
 * set_epoch or destroy. */
const int64_t *ddpc_sampler_indices(const ddpc_sampler *s);

/* The kind it was created as. */
ddpc_sampler_kind ddpc_sampler_kind_of(const ddpc_sampler *s);
/* Sources of the global index space: distributed and case have one of `size` samples. */
int ddpc_sampler_num_sources(const ddpc_sampler *s);
/* Samples in `source`; 0 out of range. */
int64_t ddpc_sampler_source_size(const ddpc_sampler *s, int source);
/* Source holding global index `g` and its local index there; -1 when g is outside every source. */
int ddpc_sampler_source_of(const ddpc_sampler *s, int64_t g, int64_t *local);
/* rank_split streaming: the batch size its single-source batches assume; 0 for other samplers. */
int64_t ddpc_sampler_batch_size(const ddpc_sampler *s);
/* task_shard: the rank that owns `task`; -1 for other samplers or a task out of range. */
int ddpc_sampler_task_rank(const ddpc_sampler *s, int task);

/* Task sharding for data-parallel training (the rule of the PI0-RIPT seed): task t goes to rank
 * t mod world, so rank r trains tasks r, r + world, ... of the list. Every rank must end up with
 * at least min_per_rank (>= 1) tasks: with replicate false, fewer than world * min_per_rank tasks
 * is DDPC_EINVAL stating the numbers (the seed would leave ranks idle); with replicate true, each
 * rank short of min_per_rank, lowest rank first, adds tasks it lacks one at a time, always the
 * one held by the fewest ranks so far (ties: first in the list); fewer than min_per_rank tasks
 * is DDPC_EINVAL. holds (world x num_tasks) gets holds[r * num_tasks + t] = 1 when rank r trains
 * task t, else 0. docs/data.md has worked examples. */
ddpc_status ddpc_task_assign(int num_tasks, int world, int min_per_rank, bool replicate,
                             unsigned char *holds);

#ifdef __cplusplus
}
#endif
#endif
