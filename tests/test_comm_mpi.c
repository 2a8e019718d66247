// SPDX-License-Identifier: MIT
/* Tests for the mpi backend (src/comm/mpi*.c). As a ctest this program re-runs itself as the
 * ranks of small jobs under `mpirun` and checks what they report: results bitwise equal to a
 * rank-order reduction (what shm computes) on the three all_reduce paths (inline, gather,
 * chunks), async work, a second group in one process, a stopped rank (SIGSTOP) that makes the
 * others time out naming it, a rank that never joins, and an environment that contradicts MPI.
 * In a build without MPI it checks instead that asking for the backend is a clear error.
 *   test_comm_mpi                      the ctest: runs the jobs below and checks their output
 *   test_comm_mpi --rank MODE          one rank of a job (basic, timeout, join, mismatch) */
#include <ddpc/alloc.h>
#include <ddpc/comm.h>
#include <ddpc/half.h>
#include <ddpc/timer.h>

#include "check.h"
#include "comm/pg_impl.h"
#include "mpi_job.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Every rank can generate every rank's input: values that make non-exact sums. */
static void fill(void *buf, size_t n, ddpc_dtype dt, int rank)
{
    for (size_t i = 0; i < n; i++) {
        float v = (float)((i * 2654435761u + (size_t)rank * 40503u) % 10007) / 997.0f - 5.0f;
        if (dt == DDPC_DTYPE_F32)
            ((float *)buf)[i] = v;
        else if (dt == DDPC_DTYPE_BF16)
            ((uint16_t *)buf)[i] = ddpc_f32_to_bf16(v);
        else if (dt == DDPC_DTYPE_F16)
            ((uint16_t *)buf)[i] = ddpc_f32_to_f16(v);
        else
            ((int32_t *)buf)[i] = (int32_t)(v * 1000.0f);
    }
}

/* One all_reduce compared bitwise with ddpc__reduce_many over every rank's input in rank order. */
static int check_against_rank_order(ddpc_pg *pg, ddpc_dtype dt, ddpc_reduce_op op, size_t n)
{
    int w = ddpc_pg_world_size(pg), rank = ddpc_pg_rank(pg), bad = 0;
    size_t es = ddpc_dtype_size(dt);
    char *all = ddpc_malloc(n * es * (size_t)w), *got = ddpc_malloc(n * es);
    char *want = ddpc_malloc(n * es);
    const void *srcs[16];
    for (int r = 0; r < w; r++) {
        fill(all + (size_t)r * n * es, n, dt, r);
        srcs[r] = all + (size_t)r * n * es;
    }
    ddpc__reduce_many(want, srcs, w, n, dt, op);
    memcpy(got, srcs[rank], n * es);
    ddpc_status s = ddpc_pg_all_reduce(pg, got, got, n, dt, op);
    if (s != DDPC_OK || memcmp(got, want, n * es) != 0) {
        fprintf(stderr, "rank %d: all_reduce %s %s n=%zu: %s\n", rank, ddpc_dtype_name(dt),
                ddpc_reduce_op_name(op), n, s ? ddpc_last_error() : "differs from rank order");
        bad = 1;
    }
    ddpc_free(all);
    ddpc_free(got);
    ddpc_free(want);
    return bad;
}

static ddpc_pg *join(double timeout_s)
{
    ddpc_comm_env env;
    ddpc_pg *pg = NULL;
    ddpc_pg_config cfg = ddpc_pg_config_default();
    cfg.timeout_s = timeout_s;
    if (ddpc_comm_env_discover(&env) != DDPC_OK || ddpc_pg_create(&env, &cfg, &pg) != DDPC_OK) {
        printf("join failed: %s\n", ddpc_last_error());
        return NULL;
    }
    return pg;
}

