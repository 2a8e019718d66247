// SPDX-License-Identifier: MIT
/* Tests for src/data/relabel.c: a relabelled view returns its base's pixels bit for bit with
 * label = map[base label], for fp32 (synthetic) and u8 (Fashion-MNIST) pixels; the Fashion-MNIST
 * coarse grouping of configs/fmnist_multitask.yaml gives the hand-counted group sizes of the
 * balanced test split; bad maps are rejected naming the problem; the view never frees its base. */
#include <ddpc/alloc.h>
#include <ddpc/data.h>

#include <stdint.h>
#include <stdlib.h>

#include "check.h"

#define FMNIST_DIR "/usr/share/datasets/fashion-mnist"

/* Every sample of v equals base's pixels, with the mapped label. */
static void check_view(const ddpc_dataset *base, const ddpc_dataset *v, const int64_t *map)
{
    int64_t n = ddpc_dataset_size(base), shape[3], vshape[3];
    CHECK_EQ_INT(ddpc_dataset_size(v), n);
    ddpc_dataset_sample_shape(base, shape);
    ddpc_dataset_sample_shape(v, vshape);
    CHECK(memcmp(shape, vshape, sizeof shape) == 0);
    CHECK_EQ_INT(ddpc_dataset_kind_of(v), DDPC_DATASET_IMAGES);
    int64_t per = shape[0] * shape[1] * shape[2], chunk = 500;
    float *xa = ddpc_malloc(sizeof(float) * (size_t)(chunk * per));
    float *xb = ddpc_malloc(sizeof(float) * (size_t)(chunk * per));
    int64_t *idx = ddpc_malloc(sizeof(int64_t) * (size_t)chunk);
    int32_t ya[500], yb[500];
    for (int64_t s = 0; s < n; s += chunk) {
        int64_t m = n - s < chunk ? n - s : chunk;
        for (int64_t i = 0; i < m; i++)
            idx[i] = n - 1 - (s + i); /* reversed: not just a contiguous copy */
        CHECK_EQ_INT(ddpc_dataset_get_batch(base, idx, m, xa, NULL, ya), DDPC_OK);
        CHECK_EQ_INT(ddpc_dataset_get_batch(v, idx, m, xb, NULL, yb), DDPC_OK);
        CHECK(memcmp(xa, xb, sizeof(float) * (size_t)(m * per)) == 0);
        for (int64_t i = 0; i < m; i++) {
            CHECK_EQ_INT(yb[i], map[ya[i]]);
            CHECK_EQ_INT(ddpc_dataset_labels(v)[idx[i]], yb[i]);
        }
    }
    ddpc_free(xa);
    ddpc_free(xb);
    ddpc_free(idx);
}

static void test_synthetic_view(void)
{
    ddpc_dataset *base = NULL, *v = NULL;
    CHECK_EQ_INT(ddpc_dataset_synthetic_images_create(&base, 300, 2, 3, 3, 6, 5, true), DDPC_OK);
    if (!base)
        return;
    const int64_t map[6] = {2, 0, 1, 2, 0, 1};
    CHECK_EQ_INT(ddpc_dataset_relabel_create(&v, base, map, 6), DDPC_OK);
    if (v) {
        CHECK_EQ_INT(ddpc_dataset_num_classes(v), 3);
        check_view(base, v, map);
        /* Out-of-range indices are still refused before anything is written. */
        int64_t bad = 300;
        CHECK_EQ_INT(ddpc_dataset_get_batch(v, &bad, 1, NULL, NULL, NULL), DDPC_EINVAL);
    }
    int64_t live = ddpc_alloc_live();
    ddpc_dataset_destroy(v);
    CHECK(ddpc_alloc_live() < live);
    /* The base is intact after the view is gone. */
    int64_t i = 299;
    float x[18];
    int32_t y;
    CHECK_EQ_INT(ddpc_dataset_get_batch(base, &i, 1, x, NULL, &y), DDPC_OK);
    ddpc_dataset_destroy(base);
}

static void test_fmnist_coarse_groups(void)
{
    ddpc_dataset *base = NULL, *v = NULL;
    CHECK_EQ_INT(ddpc_dataset_fmnist_create(&base, FMNIST_DIR, false), DDPC_OK);
    if (!base)
        return;
    /* tops 0 (T-shirt 0, pullover 2, dress 3, coat 4, shirt 6), bottoms 1 (trouser 1),
     * footwear 2 (sandal 5, sneaker 7, ankle boot 9), bags 3 (bag 8). */
    const int64_t map[10] = {0, 1, 0, 0, 0, 2, 0, 2, 3, 2};
    CHECK_EQ_INT(ddpc_dataset_relabel_create(&v, base, map, 10), DDPC_OK);
    if (v) {
        CHECK_EQ_INT(ddpc_dataset_num_classes(v), 4);
        check_view(base, v, map);
        /* The test split has 1000 images of each of the 10 classes. */
        int64_t count[4] = {0};
        for (int64_t i = 0; i < ddpc_dataset_size(v); i++)
            count[ddpc_dataset_labels(v)[i]]++;
        CHECK_EQ_INT(count[0], 5000);
        CHECK_EQ_INT(count[1], 1000);
        CHECK_EQ_INT(count[2], 3000);
        CHECK_EQ_INT(count[3], 1000);
    }
    ddpc_dataset_destroy(v);
    ddpc_dataset_destroy(base);
}

static void test_bad_maps(void)
{
    ddpc_dataset *base = NULL, *v = NULL, *tok = NULL;
    CHECK_EQ_INT(ddpc_dataset_synthetic_images_create(&base, 10, 1, 2, 2, 4, 1, true), DDPC_OK);
    CHECK_EQ_INT(ddpc_dataset_synthetic_tokens_create(&tok, 100, 5, 4, 1, true), DDPC_OK);
    if (!base || !tok)
        return;
    const int64_t three[3] = {0, 1, 1}, neg[4] = {0, 1, -1, 1}, big[4] = {0, 1, 256, 1};
    const int64_t zero[4] = {0, 0, 0, 0};
    CHECK_EQ_INT(ddpc_dataset_relabel_create(&v, base, three, 3), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "label_map has 3 entries; it needs one per class of "
                                          "the dataset (4)");
    CHECK_EQ_INT(ddpc_dataset_relabel_create(&v, base, neg, 4), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "entry 2 must be in [0, 255], got -1");
    CHECK_EQ_INT(ddpc_dataset_relabel_create(&v, base, big, 4), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "got 256");
    CHECK_EQ_INT(ddpc_dataset_relabel_create(&v, base, zero, 4), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "at least 2 classes");
    CHECK_EQ_INT(ddpc_dataset_relabel_create(&v, tok, zero, 4), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "only an images dataset");
    CHECK(v == NULL);
    int64_t live = ddpc_alloc_live();
    const int64_t ok[4] = {0, 1, 1, 0};
    ddpc_alloc_fail_after(1);
    CHECK_EQ_INT(ddpc_dataset_relabel_create(&v, base, ok, 4), DDPC_ENOMEM);
    ddpc_alloc_fail_after(-1);
    CHECK_EQ_INT(ddpc_alloc_live(), live);
    ddpc_dataset_destroy(base);
    ddpc_dataset_destroy(tok);
}

int main(void)
{
    RUN_TEST(test_synthetic_view);
    RUN_TEST(test_fmnist_coarse_groups);
    RUN_TEST(test_bad_maps);
    return check_summary();
}
