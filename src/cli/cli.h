// SPDX-License-Identifier: MIT
/* Subcommands of the ddpc program. Each returns the process exit status: 0 on success, 1 on a
 * runtime error, 2 on a usage error; errors are printed as one line on stderr. */
#ifndef DDPC_CLI_CLI_H
#define DDPC_CLI_CLI_H

#include <ddpc/config.h>

#include <stdbool.h>
#include <stdio.h>

int ddpc_cli_train(int argc, char **argv);
int ddpc_cli_plan(int argc, char **argv);
int ddpc_cli_bench(int argc, char **argv);
/* `ddpc bench <collective> [options]` (bench_coll.c); `coll` is argv[0] of the subcommand. */
int ddpc_cli_bench_coll(const char *coll, int argc, char **argv);
int ddpc_cli_run(int argc, char **argv);
int ddpc_cli_env(int argc, char **argv);
int ddpc_cli_ckpt(int argc, char **argv);
int ddpc_cli_report(int argc, char **argv);

/* env_gpu.c: what `ddpc env` reports of the build's CUDA (each a line of text). */
typedef struct {
    int runtime_version; /* cudaRuntimeGetVersion's code (13000 is 13.0); 0 without CUDA */
    char runtime[128];   /* "CUDA 13.0 (in this build, linked statically)" or why none */
    char cublas[96];     /* "cuBLAS 13.0.2" or why none */
    char device[256];    /* what device: auto takes for this rank: "cpu (no GPU: ...)" */
} ddpc_cli_cuda_report;
/* Fills *out for the rank whose LOCAL_RANK is local_rank; never fails. */
void ddpc_cli_env_cuda(ddpc_cli_cuda_report *out, int local_rank);
/* Whether arg asks for a command's usage: "--help" or "-h". */
bool ddpc_cli_is_help(const char *arg);
/* ddpc_cli_load_config's status when a "--help" or "-h" stands where CONFIG or a flag would. */
#define DDPC_CLI_HELP (-1)
/* Loads CONFIG (argv[0]) and applies key=value overrides (argv[1..]); prints the error itself.
 * `name` receives the config's base name without extension. DDPC_CLI_HELP (nothing loaded, nothing
 * printed) when a help flag stands where CONFIG or a flag would: the caller prints its usage. */
int ddpc_cli_load_config(int argc, char **argv, ddpc_config **out, char *name, size_t name_cap);
/* flags.c: argv[*i] starts with "--": applies it to c as ddpc_config_set_flag does, taking the
 * next argument as its value when ddpc_cli_flag_takes(it) and the flag has no "=VALUE" (then *i
 * moves past it). 0; 1 with the config's message set; 2 after a message naming the flag. */
int ddpc_cli_apply_flag(ddpc_config *c, int argc, char **argv, int *i);
/* flags.c: whether `next` (NULL: none) is the value of the flag before it: not another "--" flag,
 * not a key=value override. */
bool ddpc_cli_flag_takes(const char *next);
/* flags.c: after the trainer read its keys: 0, or 2 after one line naming the first flag that no
 * key matched, with the nearest flag name. */
int ddpc_cli_check_flags(const char *cmd, const ddpc_config *c);
/* flags.c: ddpc_cli_fail, but 2 when the error was a flag's misuse (ambiguous, value missing). */
int ddpc_cli_config_fail(const char *cmd, const ddpc_config *c);
/* flags.c: the documented flags and the keys they set. */
void ddpc_cli_print_flags(FILE *f);
/* plugins.c: the most plugins a command loads, from all three places together. */
#define DDPC_CLI_MAX_PLUGINS 32
/* plugins.c: -1 when argv[*i] is not --plugin; else 0 after appending its PATH ("--plugin PATH",
 * *i moves past it, or "--plugin=PATH") to paths (*n of DDPC_CLI_MAX_PLUGINS used), or 2 after
 * one line saying why not (no PATH, too many). */
int ddpc_cli_plugin_flag(int argc, char **argv, int *i, char **paths, size_t *n);
/* plugins.c: loads the plugins named by c's `plugins` (relative paths against c's file's
 * directory), then `flags` (n_flags paths), then DDPC_PLUGINS (colon-separated), each file once,
 * and sets c's `plugins` to the absolute paths loaded, as argument `arg_index` (none named
 * anywhere: c is left alone). 0, or 1 with the error set, naming the file and where it was named. */
int ddpc_cli_load_plugins(ddpc_config *c, char **flags, size_t n_flags, int arg_index);
/* local_rank.c: whether arg is torch.distributed.launch's --local-rank/--local_rank flag. */
bool ddpc_cli_is_local_rank(const char *arg);
/* local_rank.c: removes every --local-rank N / --local_rank=N from argv (*argc shrinks), checked
 * against LOCAL_RANK when set and made LOCAL_RANK under a legacy launcher that set RANK only.
 * 0, or 2 after one line saying why. */
int ddpc_cli_take_local_rank(int *argc, char **argv);
/* Prints "ddpc <cmd>: <last error>" and returns 1. */
int ddpc_cli_fail(const char *cmd);

#endif
