// SPDX-License-Identifier: MIT
/* Private trainer state shared by setup, fit, evaluation, prediction and checkpoints. A config
 * is a list of tasks — `tasks:` — or one task spelled with the `data.*` keys; both are the same
 * task table and the same loop. Invariants: task k always runs head k of a multi-task model (head
 * 0 = the single classifier otherwise); every dataset a task points to is in `owned`; batch
 * buffers are sized once for the largest batch, so a step after the first allocates nothing. */
#ifndef DDPC_TRAIN_TRAINER_IMPL_H
#define DDPC_TRAIN_TRAINER_IMPL_H

#include <ddpc/checkpoint.h>
#include <ddpc/combined.h>
#include <ddpc/comm.h>
#include <ddpc/data.h>
#include <ddpc/engine.h>
#include <ddpc/fs.h>
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

#include "train/trainer_device.h"
#include "train/trainer_gpu_step.h"
#include "train/trainer_kind.h"
#include "train/trainer_progress.h"
#include "train/trainer_settings.h"

#include <stdbool.h>

#define DDPC__FMNIST_DIR "/usr/share/datasets/fashion-mnist"
#define DDPC__FORTUNES_DIR "/usr/share/games/fortunes"
#define DDPC__TASK_NAME_MAX 32
#define DDPC_TRAIN_MAX_ACCUM 1024

/* The logging window's phase breakdown (trainer_phases.c): seconds summed over its steps. A step's
 * period runs from the end of the previous step's update to the end of its own, so logging,
 * evaluation and checkpointing after step n count in step n+1. */
typedef struct {
    double mark;      /* end of the last step's update */
    double busy_mark; /* ddpc_pg_busy_seconds at the window's start */
    double data, ckpt, step;
    ddpc_engine_timing eng;
    ddpc_engine_timing dev; /* on a GPU: the same phases in device time (gpu_on) */
    bool gpu_on;
    int64_t steps;
    double *ranks; /* (world x 3) scratch for the per-rank gathers, from fit's start */
} ddpc__phases;

/* The training samplers' keys (trainer_sampler.c): data.sampler and its options, the same for
 * every task. One dataset per task, so rank_split has one source. */
typedef struct {
    ddpc_sampler_kind kind;         /* distributed, rank_split or case */
    bool drop_last;                 /* the sampler's (torch DistributedSampler's) drop_last */
    bool left_list, right_list;     /* ddpc's per-source form given */
    int64_t left_index, right_index; /* its one entry each */
    int64_t first_left, last_right; /* the seed's scalar form; -1 = no last_right */
    double ratio;                   /* down_sample_ratio in (0, 1] */
    int64_t stride;                 /* the seed's integer down_sample_ratio; 0 = none */
    int streaming;                  /* 0 none, 1 round_robin, 2 interleave */
    bool log_indices;               /* data.log_indices: <run_dir>/indices_rank<r>.txt */
} ddpc__sampling;

typedef struct {
    char name[DDPC__TASK_NAME_MAX];      /* letters, digits, '_', '-', '.' */
    const char *data_type;               /* for the start line */
    ddpc_dataset *train, *test;          /* borrowed from owned */
    ddpc_dataset *valid;                 /* the "val" split when it differs from test, or NULL */
    int64_t batch_size, eval_batch_size; /* per rank */
    float loss_weight;
    int64_t num_classes; /* the head's width, >= the dataset's classes */
    ddpc_sampler *sampler;
    ddpc_loader *loader; /* NULL: task sharding gave this task to other ranks */
    /* Task sharding: the ranks training this task and this rank's place among them (its sampler
     * splits the task over them); -1 when this rank does not train it. Without sharding every
     * rank: world and rank. */
    int shard_world, shard_rank;
    /* Unweighted loss sums over this task's passes: since the last cross-rank sync (local), and
     * in the logging window (rank-averaged). */
    double unsynced_loss, unsynced_passes, window_loss, window_passes;
    ddpc_eval_result last_eval;
} ddpc__task;

