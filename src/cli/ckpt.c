// SPDX-License-Identifier: MIT
/* `ddpc ckpt ls|show|verify|export DIR [OUT]`: inspects a run's checkpoint directory or one
 * checkpoint. Only argument handling and printing live here; the checkpoint module does the rest.
 * Exit status: 0 ok, 1 a corrupt or missing checkpoint or another runtime error, 2 usage. */
#include "cli/cli.h"

#include <ddpc/alloc.h>
#include <ddpc/checkpoint.h>

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static const char *ckpt_usage =
    "usage: ddpc ckpt ls DIR            list a run's checkpoints (step, epoch, world, size, "
    "status, latest)\n"
    "       ddpc ckpt show DIR          print a checkpoint's state (DIR: one step-* directory, or\n"
    "                                   a run's checkpoint directory for its latest)\n"
    "       ddpc ckpt verify DIR        check sizes and CRC-32s (every checkpoint of a run's "
    "directory)\n"
    "       ddpc ckpt export DIR OUT    write the parameters as one safetensors file (a sharded\n"
    "                                   checkpoint's shards consolidated)\n";

static void human_size(uint64_t b, char *out, size_t cap)
{
    if (b < 1024)
        snprintf(out, cap, "%" PRIu64 " B", b);
    else if (b < 1024 * 1024)
        snprintf(out, cap, "%.1f KiB", (double)b / 1024.0);
    else if (b < (uint64_t)1 << 30)
        snprintf(out, cap, "%.1f MiB", (double)b / (1024.0 * 1024.0));
    else
        snprintf(out, cap, "%.2f GiB", (double)b / (1024.0 * 1024.0 * 1024.0));
}

static int cmd_ls(const char *dir)
{
    ddpc_ckpt_entry *e = NULL;
    size_t n = 0;
    if (ddpc_ckpt_list(dir, &e, &n) != DDPC_OK)
        return ddpc_cli_fail("ckpt ls");
    if (n == 0) {
        fprintf(stderr, "ddpc ckpt ls: no checkpoints in %s\n", dir);
        return 1;
    }
    printf("%-16s %10s %6s %6s %11s  %s\n", "checkpoint", "step", "epoch", "world", "size",
           "status");
    for (size_t i = 0; i < n; i++) {
        char size[32], epoch[24], world[16];
        human_size(e[i].bytes, size, sizeof size);
        snprintf(epoch, sizeof epoch, e[i].epoch >= 0 ? "%" PRId64 : "-", e[i].epoch);
        snprintf(world, sizeof world, e[i].world > 0 ? "%d" : "-", e[i].world);
        printf("%-16s %10" PRId64 " %6s %6s %11s  %s%s\n", e[i].name, e[i].step, epoch, world, size,
               e[i].ok ? "ok" : "corrupt", e[i].latest ? " (latest)" : "");
        if (!e[i].ok)
            printf("    %s\n", e[i].problem);
    }
    ddpc_free(e);
    return 0;
}

/* "zero stage: ..." and, for a sharded checkpoint, one line per shard file. */
static int print_layout(const char *path)
{
    int stage = 0;
    ddpc_ckpt_shard_info *sh = NULL;
    size_t n = 0;
    if (ddpc_ckpt_layout(path, &stage, &sh, &n) != DDPC_OK)
        return 1;
    if (stage == 0)
        printf("zero stage:    0 (full: model.safetensors, optimizer.safetensors)\n");
    else
        printf("zero stage:    %d (sharded: %zu file%s)\n", stage, n, n == 1 ? "" : "s");
    for (size_t i = 0; i < n; i++)
        printf("  %s  %" PRIu64 " floats in %zu range%s\n", sh[i].file, sh[i].floats,
               sh[i].n_ranges, sh[i].n_ranges == 1 ? "" : "s");
    ddpc_free(sh);
    return 0;
}

