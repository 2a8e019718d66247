// SPDX-License-Identifier: MIT
/* Tests that the mpi backend diagnoses failures as the shm backend does (src/comm/mpi_check.c,
 * mpi_progress.c). As a ctest this program re-runs itself as the ranks of small jobs, under
 * `mpirun` and as forked shm ranks, and checks what every rank reports:
 *  - ranks that issue different collectives (kind, count, dtype, op, root, a skipped call) all fail
 *    at once with shm's "collective mismatch" sentence, word for word, and the job exits non-zero
 *    by itself, where Open MPI used to abort with MPI_ERR_TRUNCATE or silently mix f32 and i32;
 *  - a rank that skips the last of identical collectives is named by the others' timeouts;
 *  - a rank stopped (SIGSTOP) mid-transfer in a 64 MiB all_reduce, after its first half went out,
 *    is named as having stopped responding mid-transfer, not as "every rank arrived".
 *   test_comm_mpi_diag                   the ctest
 *   test_comm_mpi_diag --rank CASE       one mpi rank of a job (a mismatch case, tail, stall)
 *   test_comm_mpi_diag --shm CASE        forks 3 shm ranks running a mismatch case */
#include <ddpc/alloc.h>
#include <ddpc/comm.h>
#include <ddpc/timer.h>

#include "check.h"
#include "mpi_job.h"
#include "spawn.h"

#include <ctype.h>

#ifdef DDPC_HAVE_MPI
#include <mpi.h>

/* The rank told to stall stops itself right after posting the second half of the large
 * all_reduce (MPI_Iallgatherv of the reduced chunks): its first half (MPI_Ialltoallv) is done,
 * its peers wait for the rest. The test's own definition wins over libmpi's (PMPI interposition).
 */
static volatile int stop_in_allgatherv;

int MPI_Iallgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                    const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                    MPI_Comm comm, MPI_Request *request)
{
    int err = PMPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                               comm, request);
    if (stop_in_allgatherv) {
        printf("stalling rank stops mid-transfer\n");
        fflush(stdout);
        raise(SIGSTOP);
    }
    return err;
}
#endif

enum { ODD = 1 }; /* the rank that issues something else */

static ddpc_pg *join(ddpc_backend backend, double timeout_s)
{
    ddpc_comm_env env;
    ddpc_pg *pg = NULL;
    ddpc_pg_config cfg = ddpc_pg_config_default();
    cfg.backend = backend;
    cfg.timeout_s = timeout_s;
    if (ddpc_comm_env_discover(&env) != DDPC_OK || ddpc_pg_create(&env, &cfg, &pg) != DDPC_OK) {
        printf("join failed: %s\n", ddpc_last_error());
        return NULL;
    }
    return pg;
}

/* Collective #1 of a mismatch case: rank ODD issues something other than the rest. */
static ddpc_status issue(ddpc_pg *pg, const char *kase, float *f)
{
    bool odd = ddpc_pg_rank(pg) == ODD;
    const ddpc_dtype F32 = DDPC_DTYPE_F32;
    if (!strcmp(kase, "kind"))
        return odd ? ddpc_pg_broadcast(pg, f, 100, F32, 0)
                   : ddpc_pg_all_reduce(pg, f, f, 300, F32, DDPC_REDUCE_MAX);
    if (!strcmp(kase, "count")) /* the large path: MPI would see different sizes */
        return ddpc_pg_all_reduce(pg, f, f, odd ? 1000001 : 1000000, F32, DDPC_REDUCE_SUM);
    if (!strcmp(kase, "dtype")) /* the same bytes: MPI would mix f32 and i32 without a word */
        return ddpc_pg_all_reduce(pg, f, f, 4096, odd ? DDPC_DTYPE_I32 : F32, DDPC_REDUCE_SUM);
    if (!strcmp(kase, "op")) /* small: rides in the descriptor exchange */
        return ddpc_pg_all_reduce(pg, f, f, 10, F32, odd ? DDPC_REDUCE_AVG : DDPC_REDUCE_SUM);
    if (!strcmp(kase, "root"))
        return ddpc_pg_broadcast(pg, f, 1000, F32, odd ? 2 : 0);
    if (!strcmp(kase, "skip")) { /* ODD skips all_reduce(10) and goes on to all_reduce(20) */
        ddpc_status s = odd ? DDPC_OK : ddpc_pg_all_reduce(pg, f, f, 10, F32, DDPC_REDUCE_SUM);
        return s ? s : ddpc_pg_all_reduce(pg, f, f, 20, F32, DDPC_REDUCE_SUM);
    }
    return ddpc_errorf(DDPC_EINVAL, "unknown case '%s'", kase);
}

