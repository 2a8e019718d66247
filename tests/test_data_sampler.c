/* Tests for src/data/sampler*.c: coverage and equal counts across ranks, torch's padding and
 * drop_last rules, epoch dependence, determinism, the hand-computed examples of docs/data.md for
 * rank_split (bounds, down-sampling, streaming), case and task_shard, and argument errors. */
#include <ddpc/alloc.h>
#include <ddpc/sampler.h>

#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "golden/sampler_golden.h"

#define MAXN 4096

static ddpc_sampler *make(ddpc_sampler_config c)
{
    ddpc_sampler *s = NULL;
    ddpc_status st = ddpc_sampler_create(&c, &s);
    if (st != DDPC_OK)
        fprintf(stderr, "sampler_create: %s\n", ddpc_last_error());
    return s;
}

/* Checks that rank `rank`'s list at `epoch` equals want (n). */
static int expect_list(ddpc_sampler_config c, int rank, int64_t epoch, const int64_t *want,
                       int64_t n)
{
    c.rank = rank;
    ddpc_sampler *s = make(c);
    if (!s)
        return 0;
    ddpc_sampler_set_epoch(s, epoch);
    int ok = ddpc_sampler_len(s) == n;
    for (int64_t k = 0; ok && k < n; k++)
        ok = ddpc_sampler_indices(s)[k] == want[k];
    if (!ok) {
        fprintf(stderr, "rank %d got:", rank);
        for (int64_t k = 0; k < ddpc_sampler_len(s); k++)
            fprintf(stderr, " %lld", (long long)ddpc_sampler_indices(s)[k]);
        fprintf(stderr, "\n");
    }
    ddpc_sampler_destroy(s);
    return ok;
}

/* padded (world * per) = the ranks' lists interleaved back into torch's padded order
 * (entry r + k * world from rank r's k-th index); returns per, or -1 if counts differ. */
static int64_t gather_strided(ddpc_sampler_config c, int64_t epoch, int64_t *padded)
{
    int64_t per = -1;
    for (int r = 0; r < c.world; r++) {
        c.rank = r;
        ddpc_sampler *s = make(c);
        if (!s)
            return -1;
        ddpc_sampler_set_epoch(s, epoch);
        int64_t len = ddpc_sampler_len(s);
        if (per >= 0 && len != per)
            per = -2;
        else if (per != -2)
            per = len;
        for (int64_t k = 0; per >= 0 && k < len; k++)
            padded[r + k * c.world] = ddpc_sampler_indices(s)[k];
        ddpc_sampler_destroy(s);
    }
    return per < 0 ? -1 : per;
}

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
    RUN_TEST(test_rank_split_bounds_and_down_sampling);
    RUN_TEST(test_rank_split_shuffled_subset);
    RUN_TEST(test_rank_split_streaming);
    RUN_TEST(test_rank_split_streaming_single_source);
    RUN_TEST(test_case_exact_shards);
    RUN_TEST(test_task_shard_balance);
    RUN_TEST(test_source_of);
    RUN_TEST(test_argument_errors);
    RUN_TEST(test_out_of_memory);
    return check_summary();
}
