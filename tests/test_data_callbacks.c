// SPDX-License-Identifier: MIT
/* Tests for src/data/dataset_callbacks.c and data_registry.c: a dataset from callbacks copies what
 * its callbacks give (per sample and per batch), checks indices before calling them, feeds the
 * loader's workers under a rank's distributed sampler like a built-in dataset, surfaces a
 * callback's error from ddpc_loader_next, frees its ctx once, refuses bad descriptions and a
 * label_map, lays token samples out as (n, T); the data-type registry refuses bad, NULL and taken
 * names and finds what it holds. */
#include <ddpc/dataset_ops.h>
#include <ddpc/loader.h>
#include <ddpc/sampler.h>

#include <stdatomic.h>

#include "check.h"

#define N 37
#define D 3

typedef struct {
    atomic_int calls;     /* get_sample calls */
    atomic_int destroyed; /* destroy calls */
    int64_t fail_at;      /* get_sample fails on this index; -1: never */
} source;

/* Sample i: x = (i, i + 0.5, -i), label i % 3. */
static ddpc_status get_sample(void *ctx, int64_t i, float *x, int32_t *tokens, int32_t *targets)
{
    source *s = ctx;
    (void)tokens;
    atomic_fetch_add(&s->calls, 1);
    if (i == s->fail_at)
        return ddpc_errorf(DDPC_EIO, "source: sample %lld is unreadable", (long long)i);
    if (x)
        x[0] = (float)i, x[1] = (float)i + 0.5f, x[2] = -(float)i;
    if (targets)
        *targets = (int32_t)(i % 3);
    return DDPC_OK;
}

static ddpc_status get_batch(void *ctx, const int64_t *idx, int64_t n, float *x, int32_t *tokens,
                             int32_t *targets)
{
    for (int64_t b = 0; b < n; b++)
        DDPC_TRY(get_sample(ctx, idx[b], x ? x + b * D : NULL, tokens,
                            targets ? targets + b : NULL));
    return DDPC_OK;
}

static void destroy(void *ctx)
{
    atomic_fetch_add(&((source *)ctx)->destroyed, 1);
}

static ddpc_dataset_callbacks callbacks(source *s)
{
    return (ddpc_dataset_callbacks){.kind = DDPC_DATASET_IMAGES, .size = N, .shape = {1, 1, D},
                                    .num_classes = 3, .get_sample = get_sample,
                                    .destroy = destroy, .ctx = s};
}

static void test_batches(void)
{
    for (int per_batch = 0; per_batch < 2; per_batch++) {
        source s = {.fail_at = -1};
        ddpc_dataset_callbacks cb = callbacks(&s);
        if (per_batch)
            cb.get_batch = get_batch;
        ddpc_dataset *d = NULL;
        CHECK_EQ_INT(ddpc_dataset_from_callbacks(&d, &cb), DDPC_OK);
        CHECK_EQ_INT(ddpc_dataset_size(d), N);
        CHECK_EQ_INT(ddpc_dataset_num_classes(d), 3);
        CHECK_EQ_INT(ddpc_dataset_kind_of(d), DDPC_DATASET_IMAGES);
        CHECK(ddpc_dataset_labels(d) == NULL);
        int64_t shape[3], idx[3] = {5, 0, 36};
        ddpc_dataset_sample_shape(d, shape);
        CHECK_EQ_INT(shape[2], D);
        float x[3 * D];
        int32_t y[3];
        CHECK_EQ_INT(ddpc_dataset_get_batch(d, idx, 3, x, NULL, y), DDPC_OK);
        CHECK_EQ_INT(x[0], 5);
        CHECK_NEAR(x[1], 5.5, 0);
        CHECK_EQ_INT(x[2], -5);
        CHECK_EQ_INT(x[6], 36);
        CHECK_EQ_INT(y[0], 2);
        CHECK_EQ_INT(y[1], 0);
        CHECK_EQ_INT(y[2], 0);
        int before = atomic_load(&s.calls);
        int64_t out_of_range[2] = {1, N};
        CHECK_EQ_INT(ddpc_dataset_get_batch(d, out_of_range, 2, x, NULL, y), DDPC_EINVAL);
        CHECK_EQ_INT(atomic_load(&s.calls), before); /* checked before any callback */
        ddpc_dataset *view = NULL;
        int64_t map[3] = {0, 1, 1};
        CHECK_EQ_INT(ddpc_dataset_relabel_create(&view, d, map, 3), DDPC_EINVAL);
        CHECK_STR_CONTAINS(ddpc_last_error(), "from callbacks");
        ddpc_dataset_destroy(d);
        CHECK_EQ_INT(atomic_load(&s.destroyed), 1);
    }
}

