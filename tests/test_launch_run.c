// SPDX-License-Identifier: MIT
/* Tests for ddpc_launch_run with small /bin/sh workers: success, a failing or killed rank stopping
 * the others, restarts, SIGKILL after the grace, stragglers killed, the launcher's own signals,
 * log files. Console streams are temporary files so the tests read what a user would see. */
#include <ddpc/alloc.h>
#include <ddpc/launch.h>
#include <ddpc/timer.h>

#include "check.h"

#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *base_env[] = {"PATH=/usr/bin:/bin", "OMP_NUM_THREADS=1", NULL};

typedef struct {
    int code;
    ddpc_status status;
    double seconds;
    char out[8192], err[8192];
} result;

static void slurp(FILE *f, char *buf, size_t cap)
{
    fflush(f);
    rewind(f);
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    fclose(f);
}

/* Runs `script` with /bin/sh -c on `nproc` workers; `tweak` adjusts the config first. */
static result run(int nproc, const char *script, void (*tweak)(ddpc_launch_config *))
{
    result r;
    memset(&r, 0, sizeof r);
    ddpc_launch_config c = ddpc_launch_config_default();
    char *argv[] = {"sh", "-c", (char *)script, NULL};
    c.argc = 3;
    c.argv = argv;
    c.nproc_per_node = nproc;
    c.monitor_interval_s = 0.02;
    c.stop_grace_s = 1.0;
    c.out = tmpfile();
    c.err = tmpfile();
    if (tweak)
        tweak(&c);
    double t0 = ddpc_time_now();
    r.status = ddpc_launch_run(&c, base_env, &r.code);
    r.seconds = ddpc_time_now() - t0;
    slurp(c.out, r.out, sizeof r.out);
    slurp(c.err, r.err, sizeof r.err);
    return r;
}

static void test_all_succeed(void)
{
    int64_t live = ddpc_alloc_live();
    result r = run(3,
                   "echo \"rank=$RANK/$WORLD_SIZE local=$LOCAL_RANK/$LOCAL_WORLD_SIZE "
                   "port=$MASTER_PORT\"; echo to-stderr-$RANK >&2",
                   NULL);
    CHECK_EQ_INT(r.status, DDPC_OK);
    CHECK_EQ_INT(r.code, 0);
    CHECK_STR_CONTAINS(r.out, "rank=0/3 local=0/3 port=");
    CHECK_STR_CONTAINS(r.out, "rank=1/3 local=1/3 port=");
    CHECK_STR_CONTAINS(r.out, "rank=2/3 local=2/3 port=");
    CHECK(strstr(r.out, "port=0") == NULL);
    CHECK_STR_CONTAINS(r.err, "to-stderr-2");
    CHECK(strstr(r.out, "to-stderr") == NULL);
    CHECK_EQ_INT(ddpc_alloc_live(), live);
}

static void test_exit_code_stops_the_others(void)
{
    result r =
        run(3, "echo started $RANK; if [ $RANK = 1 ]; then echo bye; exit 3; fi; sleep 30", NULL);
    CHECK_EQ_INT(r.status, DDPC_OK);
    CHECK_EQ_INT(r.code, 3);
    CHECK(r.seconds < 5.0);
    CHECK_STR_CONTAINS(r.err, "rank 1 (local rank 1");
    CHECK_STR_CONTAINS(r.err, "failed with exit code 3");
    CHECK_STR_CONTAINS(r.err, "[rank 1/3] bye");
}

static void test_sigkill_is_named(void)
{
    result r = run(2, "if [ $RANK = 0 ]; then kill -9 $$; fi; sleep 30", NULL);
    CHECK_EQ_INT(r.code, 137);
    CHECK(r.seconds < 5.0);
    CHECK_STR_CONTAINS(r.err, "rank 0 (local rank 0");
    CHECK_STR_CONTAINS(r.err, "signal SIGKILL");
    CHECK_STR_CONTAINS(r.err, "printed nothing");
}

static void one_restart(ddpc_launch_config *c)
{
    c->max_restarts = 1;
}

static void test_restart_increments_count(void)
{
    result r = run(2,
                   "echo attempt=$TORCHELASTIC_RESTART_COUNT max=$TORCHELASTIC_MAX_RESTARTS; "
                   "if [ $TORCHELASTIC_RESTART_COUNT = 0 ] && [ $RANK = 1 ]; then exit 5; fi",
                   one_restart);
    CHECK_EQ_INT(r.code, 0);
    CHECK_STR_CONTAINS(r.out, "attempt=1 max=1");
    CHECK_STR_CONTAINS(r.err, "restarting all workers (restart 1 of 1)");
    /* Both attempts failing: the second failure's status is the launcher's. */
    r = run(2, "if [ $RANK = 1 ]; then exit $((7 + TORCHELASTIC_RESTART_COUNT)); fi; sleep 30",
            one_restart);
    CHECK_EQ_INT(r.code, 8);
    CHECK_STR_CONTAINS(r.err, "no restarts left");
}

