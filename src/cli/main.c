// SPDX-License-Identifier: MIT
/* ddpc command line: dispatches subcommands. Parsing, printing and exit codes live in src/cli and
 * nowhere else. */
#include "cli/cli.h"

#include <ddpc/simd.h>
#include <ddpc/version.h>

#include <stdio.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ddpc <command> [args]\n"
            "  train CONFIG [key=value ...]        train, validate, test or predict (see docs/config.md)\n"
            "  plan CONFIG [--nproc N] [--bytes] [key=value ...]\n"
            "                                      per-rank memory plan at every zero.stage (docs/memory.md)\n"
            "  bench step CONFIG [key=value ...]   time training steps, print one JSON line\n"
            "  bench allreduce|broadcast|all_gather|reduce_scatter [options]\n"
            "                                      collective sweep as one worker of a job\n"
            "  run [options] -- PROGRAM [ARGS]     start PROGRAM as a group of workers (docs/launcher.md)\n"
            "  env                                 system, build, MPI/CUDA/NCCL and launch variables\n"
            "  ckpt ls|show|verify DIR             list, show or check checkpoints (docs/checkpoints.md)\n"
            "  ckpt export DIR OUT                 a checkpoint's parameters as one safetensors file\n"
            "  report RUN_DIR [--out FILE]         a run's metrics as one HTML page (docs/observability.md)\n"
            "  <command> --help                    a command's own usage (-h too)\n"
            "  --version                           print ddpc's version\n");
}

/* The subcommands, in usage's order. */
static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
} COMMANDS[] = {
    {"train", ddpc_cli_train}, {"plan", ddpc_cli_plan}, {"bench", ddpc_cli_bench},
    {"run", ddpc_cli_run},     {"env", ddpc_cli_env},   {"ckpt", ddpc_cli_ckpt},
    {"report", ddpc_cli_report},
};

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    /* torch.distributed.launch --no-python puts --local-rank=N between the program and its
     * arguments: `ddpc --local-rank=0 train CONFIG`. The command goes first; it takes the flag. */
    int lead = 0;
    while (1 + lead < argc && ddpc_cli_is_local_rank(argv[1 + lead]))
        lead += strchr(argv[1 + lead], '=') ? 1 : 2;
    if (lead > 0 && 1 + lead < argc) {
        char *command = argv[1 + lead];
        memmove(&argv[2], &argv[1], (size_t)lead * sizeof *argv);
        argv[1] = command;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf("ddpc %s\n", ddpc_version());
        return 0;
    }
    if (ddpc_isa_check_env() != DDPC_OK) { /* a typo must not quietly run the slow variant */
        fprintf(stderr, "ddpc: %s\n", ddpc_last_error());
        return 2;
    }
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++) {
        if (strcmp(cmd, COMMANDS[i].name) == 0)
            return COMMANDS[i].run(argc - 2, argv + 2);
    }
    const char *names[sizeof COMMANDS / sizeof COMMANDS[0] + 1];
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
        names[i] = COMMANDS[i].name;
    names[sizeof COMMANDS / sizeof COMMANDS[0]] = NULL;
    const char *near = ddpc_config_nearest(cmd, names); /* the config keys' "did you mean" rule */
    if (near)
        fprintf(stderr, "ddpc: unknown command '%s' (did you mean '%s'? try 'ddpc --help')\n", cmd,
                near);
    else
        fprintf(stderr, "ddpc: unknown command '%s' (try 'ddpc --help')\n", cmd);
    return 2;
}
