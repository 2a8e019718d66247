// SPDX-License-Identifier: MIT
/* Tests for the shm backend's failure paths: forked ranks (see comm_shm_testutil.h) that disagree
 * on the world size or claim the same rank, a rank that joins but never calls the collective (the
 * others time out naming it), a rank that dies (detected at once, not at the timeout), ranks that
 * call different collectives; the group stays failed and says why, and nothing is left in
 * /dev/shm afterwards. */
#include "comm_shm_testutil.h"

/* ---- failures while joining ---- */

typedef struct {
    int wrong_rank, wrong_world, dup_of;
    const char *want;
} mismatch_arg;

/* Every rank must fail to join with a message containing arg->want. */
static void rank_mismatch(const ddpc_comm_env *e, void *arg)
{
    const mismatch_arg *m = arg;
    ddpc_comm_env mine = *e;
    if (e->rank == m->wrong_rank)
        mine.world_size = mine.local_world_size = m->wrong_world;
    if (e->rank == m->dup_of + 1 && m->dup_of >= 0)
        mine.rank = mine.local_rank = m->dup_of;
    ddpc_pg *pg = NULL;
    ddpc_status s = ddpc_pg_create(&mine, NULL, &pg);
    CHECK(s != DDPC_OK);
    if (s != DDPC_OK)
        CHECK_STR_CONTAINS(ddpc_last_error(), m->want);
    if (getenv("DDPC_TEST_VERBOSE"))
        fprintf(stderr, "rank %d: %s: %s\n", e->rank, ddpc_status_name(s), ddpc_last_error());
    ddpc_pg_destroy(s == DDPC_OK ? pg : NULL);
}

static void test_world_size_mismatch_and_duplicate_rank(void)
{
    int codes[16];
    mismatch_arg m = {1, 3, -1, "world size mismatch"};
    ddpc_comm_env e = base_env(2);
    e.timeout_s = 60; /* far past the bound below, so a loaded machine cannot blur the two */
    e.master_port = free_port();
    double t0 = ddpc_time_now();
    run_ranks(2, &e, rank_mismatch, &m, 90, codes);
    expect_all_ok(2, codes);
    set_run_id(&e, "mismatch");
    run_ranks(2, &e, rank_mismatch, &m, 90, codes);
    expect_all_ok(2, codes);
    CHECK(ddpc_time_now() - t0 < 30.0); /* both sides fail at once, not at the timeout */

    /* world 3 where rank 2 also says it is rank 1: the group never forms; the error names it */
    m = (mismatch_arg){-1, 0, 1, "rank 1"};
    e = base_env(3);
    e.timeout_s = 2;
    e.master_port = free_port();
    run_ranks(3, &e, rank_mismatch, &m, 30, codes);
    expect_all_ok(3, codes);
}

/* ---- failures during collectives ---- */

typedef struct {
    int culprit;  /* the rank that misbehaves */
    bool dies;    /* _exit right after joining; else joins but never calls the collective */
    double limit; /* the others must fail within this many seconds */
    int world;
    char done[64]; /* "<prefix>.<rank>" is created by each other rank once it has failed */
} fault_arg;

static void done_path(char *out, size_t cap, const fault_arg *f, int rank)
{
    snprintf(out, cap, "%s.%d", f->done, rank);
}

/* The culprit of a timeout stays in the group until every other rank has timed out (no clock:
 * under load a fixed sleep could end before their timeout fires, turning it into a departure). */
static void wait_for_others(const fault_arg *f, int me)
{
    for (int r = 0; r < f->world; r++) {
        char path[96];
        done_path(path, sizeof path, f, r);
        for (int i = 0; r != me && i < 1200 && access(path, F_OK) != 0; i++)
            nanosleep(&(struct timespec){0, 100000000}, NULL);
    }
}

