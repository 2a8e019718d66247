// SPDX-License-Identifier: MIT
/* Tests for src/data/loader*.c: batches equal the synchronous order for 0, 1 and 3 workers,
 * drop_last and the partial last batch, token batches, several datasets behind one sampler,
 * restarting an epoch mid-way, destroying mid-epoch, recorded data-wait time, no allocation
 * after create, a worker's dataset error surfacing in next(), argument and memory errors. */
#include <ddpc/alloc.h>
#include <ddpc/loader.h>

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "check.h"
#include "data/dataset_impl.h" /* to make a dataset fail on purpose (test_worker_error) */

static ddpc_dataset *images(int64_t n, uint64_t seed)
{
    ddpc_dataset *d = NULL;
    if (ddpc_dataset_synthetic_images_create(&d, n, 1, 4, 3, 5, seed, true) != DDPC_OK)
        fprintf(stderr, "dataset: %s\n", ddpc_last_error());
    return d;
}

static ddpc_sampler *sampler(ddpc_sampler_config c)
{
    ddpc_sampler *s = NULL;
    if (ddpc_sampler_create(&c, &s) != DDPC_OK)
        fprintf(stderr, "sampler: %s\n", ddpc_last_error());
    return s;
}

static ddpc_loader *loader(const ddpc_dataset *const *ds, int n, ddpc_sampler *s, int64_t bs,
                           int workers, int prefetch, bool drop_last)
{
    ddpc_loader_config c = ddpc_loader_config_default();
    c.batch_size = bs;
    c.num_workers = workers;
    c.prefetch_factor = prefetch;
    c.drop_last = drop_last;
    ddpc_loader *l = NULL;
    if (ddpc_loader_create(ds, n, s, &c, &l) != DDPC_OK)
        fprintf(stderr, "loader: %s\n", ddpc_last_error());
    return l;
}

/* Checks batch b of loader l against the sampler's list and direct dataset reads; 1 if equal. */
static int batch_matches(const ddpc_batch *b, const ddpc_dataset *const *ds, const ddpc_sampler *s,
                         int64_t k, int64_t bs)
{
    const int64_t *want = ddpc_sampler_indices(s) + k * bs;
    int64_t shape[3];
    ddpc_dataset_sample_shape(ds[0], shape);
    bool img = ddpc_dataset_kind_of(ds[0]) == DDPC_DATASET_IMAGES;
    int64_t per = img ? shape[0] * shape[1] * shape[2] : shape[0];
    float x[64];
    int32_t tok[64], tgt[64];
    int ok = b->index == k;
    for (int64_t i = 0; ok && i < b->n; i++) {
        int64_t local;
        int d = ddpc_sampler_source_of(s, want[i], &local);
        ok = b->idx[i] == want[i] && d >= 0 && per <= 64 &&
             ddpc_dataset_get_batch(ds[d], &local, 1, img ? x : NULL, img ? NULL : tok, tgt) ==
                 DDPC_OK;
        if (ok && img)
            ok = memcmp(b->x + i * per, x, (size_t)per * sizeof *x) == 0 && b->targets[i] == tgt[0];
        if (ok && !img)
            ok = memcmp(b->tokens + i * per, tok, (size_t)per * sizeof *tok) == 0 &&
                 memcmp(b->targets + i * per, tgt, (size_t)per * sizeof *tgt) == 0;
    }
    if (!ok)
        fprintf(stderr, "batch %lld (index %lld) differs from the sampler's order\n", (long long)k,
                (long long)b->index);
    return ok;
}

