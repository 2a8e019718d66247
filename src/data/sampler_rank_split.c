// SPDX-License-Identifier: MIT
/* The `rank_split` sampler over a concatenation of sources (docs/data.md has worked examples).
 * Per source i only local indices [lo_i, hi_i) are used, of which keep_i = ceil(n_i * ratio)
 * survive down-sampling (n_i = hi_i - lo_i): positions floor(j / ratio), j < keep_i, in order; with
 * shuffle a seeded random subset per epoch instead. Non-streaming: the kept global indices are
 * concatenated, shuffled with seed + epoch, and split like torch's DistributedSampler. Streaming:
 * each source is cut into batches (the last one completed from the source's start, or dropped),
 * batches are taken round-robin over sources, and rank r gets the r-th contiguous run of them, so
 * every batch is single-source and every rank holds the same number of batches.
 * The seed's forms (LeapAI's RankSplitSampler) resolve to the same [lo_i, hi_i) and keep_i: an
 * integer stride k keeps positions j * k, keep_i = ceil(n_i / k); first_left_index and
 * last_right_index bound the first and last sources as its Python slices do. Its streaming order
 * (interleave) is in sampler_interleave.c. */
#include "data/sampler_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/rng.h>

#include <math.h>

/* Samples kept of n: ceil(n / stride) with a stride (Python's len(range(n)[::k])), else
 * ceil(n * ratio), at least one when n > 0 (the epsilon absorbs the rounding of products such as
 * 0.3 * 10). */
static int64_t kept_count(const ddpc_sampler_config *c, int64_t n)
{
    if (n == 0)
        return 0;
    if (c->down_sample_stride > 0)
        return (n + c->down_sample_stride - 1) / c->down_sample_stride;
    int64_t m = (int64_t)ceil((double)n * c->down_sample_ratio - 1e-9);
    return m < 1 ? 1 : m > n ? n : m;
}

/* Local position (from lo) of kept sample j of keep out of n: j * stride, or every (1/ratio)-th
 * from the first, clamped so that the keep positions stay distinct and inside [0, n). */
static int64_t kept_position(const ddpc_sampler_config *c, int64_t j, int64_t keep, int64_t n)
{
    if (c->down_sample_stride > 0)
        return j * c->down_sample_stride;
    int64_t p = (int64_t)floor((double)j / c->down_sample_ratio + 1e-9);
    int64_t cap = n - keep + j;
    return p < cap ? p : cap;
}

/* The seed's bounds: `indices[left:]` on source 0, then `indices[:right + 1]` on the last source
 * (the same list when there is one source, so right counts from left), clamped as Python slices
 * are. Sets lo and hi of every source. */
static void seed_bounds(ddpc_sampler *s)
{
    const ddpc_sampler_config *c = &s->cfg;
    int last = s->num_sources - 1;
    for (int i = 0; i <= last; i++) {
        s->lo[i] = 0;
        s->hi[i] = s->sizes[i];
    }
    s->lo[0] = c->first_left_index < s->sizes[0] ? c->first_left_index : s->sizes[0];
    if (c->last_right_index >= 0) {
        int64_t room = s->hi[last] - s->lo[last];
        s->hi[last] =
            s->lo[last] + (c->last_right_index + 1 < room ? c->last_right_index + 1 : room);
    }
}

static ddpc_status check_bounds(ddpc_sampler *s, int i)
{
    const ddpc_sampler_config *c = &s->cfg;
    int64_t n = s->sizes[i];
    if (c->first_left_index > 0 || c->last_right_index >= 0) { /* resolved by seed_bounds */
        s->keep[i] = kept_count(c, s->hi[i] - s->lo[i]);
        return DDPC_OK;
    }
    int64_t lo = c->left_index ? c->left_index[i] : 0;
    int64_t hi = c->right_index ? c->right_index[i] : -1;
    if (lo < 0 || lo > n)
        return ddpc_errorf(DDPC_EINVAL,
                           "rank_split sampler: left_index[%d] = %lld is outside "
                           "[0, %lld] (size of source %d)",
                           i, (long long)lo, (long long)n, i);
    if (hi < -1 || hi > n)
        return ddpc_errorf(DDPC_EINVAL,
                           "rank_split sampler: right_index[%d] = %lld is outside "
                           "[0, %lld] (size of source %d) and is not -1 (the end)",
                           i, (long long)hi, (long long)n, i);
    if (hi == -1)
        hi = n;
    if (lo > hi)
        return ddpc_errorf(DDPC_EINVAL,
                           "rank_split sampler: left_index[%d] = %lld is greater than "
                           "right_index[%d] = %lld",
                           i, (long long)lo, i, (long long)hi);
    s->lo[i] = lo;
    s->hi[i] = hi;
    s->keep[i] = kept_count(c, hi - lo);
    return DDPC_OK;
}

