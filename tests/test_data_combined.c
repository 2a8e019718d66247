// SPDX-License-Identifier: MIT
/* Tests for src/data/combined_loader.c on the example of Lightning's CombinedLoader docstring
 * (loaders over range(6) with batch 4 and range(15) with batch 5) in all four modes, cycling of
 * several short loaders, epochs, empty loaders, error pass-through and argument errors. Loaders
 * run with 0 and 2 workers, so the TSan build also covers restarts of prefetching loaders. */
#include <ddpc/alloc.h>
#include <ddpc/combined.h>

#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "data/dataset_impl.h" /* to make a dataset fail on purpose */

#define MAX_TASKS 4

typedef struct {
    int n;
    ddpc_dataset *ds[MAX_TASKS];
    ddpc_sampler *s[MAX_TASKS];
    ddpc_loader *l[MAX_TASKS];
} tasks;

/* Task i: a dataset of sizes[i] samples, sampler `kind` (world 1), loader with batch bs[i].
 * Datasets cannot be empty, so size 0 is a 1-sample dataset behind a sampler that yields nothing
 * (rank 1 of 2 with drop_last: floor(1 / 2) = 0). */
static int make_tasks(tasks *t, int n, const int64_t *sizes, const int64_t *bs,
                      ddpc_sampler_kind kind, int workers)
{
    memset(t, 0, sizeof *t);
    t->n = n;
    for (int i = 0; i < n; i++) {
        ddpc_sampler_config sc = ddpc_sampler_config_default();
        sc.kind = sizes[i] > 0 ? kind : DDPC_SAMPLER_DISTRIBUTED;
        sc.size = sizes[i] > 0 ? sizes[i] : 1;
        sc.seed = 10 + (uint64_t)i;
        if (sizes[i] == 0) {
            sc.world = 2;
            sc.rank = 1;
            sc.drop_last = true;
        }
        ddpc_loader_config lc = ddpc_loader_config_default();
        lc.batch_size = bs[i];
        lc.num_workers = workers;
        const ddpc_dataset *one[1];
        if (ddpc_dataset_synthetic_images_create(&t->ds[i], sc.size, 1, 2, 2, 3, 7, true) !=
                DDPC_OK ||
            ddpc_sampler_create(&sc, &t->s[i]) != DDPC_OK ||
            (one[0] = t->ds[i], ddpc_loader_create(one, 1, t->s[i], &lc, &t->l[i])) != DDPC_OK) {
            fprintf(stderr, "setup: %s\n", ddpc_last_error());
            return 0;
        }
    }
    return 1;
}

static void free_tasks(tasks *t)
{
    for (int i = 0; i < t->n; i++) {
        ddpc_loader_destroy(t->l[i]);
        ddpc_sampler_destroy(t->s[i]);
        ddpc_dataset_destroy(t->ds[i]);
    }
}

static const char *const names[MAX_TASKS] = {"a", "b", "c", "d"};

/* 1 if batch b holds exactly the indices [first, first + n) (NULL b matches n == 0). */
static int holds(const ddpc_batch *b, int64_t first, int64_t n)
{
    if (!b)
        return n == 0;
    int ok = b->n == n;
    for (int64_t i = 0; ok && i < n; i++)
        ok = b->idx[i] == first + i;
    return ok;
}

/* Lightning's docstring example: expected rows per step as {a first, a n, b first, b n}. */
static void run_lightning_example(ddpc_combined_mode mode, int workers, const int64_t (*want)[4],
                                  int64_t steps)
{
    tasks t;
    ddpc_combined *c = NULL;
    if (make_tasks(&t, 2, (int64_t[]){6, 15}, (int64_t[]){4, 5}, DDPC_SAMPLER_CASE, workers) &&
        ddpc_combined_create(t.l, names, 2, mode, &c) == DDPC_OK) {
        CHECK_EQ_INT(ddpc_combined_len(c), steps);
        for (int epoch = 0; epoch < 2; epoch++) {
            CHECK_EQ_INT(ddpc_combined_start_epoch(c, epoch), DDPC_OK);
            const ddpc_combined_step *st;
            int64_t k = 0;
            double wait = 0;
            while (ddpc_combined_next(c, &st) == DDPC_OK && st) {
                if (k >= steps) {
                    k++;
                    continue;
                }
                CHECK_EQ_INT(st->step, k);
                CHECK(holds(st->batches[0], want[k][0], want[k][1]));
                CHECK(holds(st->batches[1], want[k][2], want[k][3]));
                wait += st->wait_s;
                k++;
            }
            CHECK_EQ_INT(k, steps);
            CHECK_NEAR(ddpc_combined_epoch_wait(c), wait, 1e-12);
        }
    } else {
        CHECK(0);
    }
    ddpc_combined_destroy(c);
    free_tasks(&t);
}