/* Runs a whole epoch and checks every batch; returns the number of batches or -1. */
static int64_t check_epoch(ddpc_loader *l, const ddpc_dataset *const *ds, const ddpc_sampler *s,
                           int64_t epoch)
{
    if (ddpc_loader_start_epoch(l, epoch) != DDPC_OK)
        return -1;
    int64_t bs = ddpc_loader_batch_size(l), k = 0, len = ddpc_sampler_len(s);
    const ddpc_batch *b = NULL;
    while (ddpc_loader_next(l, &b) == DDPC_OK && b) {
        CHECK(batch_matches(b, ds, s, k, bs));
        CHECK_EQ_INT(b->epoch, epoch);
        CHECK_EQ_INT(b->n, len - k * bs < bs ? len - k * bs : bs);
        k++;
    }
    CHECK(b == NULL);
    CHECK_EQ_INT(ddpc_loader_next(l, &b), DDPC_OK); /* stays at the end */
    CHECK(b == NULL);
    return k;
}

static void test_order_independent_of_workers(void)
{
    ddpc_dataset *d = images(103, 1);
    ddpc_sampler_config sc = ddpc_sampler_config_default();
    sc.size = 103;
    sc.world = 2;
    sc.rank = 1;
    sc.seed = 4;
    ddpc_sampler *s = sampler(sc);
    if (!d || !s)
        return;
    const ddpc_dataset *ds[] = {d};
    const int workers[] = {0, 1, 3, 3}, prefetch[] = {2, 1, 1, 2};
    for (int w = 0; w < 4; w++)
        for (int drop = 0; drop <= 1; drop++) {
            ddpc_loader *l = loader(ds, 1, s, 8, workers[w], prefetch[w], drop);
            if (!l)
                continue;
            /* 52 samples for rank 1: 6 full batches and one of 4, or 6 with drop_last. */
            CHECK_EQ_INT(ddpc_loader_len(l), drop ? 6 : 7);
            for (int64_t epoch = 0; epoch < 3; epoch++)
                CHECK_EQ_INT(check_epoch(l, ds, s, epoch), drop ? 6 : 7);
            ddpc_loader_destroy(l);
        }
    ddpc_sampler_destroy(s);
    ddpc_dataset_destroy(d);
}

static void test_token_batches(void)
{
    ddpc_dataset *d = NULL;
    CHECK_EQ_INT(ddpc_dataset_synthetic_tokens_create(&d, 1000, 50, 16, 3, true), DDPC_OK);
    ddpc_sampler_config sc = ddpc_sampler_config_default();
    sc.size = d ? ddpc_dataset_size(d) : 0; /* 62 windows */
    ddpc_sampler *s = sampler(sc);
    if (!d || !s)
        return;
    const ddpc_dataset *ds[] = {d};
    for (int w = 0; w <= 2; w += 2) {
        ddpc_loader *l = loader(ds, 1, s, 5, w, 2, false);
        if (!l)
            continue;
        CHECK_EQ_INT(check_epoch(l, ds, s, 1), 13);
        ddpc_loader_destroy(l);
    }
    ddpc_sampler_destroy(s);
    ddpc_dataset_destroy(d);
}

/* Two datasets behind one rank_split sampler: streaming batches are single-source. */
static void test_several_datasets(void)
{
    ddpc_dataset *a = images(30, 1), *b = images(22, 2);
    int64_t sizes[] = {30, 22};
    ddpc_sampler_config sc = ddpc_sampler_config_default();
    sc.kind = DDPC_SAMPLER_RANK_SPLIT;
    sc.num_sources = 2;
    sc.sizes = sizes;
    ddpc_sampler *mixed = sampler(sc);
    sc.shuffle = false;
    sc.streaming = true;
    sc.batch_size = 4;
    ddpc_sampler *stream = sampler(sc);
    if (!a || !b || !mixed || !stream)
        return;
    const ddpc_dataset *ds[] = {a, b};
    for (int w = 0; w <= 3; w += 3) {
        ddpc_loader *l = loader(ds, 2, mixed, 8, w, 2, false);
        if (l)
            CHECK_EQ_INT(check_epoch(l, ds, mixed, 2), 7);
        ddpc_loader_destroy(l);
        l = loader(ds, 2, stream, 4, w, 2, false);
        if (!l)
            continue;
        CHECK_EQ_INT(check_epoch(l, ds, stream, 0), 14); /* 8 + 6 batches */
        CHECK_EQ_INT(ddpc_loader_start_epoch(l, 0), DDPC_OK);
        const ddpc_batch *bt;
        int64_t k = 0;
        while (ddpc_loader_next(l, &bt) == DDPC_OK && bt) /* round-robin A B A B ... A A */
            CHECK_EQ_INT(bt->source, k++ < 12 ? (k - 1) % 2 : 0);
        ddpc_loader_destroy(l);
    }
    ddpc_sampler_destroy(mixed);
    ddpc_sampler_destroy(stream);
    ddpc_dataset_destroy(a);
    ddpc_dataset_destroy(b);
}