static int rank_basic(void)
{
    ddpc_pg *pg = join(60);
    if (!pg)
        return 1;
    int bad = ddpc_pg_backend(pg) != DDPC_BACKEND_MPI, rank = ddpc_pg_rank(pg);
    const ddpc_dtype dts[4] = {DDPC_DTYPE_F32, DDPC_DTYPE_BF16, DDPC_DTYPE_F16, DDPC_DTYPE_I32};
    for (int d = 0; d < 4; d++)
        for (int op = 0; op < DDPC_REDUCE_COUNT; op++) {
            bad |= check_against_rank_order(pg, dts[d], (ddpc_reduce_op)op, 7);      /* inline */
            bad |= check_against_rank_order(pg, dts[d], (ddpc_reduce_op)op, 100);    /* gather */
            bad |= check_against_rank_order(pg, dts[d], (ddpc_reduce_op)op, 100003); /* chunks */
        }
    float x[3] = {1, 2, 3};
    ddpc_work *w[3];
    for (int k = 0; k < 3; k++)
        bad |= ddpc_pg_iall_reduce(pg, &x[k], &x[k], 1, DDPC_DTYPE_F32, DDPC_REDUCE_SUM, &w[k]);
    for (int k = 0; k < 3; k++) {
        bad |= ddpc_work_wait(w[k]) != DDPC_OK;
        bad |= x[k] != (float)((k + 1) * ddpc_pg_world_size(pg));
        ddpc_work_destroy(w[k]);
    }
    ddpc_pg_destroy(pg);
    /* MPI stays up until exit, so a second group in the same process works */
    pg = join(60);
    bad |= !pg || ddpc_pg_barrier(pg) != DDPC_OK;
    ddpc_pg_destroy(pg);
    printf("rank %d basic %s\n", rank, bad ? "FAILED" : "ok");
    return bad;
}

/* The last rank stops itself before collective #1; the others must time out naming it. */
static int rank_timeout(void)
{
    /* One timeout serves the join and the collective: 3 s lets three ThreadSanitizer-built
     * ranks finish MPI_Init on a busy 2-core machine (1 s did not, once). */
    const double timeout = 3.0;
    ddpc_pg *pg = join(timeout);
    if (!pg)
        return 1;
    int rank = ddpc_pg_rank(pg), world = ddpc_pg_world_size(pg);
    float x = 1;
    if (ddpc_pg_all_reduce(pg, &x, &x, 1, DDPC_DTYPE_F32, DDPC_REDUCE_SUM) != DDPC_OK)
        return 1;
    fflush(stdout);
    if (rank == world - 1)
        raise(SIGSTOP);
    double t0 = ddpc_time_now();
    ddpc_status s = ddpc_pg_all_reduce(pg, &x, &x, 1, DDPC_DTYPE_F32, DDPC_REDUCE_SUM);
    double took = ddpc_time_now() - t0;
    printf("rank %d status %s after %.1f s (%s): %s\n", rank, ddpc_status_name(s), took,
           took >= timeout && took < timeout + 5 ? "in time" : "LATE", ddpc_last_error());
    s = ddpc_pg_barrier(pg);
    printf("rank %d then %s: %s\n", rank, ddpc_status_name(s), ddpc_last_error());
    t0 = ddpc_time_now();
    ddpc_pg_destroy(pg);
    printf("rank %d destroyed in %.1f s\n", rank, ddpc_time_now() - t0);
    fflush(stdout);
    /* Exiting without MPI_Finalize (the group failed) makes mpirun tear the job down and resume
     * the stopped rank: give the other survivor time to read the progress window first. */
    sleep(2);
    return 0;
}

/* Both ranks join a first group (which starts MPI: MPI_Init itself cannot be bounded), then
 * rank 1 joins the second one 2 s late while rank 0 gives up after 0.5 s. */
static int rank_join(void)
{
    ddpc_pg *pg = join(30);
    if (!pg)
        return 1;
    int rank = ddpc_pg_rank(pg);
    ddpc_pg_destroy(pg);
    if (rank == 1)
        sleep(2);
    double t0 = ddpc_time_now();
    pg = join(0.5);
    printf("rank %d join %s after %.1f s\n", rank, pg ? "ok" : "failed", ddpc_time_now() - t0);
    fflush(stdout);
    ddpc_pg_destroy(pg);
    if (rank == 0)
        sleep(3); /* rank 1 reports its own timeout before the job is torn down */
    return 0;
}

/* Not under mpirun: the torchrun variables say 2 ranks, MPI says 1. */
static int rank_mismatch(void)
{
    ddpc_comm_env env;
    if (ddpc_comm_env_discover(&env) != DDPC_OK)
        return 1;
    ddpc_pg_config cfg = ddpc_pg_config_default();
    cfg.backend = DDPC_BACKEND_MPI;
    cfg.timeout_s = 5;
    ddpc_pg *pg = NULL;
    ddpc_status s = ddpc_pg_create(&env, &cfg, &pg);
    printf("mismatch %s: %s\n", ddpc_status_name(s), ddpc_last_error());
    return 0;
}

/* ---- the ctest side ---- */

