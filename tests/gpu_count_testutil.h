// SPDX-License-Identifier: MIT
/* The GPUs a test may use, counted in a forked child so that the test's own process never
 * initialises CUDA (its ranks fork later, and a forked CUDA context is unusable). */
#ifndef DDPC_TEST_GPU_COUNT_TESTUTIL_H
#define DDPC_TEST_GPU_COUNT_TESTUTIL_H

#include <ddpc/device.h>

#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

/* The visible GPUs (at most 100); 0 after printing "skipped: <why>" when there are none. */
static int gpu_count_in_child(void)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        char why[200] = "";
        int n = ddpc_cuda_devices(why, sizeof why);
        if (n <= 0)
            printf("skipped: %s\n", why);
        fflush(NULL);
        _exit(n > 100 ? 100 : n);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 0;
}

#endif
