// SPDX-License-Identifier: MIT
/* DataParallel through the engine (cfg.dp_replicas): N replicas x batch N*b train the parameters
 * N DDP ranks x b train (forked shm ranks, dropout on: replica k draws rank k's rows and masks)
 * and one process x N*b trains (no dropout), to a relative difference <= 1e-5 after STEPS AdamW
 * steps, with and without gradient accumulation; one replica is the plain engine bit for bit; an
 * uneven split is the whole batch's mean; a warm step allocates nothing; errors name the replica;
 * bad configs and a failing allocator are refused cleanly. The DDP test runs first: forked ranks
 * need a parent that has not started OpenMP. */
#include "check.h"
#include "spawn.h"

#include <ddpc/alloc.h>
#include <ddpc/comm.h>
#include <ddpc/data.h>
#include <ddpc/engine.h>
#include <ddpc/models.h>
#include <ddpc/reducer.h>

#include <string.h>

enum { STEPS = 6, B = 4, MAX_N = 4, SAMPLES = 256, PIX = 36, CLASSES = 5 };

static ddpc_model *make_model(float dropout)
{
    ddpc_model_config c = ddpc_model_config_default();
    ddpc_mlp_config own = ddpc_mlp_config_default();
    c.type_config = &own;
    strcpy(c.type, "mlp");
    c.in_channels = 1, c.in_height = 6, c.in_width = 6, c.num_classes = CLASSES;
    own.hidden[0] = 16, own.hidden[1] = 8, own.n_hidden = 2;
    c.dropout = dropout;
    c.seed = 11;
    ddpc_model *m = NULL;
    return ddpc_model_create(&m, &c) == DDPC_OK ? m : NULL;
}

static ddpc_engine_config engine_config(int replicas, int64_t accum)
{
    ddpc_engine_config c = ddpc_engine_config_default();
    c.optim.type = DDPC_OPTIM_ADAMW;
    c.optim.lr = 0.01f;
    c.optim.weight_decay = 0.01f;
    c.accum_steps = accum;
    c.dp_replicas = replicas;
    c.timing = true;
    return c;
}

/* Row i of step s's global batch of `rows` rows. */
static int64_t row_index(int step, int64_t rows, int64_t i)
{
    return (step * rows + i * 7) % SAMPLES;
}

/* Trains STEPS steps. Every step's global batch has `rows` rows; this process takes the rows
 * `pick` says: every row (stride 1) or rows rank, rank + world, ... (DDP's rows for `rank`), in
 * `accum` equal micro-batches. Returns 0 on success. */
static int train(ddpc_engine *e, int64_t rows, int rank, int world, int64_t accum)
{
    ddpc_dataset *ds = NULL;
    if (ddpc_dataset_synthetic_images_create(&ds, SAMPLES, 1, 6, 6, CLASSES, 3, true) != DDPC_OK)
        return 1;
    int64_t mine = rows / world, micro = mine / accum;
    static float x[MAX_N * B * 4 * PIX];
    static int32_t y[MAX_N * B * 4];
    int rc = 0;
    for (int s = 0; s < STEPS && rc == 0; s++) {
        ddpc_engine_zero_grad(e);
        for (int64_t k = 0; k < accum; k++) {
            int64_t idx[MAX_N * B * 4];
            for (int64_t i = 0; i < micro; i++)
                idx[i] = row_index(s, rows, rank + world * (k * micro + i));
            rc |= ddpc_dataset_get_batch(ds, idx, micro, x, NULL, y) != DDPC_OK;
            ddpc_model_input in = {.n = micro, .x = x, .targets = y};
            ddpc_model_output out;
            if (ddpc_engine_pass(e, &in, k, 1.0f, k == accum - 1, &out) != DDPC_OK) {
                fprintf(stderr, "pass: %s\n", ddpc_last_error());
                rc = 1;
            }
        }
        ddpc_engine_step_info info;
        if (ddpc_engine_update(e, &info) != DDPC_OK) {
            fprintf(stderr, "update: %s\n", ddpc_last_error());
            rc = 1;
        }
    }
    ddpc_dataset_destroy(ds);
    return rc;
}

/* A fresh model trained through an engine of cfg on one process; its parameters into out. */
static size_t train_local(const ddpc_engine_config *cfg, float dropout, int64_t rows, int64_t accum,
                          float *out)
{
    ddpc_model *m = make_model(dropout);
    ddpc_engine *e = NULL;
    size_t n = 0;
    if (!m || ddpc_engine_create(m, NULL, 0, 1, cfg, &e) != DDPC_OK) {
        fprintf(stderr, "%s\n", ddpc_last_error());
    } else if (train(e, rows, 0, 1, accum) == 0) {
        n = ddpc_model_num_params(m);
        memcpy(out, ddpc_model_params(m), n * sizeof(float));
    }
    ddpc_engine_destroy(e);
    ddpc_model_destroy(m);
    return n;
}

