// SPDX-License-Identifier: MIT
/* Faults of `ddpc run` that must leave nothing behind: this program is both the test and its
 * worker (`test_launch_faults --worker MODE DIR`), started by the ddpc binary in $DDPC_BIN. A
 * SIGKILLed launcher takes its workers and their children with it; a worker failing or killed
 * during the shm rendezvous, and every restart after it, leaves no segment of the job in
 * /dev/shm; a log file that cannot be written (ENOSPC) is reported and fails the run. */
#include <ddpc/comm.h>
#include <ddpc/timer.h>

#include "check.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void sleep_s(double s)
{
    struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

static void write_pid(const char *dir, const char *what, int rank, pid_t pid)
{
    char path[512], tmp[520];
    snprintf(path, sizeof path, "%s/%s.%d", dir, what, rank);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (f) {
        fprintf(f, "%ld\n", (long)pid);
        fclose(f);
        rename(tmp, path);
    }
}

/* MODE "sleep": record this pid and a child's, then sleep. "rdzv-exit": rank 1 exits 3 while
 * rank 0 waits in the rendezvous. "rdzv-hold": rank 0 records its pid and joins; rank 1 sleeps.
 * "print": a few lines on stdout, exit 0. */
static int worker(const char *mode, const char *dir)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    ddpc_comm_env env;
    if (ddpc_comm_env_discover(&env) != DDPC_OK) {
        printf("worker setup failed: %s\n", ddpc_last_error());
        return 2;
    }
    if (strcmp(mode, "print") == 0) {
        for (int i = 0; i < 100; i++)
            printf("rank %d line %d\n", env.rank, i);
        return 0;
    }
    if (strcmp(mode, "sleep") == 0) {
        pid_t kid = fork();
        if (kid == 0) {
            sleep_s(60);
            _exit(0);
        }
        write_pid(dir, "kid", env.rank, kid);
        write_pid(dir, "pid", env.rank, getpid());
        sleep_s(60);
        return 0;
    }
    bool hold = strcmp(mode, "rdzv-hold") == 0;
    if (env.rank == 1) {
        sleep_s(hold ? 60 : 0.5);
        return 3;
    }
    if (hold)
        write_pid(dir, "pid", env.rank, getpid());
    ddpc_pg_config pc = ddpc_pg_config_default();
    pc.timeout_s = 60;
    ddpc_pg *pg = NULL;
    if (ddpc_pg_create(&env, &pc, &pg) != DDPC_OK) {
        printf("rank 0: %s\n", ddpc_last_error());
        return 1;
    }
    ddpc_pg_destroy(pg);
    return 0;
}

