// SPDX-License-Identifier: MIT
/* Tests for the seed's forms of the rank_split sampler (LeapAI's RankSplitSampler; src/data/
 * sampler_rank_split.c and sampler_interleave.c): the worked examples of docs/data.md for its
 * bounds, integer down-sampling and interleaved streaming order, then every sequence of
 * tests/golden/seed_sampler_golden.h (made by a Python transcription of the seed's
 * get_epoch_indices), the split of the interleaved sequence over ranks, and the refusals. */
#include <ddpc/sampler.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "golden/seed_sampler_golden.h"
#include "sampler_testutil.h"

static ddpc_sampler_config seed_config(int n, const int64_t *sizes)
{
    ddpc_sampler_config c = ddpc_sampler_config_default();
    c.kind = DDPC_SAMPLER_RANK_SPLIT;
    c.shuffle = false;
    c.num_sources = n;
    c.sizes = sizes;
    return c;
}

/* docs/data.md, "the seed's forms": one dataset of 10, then A, B, C of 5, 2, 3. */
static void test_seed_bounds_and_stride(void)
{
    int64_t one[] = {10};
    ddpc_sampler_config c = seed_config(1, one);
    c.first_left_index = 2;
    c.last_right_index = 4; /* indices[2:][:5]: right counts from left with one dataset */
    CHECK(expect_list(c, 0, 0, (int64_t[]){2, 3, 4, 5, 6}, 5));
    c.down_sample_stride = 2;
    CHECK(expect_list(c, 0, 0, (int64_t[]){2, 4, 6}, 3));
    c.last_right_index = 100; /* clamped as a Python slice is */
    CHECK(expect_list(c, 0, 0, (int64_t[]){2, 4, 6, 8}, 4));
    c.first_left_index = 0;
    c.last_right_index = -1;
    c.down_sample_stride = 3; /* [::3] of 10: ceil(10 / 3) = 4 */
    CHECK(expect_list(c, 0, 0, (int64_t[]){0, 3, 6, 9}, 4));
    int64_t abc[] = {5, 2, 3};
    c = seed_config(3, abc);
    c.first_left_index = 1; /* A from local 1; C up to local 1 inclusive; B whole */
    c.last_right_index = 1;
    CHECK(expect_list(c, 0, 0, (int64_t[]){1, 2, 3, 4, 5, 6, 7, 8}, 8));
    c.down_sample_stride = 2;
    CHECK(expect_list(c, 0, 0, (int64_t[]){1, 3, 5, 7}, 4));
    /* The same bounds in ddpc's per-source half-open form give the same list. */
    int64_t left[] = {1, 0, 0}, right[] = {-1, -1, 2};
    ddpc_sampler_config d = seed_config(3, abc);
    d.left_index = left;
    d.right_index = right;
    d.down_sample_ratio = 0.5;
    CHECK(expect_list(d, 0, 0, (int64_t[]){1, 3, 5, 7}, 4));
}

/* The interleaved streaming order and its split over ranks. */
static void test_seed_interleave(void)
{
    int64_t abc[] = {5, 2, 3};
    ddpc_sampler_config c = seed_config(3, abc);
    c.first_left_index = 1;
    c.last_right_index = 1;
    c.streaming = true;
    c.interleave = true;
    c.batch_size = 2; /* groups {A, B}, {C}: A and B alternate until B runs out */
    CHECK(expect_list(c, 0, 0, (int64_t[]){1, 5, 2, 6, 3, 4, 7, 8}, 8));
    c.world = 2; /* 4 batches, 2 per rank, contiguous */
    CHECK(expect_list(c, 0, 0, (int64_t[]){1, 5, 2, 6}, 4));
    CHECK(expect_list(c, 1, 0, (int64_t[]){3, 4, 7, 8}, 4));
    CHECK(expect_list(c, 1, 5, (int64_t[]){3, 4, 7, 8}, 4)); /* epoch-independent */
    c.world = 3; /* padded to 6 batches by repeating from the start */
    CHECK(expect_list(c, 2, 0, (int64_t[]){1, 5, 2, 6}, 4));
    c.drop_last = true; /* 4 batches, one per rank, the last dropped */
    CHECK(expect_list(c, 0, 0, (int64_t[]){1, 5}, 2));
    CHECK(expect_list(c, 1, 0, (int64_t[]){2, 6}, 2));
    CHECK(expect_list(c, 2, 0, (int64_t[]){3, 4}, 2));
    /* Without drop_last a partial last batch wraps to the sequence's start. */
    int64_t odd[] = {3, 2};
    c = seed_config(2, odd);
    c.streaming = true;
    c.interleave = true;
    c.batch_size = 2; /* 0 3 1 4 2, then 0 */
    CHECK(expect_list(c, 0, 0, (int64_t[]){0, 3, 1, 4, 2, 0}, 6));
    /* The seed removes an exhausted dataset from the list it is iterating, which skips the next
     * one for that pass: sizes 1, 3, 3 in one group give 0 1 4 | 5 (1 skipped) | 2 6 | 3. */
    int64_t skip[] = {1, 3, 3};
    c = seed_config(3, skip);
    c.streaming = true;
    c.interleave = true;
    c.batch_size = 3;
    c.drop_last = true;
    CHECK(expect_list(c, 0, 0, (int64_t[]){0, 1, 4, 5, 2, 6}, 6));
}