/* One rank of a mismatch case: reports the status and message of collective #1 and, like an
 * application, exits non-zero on failure. */
static int rank_mismatch(ddpc_backend backend, const char *kase)
{
    ddpc_pg *pg = join(backend, 30);
    if (!pg)
        return 1;
    int rank = ddpc_pg_rank(pg);
    float *f = ddpc_calloc(1000001, sizeof *f);
    ddpc_status s = ddpc_pg_barrier(pg); /* #0 */
    double t0 = ddpc_time_now();
    if (s == DDPC_OK)
        s = issue(pg, kase, f);
    printf("rank %d %s after %.1f s: %s\n", rank, ddpc_status_name(s), ddpc_time_now() - t0,
           s ? ddpc_last_error() : "");
    fflush(stdout);
    ddpc_free(f);
    ddpc_pg_destroy(pg);
    /* MPI itself is still sound: a new group works. Joining it, and its second barrier, keep
     * every rank alive until all have printed, since mpirun stops the job as soon as one rank
     * exits non-zero. */
    if (backend == DDPC_BACKEND_MPI) {
        pg = join(backend, 30);
        ddpc_status again = pg ? ddpc_pg_barrier(pg) : DDPC_EINVAL;
        printf("rank %d new group %s\n", rank, ddpc_status_name(again));
        fflush(stdout);
        if (pg)
            ddpc_pg_barrier(pg);
        ddpc_pg_destroy(pg);
    }
    return s == DDPC_OK ? 0 : 3;
}

/* Returns 0 whatever happened: spawn_ranks kills the other ranks as soon as one fails, before
 * they could print their lines, which are what the test checks. */
static int shm_rank(int rank, int world, void *kase)
{
    (void)rank;
    (void)world;
    rank_mismatch(DDPC_BACKEND_SHM, kase);
    return 0;
}

/* Rank ODD stops after two all_reduces; the others call a third and must name it. */
static int rank_tail(void)
{
    ddpc_pg *pg = join(DDPC_BACKEND_MPI, 3);
    if (!pg)
        return 1;
    int rank = ddpc_pg_rank(pg), calls = rank == ODD ? 2 : 3;
    float x[10] = {0};
    ddpc_status s = DDPC_OK;
    double t0 = ddpc_time_now();
    for (int i = 0; i < calls && s == DDPC_OK; i++) {
        t0 = ddpc_time_now();
        s = ddpc_pg_all_reduce(pg, x, x, 10, DDPC_DTYPE_F32, DDPC_REDUCE_SUM);
    }
    printf("rank %d %s after %.1f s: %s\n", rank, ddpc_status_name(s), ddpc_time_now() - t0,
           s ? ddpc_last_error() : "");
    fflush(stdout);
    ddpc_pg_destroy(pg);
    sleep(rank == ODD ? 30 : 2); /* ODD lingers, as a rank busy elsewhere would, until torn down */
    return 0;
}

