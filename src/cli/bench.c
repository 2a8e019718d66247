// SPDX-License-Identifier: MIT
/* `ddpc bench step CONFIG [key=value ...]`: times training steps after warm-up and prints one
 * JSON line. bench.warmup and bench.steps are config keys like any other. Under `ddpc run` every
 * rank benchmarks data-parallel steps and only rank 0 prints (the figures cover the whole job).
 * `ddpc bench allreduce|broadcast|all_gather|reduce_scatter ...` is bench_coll.c. */
#include "cli/cli.h"

#include <ddpc/kernels.h>
#include <ddpc/train.h>

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static void print_result(const char *name, const ddpc_bench_result *r)
{
    /* Share of the all-reduce time that backward did not hide (0 when nothing communicated). */
    double exposed_frac = r->comm_mean_s > 0 ? r->exposed_mean_s / r->comm_mean_s : 0.0;
    /* On a GPU the phases as the device ran them (docs/observability.md), else null. */
    char gpu[160] = "null";
    if (r->gpu_phases)
        snprintf(gpu, sizeof gpu,
                 "{\"forward\": %.3f, \"backward\": %.3f, \"comm_wait\": %.3f, "
                 "\"optimizer\": %.3f}",
                 1e3 * r->gpu.forward_s, 1e3 * r->gpu.backward_s, 1e3 * r->gpu.comm_wait_s,
                 1e3 * r->gpu.optimizer_s);
    printf("{\"bench\": \"step\", \"config\": \"%s\", \"threads\": %d, \"world\": %d, "
           "\"batch\": %lld, \"steps\": %lld, \"median_step_ms\": %.3f, \"samples_per_s\": %.1f, "
           "\"tokens_per_s\": %.1f, \"global_samples_per_s\": %.1f, "
           "\"global_tokens_per_s\": %.1f, \"gflops\": %.2f, \"buckets\": %zu, "
           "\"exposed_comm_ms\": %.3f, \"exposed_comm_mean_ms\": %.3f, \"comm_ms\": %.3f, "
           "\"comm_mean_ms\": %.3f, \"exposed_comm_fraction\": %.4f, \"precision\": \"%s\", "
           "\"matmul\": \"%s\", \"device\": \"%s\", \"onednn\": \"%s\", "
           "\"activation_checkpointing\": %s, "
           "\"activation_bytes\": %zu, \"activation_bytes_no_ckpt\": %zu, \"zero_stage\": %d, "
           "\"comm_bytes\": %.0f, \"params\": %zu, \"replicas\": %d, \"forward_ms\": %.3f, "
           "\"backward_ms\": %.3f, \"comm_wait_ms\": %.3f, \"optimizer_ms\": %.3f, "
           "\"replicate_ms\": %.3f, \"scatter_ms\": %.3f, \"replica_wait_ms\": %.3f, "
           "\"reduce_ms\": %.3f, \"gpu_phases_ms\": %s}\n",
           name, r->threads, r->world, (long long)r->batch, (long long)r->steps,
           1e3 * r->median_step_s, r->samples_per_s, r->tokens_per_s, r->global_samples_per_s,
           r->global_tokens_per_s, r->gflops, r->num_buckets, 1e3 * r->exposed_median_s,
           1e3 * r->exposed_mean_s, 1e3 * r->comm_median_s, 1e3 * r->comm_mean_s, exposed_frac,
           ddpc_precision_name((ddpc_precision)r->precision),
           r->matmul, r->device, ddpc_kernels_onednn_info(),
           r->activation_checkpointing ? "true" : "false", r->activation_bytes,
           r->activation_bytes_no_ckpt, r->zero_stage, r->comm_bytes, r->num_params, r->replicas,
           1e3 * r->phases.forward_s, 1e3 * r->phases.backward_s, 1e3 * r->phases.comm_wait_s,
           1e3 * r->phases.optimizer_s, 1e3 * r->phases.replicate_s, 1e3 * r->phases.scatter_s,
           1e3 * r->phases.replica_wait_s, 1e3 * r->phases.reduce_s, gpu);
}

static int bench_step(int argc, char **argv)
{
    char name[256];
    ddpc_config *cfg = NULL;
    int rc = argc < 1 ? 2 : ddpc_cli_load_config(argc, argv, &cfg, name, sizeof name);
    if (rc == DDPC_CLI_HELP || argc < 1) {
        fprintf(rc == 2 ? stderr : stdout,
                "usage: ddpc bench step CONFIG [key=value ...] [--flag VALUE ...]\n"
                "Times bench.steps training steps of CONFIG after bench.warmup untimed ones and "
                "prints one JSON line (under 'ddpc run', for the whole job).\n");
        return rc == 2 ? 2 : 0;
    }
    if (rc != 0)
        return rc == 1 ? ddpc_cli_fail("bench") : rc;
    int64_t warmup = 0, steps = 0;
    ddpc_trainer *t = NULL;
    ddpc_bench_result r;
    if (ddpc_config_int(cfg, "bench.warmup", 3, 0, 100000, &warmup) != DDPC_OK ||
        ddpc_config_int(cfg, "bench.steps", 20, 1, 100000, &steps) != DDPC_OK ||
        ddpc_trainer_create(&t, cfg, name) != DDPC_OK) {
        rc = ddpc_cli_config_fail("bench", cfg);
    } else if ((rc = ddpc_cli_check_flags("bench", cfg)) != 0) {
        /* printed */
    } else if (ddpc_config_check_unused(cfg) != DDPC_OK ||
               ddpc_trainer_bench(t, warmup, steps, &r) != DDPC_OK) {
        rc = ddpc_cli_fail("bench");
    } else if (r.rank == 0) { /* one line per job: the figures are already combined over ranks */
        print_result(name, &r);
    }
    ddpc_trainer_destroy(t);
    ddpc_config_destroy(cfg);
    return rc;
}

int ddpc_cli_bench(int argc, char **argv)
{
    static const char *const colls[] = {"allreduce", "all_reduce", "broadcast", "bcast",
                                        "all_gather", "allgather", "reduce_scatter",
                                        "reducescatter"};
    if (argc >= 1 && strcmp(argv[0], "step") == 0)
        return bench_step(argc - 1, argv + 1);
    for (size_t i = 0; argc >= 1 && i < sizeof colls / sizeof colls[0]; i++)
        if (strcmp(argv[0], colls[i]) == 0)
            return ddpc_cli_bench_coll(argv[0], argc - 1, argv + 1);
    bool help = argc >= 1 && ddpc_cli_is_help(argv[0]);
    fprintf(help ? stdout : stderr, "usage: ddpc bench step CONFIG [key=value ...] | ddpc bench "
                                    "allreduce|broadcast|all_gather|reduce_scatter [options] "
                                    "(see 'ddpc bench allreduce --help')\n");
    return help ? 0 : 2;
}