static void rank_fault(const ddpc_comm_env *e, void *arg)
{
    const fault_arg *f = arg;
    ddpc_pg *pg = join(e);
    if (!pg)
        return;
    CHECK_EQ_INT(ddpc_pg_barrier(pg), DDPC_OK); /* #0: everyone is there */
    if (e->rank == f->culprit) {
        if (f->dies)
            _exit(0);
        wait_for_others(f, e->rank);
        ddpc_pg_destroy(pg);
        return;
    }
    float v[64] = {1};
    double t0 = ddpc_time_now();
    ddpc_status s = ddpc_pg_all_reduce(pg, v, v, 64, DDPC_DTYPE_F32, DDPC_REDUCE_SUM); /* #1 */
    double took = ddpc_time_now() - t0;
    CHECK_EQ_INT(s, f->dies ? DDPC_EPEER : DDPC_ETIMEOUT);
    char want[128];
    if (f->dies)
        snprintf(want, sizeof want, "rank %d (pid ", f->culprit);
    else
        snprintf(want, sizeof want, "all_reduce #1 timed out after 1 s: rank %d never arrived",
                 f->culprit);
    CHECK_STR_CONTAINS(ddpc_last_error(), want);
    if (f->dies)
        CHECK_STR_CONTAINS(ddpc_last_error(), "exited during all_reduce #1");
    if (took >= f->limit)
        fprintf(stderr, "rank %d failed after %.2f s\n", e->rank, took);
    CHECK(took < f->limit);
    CHECK_STR_CONTAINS(ddpc_pg_error(pg), want); /* the group stays failed */
    CHECK_EQ_INT(ddpc_pg_barrier(pg), DDPC_EPEER);
    CHECK_STR_CONTAINS(ddpc_last_error(), "process group failed earlier");
    char path[96];
    done_path(path, sizeof path, f, e->rank);
    FILE *done = fopen(path, "w");
    if (done)
        fclose(done);
    ddpc_pg_destroy(pg);
}

static void fault_arg_init(fault_arg *f, const char *name)
{
    snprintf(f->done, sizeof f->done, "/tmp/ddpc-shm-failure-%ld-%s", (long)getpid(), name);
}

static void fault_arg_clean(const fault_arg *f)
{
    for (int r = 0; r < f->world; r++) {
        char path[96];
        done_path(path, sizeof path, f, r);
        unlink(path);
    }
}

static void test_timeout_names_missing_rank(void)
{
    ddpc_comm_env e = base_env(3);
    e.master_port = free_port();
    e.timeout_s = 1;
    fault_arg f = {.culprit = 2, .dies = false, .limit = 30.0, .world = 3};
    fault_arg_init(&f, "timeout");
    int codes[16];
    run_ranks(3, &e, rank_fault, &f, 180, codes);
    expect_all_ok(3, codes);
    fault_arg_clean(&f);
}

static void test_dead_peer_detected(void)
{
    ddpc_comm_env e = base_env(3);
    set_run_id(&e, "dead");
    e.timeout_s = 120; /* detection must not wait for the timeout */
    fault_arg f = {.culprit = 1, .dies = true, .limit = 60.0, .world = 3};
    fault_arg_init(&f, "dead");
    int codes[16];
    run_ranks(3, &e, rank_fault, &f, 180, codes);
    expect_all_ok(3, codes);
    fault_arg_clean(&f);
}

/* Ranks that disagree on the collective fail at once with both sides named (no garbage). */
static void rank_mismatch_coll(const ddpc_comm_env *e, void *arg)
{
    (void)arg;
    ddpc_pg *pg = join(e);
    if (!pg)
        return;
    float v[300] = {0};
    CHECK_EQ_INT(ddpc_pg_barrier(pg), DDPC_OK);
    ddpc_status s = e->rank == 1
                        ? ddpc_pg_broadcast(pg, v, 100, DDPC_DTYPE_F32, 0)
                        : ddpc_pg_all_reduce(pg, v, v, 300, DDPC_DTYPE_F32, DDPC_REDUCE_MAX);
    CHECK_EQ_INT(s, DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "collective mismatch");
    CHECK_STR_CONTAINS(ddpc_last_error(), "all_reduce #1 of 300 f32 (max)");
    CHECK_STR_CONTAINS(ddpc_last_error(), "broadcast #1 of 100 f32 from root 0");
    ddpc_pg_destroy(pg);
}

static void test_collective_mismatch_is_an_error(void)
{
    ddpc_comm_env e = base_env(3);
    e.master_port = free_port();
    int codes[16];
    run_ranks(3, &e, rank_mismatch_coll, NULL, 30, codes);
    expect_all_ok(3, codes);
}

/* ---- /dev/shm ---- */

static void test_nothing_left_in_dev_shm(void)
{
    expect_nothing_left_in_dev_shm(6);
}

int main(void)
{
    RUN_TEST(test_world_size_mismatch_and_duplicate_rank);
    RUN_TEST(test_timeout_names_missing_rank);
    RUN_TEST(test_dead_peer_detected);
    RUN_TEST(test_collective_mismatch_is_an_error);
    RUN_TEST(test_nothing_left_in_dev_shm);
    return check_summary();
}
