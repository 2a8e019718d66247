// SPDX-License-Identifier: MIT
/* Tests for src/data/augment.c through the loader: every augmented row is its sample mirrored or
 * not and shifted by at most random_shift pixels (uncovered pixels = the plane's minimum); about
 * half are mirrored; a sample's transform depends on (seed, epoch, index) only, so 2 ranks' rows
 * equal 1 rank's rows of the same index and 0 or 3 workers agree; epochs differ; off = untouched. */
#include <ddpc/alloc.h>
#include <ddpc/loader.h>

#include <string.h>

#include "check.h"

#define C 2
#define H 6
#define W 5
#define N 96

static ddpc_loader *make(const ddpc_dataset *d, ddpc_sampler **s, int rank, int world,
                         int64_t bs, int workers, bool flip, int shift)
{
    ddpc_sampler_config sc = ddpc_sampler_config_default();
    sc.kind = DDPC_SAMPLER_DISTRIBUTED;
    sc.rank = rank, sc.world = world, sc.size = N, sc.seed = 3;
    CHECK_EQ_INT(ddpc_sampler_create(&sc, s), DDPC_OK);
    ddpc_loader_config c = ddpc_loader_config_default();
    c.batch_size = bs, c.num_workers = workers, c.hflip = flip, c.random_shift = shift;
    c.augment_seed = 11;
    ddpc_loader *l = NULL;
    CHECK_EQ_INT(ddpc_loader_create(&d, 1, *s, &c, &l), DDPC_OK);
    return l;
}

/* Rows of one epoch, by global index: out (N, C*H*W); returns the rows seen. */
static int epoch_rows(ddpc_loader *l, int64_t epoch, float *out)
{
    const ddpc_batch *b = NULL;
    int seen = 0;
    CHECK_EQ_INT(ddpc_loader_start_epoch(l, epoch), DDPC_OK);
    while (ddpc_loader_next(l, &b) == DDPC_OK && b)
        for (int64_t i = 0; i < b->n; i++, seen++)
            memcpy(out + b->idx[i] * C * H * W, b->x + i * C * H * W, C * H * W * sizeof(float));
    return seen;
}

/* Whether plane a (H, W) is plane b mirrored (if flip) and shifted by (dy, dx), |dy|,|dx| <= s,
 * uncovered pixels holding b's minimum. */
static bool is_transform(const float *a, const float *b, int s, bool *flipped)
{
    float mn = b[0];
    for (int k = 1; k < H * W; k++)
        mn = b[k] < mn ? b[k] : mn;
    for (int f = 0; f < 2; f++)
        for (int dy = -s; dy <= s; dy++)
            for (int dx = -s; dx <= s; dx++) {
                bool ok = true;
                for (int y = 0; ok && y < H; y++)
                    for (int x = 0; ok && x < W; x++) {
                        int sy = y - dy, sx = x - dx;
                        float want = mn;
                        if (sy >= 0 && sy < H && sx >= 0 && sx < W)
                            want = b[sy * W + (f ? W - 1 - sx : sx)];
                        ok = a[y * W + x] == want;
                    }
                if (ok) {
                    *flipped = f;
                    return true;
                }
            }
    return false;
}

static void test_rows_are_flips_and_shifts(void)
{
    ddpc_dataset *d = NULL;
    CHECK_EQ_INT(ddpc_dataset_synthetic_images_create(&d, N, C, H, W, 3, 5, true), DDPC_OK);
    float *orig = ddpc_malloc(N * C * H * W * sizeof(float));
    float *one = ddpc_malloc(N * C * H * W * sizeof(float));
    float *two = ddpc_calloc(N * C * H * W, sizeof(float));
    float *other = ddpc_malloc(N * C * H * W * sizeof(float));
    int64_t idx[N];
    int32_t y[N];
    for (int i = 0; i < N; i++)
        idx[i] = i;
    CHECK_EQ_INT(ddpc_dataset_get_batch(d, idx, N, orig, NULL, y), DDPC_OK);
    ddpc_sampler *s = NULL, *s0 = NULL, *s1 = NULL;

    ddpc_loader *l = make(d, &s, 0, 1, 8, 0, false, 0); /* off: untouched */
    CHECK_EQ_INT(epoch_rows(l, 0, one), N);
    CHECK(memcmp(one, orig, N * C * H * W * sizeof(float)) == 0);
    ddpc_loader_destroy(l);
    ddpc_sampler_destroy(s);

    l = make(d, &s, 0, 1, 8, 0, true, 2);
    CHECK_EQ_INT(epoch_rows(l, 4, one), N);
    int flips = 0, changed = 0;
    for (int i = 0; i < N; i++) {
        bool f0 = false, f1 = true;
        const float *a = one + i * C * H * W, *b = orig + i * C * H * W;
        CHECK(is_transform(a, b, 2, &f0));
        CHECK(is_transform(a + H * W, b + H * W, 2, &f1));
        CHECK(f0 == f1); /* the channels of a sample move together */
        flips += f0;
        changed += memcmp(a, b, C * H * W * sizeof(float)) != 0;
    }
    CHECK(flips > N / 4 && flips < 3 * N / 4);
    CHECK(changed > N / 2);
    CHECK_EQ_INT(epoch_rows(l, 5, other), N); /* another epoch, other transforms */
    CHECK(memcmp(one, other, N * C * H * W * sizeof(float)) != 0);

    /* Two ranks with 3 workers and batch 5: every index gets the 1-rank row's bits. */
    ddpc_loader *l0 = make(d, &s0, 0, 2, 5, 3, true, 2), *l1 = make(d, &s1, 1, 2, 5, 0, true, 2);
    CHECK_EQ_INT(epoch_rows(l0, 4, two) + epoch_rows(l1, 4, two), N);
    CHECK(memcmp(one, two, N * C * H * W * sizeof(float)) == 0);
    ddpc_loader_destroy(l0);
    ddpc_loader_destroy(l1);
    ddpc_loader_destroy(l);
    ddpc_sampler_destroy(s0);
    ddpc_sampler_destroy(s1);
    ddpc_sampler_destroy(s);
    ddpc_free(orig);
    ddpc_free(one);
    ddpc_free(two);
    ddpc_free(other);
    ddpc_dataset_destroy(d);
}

static void test_bad_shift_is_refused(void)
{
    ddpc_dataset *d = NULL;
    CHECK_EQ_INT(ddpc_dataset_synthetic_images_create(&d, N, C, H, W, 3, 5, true), DDPC_OK);
    ddpc_sampler_config sc = ddpc_sampler_config_default();
    sc.size = N;
    ddpc_sampler *s = NULL;
    CHECK_EQ_INT(ddpc_sampler_create(&sc, &s), DDPC_OK);
    ddpc_loader_config c = ddpc_loader_config_default();
    c.random_shift = 9;
    ddpc_loader *l = NULL;
    CHECK_EQ_INT(ddpc_loader_create((const ddpc_dataset *const *)&d, 1, s, &c, &l), DDPC_EINVAL);
    CHECK(strstr(ddpc_last_error(), "random_shift") != NULL);
    ddpc_sampler_destroy(s);
    ddpc_dataset_destroy(d);
}

int main(void)
{
    RUN_TEST(test_rows_are_flips_and_shifts);
    RUN_TEST(test_bad_shift_is_refused);
    return check_summary();
}