#define DDPC__MAX_OWNED (4 * DDPC_MODEL_MAX_HEADS)

/* data.type translation's state (trainer_translation.h). */
typedef struct ddpc__translation ddpc__translation;

/* trainer_ckpt.c: the newer checkpoints resume passed over because they did not verify (the
 * first DDPC__RESUME_NOTES of n_skipped, newest first), for rank 0's log and metrics.jsonl's
 * resume record; and whether this run's first save was checked to be seen by every rank
 * (trainer_ckpt_agree.c). */
#define DDPC__RESUME_NOTES 8
typedef struct {
    char dir[1024]; /* the directory they are in */
    ddpc_ckpt_entry skipped[DDPC__RESUME_NOTES];
    size_t n_skipped;
    bool save_seen_checked;
    bool had_metrics; /* run_dir's metrics.jsonl held records before this run (trainer_session.c) */
} ddpc__resume_notes;

/* The job's locks on what it writes (trainer_outputs.c): held by global rank 0 for the whole
 * job, so its other ranks never refuse each other; NULL when not taken. */
typedef struct {
    ddpc_rundir_lock *run_dir;
    ddpc_fs_lock *ckpt_dir;    /* training with checkpoints, or resume: auto from an existing one */
    ddpc_fs_lock *weights_out; /* "<weights_out's target>.lock", removed on release */
} ddpc__trainer_locks;

/* The task table and its loaders (trainer_data.c, trainer_shard.c, trainer_sampler.c). */
typedef struct {
    /* `multi` when the config declares `tasks:` (heads per task, per-task metrics). */
    bool multi;
    int n_tasks;
    int n_tasks_declared; /* in the config's tasks list, before data.task_names_to_use */
    ddpc__task task[DDPC_MODEL_MAX_HEADS];
    ddpc_dataset *owned[DDPC__MAX_OWNED];
    int n_owned;
    ddpc_combined_mode mode; /* training; evaluation is always sequential */
    ddpc_combined *combined; /* over the tasks this rank trains: local_task[j] is loader j's */
    int n_local, local_task[DDPC_MODEL_MAX_HEADS];
    bool cycle; /* the ranks' epochs differ in length: restart the combined loader when it ends */
    ddpc__sampling samp;
    /* data.task_sharding (trainer_shard.c): whether on, and holds (world x n_tasks), 1 where a
     * rank trains a task. */
    bool sharding;
    int min_tasks_per_rank;
    bool replicate_tasks;
    unsigned char *holds;
    FILE *indices_log; /* data.log_indices */
} ddpc__task_table;

/* Distributed (trainer_dist.c): the group (world 1 without a launcher), the reducer (world > 1
 * only) and the shape of the job. */
typedef struct {
    ddpc_pg *pg;
    ddpc_reducer *reducer;
    ddpc_reducer_config reducer_cfg; /* the ddp.* keys */
    int rank, world;
    int local_world; /* ranks on this host (memory.limit_gb's default divides by it) */
    /* parallel.mode dp: DataParallel replicas in this one process (world 1), each taking
     * data.batch_size rows of a loader batch N times as large; 0 under parallel.mode ddp. */
    int dp_replicas;
    int plan_world; /* > 0: `ddpc plan` at this many ranks; nothing is allocated or run */
    /* Several ranks on GPUs (trainer_gpus.c): the group on the model's device buffers, which the
     * reducer moves gradients and parameters over (pg keeps the host's data); NULL otherwise.
     * gpu_backend: dist.backend (or ddpc run --backend) as asked, since nccl is this group's
     * only (pg then takes auto). gpu_lines: rank 0's copy of every rank's start-up line. */
    ddpc_pg *device_pg;
    ddpc_backend gpu_backend;
    char *gpu_lines;
} ddpc__dist;

/* Memory plan (trainer_memory.c): its input (bucket lengths owned here), the per-rank limit and
 * how it was set, and whether the measured peak was reported yet. */