static void test_basic_jobs(void)
{
    for (int np = 2; np <= 3; np++) {
        int status = 0;
        double took = mpirun(np, "basic", &status);
        CHECK(took >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
        for (int r = 0; r < np; r++) {
            char want[64];
            snprintf(want, sizeof want, "rank %d basic ok", r);
            CHECK_STR_CONTAINS(output, want);
        }
        if (check_failures_in_test)
            fprintf(stderr, "np %d output:\n%s\n", np, output);
    }
}

static void test_stopped_rank_times_out_named(void)
{
    int status = 0;
    double took = mpirun(3, "timeout", &status);
    CHECK(took >= 0); /* the job ends by itself: mpirun tears down the stopped rank */
    for (int r = 0; r < 2; r++) {
        char head[64];
        snprintf(head, sizeof head, "rank %d status DDPC_ETIMEOUT after ", r);
        CHECK(line_has(output, head,
                       "(in time): all_reduce #1 timed out after 3 s: rank 2 never "
                       "arrived"));
        snprintf(head, sizeof head, "rank %d then DDPC_EPEER", r);
        CHECK(line_has(output, head, "process group failed earlier: all_reduce #1 timed out"));
        snprintf(head, sizeof head, "rank %d destroyed in 0.0 s", r);
        CHECK_STR_CONTAINS(output, head);
    }
    if (check_failures_in_test)
        fprintf(stderr, "output:\n%s\n", output);
}

static void test_late_join_times_out(void)
{
    int status = 0;
    double took = mpirun(2, "join", &status);
    CHECK(took >= 0);
    CHECK_STR_CONTAINS(output, "join failed: mpi backend: joining the group timed out after 0.5 s: "
                               "not every rank called ddpc_pg_create");
    const char *line = strstr(output, "rank 0 join failed after ");
    double secs = -1;
    CHECK(line && sscanf(line, "rank 0 join failed after %lf", &secs) == 1);
    CHECK(secs >= 0.5 && secs < 0.5 + 5.0);
    if (check_failures_in_test)
        fprintf(stderr, "output:\n%s\n", output);
}

static void test_env_contradicting_mpi(void)
{
    int status = 0;
    char *argv[] = {self, "--rank", "mismatch", NULL};
    const char *vars[] = {"RANK=0",
                          "WORLD_SIZE=2",
                          "MASTER_ADDR=127.0.0.1",
                          "MASTER_PORT=1",
                          "OMPI_ALLOW_RUN_AS_ROOT=1",
                          "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
                          NULL};
    double took = run_job(argv, vars, 60, &status);
    CHECK(took >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_STR_CONTAINS(output, "mismatch DDPC_EINVAL: mpi backend: MPI says this process is rank "
                               "0 of 1, but the environment (torchrun variables) says rank 0 of 2");
    if (check_failures_in_test)
        fprintf(stderr, "output:\n%s\n", output);
}

/* Without MPI: the backend constructor and ddpc_pg_create both say so. */
static void test_built_without_mpi(void)
{
    ddpc_comm_env env = ddpc_comm_env_single();
    env.world_size = 2;
    const ddpc__pg_backend *ops = (const ddpc__pg_backend *)1;
    void *state = (void *)1;
    CHECK_EQ_INT(ddpc__mpi_create(&env, ddpc_time_now() + 1, &ops, &state), DDPC_EUNSUPPORTED);
    CHECK_STR_CONTAINS(ddpc_last_error(),
                       "ddpc was built without MPI; rebuild with an MPI library");
    CHECK(ops == NULL && state == NULL);
    ddpc_pg_config cfg = ddpc_pg_config_default();
    cfg.backend = DDPC_BACKEND_MPI;
    ddpc_pg *pg = NULL;
    CHECK_EQ_INT(ddpc_pg_create(&env, &cfg, &pg), DDPC_EUNSUPPORTED);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--rank") == 0) {
        const char *m = argv[2];
        return strcmp(m, "basic") == 0      ? rank_basic()
               : strcmp(m, "timeout") == 0  ? rank_timeout()
               : strcmp(m, "join") == 0     ? rank_join()
               : strcmp(m, "mismatch") == 0 ? rank_mismatch()
                                            : 2;
    }
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = '\0';
    if (!ddpc_backend_available(DDPC_BACKEND_MPI)) {
        RUN_TEST(test_built_without_mpi);
        return check_summary();
    }
    RUN_TEST(test_basic_jobs);
    RUN_TEST(test_stopped_rank_times_out_named);
    RUN_TEST(test_late_join_times_out);
    RUN_TEST(test_env_contradicting_mpi);
    return check_summary();
}
