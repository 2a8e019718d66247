// SPDX-License-Identifier: MIT
/* Fault tests of `ddpc run` with real collectives: this program is both the test and its worker
 * (`test_launch_timeout --worker MODE`), started by the ddpc binary in $DDPC_BIN. A worker stopped
 * with SIGSTOP must make every other rank fail with the timeout message (collective, sequence
 * number, missing rank) within the timeout + 5 s; a worker killed mid-job must not hang the rest;
 * two jobs started at once on one host must each form their own group and get right sums. */
#include <ddpc/comm.h>
#include <ddpc/timer.h>

#include "check.h"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TIMEOUT_S 2.0
#define LINGER_S 1.0 /* a failed survivor waits this long so every survivor reports first */

static void sleep_s(double s)
{
    struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* MODE "sum": 50 all-reduces whose results are checked, then exit 0. */
static int sum_worker(ddpc_pg *pg)
{
    int rank = ddpc_pg_rank(pg), world = ddpc_pg_world_size(pg);
    for (int it = 0; it < 50; it++) {
        int64_t v[16];
        for (int i = 0; i < 16; i++)
            v[i] = rank * 1000 + i + it;
        if (ddpc_pg_all_reduce(pg, v, v, 16, DDPC_DTYPE_I64, DDPC_REDUCE_SUM) != DDPC_OK) {
            printf("rank %d: %s\n", rank, ddpc_last_error());
            return 1;
        }
        for (int i = 0; i < 16; i++) {
            int64_t want = 1000LL * world * (world - 1) / 2 + (int64_t)world * (i + it);
            if (v[i] != want) {
                printf("rank %d: element %d is %lld, want %lld\n", rank, i, (long long)v[i],
                       (long long)want);
                return 1;
            }
        }
    }
    printf("rank %d of %d ok\n", rank, world);
    return 0;
}

/* MODE "stop": rank 1 stops itself after 20 all-reduces; MODE "kill": rank 1 SIGKILLs itself. */
static int worker(const char *mode)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    ddpc_comm_env env;
    ddpc_pg_config pc = ddpc_pg_config_default();
    ddpc_pg *pg = NULL;
    if (ddpc_comm_env_discover(&env) != DDPC_OK || ddpc_pg_create(&env, &pc, &pg) != DDPC_OK) {
        printf("worker setup failed: %s\n", ddpc_last_error());
        return 2;
    }
    if (strcmp(mode, "sum") == 0) {
        int rc = sum_worker(pg);
        ddpc_pg_destroy(pg);
        return rc;
    }
    int rank = ddpc_pg_rank(pg);
    float v[64];
    for (int it = 0; it < 1000000; it++) {
        if (it == 20 && rank == 1) {
            printf("rank 1 stopping itself\n");
            raise(strcmp(mode, "kill") == 0 ? SIGKILL : SIGSTOP);
        }
        for (int i = 0; i < 64; i++)
            v[i] = (float)(rank + i);
        double t0 = ddpc_time_now();
        ddpc_status s = ddpc_pg_all_reduce(pg, v, v, 64, DDPC_DTYPE_F32, DDPC_REDUCE_SUM);
        if (s != DDPC_OK) {
            printf("rank %d failed after %.2f s: %s\n", rank, ddpc_time_now() - t0,
                   ddpc_last_error());
            sleep_s(LINGER_S);
            ddpc_pg_destroy(pg);
            return 1;
        }
    }
    ddpc_pg_destroy(pg);
    return 0;
}

/* The `ddpc run` command line for `nproc` workers of this program in MODE, logs in dir. */
static bool launch_command(int nproc, const char *mode, const char *dir, char *cmd, size_t cap)
{
    const char *ddpc = getenv("DDPC_BIN");
    char self[1024];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (!ddpc || n <= 0) {
        fprintf(stderr, "DDPC_BIN is not set (run through ctest) or /proc/self/exe unreadable\n");
        return false;
    }
    self[n] = '\0';
    snprintf(cmd, cap,
             "'%s' run --nproc-per-node %d --collective-timeout %g --log-dir '%s' -- '%s' "
             "--worker %s >'%s/launcher.out' 2>'%s/launcher.err'",
             ddpc, nproc, TIMEOUT_S, dir, self, mode, dir, dir);
    return true;
}

