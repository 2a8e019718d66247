// SPDX-License-Identifier: MIT
/* Test helper: runs a command (usually this test under `mpirun`, as the ranks of a small job) in
 * its own process group with a time limit, its stdout and stderr read back into `output`, and
 * finds lines in that output. Header-only, for the tests that re-run themselves as ranks. */
#ifndef DDPC_TESTS_MPI_JOB_H
#define DDPC_TESTS_MPI_JOB_H

#include <ddpc/timer.h>

#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char self[4096]; /* this test's executable, set by main from /proc/self/exe */
static char out_path[64];
static char output[1 << 16];

/* Runs argv with env additions (NULL-terminated "K=V" list) in its own process group, output to a
 * file read into `output`; kills the group after limit_s. Returns the wall time, or -1. */
static double run_job(char *const argv[], const char *const *vars, double limit_s, int *status)
{
    snprintf(out_path, sizeof out_path, "/tmp/ddpc_test_mpi_%d", (int)getpid());
    double t0 = ddpc_time_now();
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 1);
        dup2(fd, 2);
        for (const char *const *v = vars; v && *v; v++) {
            char kv[256];
            snprintf(kv, sizeof kv, "%s", *v);
            char *eq = strchr(kv, '=');
            *eq = '\0';
            setenv(kv, eq + 1, 1);
        }
        execvp(argv[0], argv);
        _exit(127);
    }
    double took = -1;
    for (;;) {
        if (waitpid(pid, status, WNOHANG) == pid) {
            took = ddpc_time_now() - t0;
            break;
        }
        if (ddpc_time_now() - t0 > limit_s) {
            kill(-pid, SIGKILL);
            waitpid(pid, status, 0);
            break;
        }
        struct timespec nap = {0, 10 * 1000 * 1000};
        nanosleep(&nap, NULL);
    }
    kill(-pid, SIGKILL); /* anything of the job left behind */
    int fd = open(out_path, O_RDONLY);
    ssize_t n = fd >= 0 ? read(fd, output, sizeof output - 1) : 0;
    output[n > 0 ? n : 0] = '\0';
    if (fd >= 0)
        close(fd);
    unlink(out_path);
    return took;
}

/* `mpirun -np NP self --rank MODE` on shared memory, allowed to run as root. */
static double mpirun(int np, const char *mode, int *status)
{
    char nps[16];
    snprintf(nps, sizeof nps, "%d", np);
    char *argv[] = {"mpirun", "--oversubscribe", "--mca",      "btl", "self,vader", "-np", nps,
                    self,     "--rank",          (char *)mode, NULL};
    const char *vars[] = {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
                          "OMP_NUM_THREADS=1", NULL};
    return run_job(argv, vars, 60, status);
}

/* Whether the line of `text` that starts with `head` also contains `needle`. */
static bool line_has(const char *text, const char *head, const char *needle)
{
    const char *line = strstr(text, head);
    if (!line)
        return false;
    const char *end = strchr(line, '\n');
    const char *hit = strstr(line, needle);
    return hit && (!end || hit < end);
}

#endif
