// SPDX-License-Identifier: MIT
/* The `distributed` sampler (torch.utils.data.distributed.DistributedSampler's rules) and the
 * `case` sampler (exact, unpadded evaluation shards).
 * distributed: a seeded Fisher-Yates permutation of [0, size) from ddpc_rng(seed + epoch) (not
 * torch.randperm's order), padded by repeating its start to ceil(size / world) * world, or cut to
 * floor(size / world) * world with drop_last; rank r takes entries r, r + world, ...
 * case: rank r takes the contiguous r-th share of [0, size); the first size % world ranks hold
 * one more, so every sample is visited exactly once across ranks. */
#include "data/sampler_impl.h"

#include <ddpc/rng.h>

#include <stddef.h>

ddpc_status ddpc__sampler_distributed_init(ddpc_sampler *s)
{
    const ddpc_sampler_config *c = &s->cfg;
    s->len = ddpc__sampler_split_strided(NULL, c->size, c->world, c->rank, c->drop_last, NULL);
    DDPC_TRY(ddpc__sampler_alloc(&s->work, c->size, "permutation entries"));
    DDPC_TRY(ddpc__sampler_alloc(&s->out, s->len, "rank indices"));
    return DDPC_OK;
}

void ddpc__sampler_distributed_fill(ddpc_sampler *s)
{
    const ddpc_sampler_config *c = &s->cfg;
    for (int64_t i = 0; i < c->size; i++)
        s->work[i] = i;
    if (c->shuffle) {
        ddpc_rng r = ddpc_rng_make(c->seed + (uint64_t)s->epoch, DDPC__SAMPLER_STREAM_SHUFFLE);
        ddpc_rng_shuffle(&r, s->work, c->size);
    }
    ddpc__sampler_split_strided(s->work, c->size, c->world, c->rank, c->drop_last, s->out);
}

/* First index of rank r's contiguous share of n samples over w ranks. */
static int64_t case_start(int64_t n, int w, int r)
{
    int64_t q = n / w, rem = n % w;
    return r * q + (r < rem ? r : rem);
}

ddpc_status ddpc__sampler_case_init(ddpc_sampler *s)
{
    const ddpc_sampler_config *c = &s->cfg;
    s->len = case_start(c->size, c->world, c->rank + 1) - case_start(c->size, c->world, c->rank);
    return ddpc__sampler_alloc(&s->out, s->len, "rank indices");
}

void ddpc__sampler_case_fill(ddpc_sampler *s)
{
    int64_t start = case_start(s->cfg.size, s->cfg.world, s->cfg.rank);
    for (int64_t k = 0; k < s->len; k++)
        s->out[k] = start + k;
}
