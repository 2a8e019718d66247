// SPDX-License-Identifier: MIT
/* DDP with a dead branch: a 2-head mlp where a step runs one head (always head 0, or heads
 * alternating per step alike on every rank), so the other head's tensors are never reported ready.
 * Without find_unused_parameters every rank's ddpc_reducer_finish fails naming them, on every
 * step, and nobody hangs; with it, N ranks x b train the same parameters as 1 rank x N*b
 * (relative difference <= 1e-5 after 20 steps), the unused head's gradients are exactly zero and
 * plain SGD leaves it unchanged. Also: several backward passes in no_sync feeding one step
 * (mark_all_ready, then finish: the multi-task trainer's step). Ranks are forked, shm backend. */
#include "check.h"
#include "spawn.h"

#include <ddpc/alloc.h>
#include <ddpc/data.h>
#include <ddpc/comm.h>
#include <ddpc/models.h>
#include <ddpc/nn.h>
#include <ddpc/optim.h>
#include <ddpc/reducer.h>

#include <string.h>

enum { STEPS = 20, GLOBAL_BATCH = 24, SAMPLES = 480, MAX_PARAMS = 4096, IN = 36 };

typedef enum {
    HEAD0_ONLY, /* every step runs head 0: heads.1 is dead throughout */
    ALTERNATE,  /* step s runs head s % 2 */
    BOTH_PASSES /* every step runs head 0 then head 1, no_sync, then mark_all_ready + finish */
} schedule;

typedef struct {
    schedule sched;
    ddpc_optim_type optim;
    float momentum;
    bool find_unused;
    int error_steps;          /* out (per rank): steps whose finish failed naming the dead head */
    float params[MAX_PARAMS]; /* the single-process reference */
    float init[MAX_PARAMS];   /* initial parameters */
} job;

static ddpc_model *make_model(void)
{
    ddpc_model_config c = ddpc_model_config_default();
    ddpc_mlp_config own = ddpc_mlp_config_default();
    c.type_config = &own;
    strcpy(c.type, "mlp");
    c.in_channels = 1, c.in_height = 6, c.in_width = 6;
    own.hidden[0] = 7, own.n_hidden = 1;
    c.head_classes[0] = 5, c.head_classes[1] = 3, c.n_heads = 2;
    c.seed = 11;
    ddpc_model *m = NULL;
    return ddpc_model_create(&m, &c) == DDPC_OK ? m : NULL;
}

static ddpc_optim *make_optim(const job *j, size_t n)
{
    ddpc_optim_config c = ddpc_optim_config_default();
    c.type = j->optim;
    c.lr = j->optim == DDPC_OPTIM_SGD ? 0.1f : 0.01f;
    c.momentum = j->momentum;
    c.weight_decay = 0.0f;
    ddpc_optim *o = NULL;
    return ddpc_optim_create(&o, &c, n) == DDPC_OK ? o : NULL;
}

/* Range [*lo, *hi) of head k's weight and bias in the flat buffers (registered last, in order). */
static void head_range(ddpc_model *m, int k, size_t *lo, size_t *hi)
{
    size_t w = ddpc_model_num_tensors(m) - 4 + 2 * (size_t)k;
    *lo = ddpc_model_tensor(m, w)->offset;
    *hi = ddpc_model_tensor(m, w + 1)->offset + ddpc_model_tensor(m, w + 1)->numel;
}

static bool all_zero(const float *g, size_t lo, size_t hi)
{
    for (size_t i = lo; i < hi; i++)
        if (g[i] != 0.0f)
            return false;
    return true;
}

/* Forward + backward of `micro` rows of this rank's share of step `step` through head `task`.
 * Head 1 has 3 classes: its labels are the 5-class labels mod 3. */
static int pass(ddpc_model *m, const ddpc_dataset *ds, int step, int rank, int64_t b, int task)
{
    int64_t idx[GLOBAL_BATCH] = {0};
    float x[GLOBAL_BATCH * IN];
    int32_t y[GLOBAL_BATCH];
    for (int64_t i = 0; i < b; i++)
        idx[i] = (step * GLOBAL_BATCH + rank * b + i + 7 * task) % SAMPLES;
    if (ddpc_dataset_get_batch(ds, idx, b, x, NULL, y) != DDPC_OK)
        return 1;
    for (int64_t i = 0; i < b && task == 1; i++)
        y[i] %= 3;
    ddpc_model_input in = {.n = b, .x = x, .targets = y, .task = task};
    ddpc_model_output out;
    if (ddpc_model_forward(m, &in, true, &out) != DDPC_OK)
        return 1;
    return ddpc_model_backward(m, 1.0f) != DDPC_OK;
}

/* One step's backward passes and synchronisation. Returns 0 on success, -1 when finish failed
 * with the expected message naming the dead head, 1 on anything else. */