static void short_grace(ddpc_launch_config *c)
{
    c->stop_grace_s = 0.3;
}

static void test_sigterm_ignored_then_sigkill(void)
{
    /* Rank 0 ignores SIGTERM (and SIGSTOPs itself first: SIGCONT must wake it). */
    result r = run(2,
                   "if [ $RANK = 0 ]; then trap '' TERM; kill -STOP $$; "
                   "while :; do sleep 0.05; done; fi; sleep 0.2; exit 1",
                   short_grace);
    CHECK_EQ_INT(r.code, 1);
    CHECK(r.seconds < 3.0);
    CHECK_STR_CONTAINS(r.err, "rank 1");
}

static void test_stragglers_are_killed(void)
{
    result r = run(1, "sleep 30 & echo straggler=$!; exit 0", NULL);
    CHECK_EQ_INT(r.code, 0);
    const char *p = strstr(r.out, "straggler=");
    CHECK(p != NULL);
    if (p) {
        pid_t pid = (pid_t)atol(p + 10);
        struct timespec ten_ms = {0, 10000000L};
        for (int i = 0; i < 50 && !check_process_gone(pid); i++)
            nanosleep(&ten_ms, NULL);
        CHECK(check_process_gone(pid));
    }
}

static void test_launcher_signal_stops_everything(void)
{
    /* The worker signals its launcher (this test process), as Ctrl-C or `kill` would. */
    result r = run(2, "if [ $RANK = 1 ]; then sleep 0.2; kill -TERM $PPID; fi; sleep 30", NULL);
    CHECK_EQ_INT(r.status, DDPC_OK);
    CHECK_EQ_INT(r.code, 143);
    CHECK(r.seconds < 5.0);
    CHECK_STR_CONTAINS(r.err, "got SIGTERM; stopped all 2 local worker(s)");
    /* The mask is restored: SIGTERM is no longer blocked here. */
    sigset_t now;
    sigprocmask(SIG_BLOCK, NULL, &now);
    CHECK(!sigismember(&now, SIGTERM));
}

static char log_dir[64];

static void with_logs(ddpc_launch_config *c)
{
    snprintf(c->log_dir, sizeof c->log_dir, "%s/nested/logs", log_dir);
    c->tee = true;
}

static void test_log_files_and_tee(void)
{
    snprintf(log_dir, sizeof log_dir, "/tmp/ddpc_test_logsXXXXXX");
    CHECK(mkdtemp(log_dir) != NULL);
    result r = run(2, "echo out-$RANK; echo err-$RANK >&2", with_logs);
    CHECK_EQ_INT(r.code, 0);
    CHECK_STR_CONTAINS(r.out, "[rank 0/2] out-0\n");
    CHECK_STR_CONTAINS(r.err, "[rank 1/2] err-1\n");
    for (int rank = 0; rank < 2; rank++) {
        char path[160], text[128], want[64];
        snprintf(path, sizeof path, "%s/nested/logs/attempt_0/rank_%d.log", log_dir, rank);
        FILE *f = fopen(path, "r");
        CHECK(f != NULL);
        if (!f)
            continue;
        slurp(f, text, sizeof text);
        snprintf(want, sizeof want, "out-%d\n", rank);
        CHECK_STR_CONTAINS(text, want);
        snprintf(want, sizeof want, "err-%d\n", rank);
        CHECK_STR_CONTAINS(text, want);
        CHECK(strstr(text, "[rank") == NULL);
        unlink(path);
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", log_dir);
    CHECK(system(cmd) == 0);
}

static void test_missing_program(void)
{
    ddpc_launch_config c = ddpc_launch_config_default();
    char *argv[] = {"no-such-program-here", NULL};
    c.argc = 1;
    c.argv = argv;
    int code = 0;
    CHECK_EQ_INT(ddpc_launch_run(&c, base_env, &code), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "'no-such-program-here' was not found in PATH");
}

int main(void)
{
    RUN_TEST(test_all_succeed);
    RUN_TEST(test_exit_code_stops_the_others);
    RUN_TEST(test_sigkill_is_named);
    RUN_TEST(test_restart_increments_count);
    RUN_TEST(test_sigterm_ignored_then_sigkill);
    RUN_TEST(test_stragglers_are_killed);
    RUN_TEST(test_launcher_signal_stops_everything);
    RUN_TEST(test_log_files_and_tee);
    RUN_TEST(test_missing_program);
    return check_summary();
}