/* Rank 1 of 2 under the distributed sampler, 3 workers: each batch is what direct reads give. */
static void test_loader_workers(void)
{
    source s = {.fail_at = -1};
    ddpc_dataset_callbacks cb = callbacks(&s);
    ddpc_dataset *d = NULL;
    CHECK_EQ_INT(ddpc_dataset_from_callbacks(&d, &cb), DDPC_OK);
    ddpc_sampler_config sc = ddpc_sampler_config_default();
    sc.size = N, sc.rank = 1, sc.world = 2, sc.shuffle = true, sc.seed = 3;
    ddpc_sampler *sm = NULL;
    CHECK_EQ_INT(ddpc_sampler_create(&sc, &sm), DDPC_OK);
    ddpc_loader_config lc = ddpc_loader_config_default();
    lc.batch_size = 4, lc.num_workers = 3, lc.drop_last = true;
    const ddpc_dataset *sets[1] = {d};
    ddpc_loader *l = NULL;
    CHECK_EQ_INT(ddpc_loader_create(sets, 1, sm, &lc, &l), DDPC_OK);
    for (int64_t epoch = 0; epoch < 2 && l; epoch++) {
        CHECK_EQ_INT(ddpc_loader_start_epoch(l, epoch), DDPC_OK);
        const ddpc_batch *b = NULL;
        int batches = 0, pos = 0;
        while (ddpc_loader_next(l, &b) == DDPC_OK && b) {
            for (int64_t i = 0; i < b->n; i++) {
                int64_t k = b->idx[i];
                CHECK_EQ_INT(k, ddpc_sampler_indices(sm)[pos++]); /* this epoch's rank-1 share */
                CHECK_EQ_INT(b->x[i * D], k);
                CHECK_EQ_INT(b->x[i * D + 2], -k);
                CHECK_EQ_INT(b->targets[i], k % 3);
            }
            batches++;
        }
        CHECK_EQ_INT(batches, (N + 1) / 2 / 4);
    }
    ddpc_loader_destroy(l);
    ddpc_sampler_destroy(sm);
    ddpc_dataset_destroy(d);
}

static void test_callback_error(void)
{
    source s = {.fail_at = 2};
    ddpc_dataset_callbacks cb = callbacks(&s);
    ddpc_dataset *d = NULL;
    CHECK_EQ_INT(ddpc_dataset_from_callbacks(&d, &cb), DDPC_OK);
    ddpc_sampler_config sc = ddpc_sampler_config_default();
    sc.size = N, sc.shuffle = false; /* the first batch is samples 0 to 3 */
    ddpc_sampler *sm = NULL;
    CHECK_EQ_INT(ddpc_sampler_create(&sc, &sm), DDPC_OK);
    ddpc_loader_config lc = ddpc_loader_config_default();
    lc.batch_size = 4, lc.num_workers = 2;
    const ddpc_dataset *sets[1] = {d};
    ddpc_loader *l = NULL;
    CHECK_EQ_INT(ddpc_loader_create(sets, 1, sm, &lc, &l), DDPC_OK);
    CHECK_EQ_INT(ddpc_loader_start_epoch(l, 0), DDPC_OK);
    const ddpc_batch *b = NULL;
    CHECK_EQ_INT(ddpc_loader_next(l, &b), DDPC_EIO); /* sample 2 is in the first batch */
    CHECK_STR_CONTAINS(ddpc_last_error(), "sample 2 is unreadable");
    ddpc_loader_destroy(l);
    ddpc_sampler_destroy(sm);
    ddpc_dataset_destroy(d);
}

