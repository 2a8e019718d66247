/* The fit loop: epochs of seeded shuffled batches (drop_last), one optimizer step per batch,
 * progress every log_every steps, evaluation every eval_every steps (or each epoch's end), a
 * final evaluation on the test split, then weights_out. Deterministic given config and seed. */
#include "train/trainer_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/kernels.h>
#include <ddpc/rng.h>
#include <ddpc/timer.h>
#include <ddpc/weights.h>

#include <stdio.h>
#include <stdlib.h>

ddpc_status ddpc__trainer_train_step(ddpc_trainer *t, const int64_t *idx, int64_t n, float *loss)
{
    ddpc_model *m = t->model;
    ddpc_model_output out;
    ddpc_model_zero_grad(m);
    DDPC_TRY(ddpc__trainer_forward(t, t->train, idx, n, true, &out));
    DDPC_TRY(ddpc_model_backward(m, 1.0f));
    size_t np = ddpc_model_num_params(m);
    if (t->set.grad_clip > 0.0f)
        ddpc_clip_grad_norm(ddpc_model_grads(m), np, t->set.grad_clip);
    float lr = ddpc_lr_at(&t->sched, t->step);
    ddpc_optim_step(t->opt, ddpc_model_params(m), ddpc_model_grads(m), ddpc_model_decay_mask(m), lr);
    t->step++;
    *loss = out.loss;
    return DDPC_OK;
}

static void shuffle_epoch(ddpc_trainer *t, int64_t epoch)
{
    int64_t n = ddpc_dataset_size(t->train);
    for (int64_t i = 0; i < n; i++)
        t->perm[i] = i;
    if (t->set.shuffle) {
        /* Stream 1000 + epoch: every epoch a different order, reproducible from the seed. */
        ddpc_rng r = ddpc_rng_make(t->set.seed, 1000 + (uint64_t)epoch);
        ddpc_rng_shuffle(&r, t->perm, n);
    }
}

static void log_progress(ddpc_trainer *t, int64_t epoch, int64_t total, double elapsed)
{
    double window_s = t->window_time;
    int64_t per_sample = t->tokens_per_sample;
    double samples_per_s = (double)(t->window_steps * t->set.batch_size) / window_s;
    double loss = t->window_loss / (double)t->window_steps;
    float lr = ddpc_lr_at(&t->sched, t->step - 1);
    char fields[512];
    snprintf(fields, sizeof fields,
             "\"step\": %lld, \"epoch\": %lld, \"loss\": %.6f, \"lr\": %.6g, \"samples_per_s\": %.1f, "
             "\"tokens_per_s\": %.1f, \"time_s\": %.3f",
             (long long)t->step, (long long)epoch, loss, lr, samples_per_s,
             samples_per_s * (double)per_sample, elapsed);
    ddpc__metrics_write(t, fields);
    if (t->log)
        fprintf(t->log, "step %6lld/%lld | epoch %lld | loss %.4f | lr %.3e | %.0f %s/s | %.1f s\n",
                (long long)t->step, (long long)total, (long long)epoch, loss, lr,
                per_sample > 1 ? samples_per_s * (double)per_sample : samples_per_s,
                per_sample > 1 ? "tok" : "samples", elapsed);
    t->last_train_loss = loss;
    t->window_loss = 0;
    t->window_steps = 0;
    t->window_time = 0;
}