/* Streaming: the per-source batch counts, the round-robin batch table and this rank's length. */
static ddpc_status init_streaming(ddpc_sampler *s)
{
    const ddpc_sampler_config *c = &s->cfg;
    int64_t b = c->batch_size, total = 0, rounds = 0;
    for (int i = 0; i < s->num_sources; i++) {
        int64_t nb = c->drop_last ? s->keep[i] / b : (s->keep[i] + b - 1) / b;
        total += nb;
        rounds = nb > rounds ? nb : rounds;
    }
    s->num_batches = total;
    DDPC_TRY(ddpc__sampler_alloc(&s->aux, 2 * total, "streaming batch table entries"));
    int64_t g = 0;
    for (int64_t t = 0; t < rounds; t++)
        for (int i = 0; i < s->num_sources; i++) {
            int64_t nb = c->drop_last ? s->keep[i] / b : (s->keep[i] + b - 1) / b;
            if (t < nb) {
                s->aux[2 * g] = i;
                s->aux[2 * g + 1] = t;
                g++;
            }
        }
    int64_t per_rank =
        ddpc__sampler_split_strided(NULL, total, c->world, c->rank, c->drop_last, NULL);
    if (per_rank > INT64_MAX / 4 / b)
        return ddpc_errorf(DDPC_EINVAL, "rank_split sampler: batch_size %lld is too large",
                           (long long)b);
    s->len = per_rank * b;
    return DDPC_OK;
}

/* The fields of the seed's forms, against each other and ddpc's own. */
static ddpc_status check_seed_forms(const ddpc_sampler_config *c)
{
    if (c->down_sample_stride < 0)
        return ddpc_errorf(DDPC_EINVAL,
                           "rank_split sampler: down_sample_stride must be >= 1 (or 0 for none), "
                           "got %lld",
                           (long long)c->down_sample_stride);
    if (c->down_sample_stride > 0 && c->down_sample_ratio != 1.0)
        return ddpc_errorf(DDPC_EINVAL,
                           "rank_split sampler: give down_sample_stride (%lld) or "
                           "down_sample_ratio (%g), not both",
                           (long long)c->down_sample_stride, c->down_sample_ratio);
    if (c->first_left_index < 0 || c->last_right_index < -1)
        return ddpc_errorf(DDPC_EINVAL,
                           "rank_split sampler: first_left_index (%lld) must be >= 0 and "
                           "last_right_index (%lld) >= 0, or -1 for none",
                           (long long)c->first_left_index, (long long)c->last_right_index);
    if ((c->first_left_index > 0 || c->last_right_index >= 0) && (c->left_index || c->right_index))
        return ddpc_errorf(DDPC_EINVAL,
                           "rank_split sampler: the seed's first_left_index/last_right_index and "
                           "the per-source left_index/right_index arrays cannot be combined");
    if (c->interleave && !c->streaming)
        return ddpc_errorf(DDPC_EINVAL, "rank_split sampler: interleave is a streaming order; "
                                        "it needs streaming on");
    return DDPC_OK;
}