typedef struct {
    ddpc_memplan_input in;
    size_t *buckets;
    uint64_t limit;
    char limit_what[256];
    bool reported;
} ddpc__mem;

/* Batch buffers (max_batch samples), for prediction and the step benchmark. */
typedef struct {
    int64_t max_batch, sample_floats, tokens_per_sample;
    float *x;                  /* (max_batch, sample_floats) */
    int32_t *tokens, *targets; /* (max_batch, tokens_per_sample) */
    int64_t target_width;      /* float targets per sample (a loss on them), else 0 */
    float *ftargets;           /* (max_batch, target_width), or NULL */
    int64_t *perm;             /* (train size) bench order */
} ddpc__buffers;

/* Position: where the next step's data starts (epoch, optimizer steps done in it), and the
 * run's saving so far. */
typedef struct {
    int64_t epoch, epoch_step;
    int64_t last_saved_step; /* -1: none this run */
    double ckpt_seconds;     /* spent saving checkpoints this run */
    int restart_count;       /* of the launcher (TORCHELASTIC_RESTART_COUNT) */
} ddpc__position;

/* The logging window (trainer_window.c): what the progress line reports. */
typedef struct {
    double time;          /* training seconds since the last progress line */
    double unsynced_loss; /* local weighted loss sum since the last cross-rank sync */
    int64_t unsynced_steps;
    double loss; /* rank-averaged loss sum since the last progress line */
    int64_t steps;
    int64_t samples; /* rows this rank trained on since the last progress line */
    double wait;     /* seconds blocked on the loaders since the last line */
    double last_train_loss;
    double last_grad_norm;    /* of the last step, before clipping */
    uint64_t last_comm_bytes; /* ring bytes this rank's last optimizer step issued */
} ddpc__window;

