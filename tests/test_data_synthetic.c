// SPDX-License-Identifier: MIT
/* Tests for src/data/synthetic.c and src/data/dataset.c: determinism by seed, shapes, label
 * learnability (labels are a function of the pixels), token rule, the test split sharing the train
 * split's rule with samples of its own, bounds and argument checks. */
#include <ddpc/alloc.h>
#include <ddpc/data.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static void test_images_deterministic_by_seed(void)
{
    ddpc_dataset *a = NULL, *b = NULL, *c = NULL;
    CHECK_EQ_INT(ddpc_dataset_synthetic_images_create(&a, 64, 2, 3, 4, 5, 7, true), DDPC_OK);
    CHECK_EQ_INT(ddpc_dataset_synthetic_images_create(&b, 64, 2, 3, 4, 5, 7, true), DDPC_OK);
    CHECK_EQ_INT(ddpc_dataset_synthetic_images_create(&c, 64, 2, 3, 4, 5, 8, true), DDPC_OK);
    if (!a || !b || !c)
        return;
    CHECK_EQ_INT(ddpc_dataset_kind_of(a), DDPC_DATASET_IMAGES);
    CHECK_EQ_INT(ddpc_dataset_size(a), 64);
    CHECK_EQ_INT(ddpc_dataset_num_classes(a), 5);
    int64_t shape[3];
    ddpc_dataset_sample_shape(a, shape);
    CHECK(shape[0] == 2 && shape[1] == 3 && shape[2] == 4);
    int64_t idx[64];
    for (int i = 0; i < 64; i++)
        idx[i] = 63 - i;
    float xa[64 * 24], xb[64 * 24], xc[64 * 24];
    int32_t ya[64], yb[64], yc[64];
    CHECK_EQ_INT(ddpc_dataset_get_batch(a, idx, 64, xa, NULL, ya), DDPC_OK);
    CHECK_EQ_INT(ddpc_dataset_get_batch(b, idx, 64, xb, NULL, yb), DDPC_OK);
    CHECK_EQ_INT(ddpc_dataset_get_batch(c, idx, 64, xc, NULL, yc), DDPC_OK);
    CHECK(memcmp(xa, xb, sizeof xa) == 0);
    CHECK(memcmp(ya, yb, sizeof ya) == 0);
    CHECK(memcmp(xa, xc, sizeof xa) != 0);
    int seen[5] = {0};
    for (int i = 0; i < 64; i++) {
        CHECK(ya[i] >= 0 && ya[i] < 5);
        CHECK_EQ_INT(ya[i], ddpc_dataset_labels(a)[63 - i]);
        if (ya[i] >= 0 && ya[i] < 5)
            seen[ya[i]] = 1;
    }
    CHECK(seen[0] + seen[1] + seen[2] + seen[3] + seen[4] >= 4);
    ddpc_dataset_destroy(a);
    ddpc_dataset_destroy(b);
    ddpc_dataset_destroy(c);
}

static void test_images_standard_normal(void)
{
    ddpc_dataset *d = NULL;
    CHECK_EQ_INT(ddpc_dataset_synthetic_images_create(&d, 1000, 1, 8, 8, 10, 1, true), DDPC_OK);
    if (!d)
        return;
    float *x = malloc(sizeof(float) * 1000 * 64);
    int64_t *idx = malloc(sizeof(int64_t) * 1000);
    for (int i = 0; i < 1000; i++)
        idx[i] = i;
    CHECK_EQ_INT(ddpc_dataset_get_batch(d, idx, 1000, x, NULL, NULL), DDPC_OK);
    double sum = 0, sumsq = 0;
    for (int j = 0; j < 64000; j++) {
        sum += x[j];
        sumsq += (double)x[j] * x[j];
    }
    CHECK_NEAR(sum / 64000, 0.0, 0.02);
    CHECK_NEAR(sumsq / 64000, 1.0, 0.03);
    /* Classes are roughly balanced: none empty, none dominating. */
    int64_t counts[10] = {0};
    for (int i = 0; i < 1000; i++)
        counts[ddpc_dataset_labels(d)[i]]++;
    for (int k = 0; k < 10; k++)
        CHECK(counts[k] > 30 && counts[k] < 250);
    free(x);
    free(idx);
    ddpc_dataset_destroy(d);
}

