// SPDX-License-Identifier: MIT
/* Tests for src/data/sampler_rank_split.c: the hand-computed examples of docs/data.md for
 * bounds, down-sampling and streaming order, a seeded subset per epoch, equality with the
 * distributed sampler in the plain case, and single-source equal-count batches for many shapes. */
#include <ddpc/sampler.h>

#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "sampler_testutil.h"

static void test_rank_split_bounds_and_down_sampling(void)
{
    int64_t sizes[] = {10, 6}, left[] = {2, 0}, right[] = {8, -1};
    ddpc_sampler_config c = ddpc_sampler_config_default();
    c.kind = DDPC_SAMPLER_RANK_SPLIT;
    c.shuffle = false;
    c.num_sources = 2;
    c.sizes = sizes;
    c.left_index = left;
    c.right_index = right;
    c.down_sample_ratio = 0.5;
    c.world = 1; /* kept: source 0 local 2, 4, 6; source 1 local 0, 2, 4 (global 10, 12, 14) */
    CHECK(expect_list(c, 0, 0, (int64_t[]){2, 4, 6, 10, 12, 14}, 6));
    c.world = 4; /* padded to 8: [2 4 6 10 12 14 2 4], rank r takes [r::4] */
    CHECK(expect_list(c, 0, 0, (int64_t[]){2, 12}, 2));
    CHECK(expect_list(c, 1, 0, (int64_t[]){4, 14}, 2));
    CHECK(expect_list(c, 2, 0, (int64_t[]){6, 2}, 2));
    CHECK(expect_list(c, 3, 0, (int64_t[]){10, 4}, 2));
    c.drop_last = true;
    CHECK(expect_list(c, 0, 0, (int64_t[]){2}, 1));
    CHECK(expect_list(c, 1, 0, (int64_t[]){4}, 1));
    CHECK(expect_list(c, 2, 0, (int64_t[]){6}, 1));
    CHECK(expect_list(c, 3, 0, (int64_t[]){10}, 1));
    /* Ratios: ceil(n * ratio) kept, every (1/ratio)-th from the first. */
    int64_t one[] = {10};
    c.num_sources = 1;
    c.sizes = one;
    c.left_index = c.right_index = NULL;
    c.world = 1;
    c.drop_last = false;
    c.down_sample_ratio = 1.0 / 3.0;
    CHECK(expect_list(c, 0, 0, (int64_t[]){0, 3, 6, 9}, 4));
    c.down_sample_ratio = 0.3;
    CHECK(expect_list(c, 0, 0, (int64_t[]){0, 3, 6}, 3));
    c.down_sample_ratio = 0.01; /* at least one sample */
    CHECK(expect_list(c, 0, 0, (int64_t[]){0}, 1));
    c.down_sample_ratio = 0.7;
    CHECK(expect_list(c, 0, 0, (int64_t[]){0, 1, 2, 4, 5, 7, 8}, 7));
}

/* With shuffle, down-sampling keeps a seeded random subset that changes with the epoch. */
static void test_rank_split_shuffled_subset(void)
{
    int64_t sizes[] = {40, 20}, left[] = {10, 0}, right[] = {30, 10};
    ddpc_sampler_config c = ddpc_sampler_config_default();
    c.kind = DDPC_SAMPLER_RANK_SPLIT;
    c.num_sources = 2;
    c.sizes = sizes;
    c.left_index = left;
    c.right_index = right;
    c.down_sample_ratio = 0.5;
    c.seed = 3;
    ddpc_sampler *s = make(c);
    if (!s)
        return;
    CHECK_EQ_INT(ddpc_sampler_len(s), 15); /* 10 of [10, 30) + 5 of [40, 50) */
    int64_t first[15];
    memcpy(first, ddpc_sampler_indices(s), sizeof first);
    int in_a = 0, in_b = 0, seen[60] = {0};
    for (int k = 0; k < 15; k++) {
        int64_t g = first[k];
        in_a += g >= 10 && g < 30;
        in_b += g >= 40 && g < 50;
        if (g >= 0 && g < 60)
            CHECK_EQ_INT(seen[g]++, 0);
    }
    CHECK_EQ_INT(in_a, 10);
    CHECK_EQ_INT(in_b, 5);
    ddpc_sampler_set_epoch(s, 1);
    CHECK(memcmp(first, ddpc_sampler_indices(s), sizeof first) != 0);
    ddpc_sampler_set_epoch(s, 0);
    CHECK(memcmp(first, ddpc_sampler_indices(s), sizeof first) == 0);
    ddpc_sampler_destroy(s);
    /* One source, no bounds, ratio 1: exactly the distributed sampler. */
    static int64_t a[MAXN], b[MAXN];
    int64_t n[] = {23};
    ddpc_sampler_config d = ddpc_sampler_config_default();
    d.size = 23;
    d.world = 3;
    d.seed = 9;
    ddpc_sampler_config r = d;
    r.kind = DDPC_SAMPLER_RANK_SPLIT;
    r.num_sources = 1;
    r.sizes = n;
    CHECK_EQ_INT(gather_strided(d, 4, a), 8);
    CHECK_EQ_INT(gather_strided(r, 4, b), 8);
    CHECK(memcmp(a, b, 24 * sizeof *a) == 0);
}

