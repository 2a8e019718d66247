// SPDX-License-Identifier: MIT
/* The trainer's top-level keys: every one it reads outside the data, model and optimizer tables,
 * with its default and range, so docs/config.md and this file list the same keys. */
#include "train/trainer_impl.h"

#include <stdio.h>

static const char *const state_names[] = {"train", "val", "test", "predict", NULL};
static const char *const lr_scales[] = {"none", "linear", "sqrt", NULL};
/* In progress_mode's order. */
static const char *const progress_modes[] = {"auto", "bar", "plain", NULL};
/* In ddpc_precision's order. */
static const char *const precision_names[] = {"fp32", "bf16", "fp16", NULL};
/* Lightning's Trainer(precision=...) spellings that mean what ours do: its "-mixed" is autocast
 * over fp32 weights, as ours is; "-true" casts the weights themselves, which ddpc never does. */
static const ddpc_config_alias precision_aliases[] = {
    {"32", "fp32", NULL},
    {"32-true", "fp32", NULL},
    {"16", "fp16", NULL},
    {"16-mixed", "fp16", NULL},
    {"bf16-mixed", "bf16", NULL},
    {"16-true", NULL, "ddpc keeps fp32 weights and casts only the matrix products (use 'fp16')"},
    {"bf16-true", NULL, "ddpc keeps fp32 weights and casts only the matrix products (use 'bf16')"},
    {NULL, NULL, NULL},
};

/* torch.set_float32_matmul_precision's names: "highest" keeps fp32 products in fp32, "high" lets
 * a GPU run them as TF32 on its tensor cores. */
static const char *const matmul_precisions[] = {"highest", "high", NULL};
static const ddpc_config_alias matmul_aliases[] = {
    {"medium", NULL, "PyTorch's medium runs fp32 products in bf16; ddpc's way is precision: bf16"},
    {NULL, NULL, NULL},
};

ddpc_status ddpc__trainer_read_settings(ddpc_trainer *t, const char *config_name)
{
    ddpc_config *c = t->cfg;
    trainer_settings *s = &t->set;
    int64_t v;
    int state, v32;
    double f;
    const char *run_dir;
    DDPC_TRY(ddpc_config_int(c, "seed", 1337, 0, INT64_MAX, &v));
    s->seed = (uint64_t)v;
    DDPC_TRY(ddpc_config_int(c, "num_threads", 0, 0, 1024, &v));
    s->threads = (int)v;
    DDPC_TRY(ddpc_config_choice(c, "state", "train", state_names, &state));
    DDPC_TRY(
        ddpc_config_choice_alias(c, "precision", "fp32", precision_names, precision_aliases, &v32));
    s->precision = (ddpc_precision)v32;
    DDPC_TRY(ddpc_config_choice_alias(c, "matmul_precision", "highest", matmul_precisions,
                                      matmul_aliases, &v32));
    s->tf32 = v32 == 1;
    DDPC_TRY(ddpc__device_read(c, &s->device));
    s->state = (trainer_state)state;
    DDPC_TRY(ddpc_config_int(c, "epochs", 1, 0, 1000000, &s->epochs));
    DDPC_TRY(ddpc_config_int(c, "max_steps", 0, 0, INT64_MAX, &s->max_steps));
    DDPC_TRY(ddpc_config_int(c, "eval_every", 0, 0, INT64_MAX, &s->eval_every));
    DDPC_TRY(ddpc_config_int(c, "eval_batches", 0, 0, INT64_MAX, &s->eval_batches));
    DDPC_TRY(ddpc_config_int(c, "test_batches", 0, 0, INT64_MAX, &s->test_batches));
    DDPC_TRY(ddpc_config_int(c, "log_every", 50, 1, INT64_MAX, &s->log_every));
    char def_dir[512];
    snprintf(def_dir, sizeof def_dir, "runs/%s", config_name);
    DDPC_TRY(ddpc_config_string(c, "run_dir", def_dir, &run_dir));
    snprintf(s->run_dir, sizeof s->run_dir, "%s", run_dir);
    DDPC_TRY(ddpc_config_string(c, "weights_out", NULL, &s->weights_out));
    DDPC_TRY(ddpc_config_string(c, "init_from", NULL, &s->init_from));
    DDPC_TRY(ddpc_config_bool(c, "init_strict", true, &s->init_strict));
    DDPC_TRY(ddpc_config_int(c, "data.batch_size", 64, 1, 1 << 20, &s->batch_size));
    DDPC_TRY(
        ddpc_config_int(c, "data.eval_batch_size", s->batch_size, 1, 1 << 20, &s->eval_batch_size));
    DDPC_TRY(ddpc__trainer_read_sampling(t)); /* data.sampler ..., then data.shuffle */
    DDPC_TRY(ddpc_config_int(c, "data.num_workers", 1, 0, 64, &v));
    s->num_workers = (int)v;
    DDPC_TRY(ddpc_config_int(c, "data.prefetch_factor", 2, 1, 1024, &v));
    s->prefetch_factor = (int)v;
    DDPC_TRY(ddpc_config_bool(c, "data.hflip", false, &s->hflip));
    DDPC_TRY(ddpc_config_int(c, "data.random_shift", 0, 0, 8, &v));
    s->random_shift = (int)v;
    DDPC_TRY(
        ddpc_config_int(c, "optim.grad_accum_steps", 1, 1, DDPC_TRAIN_MAX_ACCUM, &s->accum_steps));
    int scale;
    DDPC_TRY(ddpc_config_choice(c, "optim.lr_scale", "none", lr_scales, &scale));
    s->lr_scale = (lr_scale_kind)scale;
    DDPC_TRY(
        ddpc_config_int(c, "stats_sync_every", s->log_every, 1, INT64_MAX, &s->stats_sync_every));
    DDPC_TRY(ddpc_config_choice(c, "log.progress", "auto", progress_modes, &v32));
    s->progress = (progress_mode)v32;
    DDPC_TRY(ddpc_config_bool(c, "log.tensorboard", true, &s->tensorboard));
    DDPC_TRY(ddpc_config_bool(c, "log.tensorboard_per_rank", false, &s->tensorboard_per_rank));
    DDPC_TRY(ddpc__trainer_read_ckpt_settings(t));
    DDPC_TRY(ddpc_config_int(c, "fault.kill_at_step", 0, 0, INT64_MAX, &s->kill_at_step));
    DDPC_TRY(ddpc_config_int(c, "fault.kill_at_micro", 0, 0, DDPC_TRAIN_MAX_ACCUM - 1,
                             &s->kill_at_micro));
    DDPC_TRY(ddpc_config_int(c, "fault.kill_rank", 0, 0, INT64_MAX, &s->kill_rank));
    DDPC_TRY(ddpc_config_int(c, "predict.samples", 20, 0, INT64_MAX, &s->predict_samples));
    DDPC_TRY(ddpc_config_int(c, "predict.max_new_tokens", 200, 1, 1 << 20, &s->predict_tokens));
    DDPC_TRY(ddpc_config_string(c, "predict.prompt", "\n", &s->prompt));
    DDPC_TRY(ddpc_config_float(c, "predict.temperature", 0.8, 0.0, 100.0, &f));
    s->temperature = (float)f;
    DDPC_TRY(ddpc_config_bool(c, "log.phases", true, &s->phases));
    DDPC_TRY(ddpc__trainer_read_profile(t));
    return DDPC_OK;
}
