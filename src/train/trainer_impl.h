/* Private trainer state shared by setup, fit, evaluation, prediction and weights files.
 * Batch buffers are sized once for the larger of the train and eval batch, so a step after the
 * first allocates nothing. */
#ifndef DDPC_TRAIN_TRAINER_IMPL_H
#define DDPC_TRAIN_TRAINER_IMPL_H

#include <ddpc/data.h>
#include <ddpc/comm.h>
#include <ddpc/loader.h>
#include <ddpc/nn.h>
#include <ddpc/optim.h>
#include <ddpc/reducer.h>
#include <ddpc/sampler.h>
#include <ddpc/train.h>

#include <stdbool.h>

#define DDPC__FMNIST_DIR "/usr/share/datasets/fashion-mnist"
#define DDPC__FORTUNES_DIR "/usr/share/games/fortunes"

typedef enum { STATE_TRAIN, STATE_VAL, STATE_TEST, STATE_PREDICT } trainer_state;
#define DDPC_TRAIN_MAX_ACCUM 1024

typedef enum { LR_SCALE_NONE, LR_SCALE_LINEAR, LR_SCALE_SQRT } lr_scale_kind;

typedef struct {
    uint64_t seed;
    int threads;
    trainer_state state;
    int64_t epochs, max_steps, eval_every, eval_batches, log_every;
    int64_t batch_size, eval_batch_size; /* per rank */
    int64_t accum_steps;                 /* micro-batches per optimizer step */
    int64_t stats_sync_every;            /* steps between cross-rank loss averages */
    lr_scale_kind lr_scale;              /* base LR x (world * accum_steps)^{0, 1, 1/2} */
    int num_workers, prefetch_factor;    /* training loader */
    bool shuffle;
    float grad_clip;
    char run_dir[512];
    const char *weights_out, *init_from;
    /* predict */
    int64_t predict_samples, predict_tokens;
    const char *prompt;
    float temperature;
} trainer_settings;

struct ddpc_trainer {
    ddpc_config *cfg;
    FILE *log;
    trainer_settings set;
    ddpc_dataset *train, *val, *test; /* with tasks: task 0's, owned by `tasks` */
    struct ddpc__trainer_tasks *tasks; /* multi-task state (trainer_tasks.h); NULL for one task */
    ddpc_model *model;
    ddpc_optim *opt;
    ddpc_lr_schedule sched;
    /* Distributed: the group (world 1 without a launcher), the reducer (world > 1 only). */
    ddpc_pg *pg;
    ddpc_reducer *reducer;
    int rank, world;
    ddpc_sampler *train_sampler;
    ddpc_loader *train_loader;
    /* Batch buffers (max_batch samples). */
    int64_t max_batch, sample_floats, tokens_per_sample;
    float *x;
    int32_t *tokens, *targets;
    int64_t *perm; /* (train size) bench order */
    FILE *metrics;
    int64_t step;
    double window_time;              /* since the last progress line */
    double unsynced_loss;            /* local loss sum since the last cross-rank sync */
    int64_t unsynced_steps;
    double window_loss;              /* rank-averaged loss sum since the last progress line */
    int64_t window_steps;
    double window_wait;              /* seconds blocked on the loader since the last line */
    double last_train_loss;
    ddpc_eval_result last_eval;
};

/* trainer_setup.c */
ddpc_status ddpc__trainer_read_settings(ddpc_trainer *t, const char *config_name);
ddpc_status ddpc__trainer_load_data(ddpc_trainer *t);
ddpc_status ddpc__trainer_build_model(ddpc_trainer *t);

/* trainer_batch.c: gathers samples idx[0..n) of d into the batch buffers, runs the model's head
 * `task` (0 for one task). */
ddpc_status ddpc__trainer_forward(ddpc_trainer *t, const ddpc_dataset *d, const int64_t *idx,
                                  int64_t n, int task, bool training, ddpc_model_output *out);
/* The training sampler (distributed: seeded shuffle per epoch, equal padded shares per rank)
 * and its prefetching loader (drop_last, so every rank runs the same number of steps). */
ddpc_status ddpc__trainer_build_loader(ddpc_trainer *t);
/* Runs the model on a loader batch; `stream` makes dropout masks distinct per step and rank. */
ddpc_status ddpc__trainer_forward_batch(ddpc_trainer *t, const ddpc_batch *b, bool training,
                                        uint64_t stream, ddpc_model_output *out);

/* trainer_fit.c */
ddpc_status ddpc__trainer_fit(ddpc_trainer *t);
/* One optimizer step over accum_steps micro-batches (batches[k]), synchronised across ranks;
 * *loss = this rank's mean loss over them. */
ddpc_status ddpc__trainer_train_step(ddpc_trainer *t, const ddpc_batch *const *batches,
                                     float *loss);

/* trainer_dist.c */
ddpc_status ddpc__trainer_init_dist(ddpc_trainer *t);
ddpc_status ddpc__trainer_init_ddp(ddpc_trainer *t);
/* values (n) = their sum over ranks (in place; nothing to do on one rank). */
ddpc_status ddpc__trainer_sum(ddpc_trainer *t, double *values, size_t n);
float ddpc__trainer_lr_scale(const ddpc_trainer *t);
void ddpc__trainer_fini_dist(ddpc_trainer *t);

/* trainer_eval.c: evaluates d (all of it, or eval_batches batches when limit) and logs it. */
ddpc_status ddpc__trainer_evaluate(ddpc_trainer *t, const ddpc_dataset *d, const char *split,
                                   bool limit, ddpc_eval_result *r);
ddpc_status ddpc__trainer_predict(ddpc_trainer *t);
/* Writes run_dir/`file`: index,label,predicted,confidence for predict.samples samples of d (all
 * when 0) through head `task`. */
ddpc_status ddpc__trainer_predict_classes(ddpc_trainer *t, const ddpc_dataset *d, int task,
                                          const char *file);

/* metrics.c: one JSON object per line in run_dir/metrics.jsonl. */
ddpc_status ddpc__metrics_open(ddpc_trainer *t);
void ddpc__metrics_write(ddpc_trainer *t, const char *json_fields);
ddpc_status ddpc__make_dirs(const char *path);

#endif