/* Rank ODD stops mid-way through a 64 MiB all_reduce; the others must name it. */
static int rank_stall(void)
{
    ddpc_pg *pg = join(DDPC_BACKEND_MPI, 60); /* starts MPI, which no deadline can bound */
    ddpc_pg_destroy(pg);
    /* Long enough that the stalling rank reaches its stop (after reducing its half of 64 MiB)
     * well before the others time out, even on a loaded machine: otherwise it is still working
     * when they look, and "every rank kept responding" is the right diagnosis. */
    const double timeout = 15.0;
    if (!pg || !(pg = join(DDPC_BACKEND_MPI, timeout)))
        return 1;
    int rank = ddpc_pg_rank(pg);
    size_t n = (size_t)16 << 20;
    float *f = ddpc_calloc(n, sizeof *f);
    ddpc_status s = f ? ddpc_pg_barrier(pg) : DDPC_ENOMEM; /* #0 */
#ifdef DDPC_HAVE_MPI
    stop_in_allgatherv = rank == ODD;
#endif
    double t0 = ddpc_time_now();
    if (s == DDPC_OK)
        s = ddpc_pg_all_reduce(pg, f, f, n, DDPC_DTYPE_F32, DDPC_REDUCE_SUM); /* #1 */
    double took = ddpc_time_now() - t0;
    printf("rank %d %s after %.1f s (%s): %s\n", rank, ddpc_status_name(s), took,
           took >= timeout && took < timeout + 5 ? "in time" : "LATE", ddpc_last_error());
    fflush(stdout);
    ddpc_pg_destroy(pg);
    ddpc_free(f);
    sleep(2); /* the other survivor reads the progress window before mpirun tears the job down */
    return 0;
}

/* ---- the ctest side ---- */

/* What rank r must say about mismatch case `kase` (3 ranks, rank ODD the odd one). */
static void expected(const char *kase, int r, char *out, size_t cap)
{
    const char *mine = "", *odd = "";
    if (!strcmp(kase, "kind")) {
        mine = "all_reduce #1 of 300 f32 (max)";
        odd = "broadcast #1 of 100 f32 from root 0";
    } else if (!strcmp(kase, "count")) {
        mine = "all_reduce #1 of 1000000 f32 (sum)";
        odd = "all_reduce #1 of 1000001 f32 (sum)";
    } else if (!strcmp(kase, "dtype")) {
        mine = "all_reduce #1 of 4096 f32 (sum)";
        odd = "all_reduce #1 of 4096 i32 (sum)";
    } else if (!strcmp(kase, "op")) {
        mine = "all_reduce #1 of 10 f32 (sum)";
        odd = "all_reduce #1 of 10 f32 (avg)";
    } else if (!strcmp(kase, "root")) {
        mine = "broadcast #1 of 1000 f32 from root 0";
        odd = "broadcast #1 of 1000 f32 from root 2";
    } else if (!strcmp(kase, "skip")) {
        mine = "all_reduce #1 of 10 f32 (sum)";
        odd = "all_reduce #1 of 20 f32 (sum)";
    }
    snprintf(
        out, cap,
        "rank %d DDPC_EINVAL after %%.%% s: collective mismatch: rank %d issued %s but rank %d "
        "issued %s (every rank must issue the same collectives in the same order)\n",
        r, r, r == ODD ? odd : mine, r == ODD ? 0 : ODD, r == ODD ? mine : odd);
}

/* Whether `text` has the line `want`, where "%" in `want` stands for one digit. */
static bool has_line(const char *text, const char *want)
{
    for (const char *line = text; *line;) {
        size_t i = 0;
        while (want[i] && line[i] && (want[i] == line[i] || (want[i] == '%' && isdigit(line[i]))))
            i++;
        if (!want[i])
            return true;
        const char *end = strchr(line, '\n');
        if (!end)
            break;
        line = end + 1;
    }
    return false;
}

static const char *const cases[] = {"kind", "count", "dtype", "op", "root", "skip"};