/* Runs `ddpc run` with 3 workers of this program in MODE; logs land in dir/attempt_0/. */
static int launch(const char *mode, const char *dir, double *seconds)
{
    char cmd[4096];
    if (!launch_command(3, mode, dir, cmd, sizeof cmd))
        return -1;
    double t0 = ddpc_time_now();
    int st = system(cmd);
    *seconds = ddpc_time_now() - t0;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The survivor's "failed after X s" figure, or -1. */
static double failed_after(const char *log)
{
    const char *p = strstr(log, "failed after ");
    return p ? atof(p + 13) : -1.0;
}

static void test_sigstop_times_out_every_survivor(void)
{
    char dir[] = "/tmp/ddpc_test_timeoutXXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    double seconds = 0;
    int rc = launch("stop", dir, &seconds);
    char err[8192], path[256], log[8192];
    snprintf(path, sizeof path, "%s/launcher.err", dir);
    check_read_file(path, err, sizeof err);
    CHECK_EQ_INT(rc, 1);
    CHECK_STR_CONTAINS(err, "failed with exit code 1");
    for (int r = 0; r < 3; r += 2) {
        snprintf(path, sizeof path, "%s/attempt_0/rank_%d.log", dir, r);
        check_read_file(path, log, sizeof log);
        CHECK_STR_CONTAINS(log, "all_reduce #20 timed out");
        CHECK_STR_CONTAINS(log, "rank 1 never arrived");
        double t = failed_after(log);
        CHECK(t >= TIMEOUT_S * 0.9 && t <= TIMEOUT_S + 5.0);
        if (!(t >= TIMEOUT_S * 0.9 && t <= TIMEOUT_S + 5.0))
            fprintf(stderr, "rank %d log:\n%s\n", r, log);
    }
    CHECK(seconds < 20.0);
    if (check_failures_in_test)
        fprintf(stderr, "launcher stderr:\n%s\n", err);
    snprintf(path, sizeof path, "rm -rf '%s'", dir);
    CHECK(system(path) == 0);
}

static void test_sigkill_mid_job_stops_everything(void)
{
    char dir[] = "/tmp/ddpc_test_timeoutXXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    double seconds = 0;
    int rc = launch("kill", dir, &seconds);
    char err[8192], path[256];
    snprintf(path, sizeof path, "%s/launcher.err", dir);
    check_read_file(path, err, sizeof err);
    CHECK_EQ_INT(rc, 137);
    CHECK_STR_CONTAINS(err, "rank 1 (local rank 1");
    CHECK_STR_CONTAINS(err, "signal SIGKILL");
    CHECK(seconds < 10.0);
    if (check_failures_in_test)
        fprintf(stderr, "launcher stderr:\n%s\n", err);
    snprintf(path, sizeof path, "rm -rf '%s'", dir);
    CHECK(system(path) == 0);
}

static void test_two_jobs_at_once(void)
{
    char dirs[2][32] = {"/tmp/ddpc_test_jobaXXXXXX", "/tmp/ddpc_test_jobbXXXXXX"};
    pid_t pids[2] = {0, 0};
    for (int j = 0; j < 2; j++) {
        char cmd[4096];
        CHECK(mkdtemp(dirs[j]) != NULL);
        CHECK(launch_command(2, "sum", dirs[j], cmd, sizeof cmd));
        pids[j] = fork();
        if (pids[j] == 0) {
            execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
            _exit(127);
        }
    }
    for (int j = 0; j < 2; j++) {
        int st = 0;
        waitpid(pids[j], &st, 0);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        for (int r = 0; r < 2; r++) {
            char path[256], log[4096], want[64];
            snprintf(path, sizeof path, "%s/attempt_0/rank_%d.log", dirs[j], r);
            check_read_file(path, log, sizeof log);
            snprintf(want, sizeof want, "rank %d of 2 ok", r);
            CHECK_STR_CONTAINS(log, want);
        }
        char rm[128];
        snprintf(rm, sizeof rm, "rm -rf '%s'", dirs[j]);
        CHECK(system(rm) == 0);
    }
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--worker") == 0)
        return worker(argv[2]);
    RUN_TEST(test_sigstop_times_out_every_survivor);
    RUN_TEST(test_sigkill_mid_job_stops_everything);
    RUN_TEST(test_two_jobs_at_once);
    return check_summary();
}
