// SPDX-License-Identifier: MIT
/* Tests for src/data/sampler.c, sampler_distributed.c and sampler_task_shard.c: torch's padding,
 * drop_last and striding rules (against torch 1.13's own lists), coverage and equal counts,
 * epoch dependence and determinism, the case and task_shard examples of docs/data.md, queries,
 * argument and memory errors. rank_split is in test_data_rank_split.c. */
#include <ddpc/alloc.h>
#include <ddpc/sampler.h>

#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "golden/sampler_golden.h"
#include "sampler_testutil.h"

static void test_distributed_hand_examples(void)
{
    ddpc_sampler_config c = ddpc_sampler_config_default();
    c.shuffle = false;
    c.size = 10;
    c.world = 3;
    /* torch: num_samples = ceil(10/3) = 4, indices + indices[:2], rank r takes [r::3]. */
    CHECK(expect_list(c, 0, 0, (int64_t[]){0, 3, 6, 9}, 4));
    CHECK(expect_list(c, 1, 0, (int64_t[]){1, 4, 7, 0}, 4));
    CHECK(expect_list(c, 2, 0, (int64_t[]){2, 5, 8, 1}, 4));
    c.drop_last = true; /* floor(10/3) = 3 each; 9 is dropped */
    CHECK(expect_list(c, 0, 0, (int64_t[]){0, 3, 6}, 3));
    CHECK(expect_list(c, 1, 0, (int64_t[]){1, 4, 7}, 3));
    CHECK(expect_list(c, 2, 0, (int64_t[]){2, 5, 8}, 3));
    /* size < world: [0, 1] repeated to [0, 1, 0, 1, 0]. */
    c.drop_last = false;
    c.size = 2;
    c.world = 5;
    for (int r = 0; r < 5; r++)
        CHECK(expect_list(c, r, 0, (int64_t[]){r % 2}, 1));
    c.drop_last = true; /* floor(2/5) = 0: nothing for anyone */
    CHECK(expect_list(c, 4, 0, NULL, 0));
}

/* Unshuffled lists equal torch 1.13's DistributedSampler (tests/golden/make_sampler_golden.py). */
static void test_distributed_matches_torch(void)
{
    for (int i = 0; i < GOLDEN_SAMPLER_CASES; i++) {
        const int64_t *g = golden_sampler_cases[i];
        ddpc_sampler_config c = ddpc_sampler_config_default();
        c.shuffle = false;
        c.size = g[0];
        c.world = (int)g[1];
        c.drop_last = g[2];
        for (int r = 0; r < c.world; r++) {
            int ok = expect_list(c, r, 0, golden_sampler_lists + g[4] + r * g[3], g[3]);
            CHECK(ok);
            if (!ok)
                fprintf(stderr, "  torch case size %lld world %lld drop_last %lld\n",
                        (long long)g[0], (long long)g[1], (long long)g[2]);
        }
    }
}

/* Every (size, world, drop_last): equal counts, and the interleaved lists are a permutation of
 * [0, size) followed by its first entries (padding) or a prefix of one (drop_last). */
static void test_distributed_coverage(void)
{
    static int64_t padded[MAXN];
    static int seen[MAXN];
    const int64_t sizes[] = {0, 1, 2, 3, 7, 10, 12, 97};
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
        for (int world = 1; world <= 5; world++)
            for (int drop = 0; drop <= 1; drop++) {
                ddpc_sampler_config c = ddpc_sampler_config_default();
                c.size = sizes[si];
                c.world = world;
                c.drop_last = drop;
                c.seed = 11;
                int64_t n = c.size;
                int64_t per = gather_strided(c, 3, padded);
                int64_t want = drop ? n / world : (n + world - 1) / world;
                CHECK_EQ_INT(per, want);
                if (per != want)
                    continue;
                memset(seen, 0, sizeof seen);
                int64_t total = per * world, distinct = total < n ? total : n;
                for (int64_t k = 0; k < distinct; k++) {
                    CHECK(padded[k] >= 0 && padded[k] < n);
                    if (padded[k] >= 0 && padded[k] < n)
                        seen[padded[k]]++;
                }
                for (int64_t k = 0; k < distinct; k++)
                    CHECK_EQ_INT(seen[padded[k]], 1);
                for (int64_t k = n; k < total; k++) /* padding repeats the start */
                    CHECK_EQ_INT(padded[k], padded[k % n]);
                if (!drop)
                    CHECK_EQ_INT(distinct, n); /* nothing lost without drop_last */
            }
}

