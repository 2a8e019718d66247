// SPDX-License-Identifier: MIT
/* The trainer: builds data, model and optimizer from a config tree and runs one state
 * (train / val / test / predict), writing metrics.jsonl and weights under its run directory.
 * It reads every key it understands from the config; the caller then rejects unused keys. */
#ifndef DDPC_TRAIN_H
#define DDPC_TRAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <ddpc/config.h>
#include <ddpc/engine.h>
#include <ddpc/status.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ddpc_trainer ddpc_trainer;

/* Reads the config (borrowed for the trainer's life), loads the datasets, builds the model and
 * optimizer, loads `init_from` weights. `config_name` names the default run directory
 * ("runs/<config_name>"). Errors name the key, file or value that is wrong. */
ddpc_status ddpc_trainer_create(ddpc_trainer **out, ddpc_config *cfg, const char *config_name);
void ddpc_trainer_destroy(ddpc_trainer *t);

/* `ddpc plan`: reads the whole config like ddpc_trainer_create (so unused keys can be rejected)
 * and loads the datasets (the model's shapes come from them), but plans a job of `world` ranks
 * (< 1: the launcher's world size, or 1) as its rank 0 and allocates neither the model's buffers
 * nor the optimizer, starts no process group and no loader. The result is only for
 * ddpc_trainer_print_plan and ddpc_trainer_destroy. */
ddpc_status ddpc_trainer_create_plan(ddpc_trainer **out, ddpc_config *cfg,
                                     const char *config_name, int world);
/* Writes the memory plan table (every zero.stage, with and without activation checkpointing when
 * the model has it; sizes in bytes when `exact`) to f. DDPC_ENOMEM with the refusal message
 * (ddpc_memplan_check's) when the configured plan does not fit the limit (memory.limit_gb, or
 * this machine's available memory over the job's ranks). */
ddpc_status ddpc_trainer_print_plan(ddpc_trainer *t, FILE *f, bool exact);

/* Progress lines go to `log` (NULL: silent, the default); on rank 0 only. With log.progress auto,
 * a `log` that is a terminal gets one progress bar redrawn in place instead of the lines. */
void ddpc_trainer_set_log(ddpc_trainer *t, FILE *log);

/* Runs the configured state to completion: fit (with periodic and final evaluation, then
 * `weights_out`), validate, test or predict. */
ddpc_status ddpc_trainer_run(ddpc_trainer *t);

typedef struct {
    int threads;                 /* kernel threads per rank */
    int rank, world;             /* this process, ranks in the job (0 and 1 without a launcher) */
    int64_t batch;               /* samples per step on each rank */
    int64_t steps;               /* timed steps */
    double median_step_s;        /* median over steps of the slowest rank's step time */
    double samples_per_s;        /* per rank: batch / median_step_s */
    double tokens_per_s;         /* per rank; 0 for image models */
    double global_samples_per_s; /* all ranks: world x batch / median_step_s */
    double global_tokens_per_s;  /* 0 for image models */
    double gflops;               /* achieved per rank, from the model's FLOP estimate */
    int precision;               /* ddpc_precision of the matrix products */
    char matmul[256];            /* what runs them, as the trainer's start line says */
    char device[256];            /* the model's device, as ddpc_device_describe says */
    bool activation_checkpointing; /* model.activation_checkpointing */
    size_t activation_bytes;       /* activation arena of one micro-batch, as run */
    size_t activation_bytes_no_ckpt; /* the same without activation checkpointing */
    /* Data-parallel communication per step, averaged over ranks (all 0 on one rank): exposed is
     * the time the step blocked in ddpc_reducer_finish after backward, comm the time the bucket
     * all-reduces ran on the comm thread; exposed / comm is the share not hidden by backward. */
    size_t num_buckets;
    double exposed_median_s, exposed_mean_s;
    double comm_median_s, comm_mean_s;
    int zero_stage;          /* zero.stage in effect (0 on one rank) */
    size_t num_params;       /* the model's flat parameter count */
    double comm_bytes;       /* per timed step, on rank 0: ddpc_pg_ring_bytes's count */
    int replicas;            /* parallel.mode dp: replicas in the process (batch counts them all);
                                0 under ddp */
    /* Rank 0's engine timings (log.phases, on by default), mean per timed step: where the step
     * went (ddpc_engine_timing; the DataParallel fields are 0 under ddp). */
    ddpc_engine_timing phases;
    /* On a GPU (gpu_phases): the same phases in device time, mean per timed step (the device is
     * synchronised before they are taken, so every timed span is in). */
    bool gpu_phases;
    ddpc_engine_timing gpu;
} ddpc_bench_result;

/* Times `steps` full training steps (forward, backward, gradient all-reduce when world > 1, clip,
 * optimizer) after `warmup`. Collective when world > 1: every rank calls it with the same
 * arguments and gets the same result apart from `rank`. */
ddpc_status ddpc_trainer_bench(ddpc_trainer *t, int64_t warmup, int64_t steps,
                               ddpc_bench_result *r);

/* Last evaluation's results (for tests and the CLI's summary); with `tasks`, the first task's
 * (metrics.jsonl has every task's). */
typedef struct {
    double loss;
    double accuracy;  /* classification (bce_logits: of each label); 0 for regression */
    double rmse, mae; /* regression losses (mse, l1, smooth_l1) over every target; else 0 */
    int64_t samples;
} ddpc_eval_result;
ddpc_eval_result ddpc_trainer_last_eval(const ddpc_trainer *t);
/* Mean training loss over the last logging window. */
double ddpc_trainer_last_train_loss(const ddpc_trainer *t);

#ifdef __cplusplus
}
#endif
#endif
