// SPDX-License-Identifier: MIT
/* The top-level keys a run reads once (trainer_settings.c, trainer_ckpt.c, trainer_trace.c):
 * plain values, never changed after the trainer is built. */
#ifndef DDPC_TRAIN_TRAINER_SETTINGS_H
#define DDPC_TRAIN_TRAINER_SETTINGS_H

#include <ddpc/nn.h>

#include <stdbool.h>
#include <stdint.h>

typedef enum { STATE_TRAIN, STATE_VAL, STATE_TEST, STATE_PREDICT } trainer_state;
typedef enum { LR_SCALE_NONE, LR_SCALE_LINEAR, LR_SCALE_SQRT } lr_scale_kind;
/* log.progress, in the config's order. */
typedef enum { PROGRESS_AUTO, PROGRESS_BAR, PROGRESS_PLAIN } progress_mode;

typedef struct {
    uint64_t seed;
    int threads;
    trainer_state state;
    int64_t epochs, max_steps, eval_every, log_every;
    int64_t eval_batches, test_batches;  /* per rank and task, val / test evaluations; 0 = all */
    int64_t batch_size, eval_batch_size; /* per rank; the tasks' defaults */
    int64_t accum_steps;                 /* micro-batches per optimizer step */
    ddpc_precision precision;            /* of the model's matrix products */
    bool tf32;                           /* matmul_precision high: fp32 products as TF32 (GPU) */
    int device;                          /* device: a ddpc_device_kind (trainer_device.c) */
    int64_t stats_sync_every;            /* steps between cross-rank loss averages */
    progress_mode progress;              /* log.progress: a bar on a terminal, or plain lines */
    bool tensorboard;                    /* log.tensorboard: rank 0 writes <run_dir>/tb/ */
    bool tensorboard_per_rank;           /* log.tensorboard_per_rank: every rank, tb/rank<k>/ */
    lr_scale_kind lr_scale;              /* base LR x (world * accum_steps)^{0, 1, 1/2} */
    int num_workers, prefetch_factor;    /* training loaders */
    bool hflip;                          /* data.hflip: training images mirrored at random */
    int random_shift;                    /* data.random_shift: pixels, 0 = off */
    bool shuffle;
    char run_dir[512];
    const char *weights_out, *init_from;
    bool init_strict; /* init_from must match every tensor */
    /* checkpoints (trainer_ckpt.c) */
    int64_t ckpt_every_steps, ckpt_every_epochs, ckpt_keep;
    char ckpt_dir[1024];
    const char *resume; /* "auto", "force", "never" or a checkpoint path */
    /* fault injection for resume tests: SIGKILL this process in step kill_at_step (1-based; 0 =
     * off) before micro-batch kill_at_micro, on rank kill_rank, in a run that did not resume */
    int64_t kill_at_step, kill_at_micro, kill_rank;
    /* predict */
    int64_t predict_samples, predict_tokens;
    const char *prompt;
    float temperature;
    bool phases;                         /* log.phases: per-step phase timers (trainer_phases.c) */
    int64_t profile_first, profile_last; /* profile.steps [a, b] (1-based, inclusive); 0 = off */
} trainer_settings;

#endif