static void test_distributed_epochs_and_determinism(void)
{
    static int64_t a[MAXN], b[MAXN], e1[MAXN], other[MAXN];
    ddpc_sampler_config c = ddpc_sampler_config_default();
    c.size = 100;
    c.world = 4;
    c.seed = 5;
    CHECK_EQ_INT(gather_strided(c, 0, a), 25);
    CHECK_EQ_INT(gather_strided(c, 0, b), 25);
    CHECK(memcmp(a, b, 100 * sizeof *a) == 0);
    CHECK_EQ_INT(gather_strided(c, 1, e1), 25);
    CHECK(memcmp(a, e1, 100 * sizeof *a) != 0);
    int identity = 1;
    for (int i = 0; i < 100; i++)
        identity &= a[i] == i;
    CHECK(!identity);
    /* torch seeds its generator with seed + epoch: (5, epoch 1) is (6, epoch 0). */
    c.seed = 6;
    CHECK_EQ_INT(gather_strided(c, 0, other), 25);
    CHECK(memcmp(e1, other, 100 * sizeof *a) == 0);
    c.seed = 7;
    CHECK_EQ_INT(gather_strided(c, 0, other), 25);
    CHECK(memcmp(a, other, 100 * sizeof *a) != 0);
    /* Going back to an epoch gives its order again, and set_epoch allocates nothing. */
    c.seed = 5;
    c.rank = 2;
    ddpc_sampler *s = make(c);
    if (!s)
        return;
    int64_t allocs = ddpc_alloc_total();
    ddpc_sampler_set_epoch(s, 1);
    ddpc_sampler_set_epoch(s, 0);
    CHECK_EQ_INT(ddpc_alloc_total(), allocs);
    CHECK_EQ_INT(ddpc_sampler_epoch(s), 0);
    for (int k = 0; k < 25; k++)
        CHECK_EQ_INT(ddpc_sampler_indices(s)[k], a[2 + 4 * k]);
    ddpc_sampler_destroy(s);
}

/* docs/data.md example 1: sources of 10 and 6, bounds [2, 8) and [0, end), ratio 0.5. */
static void test_case_exact_shards(void)
{
    ddpc_sampler_config c = ddpc_sampler_config_default();
    c.kind = DDPC_SAMPLER_CASE;
    c.size = 10;
    c.world = 4; /* 3, 3, 2, 2 */
    CHECK(expect_list(c, 0, 0, (int64_t[]){0, 1, 2}, 3));
    CHECK(expect_list(c, 1, 0, (int64_t[]){3, 4, 5}, 3));
    CHECK(expect_list(c, 2, 0, (int64_t[]){6, 7}, 2));
    CHECK(expect_list(c, 3, 5, (int64_t[]){8, 9}, 2));
    for (int64_t n = 0; n <= 13; n++)
        for (int world = 1; world <= 6; world++) {
            int64_t next = 0;
            for (int r = 0; r < world; r++) {
                c.size = n;
                c.world = world;
                c.rank = r;
                ddpc_sampler *s = make(c);
                if (!s)
                    return;
                int64_t len = ddpc_sampler_len(s);
                CHECK(len == n / world || len == n / world + 1);
                for (int64_t k = 0; k < len; k++)
                    CHECK_EQ_INT(ddpc_sampler_indices(s)[k], next++);
                ddpc_sampler_destroy(s);
            }
            CHECK_EQ_INT(next, n); /* every sample exactly once, in order */
        }
}