static int step_once(job *j, ddpc_model *m, ddpc_reducer *red, const ddpc_dataset *ds, int step,
                     int rank, int64_t b)
{
    int rc = 0;
    ddpc_model_zero_grad(m);
    if (j->sched == BOTH_PASSES) {
        for (int task = 0; task < 2; task++) {
            if (red)
                ddpc_reducer_prepare(red, false); /* no_sync: only the last mark communicates */
            rc |= pass(m, ds, step, rank, b, task);
        }
        if (red)
            ddpc_reducer_mark_all_ready(red);
    } else {
        if (red)
            ddpc_reducer_prepare(red, true);
        rc |= pass(m, ds, step, rank, b, j->sched == ALTERNATE ? step % 2 : 0);
    }
    if (red && ddpc_reducer_finish(red) != DDPC_OK) {
        int dead = j->sched == ALTERNATE ? 1 - step % 2 : 1;
        char want[64];
        snprintf(want, sizeof want, "no gradient in this step: heads.%d.weight, heads.%d.bias (",
                 dead, dead);
        if (!strstr(ddpc_last_error(), want)) {
            fprintf(stderr, "rank %d step %d: %s\n", rank, step, ddpc_last_error());
            return 1;
        }
        return rc ? 1 : -1;
    }
    return rc;
}

/* Trains STEPS steps; pg NULL: one process with the whole global batch. */
static int train(job *j, ddpc_pg *pg, int rank, int world, ddpc_model *m)
{
    ddpc_dataset *ds = NULL;
    if (ddpc_dataset_synthetic_images_create(&ds, SAMPLES, 1, 6, 6, 5, 3, true) != DDPC_OK)
        return 1;
    ddpc_optim *o = make_optim(j, ddpc_model_num_params(m));
    ddpc_reducer *red = NULL;
    int rc = 0;
    if (pg) {
        ddpc_reducer_config c = ddpc_reducer_config_default();
        c.find_unused_parameters = j->find_unused;
        c.bucket_cap_mb = c.first_bucket_mb = 1e-4; /* one bucket per tensor */
        if (ddpc_reducer_create(pg, m, &c, &red) != DDPC_OK) {
            fprintf(stderr, "rank %d: %s\n", rank, ddpc_last_error());
            rc = 1;
        }
    }
    int64_t b = GLOBAL_BATCH / world;
    for (int step = 0; step < STEPS && rc == 0; step++) {
        int s = step_once(j, m, red, ds, step, rank, b);
        if (s < 0) {
            j->error_steps++;
            continue; /* the step failed on every rank: nobody updates */
        }
        rc |= s;
        /* The dead head's gradient is exactly zero after the all-reduce. */
        if (j->sched != BOTH_PASSES) {
            size_t lo, hi;
            head_range(m, j->sched == ALTERNATE ? 1 - step % 2 : 1, &lo, &hi);
            if (!all_zero(ddpc_model_grads(m), lo, hi)) {
                fprintf(stderr, "rank %d step %d: the unused head has a gradient\n", rank, step);
                rc = 1;
            }
        }
        ddpc_optim_step(o, ddpc_model_params(m), ddpc_model_grads(m), ddpc_model_decay_mask(m),
                        ddpc_optim_config_of(o)->lr);
    }
    ddpc_reducer_destroy(red);
    ddpc_optim_destroy(o);
    ddpc_dataset_destroy(ds);
    return rc;
}

/* ||a - b|| / ||b|| and the largest element-wise relative difference (absolute below 1e-3). */
static void rel_diffs(const float *a, const float *b, size_t n, double *norm, double *elem)
{
    double d = 0, r = 0, worst = 0;
    for (size_t i = 0; i < n; i++) {
        double e = (double)a[i] - b[i];
        d += e * e;
        r += (double)b[i] * b[i];
        e = fabs(e) / (fabs((double)b[i]) > 1e-3 ? fabs((double)b[i]) : 1e-3);
        worst = e > worst ? e : worst;
    }
    *norm = sqrt(d / (r > 0 ? r : 1));
    *elem = worst;
}

static int compare_with_reference(job *j, ddpc_model *m, int rank)
{
    size_t n = ddpc_model_num_params(m);
    double d, e;
    rel_diffs(ddpc_model_params(m), j->params, n, &d, &e);
    if (d > 1e-5 || e > 1e-4) {
        fprintf(stderr,
                "rank %d: relative difference %g (tolerance 1e-5), element-wise %g "
                "(tolerance 1e-4)\n",
                rank, d, e);
        return 1;
    }
    /* Plain SGD moves a parameter only along its gradient: a head that never ran is unchanged. */
    if (j->sched == HEAD0_ONLY && j->optim == DDPC_OPTIM_SGD && j->momentum == 0.0f) {
        size_t lo, hi;
        head_range(m, 1, &lo, &hi);
        if (memcmp(ddpc_model_params(m) + lo, j->init + lo, (hi - lo) * sizeof(float)) != 0) {
            fprintf(stderr, "rank %d: the unused head changed\n", rank);
            return 1;
        }
    }
    return 0;
}