static void test_bad_descriptions(void)
{
    source s = {.fail_at = -1};
    ddpc_dataset *d = NULL;
    ddpc_dataset_callbacks cb = callbacks(&s);
    cb.size = 0;
    CHECK_EQ_INT(ddpc_dataset_from_callbacks(&d, &cb), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "size 0");
    cb = callbacks(&s), cb.shape[1] = 0;
    CHECK_EQ_INT(ddpc_dataset_from_callbacks(&d, &cb), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "shape[1]");
    cb = callbacks(&s), cb.num_classes = 1;
    CHECK_EQ_INT(ddpc_dataset_from_callbacks(&d, &cb), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "num_classes 1");
    cb = callbacks(&s), cb.get_sample = NULL;
    CHECK_EQ_INT(ddpc_dataset_from_callbacks(&d, &cb), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "neither get_sample nor get_batch");
    cb = callbacks(&s), cb.kind = DDPC_DATASET_PAIRS;
    CHECK_EQ_INT(ddpc_dataset_from_callbacks(&d, &cb), DDPC_EINVAL);
    cb = callbacks(&s), cb.kind = DDPC_DATASET_TOKENS; /* tokens are (T, 1, 1) */
    CHECK_EQ_INT(ddpc_dataset_from_callbacks(&d, &cb), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "(T, 1, 1)");
    CHECK(d == NULL);
    CHECK_EQ_INT(atomic_load(&s.destroyed), 0); /* a refused ctx stays the caller's */
}

/* Token sample i of width 4: tokens i, i+1, i+2, i+3 and targets one ahead. */
static ddpc_status get_tokens(void *ctx, int64_t i, float *x, int32_t *tokens, int32_t *targets)
{
    (void)ctx, (void)x;
    for (int t = 0; t < 4; t++) {
        if (tokens)
            tokens[t] = (int32_t)(i + t);
        if (targets)
            targets[t] = (int32_t)(i + t + 1);
    }
    return DDPC_OK;
}

static void test_tokens(void)
{
    ddpc_dataset_callbacks cb = {.kind = DDPC_DATASET_TOKENS, .size = 10, .shape = {4, 1, 1},
                                 .num_classes = 16, .get_sample = get_tokens};
    ddpc_dataset *d = NULL;
    CHECK_EQ_INT(ddpc_dataset_from_callbacks(&d, &cb), DDPC_OK);
    CHECK_EQ_INT(ddpc_dataset_kind_of(d), DDPC_DATASET_TOKENS);
    int64_t idx[2] = {7, 2};
    int32_t tok[8], tgt[8];
    CHECK_EQ_INT(ddpc_dataset_get_batch(d, idx, 2, NULL, tok, tgt), DDPC_OK);
    CHECK_EQ_INT(tok[0], 7);
    CHECK_EQ_INT(tok[3], 10);
    CHECK_EQ_INT(tok[4], 2); /* row 1 starts at 4: (n, T) */
    CHECK_EQ_INT(tgt[7], 6);
    ddpc_dataset_destroy(d); /* no destroy member: ctx is the caller's */
}

static ddpc_status factory(void *ctx, ddpc_config *cfg, const char *prefix, uint64_t seed,
                           ddpc_data_splits *out)
{
    (void)ctx, (void)cfg, (void)prefix, (void)seed, (void)out;
    return DDPC_OK;
}

static void test_registry(void)
{
    int token;
    CHECK_EQ_INT(ddpc_data_register("Bad-Name", factory, NULL), DDPC_EINVAL);
    CHECK_EQ_INT(ddpc_data_register("", factory, NULL), DDPC_EINVAL);
    CHECK_EQ_INT(ddpc_data_register("ok_name", NULL, NULL), DDPC_EINVAL);
    CHECK(ddpc_data_lookup("ok_name", NULL) == NULL);
    CHECK_EQ_INT(ddpc_data_register("ok_name", factory, &token), DDPC_OK);
    CHECK_EQ_INT(ddpc_data_register("ok_name", factory, NULL), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "already registered");
    void *ctx = NULL;
    CHECK(ddpc_data_lookup("ok_name", &ctx) == factory);
    CHECK(ctx == &token);
    const char *names[4];
    CHECK_EQ_INT(ddpc_data_type_names(names, 4), 1);
    CHECK(strcmp(names[0], "ok_name") == 0);
}

int main(void)
{
    RUN_TEST(test_batches);
    RUN_TEST(test_loader_workers);
    RUN_TEST(test_callback_error);
    RUN_TEST(test_bad_descriptions);
    RUN_TEST(test_tokens);
    RUN_TEST(test_registry);
    return check_summary();
}