/* docs/data.md example 3: tasks of 5, 9, 3, 4, 4 samples over 2 ranks. */
static void test_task_shard_balance(void)
{
    int64_t sizes[] = {5, 9, 3, 4, 4};
    ddpc_sampler_config c = ddpc_sampler_config_default();
    c.kind = DDPC_SAMPLER_TASK_SHARD;
    c.shuffle = false;
    c.num_sources = 5;
    c.sizes = sizes;
    c.world = 2; /* 9 -> r0, 5 -> r1, 4 (task 3) -> r1, 4 (task 4) -> r0 (tie), 3 -> r1 */
    CHECK(expect_list(c, 0, 0, (int64_t[]){5, 6, 7, 8, 9, 10, 11, 12, 13, 21, 22, 23, 24}, 13));
    CHECK(expect_list(c, 1, 0, (int64_t[]){0, 1, 2, 3, 4, 14, 15, 16, 17, 18, 19, 20}, 12));
    ddpc_sampler *s = make(c);
    if (s) {
        const int want[] = {1, 0, 1, 1, 0};
        for (int t = 0; t < 5; t++)
            CHECK_EQ_INT(ddpc_sampler_task_rank(s, t), want[t]);
        CHECK_EQ_INT(ddpc_sampler_task_rank(s, 5), -1);
        ddpc_sampler_destroy(s);
    }
    /* Larger: every sample once, whole tasks per rank, loads within the largest task. */
    int64_t many[12];
    for (int t = 0; t < 12; t++)
        many[t] = 1 + (t * 37) % 23;
    c.sizes = many;
    c.num_sources = 12;
    c.shuffle = true;
    c.world = 3;
    int seen[300] = {0};
    int64_t lo = INT64_MAX, hi = 0;
    for (int r = 0; r < 3; r++) {
        c.rank = r;
        s = make(c);
        if (!s)
            return;
        int64_t len = ddpc_sampler_len(s);
        lo = len < lo ? len : lo;
        hi = len > hi ? len : hi;
        for (int64_t k = 0; k < len; k++) {
            int64_t g = ddpc_sampler_indices(s)[k];
            int t = ddpc_sampler_source_of(s, g, NULL);
            CHECK_EQ_INT(ddpc_sampler_task_rank(s, t), r);
            if (g >= 0 && g < 300)
                seen[g]++;
        }
        ddpc_sampler_destroy(s);
    }
    int64_t total = 0;
    for (int t = 0; t < 12; t++)
        total += many[t];
    for (int64_t g = 0; g < total; g++)
        CHECK_EQ_INT(seen[g], 1);
    CHECK(hi - lo <= 23);
}

static void test_source_of(void)
{
    int64_t sizes[] = {3, 0, 2};
    ddpc_sampler_config c = ddpc_sampler_config_default();
    c.kind = DDPC_SAMPLER_TASK_SHARD;
    c.num_sources = 3;
    c.sizes = sizes;
    ddpc_sampler *s = make(c);
    if (!s)
        return;
    int64_t local = -1;
    CHECK_EQ_INT(ddpc_sampler_source_of(s, 2, &local), 0);
    CHECK_EQ_INT(local, 2);
    CHECK_EQ_INT(ddpc_sampler_source_of(s, 3, &local), 2);
    CHECK_EQ_INT(local, 0);
    CHECK_EQ_INT(ddpc_sampler_source_of(s, 5, &local), -1);
    CHECK_EQ_INT(ddpc_sampler_source_of(s, -1, &local), -1);
    CHECK_EQ_INT(ddpc_sampler_num_sources(s), 3);
    CHECK_EQ_INT(ddpc_sampler_source_size(s, 2), 2);
    CHECK_EQ_INT(ddpc_sampler_batch_size(s), 0);
    ddpc_sampler_destroy(s);
}