static void test_tokens_rule_and_windows(void)
{
    ddpc_dataset *a = NULL, *b = NULL;
    CHECK_EQ_INT(ddpc_dataset_synthetic_tokens_create(&a, 1001, 50, 10, 3, true), DDPC_OK);
    CHECK_EQ_INT(ddpc_dataset_synthetic_tokens_create(&b, 1001, 50, 10, 3, true), DDPC_OK);
    if (!a || !b)
        return;
    CHECK_EQ_INT(ddpc_dataset_kind_of(a), DDPC_DATASET_TOKENS);
    CHECK_EQ_INT(ddpc_dataset_size(a), 100);
    CHECK_EQ_INT(ddpc_dataset_num_classes(a), 50);
    CHECK(ddpc_dataset_labels(a) == NULL);
    int64_t idx[100];
    for (int i = 0; i < 100; i++)
        idx[i] = i;
    int32_t ta[1000], ga[1000], tb[1000], gb[1000];
    CHECK_EQ_INT(ddpc_dataset_get_batch(a, idx, 100, NULL, ta, ga), DDPC_OK);
    CHECK_EQ_INT(ddpc_dataset_get_batch(b, idx, 100, NULL, tb, gb), DDPC_OK);
    CHECK(memcmp(ta, tb, sizeof ta) == 0 && memcmp(ga, gb, sizeof ga) == 0);
    /* Targets are the inputs shifted by one; consecutive windows join up. */
    for (int i = 0; i < 999; i++)
        CHECK_EQ_INT(ga[i], ta[i + 1]);
    /* The most common successor of each token explains ~90% of transitions. */
    static int succ[50][50];
    for (int i = 0; i < 1000; i++)
        succ[ta[i]][ga[i]]++;
    int explained = 0;
    for (int v = 0; v < 50; v++) {
        int best = 0;
        for (int w = 0; w < 50; w++)
            best = succ[v][w] > best ? succ[v][w] : best;
        explained += best;
    }
    CHECK(explained > 850);
    ddpc_dataset_destroy(a);
    ddpc_dataset_destroy(b);
}

/* Fraction of `test` that a nearest-centroid classifier fitted on `train` labels correctly (score
 * of class k = centroid_k . x, which suits labels that are an argmax of a linear map). */
static double centroid_accuracy(const ddpc_dataset *train, const ddpc_dataset *test)
{
    enum { PER = 16, K = 5 };
    int64_t idx[2000];
    float x[2000 * PER];
    int32_t y[2000];
    double centroid[K][PER] = {{0}};
    int64_t n = ddpc_dataset_size(train), m = ddpc_dataset_size(test);
    for (int64_t i = 0; i < 2000; i++)
        idx[i] = i;
    CHECK(n <= 2000 && m <= 2000);
    CHECK_EQ_INT(ddpc_dataset_get_batch(train, idx, n, x, NULL, y), DDPC_OK);
    for (int64_t i = 0; i < n; i++)
        for (int j = 0; j < PER; j++)
            centroid[y[i]][j] += x[i * PER + j];
    CHECK_EQ_INT(ddpc_dataset_get_batch(test, idx, m, x, NULL, y), DDPC_OK);
    int64_t right = 0;
    for (int64_t i = 0; i < m; i++) {
        int best = 0;
        double best_v = 0;
        for (int k = 0; k < K; k++) {
            double v = 0;
            for (int j = 0; j < PER; j++)
                v += centroid[k][j] * x[i * PER + j];
            if (k == 0 || v > best_v) {
                best = k;
                best_v = v;
            }
        }
        right += best == y[i];
    }
    return (double)right / (double)m;
}

