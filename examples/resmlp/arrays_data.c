// SPDX-License-Identifier: MIT
/* "arrays": samples held in two arrays, x (n, D) standard-normal features and y (n) labels
 * y = argmax(W x) for a W drawn from the seed alone, so both splits share one learnable rule.
 * The loader's workers call get_sample concurrently: it only reads the arrays. */
#include "resmlp.h"

#include <ddpc/alloc.h>
#include <ddpc/rng.h>

#include <stdio.h>
#include <string.h>

typedef struct {
    int64_t n, d;
    float *x;   /* (n, d) */
    int32_t *y; /* (n) */
} arrays;

static ddpc_status get_sample(void *ctx, int64_t i, float *x, int32_t *tokens, int32_t *targets)
{
    (void)tokens; /* an images-kind dataset: x and a label */
    const arrays *a = ctx;
    if (x)
        memcpy(x, a->x + i * a->d, (size_t)a->d * sizeof *x);
    if (targets)
        *targets = a->y[i];
    return DDPC_OK;
}

static void destroy(void *ctx)
{
    arrays *a = ctx;
    ddpc_free(a->x);
    ddpc_free(a->y);
    ddpc_free(a);
}

ddpc_status arrays_create(ddpc_dataset **out, int64_t n, int64_t d, int64_t classes, uint64_t seed,
                          int split)
{
    *out = NULL;
    arrays *a = ddpc_calloc(1, sizeof *a);
    float *w = ddpc_malloc((size_t)(classes * d) * sizeof *w);
    if (a) {
        a->x = ddpc_malloc((size_t)(n * d) * sizeof *a->x);
        a->y = ddpc_malloc((size_t)n * sizeof *a->y);
    }
    if (!a || !w || !a->x || !a->y) {
        ddpc_free(w);
        if (a)
            destroy(a);
        return ddpc_errorf(DDPC_ENOMEM, "arrays: out of memory for %lld samples", (long long)n);
    }
    a->n = n, a->d = d;
    ddpc_rng rule = ddpc_rng_make(seed, 100); /* the rule: from the seed alone */
    for (int64_t j = 0; j < classes * d; j++)
        w[j] = ddpc_rng_normal(&rule);
    ddpc_rng draw = ddpc_rng_make(seed, 200 + (uint64_t)split); /* each split its samples */
    for (int64_t i = 0; i < n; i++) {
        float *x = a->x + i * d;
        for (int64_t j = 0; j < d; j++)
            x[j] = ddpc_rng_normal(&draw);
        int32_t best = 0;
        float best_score = 0;
        for (int64_t c = 0; c < classes; c++) {
            float s = 0;
            for (int64_t j = 0; j < d; j++)
                s += w[c * d + j] * x[j];
            if (c == 0 || s > best_score)
                best = (int32_t)c, best_score = s;
        }
        a->y[i] = best;
    }
    ddpc_free(w);
    ddpc_dataset_callbacks cb = {
        .kind = DDPC_DATASET_IMAGES, /* samples (1, 1, D) of floats with a class label */
        .size = n,
        .shape = {1, 1, d},
        .num_classes = classes,
        .get_sample = get_sample,
        .destroy = destroy,
        .ctx = a,
    };
    ddpc_status s = ddpc_dataset_from_callbacks(out, &cb);
    if (s != DDPC_OK)
        destroy(a); /* not taken on failure */
    return s;
}

/* data.size (train samples; the test split has a quarter), data.features, data.classes. */
ddpc_status arrays_factory(void *ctx, ddpc_config *cfg, const char *prefix, uint64_t seed,
                           ddpc_data_splits *out)
{
    (void)ctx;
    char key[96];
    int64_t n, d, classes;
    snprintf(key, sizeof key, "%s.size", prefix);
    DDPC_TRY(ddpc_config_int(cfg, key, 2048, 1, 1 << 24, &n));
    snprintf(key, sizeof key, "%s.features", prefix);
    DDPC_TRY(ddpc_config_int(cfg, key, 16, 1, 1 << 16, &d));
    snprintf(key, sizeof key, "%s.classes", prefix);
    DDPC_TRY(ddpc_config_int(cfg, key, 4, 2, 1 << 16, &classes));
    DDPC_TRY(arrays_create(&out->train, n, d, classes, seed, 0));
    return arrays_create(&out->test, n / 4 + 1, d, classes, seed, 1);
}
