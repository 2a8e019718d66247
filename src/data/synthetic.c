// SPDX-License-Identifier: MIT
/* Seeded synthetic datasets for tests: normal-pixel images labelled by a random linear map, and
 * token streams following an affine recurrence with 10% noise.
 * Invariant: each is a pure function of its arguments (counter-based RNG streams below), so any
 * rank can build the identical dataset without communication; the rule (label map, recurrence)
 * depends on the seed alone, and only the samples differ between the train and test splits. */
#include "data/dataset_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/rng.h>

#include <stdlib.h>

/* RNG streams: one per purpose, so changing one part never shifts another. The train split keeps
 * streams 1 and 4 (so its samples are what they were before there was a test stream). */
enum {
    STREAM_PIXELS = 1,
    STREAM_LABEL_MAP = 2,
    STREAM_TOKEN_RULE = 3,
    STREAM_TOKENS = 4,
    STREAM_PIXELS_TEST = 5,
    STREAM_TOKENS_TEST = 6
};

/* Largest synthetic payload we build: 1 Gi elements. */
#define SYNTH_MAX_ELEMS ((int64_t)1 << 30)

/* labels (n) = argmax over classes of w (classes, per) @ x (n, per). */
static void label_by_linear_map(uint8_t *labels, const float *x, const float *w, int64_t n,
                                int64_t per, int64_t classes)
{
    for (int64_t i = 0; i < n; i++) {
        const float *xi = x + i * per;
        int64_t best = 0;
        double best_v = 0;
        for (int64_t k = 0; k < classes; k++) {
            const float *wk = w + k * per;
            double v = 0;
            for (int64_t j = 0; j < per; j++)
                v += (double)wk[j] * xi[j];
            if (k == 0 || v > best_v) {
                best_v = v;
                best = k;
            }
        }
        labels[i] = (uint8_t)best;
    }
}

ddpc_status ddpc_dataset_synthetic_images_create(ddpc_dataset **out, int64_t n, int64_t c,
                                                 int64_t h, int64_t w, int64_t classes,
                                                 uint64_t seed, bool train)
{
    *out = NULL;
    if (n < 1 || c < 1 || h < 1 || w < 1 || classes < 2 || classes > 256 ||
        c > SYNTH_MAX_ELEMS / h / w || n > SYNTH_MAX_ELEMS / (c * h * w) ||
        classes > SYNTH_MAX_ELEMS / (c * h * w))
        return ddpc_errorf(DDPC_EINVAL,
                           "synthetic images: bad sizes n=%lld c=%lld h=%lld w=%lld classes=%lld "
                           "(need >= 1, 2 <= classes <= 256, at most 2^30 values)",
                           (long long)n, (long long)c, (long long)h, (long long)w,
                           (long long)classes);
    int64_t per = c * h * w;
    ddpc_dataset *d = ddpc__dataset_alloc(DDPC_DATASET_IMAGES);
    float *map = ddpc_malloc((size_t)(classes * per) * sizeof *map);
    if (d) {
        d->pix_f32 = ddpc_malloc((size_t)(n * per) * sizeof *d->pix_f32);
        d->labels = ddpc_malloc((size_t)n);
    }
    if (!d || !map || !d->pix_f32 || !d->labels) {
        ddpc_free(map);
        ddpc_dataset_destroy(d);
        return ddpc_errorf(DDPC_ENOMEM, "synthetic images: out of memory for %lld samples",
                           (long long)n);
    }
    ddpc_rng px = ddpc_rng_make(seed, train ? STREAM_PIXELS : STREAM_PIXELS_TEST);
    ddpc_rng wm = ddpc_rng_make(seed, STREAM_LABEL_MAP);
    for (int64_t j = 0; j < n * per; j++)
        d->pix_f32[j] = ddpc_rng_normal(&px);
    for (int64_t j = 0; j < classes * per; j++)
        map[j] = ddpc_rng_normal(&wm);
    label_by_linear_map(d->labels, d->pix_f32, map, n, per, classes);
    ddpc_free(map);
    d->n = n;
    d->classes = classes;
    d->shape[0] = c;
    d->shape[1] = h;
    d->shape[2] = w;
    *out = d;
    return DDPC_OK;
}

/* stream (n) of tokens in [0, vocab): next = (prev * a + b) % vocab, except 10% uniform noise.
 * (a, b) come from the seed alone; the start and the noise from the split's own stream. */
static void fill_tokens(int32_t *stream, int64_t n, int64_t vocab, uint64_t seed, bool train)
{
    ddpc_rng rule = ddpc_rng_make(seed, STREAM_TOKEN_RULE);
    uint64_t a = 1 + ddpc_rng_below(&rule, (uint64_t)vocab - 1); /* in [1, vocab) */
    uint64_t b = ddpc_rng_below(&rule, (uint64_t)vocab);
    ddpc_rng r = ddpc_rng_make(seed, train ? STREAM_TOKENS : STREAM_TOKENS_TEST);
    uint64_t prev = ddpc_rng_below(&r, (uint64_t)vocab);
    stream[0] = (int32_t)prev;
    for (int64_t i = 1; i < n; i++) {
        if (ddpc_rng_uniform(&r) < 0.1f)
            prev = ddpc_rng_below(&r, (uint64_t)vocab);
        else
            prev = (prev * a + b) % (uint64_t)vocab;
        stream[i] = (int32_t)prev;
    }
}

ddpc_status ddpc_dataset_synthetic_tokens_create(ddpc_dataset **out, int64_t n_tokens,
                                                 int64_t vocab, int64_t block_size, uint64_t seed,
                                                 bool train)
{
    *out = NULL;
    if (vocab < 2 || vocab > INT32_MAX || n_tokens < 2 || n_tokens > SYNTH_MAX_ELEMS)
        return ddpc_errorf(DDPC_EINVAL,
                           "synthetic tokens: bad sizes n_tokens=%lld vocab=%lld (need "
                           "2 <= n_tokens <= 2^30, 2 <= vocab < 2^31)",
                           (long long)n_tokens, (long long)vocab);
    ddpc_dataset *d = ddpc__dataset_alloc(DDPC_DATASET_TOKENS);
    if (d)
        d->tok_i32 = ddpc_malloc((size_t)n_tokens * sizeof *d->tok_i32);
    if (!d || !d->tok_i32) {
        ddpc_dataset_destroy(d);
        return ddpc_errorf(DDPC_ENOMEM, "synthetic tokens: out of memory for %lld tokens",
                           (long long)n_tokens);
    }
    d->n_tokens = n_tokens;
    d->classes = vocab;
    fill_tokens(d->tok_i32, n_tokens, vocab, seed, train);
    ddpc_status s = ddpc__dataset_set_windows(d, block_size, "synthetic tokens");
    if (s != DDPC_OK) {
        ddpc_dataset_destroy(d);
        return s;
    }
    *out = d;
    return DDPC_OK;
}
