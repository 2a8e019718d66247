// SPDX-License-Identifier: MIT
/* The sampler struct shared by sampler.c (validation, queries) and the per-kind files
 * sampler_distributed.c, sampler_rank_split.c and sampler_task_shard.c.
 * Invariant: every buffer is sized at create for the largest list any epoch can produce, so a
 * kind's fill function only writes into them; `out[0, len)` is this rank's list for `epoch`. */
#ifndef DDPC_DATA_SAMPLER_IMPL_H
#define DDPC_DATA_SAMPLER_IMPL_H

#include <ddpc/sampler.h>

/* RNG streams, one per purpose (ddpc_rng seed = config seed + epoch, as torch does). */
enum {
    DDPC__SAMPLER_STREAM_SHUFFLE = 0x5348,        /* the global permutation */
    DDPC__SAMPLER_STREAM_SUBSET = 0x53550000,     /* + source: a rank_split source's subset */
    DDPC__SAMPLER_STREAM_TASK_SHUFFLE = 0x545348, /* task_shard's per-rank order */
};

struct ddpc_sampler {
    ddpc_sampler_config cfg; /* copy of the config; its array pointers are cleared */
    int num_sources;
    int64_t *sizes;   /* (num_sources) */
    int64_t *offsets; /* (num_sources + 1) global index of each source's first sample; total last */
    int64_t *lo, *hi; /* rank_split: (num_sources) resolved bounds [lo, hi) */
    int64_t *keep;    /* rank_split: (num_sources) samples kept after down-sampling */
    int *owner;       /* task_shard: (num_sources) rank owning each task */
    int64_t epoch;
    int64_t len;         /* entries of out this rank visits */
    int64_t *out;        /* (len) */
    int64_t *work;       /* scratch: distributed (size), rank_split (sum keep), task_shard (len) */
    int64_t *aux;        /* rank_split: shuffled subset scratch (largest range), or the streaming
                            batch table (2 per batch: source, batch number within the source), or
                            the interleaved sequence (sum keep: positions in work) */
    int64_t num_batches; /* rank_split streaming: batches in the round-robin sequence */
};

/* Per-kind setup at create (sizes the buffers; sets len) and refill for s->epoch. */
ddpc_status ddpc__sampler_distributed_init(ddpc_sampler *s);
void ddpc__sampler_distributed_fill(ddpc_sampler *s);
ddpc_status ddpc__sampler_case_init(ddpc_sampler *s);
void ddpc__sampler_case_fill(ddpc_sampler *s);
ddpc_status ddpc__sampler_rank_split_init(ddpc_sampler *s);
void ddpc__sampler_rank_split_fill(ddpc_sampler *s);
/* rank_split streaming with interleave (sampler_interleave.c): the seed's sample order into aux
 * and this rank's length (init, after the bounds); this rank's run of it into out (fill, after
 * work holds the kept indices). */
ddpc_status ddpc__sampler_interleave_init(ddpc_sampler *s, int64_t kept);
void ddpc__sampler_interleave_fill(ddpc_sampler *s, int64_t kept);
ddpc_status ddpc__sampler_task_shard_init(ddpc_sampler *s);
void ddpc__sampler_task_shard_fill(ddpc_sampler *s);

/* out (len) = list padded by repeating it from the start (or cut with drop_last) to a multiple
 * of world, then entries rank, rank + world, ... (torch DistributedSampler's split). Returns
 * the per-rank count for a list of n entries; out may be NULL to only count. */
int64_t ddpc__sampler_split_strided(const int64_t *list, int64_t n, int world, int rank,
                                    bool drop_last, int64_t *out);

/* Allocates `count` int64 (at least one) into *p, or DDPC_ENOMEM naming `what`. */
ddpc_status ddpc__sampler_alloc(int64_t **p, int64_t count, const char *what);

#endif
