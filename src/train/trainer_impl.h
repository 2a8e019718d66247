/* Private trainer state shared by setup, fit, evaluation, prediction and checkpoints. A config
 * is a list of tasks — `tasks:` — or one task spelled with the `data.*` keys; both are the same
 * task table and the same loop. Invariants: task k always runs head k of a multi-task model (head
 * 0 = the single classifier otherwise); every dataset a task points to is in `owned`; batch
 * buffers are sized once for the largest batch, so a step after the first allocates nothing. */
#ifndef DDPC_TRAIN_TRAINER_IMPL_H
#define DDPC_TRAIN_TRAINER_IMPL_H

#include <ddpc/combined.h>
#include <ddpc/comm.h>
#include <ddpc/data.h>
#include <ddpc/engine.h>
#include <ddpc/loader.h>
#include <ddpc/memplan.h>
#include <ddpc/metrics.h>
#include <ddpc/nn.h>
#include <ddpc/optim.h>
#include <ddpc/reducer.h>
#include <ddpc/rundir.h>
#include <ddpc/sampler.h>
#include <ddpc/timer.h>
#include <ddpc/trace.h>
#include <ddpc/train.h>

#include <stdbool.h>

#define DDPC__FMNIST_DIR "/usr/share/datasets/fashion-mnist"
#define DDPC__FORTUNES_DIR "/usr/share/games/fortunes"
#define DDPC__TASK_NAME_MAX 32
#define DDPC_TRAIN_MAX_ACCUM 1024

typedef enum { STATE_TRAIN, STATE_VAL, STATE_TEST, STATE_PREDICT } trainer_state;
typedef enum { LR_SCALE_NONE, LR_SCALE_LINEAR, LR_SCALE_SQRT } lr_scale_kind;
/* log.progress, in the config's order. */
typedef enum { PROGRESS_AUTO, PROGRESS_BAR, PROGRESS_PLAIN } progress_mode;

