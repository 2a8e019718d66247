// SPDX-License-Identifier: MIT
/* The task-kind table: what differs between classification or regression, a language model and
 * translation, as one ops struct per kind, selected once when the tasks are loaded. The fit
 * loop, evaluation, prediction and the step benchmark call through it and never ask which kind
 * they run. Members marked optional are NULL where a kind has nothing to do. */
#ifndef DDPC_TRAIN_TRAINER_KIND_H
#define DDPC_TRAIN_TRAINER_KIND_H

#include <ddpc/data.h>
#include <ddpc/nn.h>
#include <ddpc/train.h>

#include <stddef.h>

/* Extra evaluation sums a kind may add per evaluation (the eval buffer is sized for it). */
#define DDPC__KIND_MAX_SUMS 64

typedef struct {
    const char *name;
    /* Rank 0 writes the predictions of a `state: predict` run. */
    ddpc_status (*predict)(ddpc_trainer *t);
    /* Optional: checks, before anything is read or written, a file predict writes outside the
     * run directory. */
    ddpc_status (*check_predict_output)(ddpc_trainer *t);
    /* Optional: rank 0 writes what later runs need beside config.yaml (translation's
     * vocabularies), when the outputs are opened. */
    ddpc_status (*write_outputs)(ddpc_trainer *t);
    /* Optional: lines for fit's start-up log, after the notes. */
    void (*log_start)(ddpc_trainer *t);
    /* Optional: the model config's fields the data decides beyond its classes and shape; own is
     * the model type's own config (ddpc_model_ops.config_size bytes). */
    ddpc_status (*model_config)(ddpc_trainer *t, ddpc_model_config *mc, void *own);
    /* Optional: checks the weights of the checkpoint resumed from against the data. */
    ddpc_status (*check_resumed)(ddpc_trainer *t);
    /* Optional: s, the failed status of loading weights (init_from), with what the kind knows of
     * why they do not fit its data added to the message. */
    ddpc_status (*explain_weights)(const ddpc_trainer *t, ddpc_status s);
    /* Optional, with eval_sums > 0: eval_batch adds a batch of dataset d (the model just ran it)
     * into sums (eval_sums plain sums that ranks add); eval_record adds them to the open metrics
     * record (`rows` evaluated) and a summary for the log line into text. */
    size_t eval_sums;
    ddpc_status (*eval_batch)(ddpc_trainer *t, const ddpc_dataset *d, const ddpc_batch *b,
                              double *sums);
    void (*eval_record)(ddpc_trainer *t, const double *sums, double rows, char *text, size_t cap);
    /* Optional: the longest row, in ids, of a sentence-pair batch, for which the step benchmark
     * gathers pairs; NULL: batches go through the trainer's buffers. */
    int64_t (*pair_len)(const ddpc_trainer *t);
} ddpc__task_kind;

/* Classification and regression (images, npy, csv: trainer_predict.c's predictions), a language
 * model (token streams: sampled text), translation (trainer_translation_kind.c). */
extern const ddpc__task_kind ddpc__kind_classify;
extern const ddpc__task_kind ddpc__kind_language_model;
extern const ddpc__task_kind ddpc__kind_translation;

#endif