static int cmd_show(const char *dir)
{
    char path[4096];
    if (ddpc_ckpt_resolve(dir, path, sizeof path) != DDPC_OK || ddpc_ckpt_verify(path) != DDPC_OK)
        return ddpc_cli_fail("ckpt show");
    ddpc_ckpt_state s;
    if (ddpc_ckpt_read_state(path, &s) != DDPC_OK)
        return ddpc_cli_fail("ckpt show");
    printf("checkpoint:    %s\n", path);
    printf("step:          %" PRId64 "\n", s.step);
    printf("epoch:         %" PRId64 " (%" PRId64 " steps into it)\n", s.epoch, s.epoch_step);
    printf("samples seen:  %" PRId64 "\n", s.samples_seen);
    printf("global batch:  %" PRId64 "\n", s.global_batch);
    printf("world:         %d\n", s.world);
    if (print_layout(path) != 0) {
        ddpc_ckpt_state_fini(&s);
        return ddpc_cli_fail("ckpt show");
    }
    printf("seed:          %" PRIu64 "\n", s.seed);
    printf("skipped steps: %" PRId64 "\n", s.skipped_steps);
    if (s.loss_scaling)
        printf("loss scale:    %g (%" PRId64 " finite steps since its last change)\n",
               (double)s.loss_scale, s.loss_scale_growth_tracker);
    printf("written by:    ddpc %s\n", s.version);
    printf("config:\n");
    const char *c = s.config ? s.config : "";
    while (*c) {
        const char *nl = strchr(c, '\n');
        size_t len = nl ? (size_t)(nl - c) : strlen(c);
        printf("  %.*s\n", (int)len, c);
        c += len + (nl != NULL);
    }
    ddpc_ckpt_state_fini(&s);
    return 0;
}

static int cmd_verify(const char *dir)
{
    if (ddpc_ckpt_is_dir(dir)) {
        if (ddpc_ckpt_verify(dir) != DDPC_OK)
            return ddpc_cli_fail("ckpt verify");
        printf("ok %s\n", dir);
        return 0;
    }
    ddpc_ckpt_entry *e = NULL;
    size_t n = 0;
    if (ddpc_ckpt_list(dir, &e, &n) != DDPC_OK)
        return ddpc_cli_fail("ckpt verify");
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (e[i].ok)
            printf("ok %s/%s\n", dir, e[i].name);
        else {
            fprintf(stderr, "ddpc ckpt verify: %s\n", e[i].problem);
            bad++;
        }
    }
    ddpc_free(e);
    if (n == 0)
        fprintf(stderr, "ddpc ckpt verify: no checkpoint in %s\n", dir);
    return n == 0 || bad ? 1 : 0;
}

static int cmd_export(const char *dir, const char *out)
{
    char path[4096];
    if (ddpc_ckpt_resolve(dir, path, sizeof path) != DDPC_OK ||
        ddpc_ckpt_export(path, out) != DDPC_OK)
        return ddpc_cli_fail("ckpt export");
    printf("exported %s to %s\n", path, out);
    return 0;
}

int ddpc_cli_ckpt(int argc, char **argv)
{
    for (int i = 0; i < argc; i++) { /* anywhere: `ddpc ckpt ls --help` is not a directory */
        if (ddpc_cli_is_help(argv[i])) {
            fputs(ckpt_usage, stdout);
            return 0;
        }
    }
    const char *sub = argc >= 1 ? argv[0] : "";
    bool two = strcmp(sub, "export") == 0;
    if (argc != (two ? 3 : 2) ||
        (!two && strcmp(sub, "ls") && strcmp(sub, "show") && strcmp(sub, "verify"))) {
        fputs(ckpt_usage, stderr);
        return 2;
    }
    if (strcmp(sub, "ls") == 0)
        return cmd_ls(argv[1]);
    if (strcmp(sub, "show") == 0)
        return cmd_show(argv[1]);
    if (strcmp(sub, "verify") == 0)
        return cmd_verify(argv[1]);
    return cmd_export(argv[1], argv[2]);
}