/* Every golden sequence: non-streaming at world 1 is the sequence itself; interleaved streaming is
 * the sequence followed by its start up to a whole batch (or cut to whole batches with
 * drop_last). */
static void test_seed_golden(void)
{
    int failed = 0;
    for (int k = 0; k < SEED_GOLDEN_CASES && failed < 5; k++) {
        const int64_t *g = seed_golden_cases[k];
        int64_t b = g[6], len = g[8];
        const int64_t *want = seed_golden_seq + g[7];
        ddpc_sampler_config c = seed_config((int)g[1], seed_golden_sizes + g[0]);
        c.first_left_index = g[2];
        c.last_right_index = g[3];
        c.down_sample_stride = g[4];
        c.streaming = c.interleave = g[5] != 0;
        c.batch_size = b;
        for (int drop = 0; drop <= (int)g[5]; drop++) {
            c.drop_last = drop;
            ddpc_sampler *s = make(c);
            if (!s) {
                failed++;
                break;
            }
            int64_t expect = !c.streaming ? len : drop ? len / b * b : (len + b - 1) / b * b;
            int ok = ddpc_sampler_len(s) == expect;
            for (int64_t i = 0; ok && i < expect; i++)
                ok = ddpc_sampler_indices(s)[i] == want[i % len];
            if (!ok) {
                failed++;
                fprintf(stderr, "golden case %d (drop_last %d) differs\n", k, drop);
            }
            ddpc_sampler_destroy(s);
        }
    }
    CHECK_EQ_INT(failed, 0);
}

static int refused(ddpc_sampler_config c, const char *needle)
{
    ddpc_sampler *s = NULL;
    ddpc_status st = ddpc_sampler_create(&c, &s);
    ddpc_sampler_destroy(s);
    if (st == DDPC_OK)
        return 0;
    if (!strstr(ddpc_last_error(), needle)) {
        fprintf(stderr, "message: %s\n", ddpc_last_error());
        return 0;
    }
    return 1;
}

static void test_seed_form_errors(void)
{
    int64_t two[] = {4, 4}, left[] = {1, 0};
    ddpc_sampler_config c = seed_config(2, two);
    c.down_sample_stride = -2;
    CHECK(refused(c, "down_sample_stride must be >= 1"));
    c.down_sample_stride = 2;
    c.down_sample_ratio = 0.5;
    CHECK(refused(c, "give down_sample_stride (2) or down_sample_ratio (0.5), not both"));
    c = seed_config(2, two);
    c.first_left_index = 1;
    c.left_index = left;
    CHECK(refused(c, "cannot be combined"));
    c = seed_config(2, two);
    c.last_right_index = -2;
    CHECK(refused(c, "last_right_index (-2) >= 0, or -1 for none"));
    c = seed_config(2, two);
    c.interleave = true;
    CHECK(refused(c, "interleave is a streaming order"));
    c.streaming = true;
    c.batch_size = 2;
    c.shuffle = true;
    CHECK(refused(c, "shuffle must be off with streaming"));
}

/* Shuffled, a stride keeps a seeded random subset of ceil(n / k) per source, new each epoch. */
static void test_seed_stride_shuffled(void)
{
    int64_t sizes[] = {10, 7};
    ddpc_sampler_config c = seed_config(2, sizes);
    c.shuffle = true;
    c.seed = 5;
    c.down_sample_stride = 3;
    ddpc_sampler *s = make(c);
    if (!s)
        return;
    CHECK_EQ_INT(ddpc_sampler_len(s), 4 + 3);
    int in_a = 0, seen[17] = {0};
    for (int64_t k = 0; k < ddpc_sampler_len(s); k++) {
        int64_t g = ddpc_sampler_indices(s)[k];
        CHECK(g >= 0 && g < 17);
        if (g >= 0 && g < 17)
            CHECK_EQ_INT(seen[g]++, 0);
        in_a += g < 10;
    }
    CHECK_EQ_INT(in_a, 4);
    int64_t first[7];
    memcpy(first, ddpc_sampler_indices(s), sizeof first);
    ddpc_sampler_set_epoch(s, 1); /* another subset (and order) next epoch */
    CHECK(memcmp(first, ddpc_sampler_indices(s), sizeof first) != 0);
    ddpc_sampler_destroy(s);
}

int main(void)
{
    RUN_TEST(test_seed_bounds_and_stride);
    RUN_TEST(test_seed_interleave);
    RUN_TEST(test_seed_golden);
    RUN_TEST(test_seed_form_errors);
    RUN_TEST(test_seed_stride_shuffled);
    return check_summary();
}