static void test_images_test_split_shares_the_rule(void)
{
    ddpc_dataset *train = NULL, *test = NULL, *other = NULL;
    CHECK_EQ_INT(ddpc_dataset_synthetic_images_create(&train, 2000, 1, 4, 4, 5, 11, true), DDPC_OK);
    CHECK_EQ_INT(ddpc_dataset_synthetic_images_create(&test, 500, 1, 4, 4, 5, 11, false), DDPC_OK);
    /* What the trainer used to build: a test split from seed + 1, labelled by another map. */
    CHECK_EQ_INT(ddpc_dataset_synthetic_images_create(&other, 500, 1, 4, 4, 5, 12, false), DDPC_OK);
    if (!train || !test || !other)
        goto out;
    /* Same index, different sample: no test image equals the train image at its index. */
    int64_t idx[500];
    for (int i = 0; i < 500; i++)
        idx[i] = i;
    static float xa[500 * 16], xb[500 * 16];
    CHECK_EQ_INT(ddpc_dataset_get_batch(train, idx, 500, xa, NULL, NULL), DDPC_OK);
    CHECK_EQ_INT(ddpc_dataset_get_batch(test, idx, 500, xb, NULL, NULL), DDPC_OK);
    int same = 0;
    for (int i = 0; i < 500; i++)
        same += memcmp(xa + i * 16, xb + i * 16, 16 * sizeof(float)) == 0;
    CHECK_EQ_INT(same, 0);
    /* One rule labels both splits: a classifier fitted on train is far above chance (0.2) on
     * test, and at chance on a split labelled by another seed's map. */
    double acc = centroid_accuracy(train, test), acc_other = centroid_accuracy(train, other);
    fprintf(stderr, "  nearest-centroid accuracy: same seed %.3f, other seed %.3f\n", acc,
            acc_other);
    CHECK(acc > 0.6);
    CHECK(acc_other < 0.4);
out:
    ddpc_dataset_destroy(train);
    ddpc_dataset_destroy(test);
    ddpc_dataset_destroy(other);
}

/* Transitions of `test` (n windows of 10) that train's most common successor predicts. */
static int successor_hits(const ddpc_dataset *train, const ddpc_dataset *test)
{
    int64_t idx[100];
    int32_t t[1000], g[1000];
    static int succ[50][50];
    memset(succ, 0, sizeof succ);
    for (int i = 0; i < 100; i++)
        idx[i] = i;
    CHECK_EQ_INT(ddpc_dataset_get_batch(train, idx, 100, NULL, t, g), DDPC_OK);
    for (int i = 0; i < 1000; i++)
        succ[t[i]][g[i]]++;
    int guess[50];
    for (int v = 0; v < 50; v++) {
        guess[v] = 0;
        for (int w = 1; w < 50; w++)
            guess[v] = succ[v][w] > succ[v][guess[v]] ? w : guess[v];
    }
    CHECK_EQ_INT(ddpc_dataset_get_batch(test, idx, 100, NULL, t, g), DDPC_OK);
    int hits = 0;
    for (int i = 0; i < 1000; i++)
        hits += guess[t[i]] == g[i];
    return hits;
}

static void test_tokens_test_split_shares_the_rule(void)
{
    ddpc_dataset *train = NULL, *test = NULL, *other = NULL;
    CHECK_EQ_INT(ddpc_dataset_synthetic_tokens_create(&train, 1001, 50, 10, 3, true), DDPC_OK);
    CHECK_EQ_INT(ddpc_dataset_synthetic_tokens_create(&test, 1001, 50, 10, 3, false), DDPC_OK);
    CHECK_EQ_INT(ddpc_dataset_synthetic_tokens_create(&other, 1001, 50, 10, 4, false), DDPC_OK);
    if (!train || !test || !other)
        goto out;
    int64_t idx[100];
    for (int i = 0; i < 100; i++)
        idx[i] = i;
    int32_t ta[1000], tb[1000];
    CHECK_EQ_INT(ddpc_dataset_get_batch(train, idx, 100, NULL, ta, NULL), DDPC_OK);
    CHECK_EQ_INT(ddpc_dataset_get_batch(test, idx, 100, NULL, tb, NULL), DDPC_OK);
    int same = 0;
    for (int i = 0; i < 1000; i++)
        same += ta[i] == tb[i];
    CHECK(same < 100); /* independent streams agree about 1 time in 50 */
    /* ~90% of test transitions follow train's rule; another seed's rule predicts almost none. */
    int hits = successor_hits(train, test), hits_other = successor_hits(train, other);
    fprintf(stderr, "  successor hits of 1000: same seed %d, other seed %d\n", hits, hits_other);
    CHECK(hits > 850);
    CHECK(hits_other < 200);
out:
    ddpc_dataset_destroy(train);
    ddpc_dataset_destroy(test);
    ddpc_dataset_destroy(other);
}

