/* Private trainer state shared by setup, fit, evaluation, prediction and weights files.
 * Batch buffers are sized once for the larger of the train and eval batch, so a step after the
 * first allocates nothing. */
#ifndef DDPC_TRAIN_TRAINER_IMPL_H
#define DDPC_TRAIN_TRAINER_IMPL_H

#include <ddpc/data.h>
#include <ddpc/nn.h>
#include <ddpc/optim.h>
#include <ddpc/train.h>

#include <stdbool.h>

typedef enum { STATE_TRAIN, STATE_VAL, STATE_TEST, STATE_PREDICT } trainer_state;

typedef struct {
    uint64_t seed;
    int threads;
    trainer_state state;
    int64_t epochs, max_steps, eval_every, eval_batches, log_every;
    int64_t batch_size, eval_batch_size;
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
    ddpc_dataset *train, *val, *test;
    ddpc_model *model;
    ddpc_optim *opt;
    ddpc_lr_schedule sched;
    /* Batch buffers (max_batch samples). */
    int64_t max_batch, sample_floats, tokens_per_sample;
    float *x;
    int32_t *tokens, *targets;
    int64_t *idx;
    int64_t *perm; /* (train size) this epoch's order */
    FILE *metrics;
    int64_t step;
    double window_loss, window_time; /* since the last progress line */
    int64_t window_steps;
    double last_train_loss;
    ddpc_eval_result last_eval;
};

/* trainer_setup.c */
ddpc_status ddpc__trainer_read_settings(ddpc_trainer *t, const char *config_name);
ddpc_status ddpc__trainer_load_data(ddpc_trainer *t);
ddpc_status ddpc__trainer_build_model(ddpc_trainer *t);

/* trainer_batch.c: gathers samples idx[0..n) of d into the batch buffers, runs the model. */
ddpc_status ddpc__trainer_forward(ddpc_trainer *t, const ddpc_dataset *d, const int64_t *idx,
                                  int64_t n, bool training, ddpc_model_output *out);

/* trainer_fit.c */
ddpc_status ddpc__trainer_fit(ddpc_trainer *t);
ddpc_status ddpc__trainer_train_step(ddpc_trainer *t, const int64_t *idx, int64_t n, float *loss);

/* trainer_eval.c: evaluates d (all of it, or eval_batches batches when limit) and logs it. */
ddpc_status ddpc__trainer_evaluate(ddpc_trainer *t, const ddpc_dataset *d, const char *split,
                                   bool limit, ddpc_eval_result *r);
ddpc_status ddpc__trainer_predict(ddpc_trainer *t);

/* metrics.c: one JSON object per line in run_dir/metrics.jsonl. */
ddpc_status ddpc__metrics_open(ddpc_trainer *t);
void ddpc__metrics_write(ddpc_trainer *t, const char *json_fields);
ddpc_status ddpc__make_dirs(const char *path);

#endif
