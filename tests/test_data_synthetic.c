/* Tests for src/data/synthetic.c and src/data/dataset.c: determinism by seed, shapes, label
 * learnability (labels are a function of the pixels), token rule, bounds and argument checks. */
#include <ddpc/alloc.h>
#include <ddpc/data.h>

#include <stdint.h>
#include <stdlib.h>

#include "check.h"

static void test_images_deterministic_by_seed(void)
{
    ddpc_dataset *a = NULL, *b = NULL, *c = NULL;
    CHECK_EQ_INT(ddpc_dataset_synthetic_images_create(&a, 64, 2, 3, 4, 5, 7), DDPC_OK);
    CHECK_EQ_INT(ddpc_dataset_synthetic_images_create(&b, 64, 2, 3, 4, 5, 7), DDPC_OK);
    CHECK_EQ_INT(ddpc_dataset_synthetic_images_create(&c, 64, 2, 3, 4, 5, 8), DDPC_OK);
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
    CHECK_EQ_INT(ddpc_dataset_synthetic_images_create(&d, 1000, 1, 8, 8, 10, 1), DDPC_OK);
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
    CHECK_EQ_INT(ddpc_dataset_synthetic_tokens_create(&a, 1001, 50, 10, 3), DDPC_OK);
    CHECK_EQ_INT(ddpc_dataset_synthetic_tokens_create(&b, 1001, 50, 10, 3), DDPC_OK);
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

static void test_bad_arguments(void)
{
    ddpc_dataset *d = NULL;
    CHECK_EQ_INT(ddpc_dataset_synthetic_images_create(&d, 0, 1, 1, 1, 2, 0), DDPC_EINVAL);
    CHECK_EQ_INT(ddpc_dataset_synthetic_images_create(&d, 4, 1, 1, 1, 1, 0), DDPC_EINVAL);
    CHECK_EQ_INT(ddpc_dataset_synthetic_images_create(&d, 4, 1, 1, 1, 257, 0), DDPC_EINVAL);
    CHECK_EQ_INT(ddpc_dataset_synthetic_images_create(&d, 1 << 20, 1 << 20, 1 << 20, 1, 2, 0),
                 DDPC_EINVAL);
    CHECK_EQ_INT(ddpc_dataset_synthetic_tokens_create(&d, 10, 1, 4, 0), DDPC_EINVAL);
    CHECK_EQ_INT(ddpc_dataset_synthetic_tokens_create(&d, 10, 16, 10, 0), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "block_size+1 = 11");
    CHECK_EQ_INT(ddpc_dataset_synthetic_tokens_create(&d, 10, 16, 0, 0), DDPC_EINVAL);
    CHECK(d == NULL);
    CHECK_EQ_INT(ddpc_dataset_synthetic_tokens_create(&d, 11, 16, 10, 0), DDPC_OK);
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
        ddpc_status s = ddpc_dataset_synthetic_images_create(&d, 8, 1, 2, 2, 3, 1);
        ddpc_alloc_fail_after(-1);
        CHECK(s == DDPC_OK || s == DDPC_ENOMEM);
        ddpc_dataset_destroy(d);
        ddpc_alloc_fail_after(k);
        s = ddpc_dataset_synthetic_tokens_create(&d, 100, 8, 4, 1);
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
    RUN_TEST(test_bad_arguments);
    RUN_TEST(test_failing_allocator);
    return check_summary();
}