typedef struct {
    uint64_t seed;
    int threads;
    trainer_state state;
    int64_t epochs, max_steps, eval_every, eval_batches, log_every;
    int64_t batch_size, eval_batch_size; /* per rank; the tasks' defaults */
    int64_t accum_steps;                 /* micro-batches per optimizer step */
    ddpc_precision precision;            /* of the model's matrix products */
    int64_t stats_sync_every;            /* steps between cross-rank loss averages */
    progress_mode progress;              /* log.progress: a bar on a terminal, or plain lines */
    bool tensorboard;                    /* log.tensorboard: rank 0 writes <run_dir>/tb/ */
    bool tensorboard_per_rank;           /* log.tensorboard_per_rank: every rank, tb/rank<k>/ */
    lr_scale_kind lr_scale;              /* base LR x (world * accum_steps)^{0, 1, 1/2} */
    int num_workers, prefetch_factor;    /* training loaders */
    bool shuffle;
    char run_dir[512];
    const char *weights_out, *init_from;
    bool init_strict; /* init_from must match every tensor */
    /* checkpoints (trainer_ckpt.c) */
    int64_t ckpt_every_steps, ckpt_every_epochs, ckpt_keep;
    char ckpt_dir[1024];
    const char *resume; /* "auto", "never" or a checkpoint path */
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

/* The logging window's phase breakdown (trainer_phases.c): seconds summed over its steps. A step's
 * period runs from the end of the previous step's update to the end of its own, so logging,
 * evaluation and checkpointing after step n count in step n+1. */
typedef struct {
    double mark;      /* end of the last step's update */
    double busy_mark; /* ddpc_pg_busy_seconds at the window's start */
    double data, ckpt, step;
    ddpc_engine_timing eng;
    int64_t steps;
    double *ranks; /* (world x 3) scratch for the per-rank gathers, from fit's start */
} ddpc__phases;

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

#define DDPC__MAX_OWNED (4 * DDPC_MODEL_MAX_HEADS)

/* The progress bar's state (trainer_progress.c). */
typedef struct {
    bool decided, on, drawn;
    double start, last_draw; /* ddpc_time_now() of the first call and of the last redraw */
    int64_t start_step;      /* the engine's step at the first call (a resumed run's start) */
    int64_t epoch;
    double loss, rate; /* of the last logging window; loss NaN before the first */
    bool tokens;       /* rate counts tokens, not samples */
} ddpc__progress;

struct ddpc_trainer {
    ddpc_config *cfg;
    FILE *log;
    trainer_settings set;
    /* Tasks: `multi` when the config declares `tasks:` (heads per task, per-task metrics). */
    bool multi;
    int n_tasks;
    ddpc__task task[DDPC_MODEL_MAX_HEADS];
    ddpc_dataset *owned[DDPC__MAX_OWNED];
    int n_owned;
    ddpc_combined_mode mode; /* training; evaluation is always sequential */
    ddpc_combined *combined;
    ddpc_model *model;
    ddpc_engine_config engine_cfg;
    ddpc_engine *engine;
    int64_t total_steps;     /* optimizer steps of the whole run */
    int64_t steps_per_epoch; /* optimizer steps per epoch (training only) */
    /* Distributed: the group (world 1 without a launcher), the reducer (world > 1 only). */
    ddpc_pg *pg;
    ddpc_reducer *reducer;
    ddpc_reducer_config reducer_cfg; /* the ddp.* keys */
    int rank, world;
    int local_world; /* ranks on this host (memory.limit_gb's default divides by it) */
    /* parallel.mode dp: DataParallel replicas in this one process (world 1), each taking
     * data.batch_size rows of a loader batch N times as large; 0 under parallel.mode ddp. */
    int dp_replicas;
    int plan_world;  /* > 0: `ddpc plan` at this many ranks; nothing is allocated or run */
    /* Memory plan (trainer_memory.c): its input (bucket lengths owned here), the per-rank limit
     * and how it was set, and whether the measured peak was reported yet. */
    ddpc_memplan_input mem_in;
    size_t *mem_buckets;
    uint64_t mem_limit;
    char mem_limit_what[256];
    bool mem_reported;
    /* Batch buffers (max_batch samples), for prediction and the step benchmark. */
    int64_t max_batch, sample_floats, tokens_per_sample;
    float *x;
    int32_t *tokens, *targets;
    int64_t *perm;          /* (train size) bench order */
    ddpc_metrics *metrics;  /* records of rank 0 reach metrics.jsonl; other ranks' go nowhere */
    ddpc_rundir_lock *lock; /* rank 0: this job's run directory */
    char *config_text;      /* the effective configuration (ddpc_config_dump), for config.yaml and
                               checkpoints */
    int restart_count;      /* of the launcher (TORCHELASTIC_RESTART_COUNT) */
    /* Position: where the next step's data starts (epoch, optimizer steps done in it). */
    int64_t epoch, epoch_step;
    int64_t last_saved_step; /* -1: none this run */
    double ckpt_seconds;     /* spent saving checkpoints this run */
    char resumed_from[1100]; /* checkpoint this run resumed from, or "" */
    char init_report[1024];  /* what init_from (init_strict: false) left out, or "" */
    /* Logging window. */
    double window_time;   /* training seconds since the last progress line */
    double unsynced_loss; /* local weighted loss sum since the last cross-rank sync */
    int64_t unsynced_steps;
    double window_loss; /* rank-averaged loss sum since the last progress line */
    int64_t window_steps;
    int64_t window_samples; /* rows this rank trained on since the last progress line */
    double window_wait;     /* seconds blocked on the loaders since the last line */
    double last_train_loss;
    double last_grad_norm; /* of the last step, before clipping */
    uint64_t last_comm_bytes; /* ring bytes this rank's last optimizer step issued */
    ddpc_eval_result last_eval;
    ddpc__progress bar;
    ddpc__phases ph;
};

/* trainer_settings.c: the top-level keys (every one with its default and range). */
ddpc_status ddpc__trainer_read_settings(ddpc_trainer *t, const char *config_name);

/* trainer_data.c: the dataset table and the task table. Reads `tasks.<i>.*` when the config
 * declares tasks, else one task from `data.*` (the same builder and keys); loads every dataset
 * once (tasks naming the same one share it; a label_map is a view). */
ddpc_status ddpc__trainer_load_tasks(ddpc_trainer *t);
/* Frees loaders, samplers and datasets. */
void ddpc__trainer_free_tasks(ddpc_trainer *t);

/* trainer_model.c: the model table (keys per model.type), the optimizer keys and the engine. */
ddpc_status ddpc__trainer_build_model(ddpc_trainer *t);
/* Per task a distributed sampler + loader (drop_last), the combined loader over them;
 * *per_epoch = optimizer steps per epoch. */
ddpc_status ddpc__trainer_build_loaders(ddpc_trainer *t, int64_t *per_epoch);

/* trainer_fit.c: the fit loop. */
ddpc_status ddpc__trainer_fit(ddpc_trainer *t);

/* trainer_progress.c: the bar drawn on rank 0 in place of the progress lines when log.progress
 * is bar, or auto and the log is a terminal. on: whether it is drawn (decided at the first call);
 * update: the window's loss and rate, redrawn now; tick: after a step, redrawn at most 10 times a
 * second; clear: erases it before another line is printed; finish: its last state and a newline. */
bool ddpc__progress_on(ddpc_trainer *t);
void ddpc__progress_update(ddpc_trainer *t, int64_t epoch, double loss, double rate, bool tokens);
void ddpc__progress_tick(ddpc_trainer *t, int64_t epoch);
void ddpc__progress_clear(ddpc_trainer *t);
void ddpc__progress_finish(ddpc_trainer *t);

/* trainer_ckpt.c: checkpoint keys, saving and resuming. */
ddpc_status ddpc__trainer_read_ckpt_settings(ddpc_trainer *t);
/* Whether checkpoint.every_steps or every_epochs asks for checkpoints. */
bool ddpc__trainer_checkpoints_on(const ddpc_trainer *t);
/* Per `resume`: loads the checkpoint's parameters, optimizer state, counters and position. */
ddpc_status ddpc__trainer_resume(ddpc_trainer *t);
/* After a step: saves when every_steps / every_epochs says so (rank 0 writes). */
ddpc_status ddpc__trainer_after_step_save(ddpc_trainer *t, bool epoch_end);
/* At the end of training: saves the final state unless it was just saved (checkpoints on). */
ddpc_status ddpc__trainer_final_save(ddpc_trainer *t);

/* trainer_dist.c */
ddpc_status ddpc__trainer_init_dist(ddpc_trainer *t);
/* The ddp.* keys into t->reducer_cfg (before the model is allocated: the memory plan needs them). */
ddpc_status ddpc__trainer_read_ddp(ddpc_trainer *t);
ddpc_status ddpc__trainer_init_ddp(ddpc_trainer *t);
/* Model copies that each take data.batch_size rows of a step: ranks x DataParallel replicas. */
static inline int ddpc__trainer_dp_degree(const ddpc_trainer *t)
{
    return t->world * (t->dp_replicas > 0 ? t->dp_replicas : 1);
}
/* values (n) = their sum over ranks (in place; nothing to do on one rank). */
ddpc_status ddpc__trainer_sum(ddpc_trainer *t, double *values, size_t n);
float ddpc__trainer_lr_scale(const ddpc_trainer *t);
void ddpc__trainer_fini_dist(ddpc_trainer *t);

/* trainer_memory.c: the memory plan of issue #11. plan_memory (on the shapes-only model, before
 * its buffers and the optimizer exist) fills mem_in and the limit (memory.limit_gb, or this
 * host's MemAvailable over its ranks; the smallest over ranks) and, training, refuses a plan over
 * it. log_memory_plan writes the plan line; report_memory (rank 0 log, metrics.jsonl) the
 * measured allocator and RSS peaks next to the plan, once. */
ddpc_status ddpc__trainer_plan_memory(ddpc_trainer *t);
void ddpc__trainer_log_memory_plan(ddpc_trainer *t);
ddpc_status ddpc__trainer_report_memory(ddpc_trainer *t);

/* trainer_phases.c: the phase breakdown (log.phases) and the per-rank records. start allocates
 * the scratch (before the first step); now is the clock when log.phases is on, else 0; step adds
 * a finished step (its update ended at `end`); fields adds the window's means to the open record;
 * ranks (collective, after that record) writes the per-rank step times and resets the window;
 * rank_memory (collective) writes every rank's allocator peak and RSS. */
ddpc_status ddpc__trainer_phases_start(ddpc_trainer *t, double start);
static inline double ddpc__trainer_phase_now(const ddpc_trainer *t)
{
    return t->set.phases || ddpc_trace_on() ? ddpc_time_now() : 0.0;
}
void ddpc__trainer_phases_step(ddpc_trainer *t, double end);
void ddpc__trainer_phases_fields(ddpc_trainer *t);
ddpc_status ddpc__trainer_phases_ranks(ddpc_trainer *t, int64_t step);
ddpc_status ddpc__trainer_rank_memory(ddpc_trainer *t, int64_t step);

/* trainer_trace.c: profile.steps. before (ahead of step `next`, 1-based) starts recording at the
 * first profiled step; after (the step ran over [t0, t1]) records it and, after the last profiled
 * step (or the run's last), gathers every rank's events and rank 0 writes <run_dir>/trace.json.
 * Collective. */
ddpc_status ddpc__trainer_read_profile(ddpc_trainer *t);
ddpc_status ddpc__trainer_trace_before(ddpc_trainer *t, int64_t next);
ddpc_status ddpc__trainer_trace_after(ddpc_trainer *t, double t0, double t1);

/* trainer_eval.c: evaluates every task on its test split (all of it, or eval_batches batches per
 * rank when limit), logs one record per task and keeps the results. */
ddpc_status ddpc__trainer_evaluate(ddpc_trainer *t, const char *split, bool limit);

/* trainer_predict.c: rank 0 writes predictions (classes per task, or sampled text). */
ddpc_status ddpc__trainer_predict(ddpc_trainer *t);

/* trainer_outputs.c: run directory lock, config.yaml, writability checks, metrics.jsonl. */
ddpc_status ddpc__trainer_open_outputs(ddpc_trainer *t);

#endif