struct ddpc_trainer {
    ddpc_config *cfg;
    FILE *log;
    trainer_settings set;
    ddpc__task_table data;
    const ddpc__task_kind *kind; /* chosen by the tasks' data (trainer_kind.h) */
    ddpc__translation *tr;       /* data.type translation's state; NULL otherwise */
    ddpc_model *model;
    ddpc_engine_config engine_cfg;
    ddpc_engine *engine;
    int64_t total_steps;     /* optimizer steps of the whole run */
    int64_t steps_per_epoch; /* optimizer steps per epoch (training only) */
    ddpc__dist dist;
    ddpc__mem mem;
    ddpc__buffers buf;
    ddpc_metrics *metrics;  /* records of rank 0 reach metrics.jsonl; other ranks' go nowhere */
    ddpc__trainer_locks locks; /* rank 0's, for the job */
    char *config_text; /* the effective configuration (ddpc_config_dump), for config.yaml and
                          checkpoints */
    ddpc__position pos;
    ddpc__gpu_count gpu;
    ddpc__pending pend;
    char resumed_from[1100]; /* checkpoint this run resumed from, or "" */
    ddpc__resume_notes resume; /* what resuming passed over; the first save's check */
    char init_report[1024];  /* what init_from (init_strict: false) left out, or "" */
    char notes[1024]; /* lines about a config changed to fit the run (warm-up cut to the run,
                         a partial batch kept), decided while building, printed when it runs */
    ddpc__window win;
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

/* trainer_sampler.c: the data.sampler keys into t->data.samp (before data.shuffle, whose default
 * depends on streaming); the training sampler config of task i; data.log_indices' file (open at
 * fit's start, one line per pass: step, micro-step, task, indices). */
ddpc_status ddpc__trainer_read_sampling(ddpc_trainer *t);
ddpc_sampler_config ddpc__trainer_sampler_config(const ddpc_trainer *t, int i, int64_t *size);
ddpc_status ddpc__trainer_open_indices_log(ddpc_trainer *t);
void ddpc__trainer_log_indices(ddpc_trainer *t, int64_t step, int64_t micro, int task,
                               const ddpc_batch *b);

/* trainer_shard.c: data.task_names_to_use (keeps and orders the tasks named; before the model,
 * whose heads follow the task table) and data.task_sharding (which ranks train which tasks);
 * log_task_sharding writes the assignment (rank 0, at fit's start). */
ddpc_status ddpc__trainer_select_tasks(ddpc_trainer *t);
ddpc_status ddpc__trainer_shard_tasks(ddpc_trainer *t);
void ddpc__trainer_log_task_sharding(ddpc_trainer *t);

/* trainer_model.c: the model (each type reads its own keys), the optimizer keys and the engine. */
ddpc_status ddpc__trainer_build_model(ddpc_trainer *t);
/* trainer_loaders.c: per task a distributed sampler + loader (drop_last), the combined loader over
 * them; *per_epoch = optimizer steps per epoch. */
ddpc_status ddpc__trainer_build_loaders(ddpc_trainer *t, int64_t *per_epoch);

/* trainer_fit.c: the fit loop. */
ddpc_status ddpc__trainer_fit(ddpc_trainer *t);
/* trainer_fit_log.c: rank 0's lines before the first step and, on a GPU, after the last. */
void ddpc__trainer_log_start(ddpc_trainer *t);
/* What runs the run's matrix products (engine, precision, TF32), as the start line says it. */
void ddpc__trainer_matmul_info(const ddpc_trainer *t, char *out, size_t cap);
void ddpc__trainer_log_device_allocs(const ddpc_trainer *t);
/* trainer_window.c: sync_stats (collective) averages the losses since the last sync over ranks
 * into the window; log_progress writes the window's record and line, then resets it. */
ddpc_status ddpc__trainer_sync_stats(ddpc_trainer *t);
ddpc_status ddpc__trainer_log_progress(ddpc_trainer *t, int64_t epoch, double elapsed);

/* trainer_ckpt.c: checkpoint keys, saving and resuming. */
ddpc_status ddpc__trainer_read_ckpt_settings(ddpc_trainer *t);
/* Whether checkpoint.every_steps or every_epochs asks for checkpoints. */
bool ddpc__trainer_checkpoints_on(const ddpc_trainer *t);
/* Per `resume`: loads the checkpoint's parameters, optimizer state, counters and position. */
ddpc_status ddpc__trainer_resume(ddpc_trainer *t);
/* Samples one optimizer step consumes over all ranks (world x batch x accumulation). */
int64_t ddpc__trainer_global_batch(const ddpc_trainer *t);
/* trainer_session.c: note_metrics (every rank, before resume's collective) sees whether run_dir
 * holds an earlier run's metrics, which this run then appends to (appends_metrics); record_session
 * writes the "rerun" record of a run that continues nothing there (a TensorBoard START) and the
 * "run" record (world, precision, ZeRO stage, device, config); record_end the wall time. */
void ddpc__trainer_note_metrics(ddpc_trainer *t);
/* Appends to t->notes, the lines printed when the run starts (a config changed to fit the run,
 * the threads each rank got, what the data reader skipped). */
void ddpc__trainer_add_note(ddpc_trainer *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
bool ddpc__trainer_appends_metrics(const ddpc_trainer *t);
ddpc_status ddpc__trainer_record_session(ddpc_trainer *t);
ddpc_status ddpc__trainer_record_end(ddpc_trainer *t, double wall_s);
/* trainer_resume_config.c: the checkpoint at path (its state st) against this run's configuration.
 * Changes to the training refuse a resume: auto (DDPC_EINVAL naming the keys, old -> new); report
 * (cap) gets the lines for rank 0's log: resume=force's warning, reshard, length, cosmetic keys. */
ddpc_status ddpc__trainer_compare_config(const ddpc_trainer *t, const char *path,
                                         const ddpc_ckpt_state *st, char *report, size_t cap);
/* trainer_ckpt_agree.c, collectives over t->dist.pg (every rank calls them; world 1: no-ops).
 * resume_agree: after each rank tried to resume (local: its status; st: what it loaded, NULL if
 * nothing; path: from where), every rank returns the same verdict: a rank's failure, or
 * ranks that loaded different checkpoints (step, state.json's CRC, directory name, position)
 * refuse, naming the ranks. save_seen: after this run's first save (local: this rank's status,
 * path: the committed checkpoint on rank 0), every rank checks it sees rank 0's state.json,
 * else all fail saying checkpoint.dir must be on a file system every rank sees. */
ddpc_status ddpc__trainer_resume_agree(ddpc_trainer *t, ddpc_status local,
                                       const ddpc_ckpt_state *st, const char *path);
ddpc_status ddpc__trainer_save_seen(ddpc_trainer *t, ddpc_status local, const char *path);
/* After a step: saves when every_steps / every_epochs says so (rank 0 writes). */
ddpc_status ddpc__trainer_after_step_save(ddpc_trainer *t, bool epoch_end);
/* At the end of training: saves the final state unless it was just saved (checkpoints on). */
ddpc_status ddpc__trainer_final_save(ddpc_trainer *t);

/* The model's input for a loader batch (or the step benchmark's) of head `task`. */
static inline ddpc_model_input ddpc__trainer_input_of(const ddpc_batch *b, int task)
{
    return (ddpc_model_input){.n = b->n,
                              .x = b->x,
                              .tokens = b->tokens,
                              .targets = b->targets,
                              .float_targets = b->float_targets,
                              .src_tokens = b->src_tokens,
                              .src_len = b->src_len,
                              .tgt_len = b->tgt_len,
                              .task = task};
}


/* trainer_dist.c */
ddpc_status ddpc__trainer_init_dist(ddpc_trainer *t);
/* trainer_threads.c: once the group exists, the kernel threads of this rank (the user's count,
 * else the usable CPUs split among the ranks on this host), and a start-up note saying why. */
void ddpc__trainer_split_threads(ddpc_trainer *t, const ddpc_comm_env *env);
/* The ddp.* keys into t->dist.reducer_cfg (before the model is allocated: the memory plan needs
 * them). */
ddpc_status ddpc__trainer_read_ddp(ddpc_trainer *t);
ddpc_status ddpc__trainer_zero_stage(ddpc_config *c, int *stage); /* zero.stage, 0-3 */
ddpc_status ddpc__trainer_init_ddp(ddpc_trainer *t);
/* trainer_gpus.c: once the model is built, every rank's device kind agreed (a CPU and GPU mix is
 * refused on every rank), and with world > 1 on GPUs the device group and the start-up lines. */
ddpc_status ddpc__trainer_init_gpus(ddpc_trainer *t);
void ddpc__trainer_fini_gpus(ddpc_trainer *t);
/* Model copies that each take data.batch_size rows of a step: ranks x DataParallel replicas. */
static inline int ddpc__trainer_dp_degree(const ddpc_trainer *t)
{
    return t->dist.world * (t->dist.dp_replicas > 0 ? t->dist.dp_replicas : 1);
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
/* *acc += scale x, field by field (window sums, and the bench's means per step). */
void ddpc__timing_add(ddpc_engine_timing *acc, const ddpc_engine_timing *x, double scale);
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

/* trainer_eval.c: evaluates every task on its test split (at most max_batches batches of each
 * task per rank: eval_batches for "val", test_batches for "test"; 0 = all of it), logs one record
 * per task and keeps the results. */
ddpc_status ddpc__trainer_evaluate(ddpc_trainer *t, const char *split, int64_t max_batches);

/* trainer_predict.c: rank 0 writes predictions (classes per task, or sampled text). */
ddpc_status ddpc__trainer_predict(ddpc_trainer *t);

/* trainer_outputs.c: the job's locks (run directory, checkpoint directory, weights_out) and the
 * early checks of outputs written at the end, taken before anything is read or written; then
 * config.yaml, writability checks, metrics.jsonl. Rank 0 locks, for the whole job. */
ddpc_status ddpc__trainer_lock_outputs(ddpc_trainer *t);
void ddpc__trainer_unlock_outputs(ddpc_trainer *t);
ddpc_status ddpc__trainer_open_outputs(ddpc_trainer *t);

#endif