/* docs/data.md example 2: sources of 5, 2, 3 samples, batch 2, streaming. */
static void test_rank_split_streaming(void)
{
    int64_t sizes[] = {5, 2, 3};
    ddpc_sampler_config c = ddpc_sampler_config_default();
    c.kind = DDPC_SAMPLER_RANK_SPLIT;
    c.shuffle = false;
    c.num_sources = 3;
    c.sizes = sizes;
    c.streaming = true;
    c.batch_size = 2;
    /* Batches A0=[0 1] A1=[2 3] A2=[4 0] B0=[5 6] C0=[7 8] C1=[9 7]; round-robin
     * A0 B0 C0 A1 C1 A2. */
    CHECK(expect_list(c, 0, 0, (int64_t[]){0, 1, 5, 6, 7, 8, 2, 3, 9, 7, 4, 0}, 12));
    c.world = 2; /* contiguous thirds of 6 batches */
    CHECK(expect_list(c, 0, 0, (int64_t[]){0, 1, 5, 6, 7, 8}, 6));
    CHECK(expect_list(c, 1, 0, (int64_t[]){2, 3, 9, 7, 4, 0}, 6));
    CHECK(expect_list(c, 1, 7, (int64_t[]){2, 3, 9, 7, 4, 0}, 6)); /* epoch-independent */
    c.world = 4; /* 6 batches padded to 8 by repeating A0 B0 */
    CHECK(expect_list(c, 0, 0, (int64_t[]){0, 1, 5, 6}, 4));
    CHECK(expect_list(c, 1, 0, (int64_t[]){7, 8, 2, 3}, 4));
    CHECK(expect_list(c, 2, 0, (int64_t[]){9, 7, 4, 0}, 4));
    CHECK(expect_list(c, 3, 0, (int64_t[]){0, 1, 5, 6}, 4));
    c.drop_last = true; /* A0 A1, B0, C0 -> A0 B0 C0 A1; 4 batches over 4 ranks */
    CHECK(expect_list(c, 0, 0, (int64_t[]){0, 1}, 2));
    CHECK(expect_list(c, 1, 0, (int64_t[]){5, 6}, 2));
    CHECK(expect_list(c, 2, 0, (int64_t[]){7, 8}, 2));
    CHECK(expect_list(c, 3, 0, (int64_t[]){2, 3}, 2));
    c.world = 2;
    CHECK(expect_list(c, 0, 0, (int64_t[]){0, 1, 5, 6}, 4));
    CHECK(expect_list(c, 1, 0, (int64_t[]){7, 8, 2, 3}, 4));
    /* Bounds and down-sampling apply before batching: A [1, 5) ratio 0.5 -> 1, 3. */
    int64_t left[] = {1, 0, 0};
    c.left_index = left;
    c.down_sample_ratio = 0.5; /* A: 1 3 | B: 5 | C: 7 9 -> drop_last keeps A0 and C0 */
    c.world = 1;
    CHECK(expect_list(c, 0, 0, (int64_t[]){1, 3, 7, 9}, 4));
}

/* Property check: every rank gets the same number of batches, each from one source. */
static void test_rank_split_streaming_single_source(void)
{
    int64_t sizes[] = {37, 5, 0, 64, 11};
    for (int world = 1; world <= 4; world++)
        for (int drop = 0; drop <= 1; drop++) {
            int64_t len0 = -1;
            for (int r = 0; r < world; r++) {
                ddpc_sampler_config c = ddpc_sampler_config_default();
                c.kind = DDPC_SAMPLER_RANK_SPLIT;
                c.shuffle = false;
                c.num_sources = 5;
                c.sizes = sizes;
                c.streaming = true;
                c.batch_size = 4;
                c.drop_last = drop;
                c.world = world;
                c.rank = r;
                ddpc_sampler *s = make(c);
                if (!s)
                    return;
                int64_t len = ddpc_sampler_len(s);
                CHECK_EQ_INT(len % 4, 0);
                if (len0 >= 0)
                    CHECK_EQ_INT(len, len0);
                len0 = len;
                const int64_t *idx = ddpc_sampler_indices(s);
                for (int64_t b = 0; b + 4 <= len; b += 4) {
                    int src = ddpc_sampler_source_of(s, idx[b], NULL);
                    CHECK(src >= 0 && src != 2);
                    for (int j = 1; j < 4; j++)
                        CHECK_EQ_INT(ddpc_sampler_source_of(s, idx[b + j], NULL), src);
                }
                ddpc_sampler_destroy(s);
            }
        }
}

int main(void)
{
    RUN_TEST(test_rank_split_bounds_and_down_sampling);
    RUN_TEST(test_rank_split_shuffled_subset);
    RUN_TEST(test_rank_split_streaming);
    RUN_TEST(test_rank_split_streaming_single_source);
    return check_summary();
}