ddpc_status ddpc__sampler_rank_split_init(ddpc_sampler *s)
{
    const ddpc_sampler_config *c = &s->cfg;
    if (!(c->down_sample_ratio > 0.0 && c->down_sample_ratio <= 1.0))
        return ddpc_errorf(DDPC_EINVAL,
                           "rank_split sampler: down_sample_ratio must be in (0, 1], got %g",
                           c->down_sample_ratio);
    DDPC_TRY(check_seed_forms(c));
    if (c->streaming && c->batch_size < 1)
        return ddpc_errorf(DDPC_EINVAL,
                           "rank_split sampler: streaming needs batch_size >= 1, got %lld",
                           (long long)c->batch_size);
    if (c->streaming && c->shuffle)
        return ddpc_errorf(DDPC_EINVAL, "rank_split sampler: shuffle must be off with streaming "
                                        "(streaming reads each source in order)");
    DDPC_TRY(ddpc__sampler_alloc(&s->lo, s->num_sources, "bounds"));
    DDPC_TRY(ddpc__sampler_alloc(&s->hi, s->num_sources, "bounds"));
    DDPC_TRY(ddpc__sampler_alloc(&s->keep, s->num_sources, "bounds"));
    if (c->first_left_index > 0 || c->last_right_index >= 0)
        seed_bounds(s);
    int64_t kept = 0, widest = 0;
    for (int i = 0; i < s->num_sources; i++) {
        DDPC_TRY(check_bounds(s, i));
        kept += s->keep[i];
        widest = s->hi[i] - s->lo[i] > widest ? s->hi[i] - s->lo[i] : widest;
    }
    DDPC_TRY(ddpc__sampler_alloc(&s->work, kept, "kept indices"));
    if (c->streaming && c->interleave) {
        DDPC_TRY(ddpc__sampler_interleave_init(s, kept));
    } else if (c->streaming) {
        DDPC_TRY(init_streaming(s));
    } else {
        s->len = ddpc__sampler_split_strided(NULL, kept, c->world, c->rank, c->drop_last, NULL);
        if (c->shuffle && (c->down_sample_ratio < 1.0 || c->down_sample_stride > 1))
            DDPC_TRY(ddpc__sampler_alloc(&s->aux, widest, "subset scratch entries"));
    }
    return ddpc__sampler_alloc(&s->out, s->len, "rank indices");
}

/* dst (keep_i) = source i's kept global indices for this epoch. */
static void kept_indices(ddpc_sampler *s, int i, int64_t *dst)
{
    const ddpc_sampler_config *c = &s->cfg;
    int64_t lo = s->lo[i], n = s->hi[i] - s->lo[i], keep = s->keep[i], base = s->offsets[i] + lo;
    if (c->shuffle && keep < n) {
        /* A seeded random subset per epoch: the first keep of a permutation of the range. */
        for (int64_t j = 0; j < n; j++)
            s->aux[j] = j;
        ddpc_rng r =
            ddpc_rng_make(c->seed + (uint64_t)s->epoch, DDPC__SAMPLER_STREAM_SUBSET + (uint64_t)i);
        ddpc_rng_shuffle(&r, s->aux, n);
        for (int64_t j = 0; j < keep; j++)
            dst[j] = base + s->aux[j];
        return;
    }
    for (int64_t j = 0; j < keep; j++)
        dst[j] = base + (keep == n ? j : kept_position(c, j, keep, n));
}

void ddpc__sampler_rank_split_fill(ddpc_sampler *s)
{
    const ddpc_sampler_config *c = &s->cfg;
    int64_t kept = 0;
    for (int i = 0; i < s->num_sources; i++) {
        kept_indices(s, i, s->work + kept);
        kept += s->keep[i];
    }
    if (!c->streaming) {
        if (c->shuffle) {
            ddpc_rng r = ddpc_rng_make(c->seed + (uint64_t)s->epoch, DDPC__SAMPLER_STREAM_SHUFFLE);
            ddpc_rng_shuffle(&r, s->work, kept);
        }
        ddpc__sampler_split_strided(s->work, kept, c->world, c->rank, c->drop_last, s->out);
        return;
    }
    if (c->interleave) {
        ddpc__sampler_interleave_fill(s, kept);
        return;
    }
    /* Rank r holds batches [r * per, (r + 1) * per) of the sequence repeated from its start. */
    int64_t b = c->batch_size, per = s->len / b, k = 0;
    for (int64_t q = c->rank * per; q < (c->rank + 1) * per; q++) {
        int64_t g = q % s->num_batches;
        int i = (int)s->aux[2 * g];
        int64_t t = s->aux[2 * g + 1], start = 0;
        for (int j = 0; j < i; j++)
            start += s->keep[j];
        for (int64_t j = 0; j < b; j++)
            s->out[k++] = s->work[start + (t * b + j) % s->keep[i]];
    }
}