static void test_restart_and_destroy_mid_epoch(void)
{
    ddpc_dataset *d = images(200, 3);
    ddpc_sampler_config sc = ddpc_sampler_config_default();
    sc.size = 200;
    ddpc_sampler *s = sampler(sc);
    if (!d || !s)
        return;
    const ddpc_dataset *ds[] = {d};
    int64_t live = ddpc_alloc_live();
    for (int w = 0; w <= 3; w += 3) {
        ddpc_loader *l = loader(ds, 1, s, 7, w, 2, false);
        if (!l)
            continue;
        const ddpc_batch *b;
        CHECK_EQ_INT(ddpc_loader_start_epoch(l, 0), DDPC_OK);
        for (int k = 0; k < 3; k++)
            CHECK(ddpc_loader_next(l, &b) == DDPC_OK && b && batch_matches(b, ds, s, k, 7));
        CHECK_EQ_INT(check_epoch(l, ds, s, 1), 29); /* restart mid-epoch: a full, correct epoch */
        CHECK_EQ_INT(ddpc_loader_start_epoch(l, 1), DDPC_OK);
        CHECK(ddpc_loader_next(l, &b) == DDPC_OK && b && batch_matches(b, ds, s, 0, 7));
        CHECK_EQ_INT(check_epoch(l, ds, s, 0), 29);
        CHECK_EQ_INT(ddpc_loader_start_epoch(l, 2), DDPC_OK);
        CHECK(ddpc_loader_next(l, &b) == DDPC_OK && b);
        ddpc_loader_destroy(l); /* mid-epoch, workers busy prefetching */
        l = loader(ds, 1, s, 7, w, 2, false);
        ddpc_loader_destroy(l); /* never started */
        l = loader(ds, 1, s, 7, w, 2, false);
        if (l)
            CHECK_EQ_INT(ddpc_loader_start_epoch(l, 0), DDPC_OK);
        ddpc_loader_destroy(l); /* started, nothing taken */
    }
    CHECK_EQ_INT(ddpc_alloc_live(), live);
    ddpc_sampler_destroy(s);
    ddpc_dataset_destroy(d);
}

static void sleep_ms(int ms)
{
    struct timespec t = {0, ms * 1000000L};
    nanosleep(&t, NULL);
}