static void test_lightning_modes(void)
{
    static const int64_t cycle[][4] = {{0, 4, 0, 5}, {4, 2, 5, 5}, {0, 4, 10, 5}};
    static const int64_t max[][4] = {{0, 4, 0, 5}, {4, 2, 5, 5}, {0, 0, 10, 5}};
    static const int64_t min[][4] = {{0, 4, 0, 5}, {4, 2, 5, 5}};
    for (int w = 0; w <= 2; w += 2) {
        run_lightning_example(DDPC_COMBINED_MAX_SIZE_CYCLE, w, cycle, 3);
        run_lightning_example(DDPC_COMBINED_MAX_SIZE, w, max, 3);
        run_lightning_example(DDPC_COMBINED_MIN_SIZE, w, min, 2);
    }
}

/* sequential: (batch, batch_idx, dataloader_idx) = ([0..3], 0, 0), ([4, 5], 1, 0),
 * ([0..4], 0, 1), ([5..9], 1, 1), ([10..14], 2, 1). */
static void test_lightning_sequential(void)
{
    static const int64_t want[][4] = {{0, 0, 0, 4},
                                      {0, 1, 4, 2},
                                      {1, 0, 0, 5},
                                      {1, 1, 5, 5},
                                      {1, 2, 10, 5}}; /* task, index, first, n */
    for (int w = 0; w <= 2; w += 2) {
        tasks t;
        ddpc_combined *c = NULL;
        if (!make_tasks(&t, 2, (int64_t[]){6, 15}, (int64_t[]){4, 5}, DDPC_SAMPLER_CASE, w) ||
            ddpc_combined_create(t.l, names, 2, DDPC_COMBINED_SEQUENTIAL, &c) != DDPC_OK) {
            CHECK(0);
            free_tasks(&t);
            continue;
        }
        CHECK_EQ_INT(ddpc_combined_len(c), 5);
        CHECK_EQ_INT(ddpc_combined_start_epoch(c, 0), DDPC_OK);
        const ddpc_combined_step *st;
        int k = 0;
        while (ddpc_combined_next(c, &st) == DDPC_OK && st && k < 5) {
            int task = (int)want[k][0];
            CHECK_EQ_INT(st->task, task);
            CHECK_EQ_INT(st->index, want[k][1]);
            CHECK_EQ_INT(st->step, k);
            CHECK(holds(st->batches[task], want[k][2], want[k][3]));
            CHECK(st->batches[1 - task] == NULL);
            k++;
        }
        CHECK_EQ_INT(k, 5);
        CHECK(st == NULL);
        ddpc_combined_destroy(c);
        free_tasks(&t);
    }
}

/* Three shuffled tasks of 1, 3 and 2 batches in max_size_cycle: a cycled loader repeats its
 * epoch's order; a new epoch brings a new order; an empty task is skipped by sequential. */
static void test_cycle_and_epochs(void)
{
    tasks t;
    ddpc_combined *c = NULL;
    if (!make_tasks(&t, 3, (int64_t[]){4, 12, 8}, (int64_t[]){4, 4, 4}, DDPC_SAMPLER_DISTRIBUTED,
                    2) ||
        ddpc_combined_create(t.l, names, 3, DDPC_COMBINED_MAX_SIZE_CYCLE, &c) != DDPC_OK) {
        CHECK(0);
        free_tasks(&t);
        return;
    }
    int64_t first[2][3][4]; /* epoch, task, first index of each batch in that task's order */
    for (int epoch = 0; epoch < 2; epoch++) {
        CHECK_EQ_INT(ddpc_combined_start_epoch(c, epoch), DDPC_OK);
        const ddpc_combined_step *st;
        int64_t k = 0;
        while (ddpc_combined_next(c, &st) == DDPC_OK && st) {
            const int64_t want_batch[3] = {0, k, k % 2}; /* task lengths 1, 3, 2 */
            for (int task = 0; task < 3; task++) {
                const ddpc_batch *b = st->batches[task];
                CHECK(b != NULL);
                if (!b)
                    continue;
                CHECK_EQ_INT(b->index, want_batch[task]);
                CHECK_EQ_INT(b->epoch, epoch);
                if (k < 4 && b->index == k)
                    first[epoch][task][k] = b->idx[0];
                if (k > b->index) /* a cycled batch repeats the first pass */
                    CHECK_EQ_INT(b->idx[0], first[epoch][task][b->index]);
            }
            k++;
        }
        CHECK_EQ_INT(k, 3);
    }
    CHECK(first[0][1][0] != first[1][1][0] || first[0][1][1] != first[1][1][1] ||
          first[0][1][2] != first[1][1][2]);
    ddpc_combined_destroy(c);
    free_tasks(&t);
}