/* ||a - b|| / ||b|| */
static double rel_diff(const float *a, const float *b, size_t n)
{
    double d = 0, r = 0;
    for (size_t i = 0; i < n; i++) {
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        r += (double)b[i] * b[i];
    }
    return sqrt(d / (r > 0 ? r : 1));
}

enum { MAX_PARAMS = 4096 };
static float ref[MAX_PARAMS], got[MAX_PARAMS];

/* One DDP rank: engine + reducer, the rows of its rank, dropout on; rank 0 writes its params. */
static int ddp_rank(int rank, int world, void *ctx)
{
    const char *path = ctx;
    ddpc_comm_env env;
    ddpc_pg *pg = NULL;
    ddpc_pg_config pc = ddpc_pg_config_default();
    pc.timeout_s = 30;
    ddpc_model *m = make_model(0.25f);
    ddpc_reducer *red = NULL;
    ddpc_engine *e = NULL;
    ddpc_engine_config cfg = engine_config(0, 1);
    ddpc_reducer_config rcfg = ddpc_reducer_config_default();
    int rc = 1;
    if (ddpc_comm_env_discover(&env) == DDPC_OK && ddpc_pg_create(&env, &pc, &pg) == DDPC_OK &&
        ddpc_reducer_create(pg, m, &rcfg, &red) == DDPC_OK &&
        ddpc_engine_create(m, red, rank, world, &cfg, &e) == DDPC_OK)
        rc = train(e, (int64_t)world * B, rank, world, 1);
    else
        fprintf(stderr, "rank %d: %s\n", rank, ddpc_last_error());
    if (rc == 0 && rank == 0) {
        size_t n = ddpc_model_num_params(m);
        FILE *f = fopen(path, "wb");
        rc = !f || fwrite(ddpc_model_params(m), sizeof(float), n, f) != n;
        if (f)
            fclose(f);
    }
    ddpc_engine_destroy(e);
    ddpc_reducer_destroy(red);
    ddpc_model_destroy(m);
    ddpc_pg_destroy(pg);
    return rc;
}

static void test_dp_matches_ddp_ranks_with_dropout(void)
{
    size_t n_ddp[MAX_N + 1] = {0};
    static float ddp[MAX_N + 1][MAX_PARAMS];
    for (int world = 2; world <= MAX_N; world += 2) {
        char path[] = "/tmp/ddpc_dp_XXXXXX";
        int fd = mkstemp(path);
        close(fd);
        CHECK_EQ_INT(spawn_ranks(world, 60.0, ddp_rank, path), 0);
        FILE *f = fopen(path, "rb");
        n_ddp[world] = f ? fread(ddp[world], sizeof(float), MAX_PARAMS, f) : 0;
        if (f)
            fclose(f);
        unlink(path);
    }
    for (int world = 2; world <= MAX_N; world += 2) {
        ddpc_engine_config cfg = engine_config(world, 1);
        size_t n = train_local(&cfg, 0.25f, (int64_t)world * B, 1, got);
        CHECK(n > 0);
        CHECK_EQ_INT(n, n_ddp[world]);
        double d = rel_diff(got, ddp[world], n);
        if (d > 1e-5)
            fprintf(stderr, "%d replicas vs %d DDP ranks: relative difference %g\n", world, world,
                    d);
        CHECK(d <= 1e-5);
    }
}

static void test_dp_matches_one_process(void)
{
    for (int reps = 2; reps <= MAX_N; reps++) {
        ddpc_engine_config plain = engine_config(0, 1), dp = engine_config(reps, 1);
        int64_t rows = (int64_t)reps * B;
        size_t n = train_local(&plain, 0.0f, rows, 1, ref);
        CHECK(n > 0);
        CHECK_EQ_INT(train_local(&dp, 0.0f, rows, 1, got), n);
        double d = rel_diff(got, ref, n);
        if (d > 1e-5)
            fprintf(stderr, "%d replicas vs one process: relative difference %g\n", reps, d);
        CHECK(d <= 1e-5);
    }
}

static void test_dp_with_accumulation(void)
{
    ddpc_engine_config plain = engine_config(0, 1), dp = engine_config(2, 2);
    size_t n = train_local(&plain, 0.0f, 4 * B, 1, ref);
    CHECK_EQ_INT(train_local(&dp, 0.0f, 4 * B, 2, got), n);
    CHECK(rel_diff(got, ref, n) <= 1e-5);
}

static void test_one_replica_is_the_plain_engine(void)
{
    ddpc_engine_config plain = engine_config(0, 1), dp = engine_config(1, 1);
    size_t n = train_local(&plain, 0.25f, 2 * B, 1, ref);
    CHECK_EQ_INT(train_local(&dp, 0.25f, 2 * B, 1, got), n);
    CHECK(memcmp(got, ref, n * sizeof(float)) == 0);
}

/* 5 rows over 2 replicas (3 + 2): the gradient of the whole batch's mean loss. */
static void test_uneven_split_is_the_batch_mean(void)
{
    ddpc_engine_config plain = engine_config(0, 1), dp = engine_config(2, 1);
    size_t n = train_local(&plain, 0.0f, 5, 1, ref);
    CHECK_EQ_INT(train_local(&dp, 0.0f, 5, 1, got), n);
    CHECK(rel_diff(got, ref, n) <= 1e-5);
}

