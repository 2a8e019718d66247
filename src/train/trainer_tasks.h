/* Multi-task training (the `tasks:` config): each task has its datasets, a head of the model, a
 * batch size and a loss weight; one distributed sampler + prefetching loader per task, stepped
 * together by the combined loader. Invariant: task k always runs head k of the model, and every
 * dataset a task points to is in `owned` (views of a shared base come after the base). */
#ifndef DDPC_TRAIN_TRAINER_TASKS_H
#define DDPC_TRAIN_TRAINER_TASKS_H

#include "train/trainer_impl.h"

#include <ddpc/combined.h>

#define DDPC__TASK_NAME_MAX 32

typedef struct {
    char name[DDPC__TASK_NAME_MAX];      /* letters, digits, '_', '-', '.' */
    const char *data_type;               /* for the start line */
    ddpc_dataset *train, *test;          /* borrowed from owned */
    int64_t batch_size, eval_batch_size; /* per rank */
    float loss_weight;
    int64_t num_classes; /* the head's width, >= the dataset's classes */
    ddpc_sampler *sampler;
    ddpc_loader *loader;
    /* Unweighted loss sums over this task's passes: since the last cross-rank sync (local), and
     * in the logging window (rank-averaged). */
    double unsynced_loss, unsynced_passes, window_loss, window_passes;
    ddpc_eval_result last_eval;
} ddpc__task;

struct ddpc__trainer_tasks {
    int n;
    ddpc__task task[DDPC_MODEL_MAX_HEADS];
    ddpc_dataset *owned[4 * DDPC_MODEL_MAX_HEADS];
    int n_owned;
    ddpc_combined_mode mode; /* training; evaluation is always sequential */
    ddpc_combined *combined;
    int64_t window_samples; /* rows this rank trained on since the last progress line */
};

/* trainer_tasks_setup.c */
/* Whether the config declares tasks (a non-empty `tasks` sequence). */
bool ddpc__tasks_declared(const ddpc_config *c);
/* Reads `tasks.<i>.*` and `data.combined_mode`, loads every task's datasets (tasks with the same
 * dataset share it), and points t->train/val/test at task 0's for the shared code paths. */
ddpc_status ddpc__tasks_load(ddpc_trainer *t);
/* One head per task, as wide as its num_classes; the samples of every task must have one shape. */
ddpc_status ddpc__tasks_model_heads(ddpc_trainer *t, ddpc_model_config *mc);
/* Per task a distributed sampler + loader (drop_last), and the combined loader over them;
 * *per_epoch = optimizer steps per epoch. */
ddpc_status ddpc__tasks_build_loaders(ddpc_trainer *t, int64_t *per_epoch);
/* The largest per-rank batch any task trains or evaluates with. */
int64_t ddpc__tasks_max_batch(const ddpc_trainer *t);
/* Frees loaders, samplers and datasets; leaves t->train/val/test NULL. */
void ddpc__tasks_destroy(ddpc_trainer *t);

/* trainer_tasks_fit.c: the fit loop (one step = every task's pass, then one synchronisation). */
ddpc_status ddpc__tasks_fit(ddpc_trainer *t);

/* trainer_tasks_eval.c */
/* Evaluates every task on its test split (val as well: no task has a separate validation split),
 * all of it or eval_batches per rank when limit, through the combined loader in sequential mode;
 * logs and records one result per task. */
ddpc_status ddpc__tasks_evaluate(ddpc_trainer *t, const char *split, bool limit);
/* Rank 0 writes predictions_<task>.csv for every task. */
ddpc_status ddpc__tasks_predict(ddpc_trainer *t);

#endif