/* Waits are recorded per batch and summed per epoch; the epoch allocates nothing. */
static void test_wait_time_and_no_allocation(void)
{
    ddpc_dataset *d = NULL;
    CHECK_EQ_INT(ddpc_dataset_synthetic_images_create(&d, 64, 3, 32, 32, 10, 5, true), DDPC_OK);
    ddpc_sampler_config sc = ddpc_sampler_config_default();
    sc.size = 64;
    ddpc_sampler *s = sampler(sc);
    if (!d || !s)
        return;
    const ddpc_dataset *ds[] = {d};
    for (int w = 0; w <= 2; w += 2) {
        ddpc_loader *l = loader(ds, 1, s, 16, w, 2, false);
        if (!l)
            continue;
        int64_t allocs = ddpc_alloc_total();
        for (int64_t epoch = 0; epoch < 3; epoch++) {
            CHECK_EQ_INT(ddpc_loader_start_epoch(l, epoch), DDPC_OK);
            const ddpc_batch *b;
            double sum = 0;
            int n = 0;
            while (ddpc_loader_next(l, &b) == DDPC_OK && b) {
                CHECK(b->wait_s >= 0);
                sum += b->wait_s;
                n++;
                if (w > 0)
                    sleep_ms(2); /* "compute" while the workers prefetch */
            }
            CHECK_EQ_INT(n, 4);
            CHECK_NEAR(ddpc_loader_epoch_wait(l), sum, 1e-12);
            if (w == 0) /* synchronous: the caller waited for every copy */
                CHECK(ddpc_loader_epoch_wait(l) > 0);
        }
        CHECK_EQ_INT(ddpc_alloc_total(), allocs);
        ddpc_loader_destroy(l);
    }
    ddpc_sampler_destroy(s);
    ddpc_dataset_destroy(d);
}

/* A dataset error in a worker reaches next() in order, with its message, and sticks. */
static void test_worker_error(void)
{
    ddpc_dataset *d = images(100, 6);
    ddpc_sampler_config sc = ddpc_sampler_config_default();
    sc.kind = DDPC_SAMPLER_CASE;
    sc.size = 100;
    ddpc_sampler *s = sampler(sc);
    if (!d || !s)
        return;
    const ddpc_dataset *ds[] = {d};
    for (int w = 0; w <= 3; w += 3) {
        ddpc_loader *l = loader(ds, 1, s, 10, w, 2, false);
        if (!l)
            continue;
        d->n = 55; /* the dataset now refuses indices >= 55: batch 5 fails */
        CHECK_EQ_INT(ddpc_loader_start_epoch(l, 0), DDPC_OK);
        const ddpc_batch *b = NULL;
        for (int k = 0; k < 5; k++)
            CHECK(ddpc_loader_next(l, &b) == DDPC_OK && b && b->index == k);
        CHECK_EQ_INT(ddpc_loader_next(l, &b), DDPC_EINVAL);
        CHECK(b == NULL);
        CHECK_STR_CONTAINS(ddpc_last_error(), "index 55");
        ddpc_clear_error();
        CHECK_EQ_INT(ddpc_loader_next(l, &b), DDPC_EINVAL);
        CHECK_STR_CONTAINS(ddpc_last_error(), "index 55");
        CHECK_EQ_INT(ddpc_loader_start_epoch(l, 1), DDPC_OK); /* a new epoch starts clean */
        for (int k = 0; k < 5; k++)
            CHECK(ddpc_loader_next(l, &b) == DDPC_OK && b && batch_matches(b, ds, s, k, 10));
        ddpc_loader_destroy(l);
        d->n = 100; /* only once no worker can read it */
    }
    ddpc_sampler_destroy(s);
    ddpc_dataset_destroy(d);
}

static void expect_create_error(const ddpc_dataset *const *ds, int n, ddpc_sampler *s,
                                ddpc_loader_config c, const char *needle)
{
    ddpc_loader *l = (ddpc_loader *)1;
    CHECK_EQ_INT(ddpc_loader_create(ds, n, s, &c, &l), DDPC_EINVAL);
    CHECK(l == NULL);
    CHECK_STR_CONTAINS(ddpc_last_error(), needle);
}

