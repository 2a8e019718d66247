// SPDX-License-Identifier: MIT
/* torch.distributed.launch's `--local-rank N` (`--local_rank`, `=N` too): the legacy launcher
 * passes it to every worker, and ddpc train takes it out of its arguments. Rank discovery stays in
 * src/comm: when the environment has LOCAL_RANK they must agree; when a launcher set RANK but not
 * LOCAL_RANK (torch < 1.9), the flag becomes LOCAL_RANK, so discovery has one source of truth. */
#include "cli/cli.h"

#include <ddpc/comm.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

/* If argv[i] is the flag, its value text (from "=N" or the next argument, *used = 1 or 2
 * arguments); NULL with *used = 0 otherwise. A flag without its value: *used = -1. */
static const char *flag_value(int argc, char **argv, int i, int *used)
{
    static const char *const names[] = {"--local-rank", "--local_rank"};
    *used = 0;
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        size_t n = strlen(names[k]);
        if (strncmp(argv[i], names[k], n) != 0)
            continue;
        if (argv[i][n] == '=') {
            *used = 1;
            return argv[i] + n + 1;
        }
        if (argv[i][n] != '\0')
            continue;
        if (i + 1 >= argc) {
            *used = -1;
            return NULL;
        }
        *used = 2;
        return argv[i + 1];
    }
    return NULL;
}

bool ddpc_cli_is_local_rank(const char *arg)
{
    int used;
    char *argv[1] = {(char *)arg};
    flag_value(1, argv, 0, &used);
    return used != 0;
}

/* Checks `text` against the environment (see the file's comment); 0 or 2 after one line. */
static int agree(const char *text)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < 0 || v > 1 << 20) {
        fprintf(stderr, "ddpc train: --local-rank '%s' is not a local rank (an integer >= 0)\n",
                text);
        return 2;
    }
    const char *const *envp = (const char *const *)environ;
    const char *env = ddpc_comm_env_lookup(envp, "LOCAL_RANK");
    if (env) {
        char *e_end;
        long e = strtol(env, &e_end, 10);
        if (e_end == env || *e_end || e != v) {
            fprintf(stderr,
                    "ddpc train: --local-rank %ld disagrees with LOCAL_RANK=%s in the environment; "
                    "the launcher's flag and variable must name the same process\n",
                    v, env);
            return 2;
        }
        return 0;
    }
    if (ddpc_comm_env_lookup(envp, "RANK")) { /* a legacy launcher: the flag is the local rank */
        char buf[24];
        snprintf(buf, sizeof buf, "%ld", v);
        if (setenv("LOCAL_RANK", buf, 1) != 0) {
            fprintf(stderr, "ddpc train: cannot set LOCAL_RANK=%s: %s\n", buf, strerror(errno));
            return 2;
        }
        return 0;
    }
    if (v != 0) {
        fprintf(stderr,
                "ddpc train: --local-rank %ld, but no launcher's environment (RANK, LOCAL_RANK) "
                "places this process; alone it is local rank 0\n",
                v);
        return 2;
    }
    return 0;
}

int ddpc_cli_take_local_rank(int *argc, char **argv)
{
    int out = 0;
    for (int i = 0; i < *argc;) {
        int used;
        const char *v = flag_value(*argc, argv, i, &used);
        if (used < 0) {
            fprintf(stderr, "ddpc train: flag '%s' needs a value\n", argv[i]);
            return 2;
        }
        if (used == 0) {
            argv[out++] = argv[i++];
            continue;
        }
        int rc = agree(v);
        if (rc != 0)
            return rc;
        i += used;
    }
    *argc = out;
    return 0;
}
