// SPDX-License-Identifier: MIT
/* Test helper: forks N ranks of a multi-process test, each with torchrun-style variables (RANK,
 * WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, a free MASTER_PORT), as a platform would
 * start them; kills the others as soon as one fails, and fails the whole after timeout_s.
 * Children must not have touched OpenMP before the fork. Header-only, for tests. */
#ifndef DDPC_TESTS_SPAWN_H
#define DDPC_TESTS_SPAWN_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int spawn_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        perror("spawn: free port");
        exit(1);
    }
    close(fd);
    return ntohs(a.sin_port);
}

static void spawn_setenv_int(const char *name, int v)
{
    char s[32];
    snprintf(s, sizeof s, "%d", v);
    setenv(name, s, 1);
}

static double spawn_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Runs fn(rank, world, ctx) in n forked processes; returns 0 when all returned 0 in time. */
static int spawn_ranks(int n, double timeout_s, int (*fn)(int rank, int world, void *ctx),
                       void *ctx)
{
    enum { MAX_RANKS = 64 };
    pid_t pids[MAX_RANKS];
    if (n < 1 || n > MAX_RANKS)
        return 2;
    int port = spawn_free_port();
    fflush(NULL);
    for (int r = 0; r < n; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            spawn_setenv_int("RANK", r);
            spawn_setenv_int("LOCAL_RANK", r);
            spawn_setenv_int("WORLD_SIZE", n);
            spawn_setenv_int("LOCAL_WORLD_SIZE", n);
            spawn_setenv_int("MASTER_PORT", port);
            setenv("MASTER_ADDR", "127.0.0.1", 1);
            int rc = fn(r, n, ctx);
            fflush(NULL);
            _exit(rc);
        }
    }
    int failed = 0, left = n;
    double t0 = spawn_now();
    struct timespec nap = {0, 2 * 1000 * 1000};
    while (left > 0) {
        int status;
        pid_t p = waitpid(-1, &status, WNOHANG);
        if (p > 0) {
            for (int r = 0; r < n; r++) {
                if (pids[r] != p)
                    continue;
                pids[r] = 0;
                left--;
                if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                    fprintf(stderr, "spawn: rank %d of %d failed (status 0x%x)\n", r, n, status);
                    failed = 1;
                }
            }
            continue;
        }
        if (failed || spawn_now() - t0 > timeout_s) {
            if (!failed)
                fprintf(stderr, "spawn: timed out after %.0f s\n", timeout_s);
            failed = 1;
            for (int r = 0; r < n; r++)
                if (pids[r] > 0)
                    kill(pids[r], SIGKILL);
        }
        nanosleep(&nap, NULL);
    }
    return failed;
}

#endif
