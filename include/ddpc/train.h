/* The trainer: builds data, model and optimizer from a config tree and runs one state
 * (train / val / test / predict), writing metrics.jsonl and weights under its run directory.
 * It reads every key it understands from the config; the caller then rejects unused keys. */
#ifndef DDPC_TRAIN_H
#define DDPC_TRAIN_H

#include <stdint.h>
#include <stdio.h>

#include <ddpc/config.h>
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

/* Progress lines go to `log` (NULL: silent, the default). */
void ddpc_trainer_set_log(ddpc_trainer *t, FILE *log);

/* Runs the configured state to completion: fit (with periodic and final evaluation, then
 * `weights_out`), validate, test or predict. */
ddpc_status ddpc_trainer_run(ddpc_trainer *t);

typedef struct {
    int threads;
    int64_t batch;             /* samples per step */
    int64_t steps;             /* timed steps */
    double median_step_s;
    double samples_per_s;
    double tokens_per_s;       /* 0 for image models */
    double gflops;             /* achieved, from the model's FLOP estimate */
} ddpc_bench_result;

/* Times `steps` full training steps (forward, backward, clip, optimizer) after `warmup`. */
ddpc_status ddpc_trainer_bench(ddpc_trainer *t, int64_t warmup, int64_t steps, ddpc_bench_result *r);

/* Last evaluation's results (for tests and the CLI's summary); with `tasks`, the first task's
 * (metrics.jsonl has every task's). */
typedef struct {
    double loss;
    double accuracy;
    int64_t samples;
} ddpc_eval_result;
ddpc_eval_result ddpc_trainer_last_eval(const ddpc_trainer *t);
/* Mean training loss over the last logging window. */
double ddpc_trainer_last_train_loss(const ddpc_trainer *t);

#ifdef __cplusplus
}
#endif
#endif