static void test_bad_arguments(void)
{
    ddpc_dataset *d = NULL;
    CHECK_EQ_INT(ddpc_dataset_synthetic_images_create(&d, 0, 1, 1, 1, 2, 0, true), DDPC_EINVAL);
    CHECK_EQ_INT(ddpc_dataset_synthetic_images_create(&d, 4, 1, 1, 1, 1, 0, true), DDPC_EINVAL);
    CHECK_EQ_INT(ddpc_dataset_synthetic_images_create(&d, 4, 1, 1, 1, 257, 0, true), DDPC_EINVAL);
    CHECK_EQ_INT(ddpc_dataset_synthetic_images_create(&d, 1 << 20, 1 << 20, 1 << 20, 1, 2, 0, true),
                 DDPC_EINVAL);
    CHECK_EQ_INT(ddpc_dataset_synthetic_tokens_create(&d, 10, 1, 4, 0, true), DDPC_EINVAL);
    CHECK_EQ_INT(ddpc_dataset_synthetic_tokens_create(&d, 10, 16, 10, 0, true), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "block_size+1 = 11");
    CHECK_EQ_INT(ddpc_dataset_synthetic_tokens_create(&d, 10, 16, 0, 0, true), DDPC_EINVAL);
    CHECK(d == NULL);
    CHECK_EQ_INT(ddpc_dataset_synthetic_tokens_create(&d, 11, 16, 10, 0, true), DDPC_OK);
    int64_t i = 1;
    int32_t t[10];
    CHECK_EQ_INT(ddpc_dataset_get_batch(d, &i, 1, NULL, t, NULL), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "index 1");
    CHECK_EQ_INT(ddpc_dataset_get_batch(NULL, &i, 1, NULL, t, NULL), DDPC_EINVAL);
    ddpc_dataset_destroy(d);
    ddpc_dataset_destroy(NULL);
}

static void test_failing_allocator(void)
{
    for (int64_t k = 0; k < 10; k++) {
        ddpc_dataset *d = NULL;
        ddpc_alloc_fail_after(k);
        ddpc_status s = ddpc_dataset_synthetic_images_create(&d, 8, 1, 2, 2, 3, 1, true);
        ddpc_alloc_fail_after(-1);
        CHECK(s == DDPC_OK || s == DDPC_ENOMEM);
        ddpc_dataset_destroy(d);
        ddpc_alloc_fail_after(k);
        s = ddpc_dataset_synthetic_tokens_create(&d, 100, 8, 4, 1, true);
        ddpc_alloc_fail_after(-1);
        CHECK(s == DDPC_OK || s == DDPC_ENOMEM);
        ddpc_dataset_destroy(d);
        CHECK_EQ_INT(ddpc_alloc_live(), 0);
    }
}

int main(void)
{
    RUN_TEST(test_images_deterministic_by_seed);
    RUN_TEST(test_images_standard_normal);
    RUN_TEST(test_tokens_rule_and_windows);
    RUN_TEST(test_images_test_split_shares_the_rule);
    RUN_TEST(test_tokens_test_split_shares_the_rule);
    RUN_TEST(test_bad_arguments);
    RUN_TEST(test_failing_allocator);
    return check_summary();
}