static void test_argument_errors(void)
{
    ddpc_dataset *d = images(20, 1), *other = images(20, 2), *tok = NULL;
    CHECK_EQ_INT(ddpc_dataset_synthetic_tokens_create(&tok, 21 * 4 + 1, 9, 4, 1, true), DDPC_OK);
    int64_t sizes[] = {20, 20};
    ddpc_sampler_config sc = ddpc_sampler_config_default();
    sc.size = 19;
    ddpc_sampler *s19 = sampler(sc);
    sc.kind = DDPC_SAMPLER_RANK_SPLIT;
    sc.num_sources = 2;
    sc.sizes = sizes;
    sc.shuffle = false;
    sc.streaming = true;
    sc.batch_size = 4;
    ddpc_sampler *two = sampler(sc);
    if (!d || !other || !tok || !s19 || !two)
        return;
    int64_t live = ddpc_alloc_live();
    ddpc_loader_config c = ddpc_loader_config_default();
    const ddpc_dataset *one[] = {d}, *pair[] = {d, other}, *mixed[] = {d, tok};
    expect_create_error(one, 1, s19, c, "dataset 0 has 20 samples but sampler source 0 has 19");
    expect_create_error(one, 1, two, c, "1 datasets but the sampler has 2 sources");
    expect_create_error(pair, 2, two, c, "batch_size 64 differs from the streaming sampler's 4");
    c.batch_size = 4;
    expect_create_error(mixed, 2, two, c, "dataset 1 has 21 samples"); /* sizes checked first */
    c.batch_size = 0;
    expect_create_error(pair, 2, two, c, "batch_size");
    c.batch_size = 4;
    c.num_workers = -1;
    expect_create_error(pair, 2, two, c, "num_workers");
    c.num_workers = 2;
    c.prefetch_factor = 0;
    expect_create_error(pair, 2, two, c, "prefetch_factor");
    c.prefetch_factor = 2;
    ddpc_loader *l = NULL;
    CHECK_EQ_INT(ddpc_loader_create(pair, 2, two, &c, &l), DDPC_OK);
    const ddpc_batch *b = NULL;
    if (l) {
        CHECK_EQ_INT(ddpc_loader_next(l, &b), DDPC_EINVAL);
        CHECK_STR_CONTAINS(ddpc_last_error(), "before start_epoch");
        CHECK_EQ_INT(ddpc_loader_start_epoch(l, -1), DDPC_EINVAL);
    }
    ddpc_loader_destroy(l);
    CHECK_EQ_INT(ddpc_alloc_live(), live);
    ddpc_sampler_destroy(s19);
    ddpc_sampler_destroy(two);
    ddpc_dataset_destroy(d);
    ddpc_dataset_destroy(other);
    ddpc_dataset_destroy(tok);
}

static void test_out_of_memory(void)
{
    ddpc_dataset *d = images(40, 1);
    ddpc_sampler_config sc = ddpc_sampler_config_default();
    sc.size = 40;
    ddpc_sampler *s = sampler(sc);
    if (!d || !s)
        return;
    const ddpc_dataset *ds[] = {d};
    ddpc_loader_config c = ddpc_loader_config_default();
    c.batch_size = 8;
    c.num_workers = 2;
    int64_t live = ddpc_alloc_live();
    int failures = 0;
    for (int n = 0; n < 30; n++) {
        ddpc_loader *l = NULL;
        ddpc_alloc_fail_after(n);
        ddpc_status st = ddpc_loader_create(ds, 1, s, &c, &l);
        ddpc_alloc_fail_after(-1);
        failures += st == DDPC_ENOMEM;
        CHECK(st == DDPC_OK || (st == DDPC_ENOMEM && l == NULL));
        ddpc_loader_destroy(l);
        CHECK_EQ_INT(ddpc_alloc_live(), live);
    }
    CHECK_EQ_INT(failures, 3 + 5 * 4 + 1); /* loader, datasets, slots; 5 slots x 4; threads */
    ddpc_sampler_destroy(s);
    ddpc_dataset_destroy(d);
}

int main(void)
{
    RUN_TEST(test_order_independent_of_workers);
    RUN_TEST(test_token_batches);
    RUN_TEST(test_several_datasets);
    RUN_TEST(test_restart_and_destroy_mid_epoch);
    RUN_TEST(test_wait_time_and_no_allocation);
    RUN_TEST(test_worker_error);
    RUN_TEST(test_argument_errors);
    RUN_TEST(test_out_of_memory);
    return check_summary();
}