/* Starts `ddpc run --nproc-per-node 2 EXTRA -- self --worker MODE DIR`, output in DIR. */
static pid_t start_launcher(const char *extra, const char *mode, const char *dir)
{
    const char *ddpc = getenv("DDPC_BIN");
    char self[1024], cmd[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (!ddpc || n <= 0) {
        fprintf(stderr, "DDPC_BIN is not set (run through ctest) or /proc/self/exe unreadable\n");
        return -1;
    }
    self[n] = '\0';
    snprintf(cmd, sizeof cmd,
             "exec '%s' run --nproc-per-node 2 %s -- '%s' --worker %s '%s' "
             ">'%s/launcher.out' 2>'%s/launcher.err'",
             ddpc, extra, self, mode, dir, dir, dir);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* The launcher's exit code (128 + signal when killed), or -1 after `limit_s` (it is killed). */
static int wait_launcher(pid_t pid, double limit_s)
{
    double end = ddpc_time_now() + limit_s;
    int st = 0;
    while (waitpid(pid, &st, WNOHANG) == 0) {
        if (ddpc_time_now() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        sleep_s(0.02);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static long read_pid(const char *dir, const char *what, int rank)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s.%d", dir, what, rank);
    FILE *f = fopen(path, "r");
    long pid = 0;
    if (f) {
        if (fscanf(f, "%ld", &pid) != 1)
            pid = 0;
        fclose(f);
    }
    return pid;
}

/* Gone or a zombie (an orphan's reaper may be slow). */
/* Entries of /dev/shm whose name contains `id`. */
static int shm_entries(const char *id)
{
    DIR *d = opendir("/dev/shm");
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += strstr(e->d_name, id) != NULL;
    if (d)
        closedir(d);
    return n;
}

static void remove_dir(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

static void show_err(const char *dir)
{
    char path[512], err[8192];
    snprintf(path, sizeof path, "%s/launcher.err", dir);
    check_read_file(path, err, sizeof err);
    fprintf(stderr, "launcher stderr:\n%s\n", err);
}

static void test_sigkill_of_launcher_takes_workers(void)
{
    char dir[] = "/tmp/ddpc_test_faultsXXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    pid_t launcher = start_launcher("", "sleep", dir);
    CHECK(launcher > 0);
    long pids[4] = {0, 0, 0, 0};
    for (int i = 0; i < 500 && !(pids[0] && pids[1] && pids[2] && pids[3]); i++) {
        sleep_s(0.02);
        for (int r = 0; r < 2; r++) {
            pids[r] = read_pid(dir, "pid", r);
            pids[2 + r] = read_pid(dir, "kid", r);
        }
    }
    CHECK(pids[0] && pids[1] && pids[2] && pids[3]);
    kill(launcher, SIGKILL);
    CHECK_EQ_INT(wait_launcher(launcher, 10), 128 + SIGKILL);
    bool all_dead = false;
    double t0 = ddpc_time_now();
    while (!all_dead && ddpc_time_now() - t0 < 20.0) {
        all_dead = true;
        for (int k = 0; k < 4; k++)
            all_dead = all_dead && (pids[k] == 0 || check_process_gone(pids[k]));
        if (!all_dead)
            sleep_s(0.02);
    }
    CHECK(all_dead); /* workers (k < 2) and the children they forked (k >= 2) */
    for (int k = 0; k < 4; k++)
        if (pids[k] > 0 && !check_process_gone(pids[k]))
            kill((pid_t)pids[k], SIGKILL);
    remove_dir(dir);
}

/* `ddpc run EXTRA` of MODE with run id `id`: the launcher's exit code, and no segment left. */
static void check_no_shm_left(const char *tag, const char *extra, const char *mode, int want_rc)
{
    char dir[] = "/tmp/ddpc_test_faultsXXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char id[64], args[256];
    snprintf(id, sizeof id, "faults-%ld-%s", (long)getpid(), tag);
    snprintf(args, sizeof args, "--run-id %s %s", id, extra);
    pid_t launcher = start_launcher(args, mode, dir);
    CHECK(launcher > 0);
    if (strcmp(mode, "rdzv-hold") == 0) {
        /* SIGKILL rank 0 once its segment exists: it dies inside the rendezvous */
        long pid = 0;
        for (int i = 0; i < 500 && !(pid && shm_entries(id) > 0); i++) {
            sleep_s(0.02);
            pid = read_pid(dir, "pid", 0);
        }
        CHECK(pid > 0 && shm_entries(id) > 0);
        if (pid > 0)
            kill((pid_t)pid, SIGKILL);
    }
    int rc = wait_launcher(launcher, 30);
    CHECK_EQ_INT(rc, want_rc);
    CHECK_EQ_INT(shm_entries(id), 0);
    if (check_failures_in_test)
        show_err(dir);
    remove_dir(dir);
}

static void test_rendezvous_failure_leaves_no_shm(void)
{
    check_no_shm_left("exit", "", "rdzv-exit", 3);
}

static void test_rendezvous_sigkill_leaves_no_shm(void)
{
    check_no_shm_left("kill", "", "rdzv-hold", 128 + SIGKILL);
}

static void test_restarts_leave_no_shm(void)
{
    check_no_shm_left("restart", "--max-restarts 2", "rdzv-exit", 3);
}

static void test_log_write_error_fails_the_run(void)
{
    char dir[] = "/tmp/ddpc_test_faultsXXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char logs[600], path[1400], err[8192];
    snprintf(logs, sizeof logs, "%s/logs/attempt_0", dir);
    snprintf(path, sizeof path, "mkdir -p '%s' && ln -s /dev/full '%s/rank_1.log'", logs, logs);
    CHECK(system(path) == 0);
    char extra[700];
    snprintf(extra, sizeof extra, "--log-dir '%s/logs'", dir);
    pid_t launcher = start_launcher(extra, "print", dir);
    CHECK(launcher > 0);
    int rc = wait_launcher(launcher, 30);
    CHECK(rc != 0 && rc != -1);
    snprintf(path, sizeof path, "%s/launcher.err", dir);
    check_read_file(path, err, sizeof err);
    CHECK_STR_CONTAINS(err, "rank_1.log");
    CHECK_STR_CONTAINS(err, strerror(ENOSPC));
    if (check_failures_in_test)
        fprintf(stderr, "launcher stderr:\n%s\n", err);
    remove_dir(dir);
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--worker") == 0)
        return worker(argv[2], argv[3]);
    RUN_TEST(test_sigkill_of_launcher_takes_workers);
    RUN_TEST(test_rendezvous_failure_leaves_no_shm);
    RUN_TEST(test_rendezvous_sigkill_leaves_no_shm);
    RUN_TEST(test_restarts_leave_no_shm);
    RUN_TEST(test_log_write_error_fails_the_run);
    return check_summary();
}