static void test_mismatch_fails_every_rank_in_shm_words(void)
{
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        int status = 0;
        double took = mpirun(3, cases[k], &status);
        /* every rank fails in under 10 s (the timeout is 30 s) and the job ends by itself, with
         * a failure status */
        CHECK(took >= 0 && took < 30);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) != 0);
        char want[512];
        for (int r = 0; r < 3; r++) {
            expected(cases[k], r, want, sizeof want);
            if (!has_line(output, want)) {
                fprintf(stderr, "case %s: no line\n  %s", cases[k], want);
                check_failures_in_test++;
            }
        }
        CHECK(!strstr(output, "MPI_ERR"));
        for (int r = 0; r < 3; r++) {
            snprintf(want, sizeof want, "rank %d new group DDPC_OK", r);
            CHECK_STR_CONTAINS(output, want);
        }
        if (check_failures_in_test)
            fprintf(stderr, "case %s output:\n%s\n", cases[k], output);
        /* the shm backend says the very same on every rank */
        char *argv[] = {self, "--shm", (char *)cases[k], NULL};
        run_job(argv, NULL, 60, &status);
        for (int r = 0; r < 3; r++) {
            expected(cases[k], r, want, sizeof want);
            if (!has_line(output, want)) {
                fprintf(stderr, "shm case %s: no line\n  %s", cases[k], want);
                check_failures_in_test++;
            }
        }
        if (check_failures_in_test)
            fprintf(stderr, "shm case %s output:\n%s\n", cases[k], output);
    }
}

static void test_rank_missing_the_last_call_is_named(void)
{
    int status = 0;
    double took = mpirun(3, "tail", &status);
    CHECK(took >= 0 && took < 30); /* torn down once the others exit after their timeouts */
    CHECK(line_has(output, "rank 1 DDPC_OK", ""));
    CHECK(line_has(output, "rank 0 DDPC_ETIMEOUT",
                   "all_reduce #2 timed out after 3 s: rank 1 never arrived\n"));
    CHECK(line_has(output, "rank 2 DDPC_ETIMEOUT",
                   "all_reduce #2 timed out after 3 s: rank 1 never arrived\n"));
    if (check_failures_in_test)
        fprintf(stderr, "output:\n%s\n", output);
}

/* With 2 ranks the survivor cannot finish without the stopped one; with 3, a survivor may (it
 * already holds every chunk, depending on MPI's algorithm), but one that fails must name rank 1. */
static void test_rank_stopped_mid_transfer_is_named(void)
{
    for (int np = 2; np <= 3; np++) {
        int status = 0, named = 0;
        double took = mpirun(np, "stall", &status);
        CHECK(took >= 0 && took < 60);
        CHECK_STR_CONTAINS(output, "stalling rank stops mid-transfer");
        for (int r = 0; r < np; r += 2) {
            char head[64];
            snprintf(head, sizeof head, "rank %d DDPC_ETIMEOUT after ", r);
            bool ok = line_has(output, head,
                               "(in time): all_reduce #1 timed out after 15 s: rank 1 stopped "
                               "responding mid-transfer\n");
            named += ok;
            snprintf(head, sizeof head, "rank %d DDPC_OK", r);
            CHECK(ok || (np == 3 && line_has(output, head, "")));
            snprintf(head, sizeof head, "rank %d ", r);
            CHECK(!line_has(output, head, "every rank arrived"));
        }
        CHECK(named >= 1);
        if (check_failures_in_test)
            fprintf(stderr, "np %d output:\n%s\n", np, output);
    }
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--shm") == 0)
        return spawn_ranks(3, 60, shm_rank, argv[2]) == 0 ? 0 : 3;
    if (argc == 3 && strcmp(argv[1], "--rank") == 0) {
        const char *m = argv[2];
        return strcmp(m, "tail") == 0    ? rank_tail()
               : strcmp(m, "stall") == 0 ? rank_stall()
                                         : rank_mismatch(DDPC_BACKEND_MPI, m);
    }
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = '\0';
    if (!ddpc_backend_available(DDPC_BACKEND_MPI)) {
        printf("built without MPI: nothing to test here (test_comm_mpi checks the error)\n");
        return 0;
    }
    RUN_TEST(test_mismatch_fails_every_rank_in_shm_words);
    RUN_TEST(test_rank_missing_the_last_call_is_named);
    RUN_TEST(test_rank_stopped_mid_transfer_is_named);
    return check_summary();
}