static void expect_error(ddpc_sampler_config c, const char *needle)
{
    ddpc_sampler *s = (ddpc_sampler *)1;
    CHECK_EQ_INT(ddpc_sampler_create(&c, &s), DDPC_EINVAL);
    CHECK(s == NULL);
    CHECK_STR_CONTAINS(ddpc_last_error(), needle);
}

static void test_argument_errors(void)
{
    int64_t live = ddpc_alloc_live();
    ddpc_sampler_config c = ddpc_sampler_config_default();
    c.size = 10;
    c.world = 2;
    c.rank = 2;
    expect_error(c, "rank 2");
    c.rank = -1;
    expect_error(c, "rank -1");
    c.rank = 0;
    c.world = 0;
    expect_error(c, "world");
    c.world = 1;
    c.size = -3;
    expect_error(c, "size");
    int64_t sizes[] = {10, 9}, left[] = {2, 7}, right[] = {8, 4};
    ddpc_sampler_config r = ddpc_sampler_config_default();
    r.kind = DDPC_SAMPLER_RANK_SPLIT;
    expect_error(r, "num_sources");
    r.num_sources = 2;
    r.sizes = sizes;
    r.left_index = left;
    r.right_index = right;
    expect_error(r, "left_index[1] = 7 is greater than right_index[1] = 4");
    right[1] = 7;
    right[0] = 11;
    expect_error(r, "right_index[0] = 11");
    right[0] = -2;
    expect_error(r, "right_index[0] = -2");
    right[0] = -1;
    left[0] = 12;
    expect_error(r, "left_index[0] = 12");
    left[0] = 0;
    r.down_sample_ratio = 0.0;
    expect_error(r, "down_sample_ratio");
    r.down_sample_ratio = 1.5;
    expect_error(r, "down_sample_ratio");
    r.down_sample_ratio = 1.0;
    r.streaming = true;
    r.shuffle = false;
    expect_error(r, "batch_size");
    r.batch_size = 2;
    r.shuffle = true;
    expect_error(r, "shuffle");
    ddpc_sampler_kind k;
    CHECK_EQ_INT(ddpc_sampler_kind_parse("rank_split", &k), DDPC_OK);
    CHECK_EQ_INT(k, DDPC_SAMPLER_RANK_SPLIT);
    CHECK_EQ_INT(ddpc_sampler_kind_parse("random", &k), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "'random'");
    CHECK(strcmp(ddpc_sampler_kind_name(DDPC_SAMPLER_TASK_SHARD), "task_shard") == 0);
    CHECK_EQ_INT(ddpc_alloc_live(), live); /* failed creates leak nothing */
}

static void test_out_of_memory(void)
{
    int64_t sizes[] = {50, 30};
    ddpc_sampler_config c = ddpc_sampler_config_default();
    c.kind = DDPC_SAMPLER_RANK_SPLIT;
    c.num_sources = 2;
    c.sizes = sizes;
    c.down_sample_ratio = 0.5;
    int64_t live = ddpc_alloc_live();
    int failures = 0;
    for (int n = 0; n < 12; n++) {
        ddpc_sampler *s = NULL;
        ddpc_alloc_fail_after(n);
        ddpc_status st = ddpc_sampler_create(&c, &s);
        ddpc_alloc_fail_after(-1);
        if (st == DDPC_ENOMEM) {
            failures++;
            CHECK(s == NULL);
        } else {
            CHECK_EQ_INT(st, DDPC_OK);
        }
        ddpc_sampler_destroy(s);
        CHECK_EQ_INT(ddpc_alloc_live(), live);
    }
    CHECK(failures >= 5);
}

int main(void)
{
    RUN_TEST(test_distributed_hand_examples);
    RUN_TEST(test_distributed_matches_torch);
    RUN_TEST(test_distributed_coverage);
    RUN_TEST(test_distributed_epochs_and_determinism);
    RUN_TEST(test_case_exact_shards);
    RUN_TEST(test_task_shard_balance);
    RUN_TEST(test_source_of);
    RUN_TEST(test_argument_errors);
    RUN_TEST(test_out_of_memory);
    return check_summary();
}
