// SPDX-License-Identifier: MIT
/* rank_split's `interleave` streaming order, the one of LeapAI's RankSplitSampler ("the seed"):
 * sources are taken in groups of batch_size (sources 0 .. b-1, then b .. 2b-1, ...); within a
 * group one sample of each source in turn, in order, until the group runs dry, so that with
 * sources of equal length slot j of consecutive batches follows one source. A source that ran out
 * is removed from the turn as the seed's Python loop removes it from the list it is iterating,
 * which skips the source after it for that pass; we reproduce that too, so the sequence is the
 * seed's exactly. Ranks get contiguous runs of whole batches of the sequence (padded by repeating
 * it from its start, or cut with drop_last). Invariant: aux (sum keep) holds the sequence as
 * positions into work, fixed at create (streaming never shuffles). */
#include "data/sampler_impl.h"

#include <ddpc/alloc.h>

ddpc_status ddpc__sampler_interleave_init(ddpc_sampler *s, int64_t kept)
{
    const ddpc_sampler_config *c = &s->cfg;
    int n = s->num_sources;
    int64_t b = c->batch_size, group_cap = b < n ? b : n;
    DDPC_TRY(ddpc__sampler_alloc(&s->aux, kept, "interleaved sequence entries"));
    int64_t *start = NULL, *taken = NULL, *turn = NULL; /* (n), (n), (group_cap) */
    ddpc_status st = ddpc__sampler_alloc(&start, n, "interleave scratch");
    if (st == DDPC_OK)
        st = ddpc__sampler_alloc(&taken, n, "interleave scratch");
    if (st == DDPC_OK)
        st = ddpc__sampler_alloc(&turn, group_cap, "interleave scratch");
    if (st != DDPC_OK) {
        ddpc_free(start);
        ddpc_free(taken);
        return st;
    }
    for (int i = 0; i < n; i++) {
        start[i] = i == 0 ? 0 : start[i - 1] + s->keep[i - 1];
        taken[i] = 0;
    }
    int64_t q = 0;
    for (int64_t g0 = 0; g0 < n; g0 += b) {
        int64_t len = 0;
        for (int64_t i = g0; i < n && i < g0 + b; i++)
            turn[len++] = i;
        while (len > 0) {
            /* One pass of `for set_i in tmp`: p is the iterator's next position. */
            for (int64_t p = 0; p < len;) {
                int64_t i = turn[p++];
                if (taken[i] < s->keep[i]) {
                    s->aux[q++] = start[i] + taken[i]++;
                    continue;
                }
                for (int64_t j = p - 1; j + 1 < len; j++) /* tmp.remove(set_i) */
                    turn[j] = turn[j + 1];
                len--;
            }
        }
    }
    ddpc_free(start);
    ddpc_free(taken);
    ddpc_free(turn);
    DDPC_ASSERT(q == kept);
    int64_t batches = c->drop_last ? kept / b : (kept + b - 1) / b;
    int64_t per = c->drop_last ? batches / c->world : (batches + c->world - 1) / c->world;
    if (per > INT64_MAX / 4 / b)
        return ddpc_errorf(DDPC_EINVAL, "rank_split sampler: batch_size %lld is too large",
                           (long long)b);
    s->len = per * b;
    return DDPC_OK;
}

void ddpc__sampler_interleave_fill(ddpc_sampler *s, int64_t kept)
{
    int64_t first = s->cfg.rank * s->len;
    for (int64_t k = 0; k < s->len; k++)
        s->out[k] = s->work[s->aux[(first + k) % kept]];
}