static int rank_main(int rank, int world, void *ctx)
{
    job *j = ctx;
    ddpc_comm_env env;
    ddpc_pg *pg = NULL;
    ddpc_pg_config pc = ddpc_pg_config_default();
    pc.timeout_s = 30;
    if (ddpc_comm_env_discover(&env) != DDPC_OK || ddpc_pg_create(&env, &pc, &pg) != DDPC_OK) {
        fprintf(stderr, "rank %d: %s\n", rank, ddpc_last_error());
        return 1;
    }
    ddpc_model *m = make_model();
    ddpc_model_params(m)[0] += (float)rank; /* the reducer's broadcast must equalise replicas */
    int rc = train(j, pg, rank, world, m);
    bool expect_failure = !j->find_unused && j->sched != BOTH_PASSES;
    if (rc == 0 && !expect_failure) {
        rc = j->error_steps != 0;
        rc |= compare_with_reference(j, m, rank);
        uint64_t h = 0, all[8]; /* unsigned: the hash wraps */
        for (size_t i = 0; i < ddpc_model_num_params(m); i++)
            h = h * 31 + ((const uint32_t *)ddpc_model_params(m))[i];
        rc |= ddpc_pg_all_gather(pg, &h, all, 1, DDPC_DTYPE_I64) != DDPC_OK;
        for (int r = 0; r < world; r++)
            rc |= all[r] != h;
    } else if (rc == 0) {
        /* Every step must have failed, on this rank, with the message naming the dead head; a
         * collective afterwards shows the ranks are still in step. */
        rc = j->error_steps != STEPS;
        if (rc)
            fprintf(stderr, "rank %d: %d of %d steps failed\n", rank, j->error_steps, STEPS);
        double one = 1.0;
        rc |= ddpc_pg_all_reduce(pg, &one, &one, 1, DDPC_DTYPE_F64, DDPC_REDUCE_SUM) != DDPC_OK;
        rc |= one != (double)world;
    }
    ddpc_model_destroy(m);
    ddpc_pg_destroy(pg);
    return rc;
}

/* The single-process reference, then `world` ranks checked against it. */
static int run(job *j, int world)
{
    ddpc_model *m = make_model();
    if (!m)
        return 1;
    size_t n = ddpc_model_num_params(m);
    memcpy(j->init, ddpc_model_params(m), n * sizeof(float));
    int rc = train(j, NULL, 0, 1, m);
    memcpy(j->params, ddpc_model_params(m), n * sizeof(float));
    ddpc_model_destroy(m);
    j->error_steps = 0;
    return rc | spawn_ranks(world, 60.0, rank_main, j);
}

static void test_without_find_unused_every_rank_fails_naming_the_head(void)
{
    job j = {.sched = HEAD0_ONLY, .optim = DDPC_OPTIM_SGD};
    CHECK_EQ_INT(run(&j, 2), 0);
    j.sched = ALTERNATE; /* the dead head changes every step, and so does the message */
    CHECK_EQ_INT(run(&j, 3), 0);
}

static void test_find_unused_matches_one_process_and_leaves_the_head(void)
{
    job j = {.sched = HEAD0_ONLY, .optim = DDPC_OPTIM_SGD, .find_unused = true};
    CHECK_EQ_INT(run(&j, 2), 0);
    CHECK_EQ_INT(run(&j, 4), 0);
}

static void test_find_unused_alternating_heads_adamw(void)
{
    job j = {.sched = ALTERNATE, .optim = DDPC_OPTIM_ADAMW, .find_unused = true};
    CHECK_EQ_INT(run(&j, 2), 0);
    j.optim = DDPC_OPTIM_SGD, j.momentum = 0.9f;
    CHECK_EQ_INT(run(&j, 3), 0);
}

static void test_no_sync_passes_then_mark_all_ready(void)
{
    /* Both heads every step, communicated once after the last pass: no unused tensor. */
    job j = {.sched = BOTH_PASSES, .optim = DDPC_OPTIM_SGD, .momentum = 0.9f};
    CHECK_EQ_INT(run(&j, 2), 0);
    j.find_unused = true;
    CHECK_EQ_INT(run(&j, 4), 0);
}

int main(void)
{
    RUN_TEST(test_without_find_unused_every_rank_fails_naming_the_head);
    RUN_TEST(test_find_unused_matches_one_process_and_leaves_the_head);
    RUN_TEST(test_find_unused_alternating_heads_adamw);
    RUN_TEST(test_no_sync_passes_then_mark_all_ready);
    return check_summary();
}