ddpc_status ddpc__trainer_fit(ddpc_trainer *t)
{
    const trainer_settings *s = &t->set;
    int64_t per_epoch = ddpc_dataset_size(t->train) / s->batch_size;
    int64_t total = t->sched.total_steps;
    if (t->log)
        fprintf(t->log, "training %s: %zu parameters, %lld samples, batch %lld, %lld steps, %d threads\n",
                ddpc_model_config_of(t->model)->type, ddpc_model_num_params(t->model),
                (long long)ddpc_dataset_size(t->train), (long long)s->batch_size, (long long)total,
                ddpc_kernels_threads());
    double start = ddpc_time_now();
    ddpc_eval_result r;
    for (int64_t epoch = 0; t->step < total; epoch++) {
        shuffle_epoch(t, epoch);
        for (int64_t b = 0; b < per_epoch && t->step < total; b++) {
            float loss;
            double t0 = ddpc_time_now();
            DDPC_TRY(ddpc__trainer_train_step(t, t->perm + b * s->batch_size, s->batch_size, &loss));
            /* Throughput counts training steps only, not evaluation or logging. */
            t->window_time += ddpc_time_now() - t0;
            t->window_loss += loss;
            t->window_steps++;
            if (t->step % s->log_every == 0 || t->step == total)
                log_progress(t, epoch, total, ddpc_time_now() - start);
            bool epoch_end = b + 1 == per_epoch || t->step == total;
            /* The final test evaluation follows; a validation pass on the same split would repeat it. */
            bool repeat = t->step == total && t->val == t->test && s->eval_batches == 0;
            if (!repeat && ((s->eval_every > 0 && t->step % s->eval_every == 0) ||
                            (s->eval_every == 0 && epoch_end))) {
                DDPC_TRY(ddpc__trainer_evaluate(t, t->val, "val", true, &r));
            }
        }
    }
    DDPC_TRY(ddpc__trainer_evaluate(t, t->test, "test", false, &r));
    if (t->log)
        fprintf(t->log, "done in %.1f s\n", ddpc_time_now() - start);
    if (s->weights_out) {
        DDPC_TRY(ddpc_weights_save(t->model, ddpc_model_params(t->model), s->weights_out));
        if (t->log)
            fprintf(t->log, "saved weights to %s\n", s->weights_out);
    }
    return DDPC_OK;
}

ddpc_status ddpc_trainer_run(ddpc_trainer *t)
{
    DDPC_TRY(ddpc__metrics_open(t));
    ddpc_eval_result r;
    switch (t->set.state) {
    case STATE_TRAIN:
        return ddpc__trainer_fit(t);
    case STATE_VAL:
        return ddpc__trainer_evaluate(t, t->val, "val", false, &r);
    case STATE_TEST:
        return ddpc__trainer_evaluate(t, t->test, "test", false, &r);
    case STATE_PREDICT:
        return ddpc__trainer_predict(t);
    }
    return ddpc_errorf(DDPC_EINTERNAL, "unknown trainer state %d", (int)t->set.state);
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

ddpc_status ddpc_trainer_bench(ddpc_trainer *t, int64_t warmup, int64_t steps, ddpc_bench_result *r)
{
    int64_t n = t->set.batch_size, size = ddpc_dataset_size(t->train);
    if (steps < 1 || steps > 100000)
        return ddpc_errorf(DDPC_EINVAL, "bench steps must be in [1, 100000], got %lld", (long long)steps);
    double *dt = ddpc_malloc((size_t)steps * sizeof(double));
    if (!dt)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for %lld bench timings", (long long)steps);
    shuffle_epoch(t, 0);
    ddpc_status st = DDPC_OK;
    for (int64_t i = 0; i < warmup + steps && st == DDPC_OK; i++) {
        int64_t off = (i * n) % (size - n + 1);
        float loss;
        double t0 = ddpc_time_now();
        st = ddpc__trainer_train_step(t, t->perm + off, n, &loss);
        if (i >= warmup)
            dt[i - warmup] = ddpc_time_now() - t0;
    }
    if (st == DDPC_OK) {
        qsort(dt, (size_t)steps, sizeof *dt, compare_double);
        double med = steps % 2 ? dt[steps / 2] : 0.5 * (dt[steps / 2 - 1] + dt[steps / 2]);
        *r = (ddpc_bench_result){
            .threads = ddpc_kernels_threads(), .batch = n, .steps = steps, .median_step_s = med,
            .samples_per_s = (double)n / med,
            .tokens_per_s = t->tokens_per_sample > 1 ? (double)(n * t->tokens_per_sample) / med : 0,
            .gflops = ddpc_model_train_flops_per_sample(t->model) * (double)n / med * 1e-9,
        };
    }
    ddpc_free(dt);
    return st;
}