static void test_empty_loader(void)
{
    tasks t;
    ddpc_combined *c = NULL;
    if (!make_tasks(&t, 3, (int64_t[]){5, 0, 3}, (int64_t[]){2, 2, 2}, DDPC_SAMPLER_CASE, 0)) {
        free_tasks(&t);
        CHECK(0);
        return;
    }
    CHECK_EQ_INT(ddpc_combined_create(t.l, names, 3, DDPC_COMBINED_MAX_SIZE_CYCLE, &c), DDPC_OK);
    if (c) {
        CHECK_EQ_INT(ddpc_combined_start_epoch(c, 0), DDPC_EINVAL);
        CHECK_STR_CONTAINS(ddpc_last_error(), "task 'b' has no batches");
    }
    ddpc_combined_destroy(c);
    c = NULL;
    const int want_task[] = {0, 0, 0, 2, 2};
    CHECK_EQ_INT(ddpc_combined_create(t.l, names, 3, DDPC_COMBINED_SEQUENTIAL, &c), DDPC_OK);
    if (c) {
        CHECK_EQ_INT(ddpc_combined_start_epoch(c, 0), DDPC_OK);
        const ddpc_combined_step *st;
        int k = 0;
        while (ddpc_combined_next(c, &st) == DDPC_OK && st && k < 5)
            CHECK_EQ_INT(st->task, want_task[k++]);
        CHECK_EQ_INT(k, 5);
    }
    ddpc_combined_destroy(c);
    c = NULL;
    CHECK_EQ_INT(ddpc_combined_create(t.l, names, 3, DDPC_COMBINED_MIN_SIZE, &c), DDPC_OK);
    if (c) {
        CHECK_EQ_INT(ddpc_combined_start_epoch(c, 0), DDPC_OK);
        const ddpc_combined_step *st = (const ddpc_combined_step *)1;
        CHECK_EQ_INT(ddpc_combined_next(c, &st), DDPC_OK);
        CHECK(st == NULL); /* the shortest has no batch: no steps */
    }
    ddpc_combined_destroy(c);
    free_tasks(&t);
}

static void test_errors(void)
{
    int64_t live = ddpc_alloc_live();
    tasks t;
    if (!make_tasks(&t, 2, (int64_t[]){6, 15}, (int64_t[]){4, 5}, DDPC_SAMPLER_CASE, 0)) {
        free_tasks(&t);
        CHECK(0);
        return;
    }
    ddpc_combined *c = (ddpc_combined *)1;
    const char *dup[] = {"cls", "cls"}, *blank[] = {"cls", ""};
    CHECK_EQ_INT(ddpc_combined_create(t.l, dup, 2, DDPC_COMBINED_MIN_SIZE, &c), DDPC_EINVAL);
    CHECK(c == NULL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "'cls' is used twice");
    CHECK_EQ_INT(ddpc_combined_create(t.l, blank, 2, DDPC_COMBINED_MIN_SIZE, &c), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "task 1 has no name");
    ddpc_loader *none[] = {t.l[0], NULL};
    CHECK_EQ_INT(ddpc_combined_create(none, names, 2, DDPC_COMBINED_MIN_SIZE, &c), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "task 'b' has no loader");
    CHECK_EQ_INT(ddpc_combined_create(t.l, names, 2, DDPC_COMBINED_COUNT, &c), DDPC_EINVAL);
    ddpc_combined_mode m;
    CHECK_EQ_INT(ddpc_combined_mode_parse("max_size_cycle", &m), DDPC_OK);
    CHECK_EQ_INT(m, DDPC_COMBINED_MAX_SIZE_CYCLE);
    CHECK_EQ_INT(ddpc_combined_mode_parse("cycle", &m), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "'cycle'");
    CHECK(strcmp(ddpc_combined_mode_name(DDPC_COMBINED_SEQUENTIAL), "sequential") == 0);
    /* A loader's error passes through with its own message. */
    CHECK_EQ_INT(ddpc_combined_create(t.l, names, 2, DDPC_COMBINED_MAX_SIZE, &c), DDPC_OK);
    const ddpc_combined_step *st = NULL;
    CHECK_EQ_INT(ddpc_combined_next(c, &st), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "before start_epoch");
    CHECK_EQ_INT(ddpc_combined_num_tasks(c), 2);
    CHECK(strcmp(ddpc_combined_task_name(c, 1), "b") == 0);
    CHECK(ddpc_combined_task_name(c, 2) == NULL);
    t.ds[1]->n = 7; /* synchronous loaders: no thread reads it meanwhile */
    CHECK_EQ_INT(ddpc_combined_start_epoch(c, 0), DDPC_OK);
    CHECK_EQ_INT(ddpc_combined_next(c, &st), DDPC_OK);
    CHECK_EQ_INT(ddpc_combined_next(c, &st), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "index 7");
    t.ds[1]->n = 15;
    ddpc_combined_destroy(c);
    free_tasks(&t);
    CHECK_EQ_INT(ddpc_alloc_live(), live);
}

int main(void)
{
    RUN_TEST(test_lightning_modes);
    RUN_TEST(test_lightning_sequential);
    RUN_TEST(test_cycle_and_epochs);
    RUN_TEST(test_empty_loader);
    RUN_TEST(test_errors);
    return check_summary();
}