static void test_warm_step_allocates_nothing_and_times_its_parts(void)
{
    ddpc_model *m = make_model(0.0f);
    ddpc_engine *e = NULL;
    ddpc_engine_config cfg = engine_config(2, 1);
    CHECK_EQ_INT(ddpc_engine_create(m, NULL, 0, 1, &cfg, &e), DDPC_OK);
    CHECK_EQ_INT(train(e, 2 * B, 0, 1, 1), 0); /* warm-up */
    (void)ddpc_engine_take_timing(e);
    int64_t before = ddpc_alloc_total();
    CHECK_EQ_INT(train(e, 2 * B, 0, 1, 1), 0);
    /* train() creates and destroys its dataset: 2 allocations per dataset, none per step. */
    int64_t grown = ddpc_alloc_total() - before;
    ddpc_dataset *ds = NULL;
    int64_t d0 = ddpc_alloc_total();
    CHECK_EQ_INT(ddpc_dataset_synthetic_images_create(&ds, SAMPLES, 1, 6, 6, CLASSES, 3, true),
                 DDPC_OK);
    ddpc_dataset_destroy(ds);
    CHECK_EQ_INT(grown, ddpc_alloc_total() - d0);
    ddpc_engine_timing t = ddpc_engine_take_timing(e);
    CHECK(t.forward_s > 0 && t.backward_s > 0 && t.scatter_s > 0 && t.reduce_s > 0);
    CHECK(t.replicate_s > 0 && t.replica_wait_s >= 0 && t.optimizer_s > 0);
    ddpc_engine_destroy(e);
    ddpc_model_destroy(m);
}

static void test_replica_errors_are_named(void)
{
    ddpc_model *m = make_model(0.0f);
    ddpc_engine *e = NULL;
    ddpc_engine_config cfg = engine_config(2, 1);
    CHECK_EQ_INT(ddpc_engine_create(m, NULL, 0, 1, &cfg, &e), DDPC_OK);
    static float x[4 * PIX];
    int32_t y[4] = {0, 1, 2, 3};
    ddpc_model_input in = {.n = 4, .x = x, .targets = y, .task = 3}; /* one head only */
    ddpc_model_output out;
    ddpc_engine_zero_grad(e);
    CHECK_EQ_INT(ddpc_engine_pass(e, &in, 0, 1.0f, true, &out), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "DataParallel replica 0: model forward: task 3");
    in.task = 0;
    in.targets = NULL;
    CHECK_EQ_INT(ddpc_engine_pass(e, &in, 0, 1.0f, true, &out), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "with targets");
    ddpc_engine_destroy(e);
    ddpc_model_destroy(m);
}

static void test_bad_configs_are_refused(void)
{
    ddpc_model *m = make_model(0.0f);
    ddpc_engine *e = NULL;
    ddpc_engine_config cfg = engine_config(DDPC_ENGINE_MAX_REPLICAS + 1, 1);
    CHECK_EQ_INT(ddpc_engine_create(m, NULL, 0, 1, &cfg, &e), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "dp_replicas must be in [0, 64], got 65");
    cfg.dp_replicas = 2;
    CHECK_EQ_INT(ddpc_engine_create(m, NULL, 0, 2, &cfg, &e), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "one process, not in a world of 2 ranks");
    CHECK(e == NULL);
    ddpc_model_destroy(m);
}

/* Every allocation of engine creation fails in turn: a clean DDPC_ENOMEM, nothing leaked. */
static void test_failing_allocator(void)
{
    ddpc_model *m = make_model(0.0f);
    ddpc_engine_config cfg = engine_config(3, 1);
    int64_t live = ddpc_alloc_live();
    int failures = 0;
    for (int64_t k = 0; k < 64; k++) {
        ddpc_engine *e = NULL;
        ddpc_alloc_fail_after(k);
        ddpc_status st = ddpc_engine_create(m, NULL, 0, 1, &cfg, &e);
        ddpc_alloc_fail_after(-1);
        if (st == DDPC_OK) {
            ddpc_engine_destroy(e);
            break;
        }
        failures++;
        CHECK_EQ_INT(st, DDPC_ENOMEM);
        CHECK_EQ_INT(ddpc_alloc_live(), live);
    }
    CHECK(failures > 3);
    ddpc_model_destroy(m);
}

int main(void)
{
    RUN_TEST(test_dp_matches_ddp_ranks_with_dropout); /* first: it forks */
    RUN_TEST(test_dp_matches_one_process);
    RUN_TEST(test_dp_with_accumulation);
    RUN_TEST(test_one_replica_is_the_plain_engine);
    RUN_TEST(test_uneven_split_is_the_batch_mean);
    RUN_TEST(test_warm_step_allocates_nothing_and_times_its_parts);
    RUN_TEST(test_replica_errors_are_named);
    RUN_TEST(test_bad_configs_are_refused);
    RUN_TEST(test_failing_allocator);
    return check_summary();
}
