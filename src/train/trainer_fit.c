/* The fit loop: epochs of seeded shuffled batches (drop_last), one optimizer step per batch,
 * progress every log_every steps, evaluation every eval_every steps (or each epoch's end), a
 * final evaluation on the test split, then weights_out. Deterministic given config and seed. */
#include "train/trainer_impl.h"
#include "train/trainer_tasks.h"

#include <ddpc/alloc.h>
#include <ddpc/kernels.h>
#include <ddpc/rng.h>
#include <ddpc/timer.h>
#include <ddpc/weights.h>

#include <stdio.h>
#include <stdlib.h>

ddpc_status ddpc__trainer_train_step(ddpc_trainer *t, const ddpc_batch *const *batches,
                                     float *loss)
{
    ddpc_model *m = t->model;
    int64_t k_steps = t->set.accum_steps;
    double sum = 0;
    ddpc_model_zero_grad(m);
    for (int64_t k = 0; k < k_steps; k++) {
        ddpc_model_output out;
        /* Dropout stream: distinct for every micro-step of every rank. */
        uint64_t stream = ((uint64_t)t->step * (uint64_t)k_steps + (uint64_t)k) * (uint64_t)t->world +
                          (uint64_t)t->rank;
        if (t->reducer) /* communicate only on the last micro-step (no_sync before it) */
            ddpc_reducer_prepare(t->reducer, k == k_steps - 1);
        DDPC_TRY(ddpc__trainer_forward_batch(t, batches[k], true, stream, &out));
        DDPC_TRY(ddpc_model_backward(m, 1.0f / (float)k_steps));
        sum += out.loss;
    }
    if (t->reducer)
        DDPC_TRY(ddpc_reducer_finish(t->reducer));
    size_t np = ddpc_model_num_params(m);
    /* After the all-reduce the gradients are identical, so every rank computes the same norm. */
    if (t->set.grad_clip > 0.0f)
        ddpc_clip_grad_norm(ddpc_model_grads(m), np, t->set.grad_clip);
    float lr = ddpc_lr_at(&t->sched, t->step) * ddpc__trainer_lr_scale(t);
    ddpc_optim_step(t->opt, ddpc_model_params(m), ddpc_model_grads(m), ddpc_model_decay_mask(m), lr);
    t->step++;
    *loss = (float)(sum / (double)k_steps);
    return DDPC_OK;
}

/* Averages the losses of every rank since the last sync into the logging window. */
static ddpc_status sync_stats(ddpc_trainer *t)
{
    double v[2] = {t->unsynced_loss, (double)t->unsynced_steps};
    DDPC_TRY(ddpc__trainer_sum(t, v, 2));
    t->window_loss += v[0] / (double)t->world;
    t->window_steps += t->unsynced_steps;
    t->unsynced_loss = 0;
    t->unsynced_steps = 0;
    return DDPC_OK;
}

static void log_progress(ddpc_trainer *t, int64_t epoch, int64_t total, double elapsed)
{
    double window_s = t->window_time;
    int64_t per_sample = t->tokens_per_sample;
    int64_t global_batch = t->set.batch_size * t->set.accum_steps * t->world;
    double samples_per_s = (double)(t->window_steps * global_batch) / window_s;
    double loss = t->window_steps ? t->window_loss / (double)t->window_steps : 0.0;
    float lr = ddpc_lr_at(&t->sched, t->step - 1) * ddpc__trainer_lr_scale(t);
    char fields[512];
    snprintf(fields, sizeof fields,
             "\"step\": %lld, \"epoch\": %lld, \"loss\": %.6f, \"lr\": %.6g, \"samples_per_s\": %.1f, "
             "\"tokens_per_s\": %.1f, \"data_wait_s\": %.4f, \"time_s\": %.3f",
             (long long)t->step, (long long)epoch, loss, lr, samples_per_s,
             samples_per_s * (double)per_sample, t->window_wait, elapsed);
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
    t->window_wait = 0;
}

static void log_start(ddpc_trainer *t, int64_t total)
{
    const trainer_settings *s = &t->set;
    if (!t->log)
        return;
    fprintf(t->log, "training %s: %zu parameters, %lld samples, %lld steps, %d threads per rank\n",
            ddpc_model_config_of(t->model)->type, ddpc_model_num_params(t->model),
            (long long)ddpc_dataset_size(t->train), (long long)total, ddpc_kernels_threads());
    fprintf(t->log, "global batch %lld = %lld per rank x %d rank%s x %lld accumulation step%s "
            "(backend %s, lr x %.3g)\n",
            (long long)(s->batch_size * t->world * s->accum_steps), (long long)s->batch_size,
            t->world, t->world == 1 ? "" : "s", (long long)s->accum_steps,
            s->accum_steps == 1 ? "" : "s", ddpc_backend_name(ddpc_pg_backend(t->pg)),
            ddpc__trainer_lr_scale(t));
}

/* Takes accum_steps batches from the loader; false at the end of the epoch. */
static ddpc_status next_batches(ddpc_trainer *t, const ddpc_batch **batches, bool *ok)
{
    *ok = true;
    for (int64_t k = 0; k < t->set.accum_steps && *ok; k++) {
        DDPC_TRY(ddpc_loader_next(t->train_loader, &batches[k]));
        *ok = batches[k] != NULL;
        if (*ok)
            t->window_wait += batches[k]->wait_s;
    }
    return DDPC_OK;
}

/* Periodic work after a step: stats sync, progress line, validation. */
static ddpc_status after_step(ddpc_trainer *t, int64_t epoch, int64_t total, bool epoch_end,
                              double start)
{
    const trainer_settings *s = &t->set;
    bool log_now = t->step % s->log_every == 0 || t->step == total;
    if (t->step % s->stats_sync_every == 0 || log_now)
        DDPC_TRY(sync_stats(t));
    if (log_now)
        log_progress(t, epoch, total, ddpc_time_now() - start);
    /* The final test evaluation follows; a validation pass on the same split would repeat it. */
    bool repeat = t->step == total && t->val == t->test && s->eval_batches == 0;
    if (!repeat && ((s->eval_every > 0 && t->step % s->eval_every == 0) ||
                    (s->eval_every == 0 && epoch_end))) {
        ddpc_eval_result r;
        DDPC_TRY(ddpc__trainer_evaluate(t, t->val, "val", true, &r));
    }
    return DDPC_OK;
}

ddpc_status ddpc__trainer_fit(ddpc_trainer *t)
{
    const trainer_settings *s = &t->set;
    int64_t per_epoch = ddpc_loader_len(t->train_loader) / s->accum_steps;
    int64_t total = t->sched.total_steps;
    log_start(t, total);
    double start = ddpc_time_now();
    const ddpc_batch *batches[DDPC_TRAIN_MAX_ACCUM];
    for (int64_t epoch = 0; t->step < total; epoch++) {
        DDPC_TRY(ddpc_loader_start_epoch(t->train_loader, epoch));
        for (int64_t b = 0; b < per_epoch && t->step < total; b++) {
            bool ok;
            float loss;
            double t0 = ddpc_time_now();
            DDPC_TRY(next_batches(t, batches, &ok));
            if (!ok)
                return ddpc_errorf(DDPC_EINTERNAL, "the loader ended epoch %lld after %lld of %lld "
                                   "steps", (long long)epoch, (long long)b, (long long)per_epoch);
            DDPC_TRY(ddpc__trainer_train_step(t, batches, &loss));
            /* Throughput counts training steps only, not evaluation or logging. */
            t->window_time += ddpc_time_now() - t0;
            t->unsynced_loss += loss;
            t->unsynced_steps++;
            DDPC_TRY(after_step(t, epoch, total, b + 1 == per_epoch || t->step == total, start));
        }
    }
    ddpc_eval_result r;
    DDPC_TRY(ddpc__trainer_evaluate(t, t->test, "test", false, &r));
    if (t->log)
        fprintf(t->log, "done in %.1f s\n", ddpc_time_now() - start);
    if (s->weights_out && t->rank == 0) {
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
        return t->tasks ? ddpc__tasks_fit(t) : ddpc__trainer_fit(t);
    case STATE_VAL:
        return t->tasks ? ddpc__tasks_evaluate(t, "val", false)
                        : ddpc__trainer_evaluate(t, t->val, "val", false, &r);
    case STATE_TEST:
        return t->tasks ? ddpc__tasks_evaluate(t, "test", false)
                        : ddpc__trainer_evaluate(t, t->test, "test", false, &r);
    case STATE_PREDICT:
        return t->tasks ? ddpc__tasks_predict(t) : ddpc__trainer_predict(t);
    }
    return ddpc_errorf(DDPC_EINTERNAL, "unknown trainer state %d", (int)t->set.state);
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of v (n >= 1); sorts v. */
static double median_of(double *v, int64_t n)
{
    qsort(v, (size_t)n, sizeof *v, compare_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double mean_of(const double *v, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += v[i];
    return s / (double)n;
}

/* Runs warmup + steps training steps; for timed step i: wall time dt[i] and the reducer's exposed
 * and comm seconds (exposed[i], comm[i]; 0 on one rank). Every micro-step of a step reuses one
 * gathered batch, and gathering is not timed: the data path is not benchmarked. */
static ddpc_status bench_loop(ddpc_trainer *t, int64_t warmup, int64_t steps, double *dt,
                              double *exposed, double *comm)
{
    int64_t n = t->set.batch_size, size = ddpc_dataset_size(t->train);
    for (int64_t i = 0; i < size; i++)
        t->perm[i] = i;
    ddpc_rng order = ddpc_rng_make(t->set.seed, 1000);
    ddpc_rng_shuffle(&order, t->perm, size);
    ddpc_batch batch = {.n = n, .x = t->x, .tokens = t->tokens, .targets = t->targets};
    const ddpc_batch *batches[DDPC_TRAIN_MAX_ACCUM];
    for (int64_t k = 0; k < t->set.accum_steps; k++)
        batches[k] = &batch;
    for (int64_t i = 0; i < warmup + steps; i++) {
        /* Ranks take different samples, as they do in training. */
        int64_t off = ((i * t->world + t->rank) * n) % (size - n + 1);
        float loss;
        DDPC_TRY(ddpc_dataset_get_batch(t->train, t->perm + off, n, t->x, t->tokens, t->targets));
        ddpc_reducer_stats s0 = {0}, s1 = {0};
        if (t->reducer)
            s0 = ddpc_reducer_stats_of(t->reducer);
        double t0 = ddpc_time_now();
        DDPC_TRY(ddpc__trainer_train_step(t, batches, &loss));
        double t1 = ddpc_time_now();
        if (t->reducer)
            s1 = ddpc_reducer_stats_of(t->reducer);
        if (i >= warmup) {
            dt[i - warmup] = t1 - t0;
            exposed[i - warmup] = s1.exposed_s - s0.exposed_s;
            comm[i - warmup] = s1.comm_s - s0.comm_s;
        }
    }
    return DDPC_OK;
}

ddpc_status ddpc_trainer_bench(ddpc_trainer *t, int64_t warmup, int64_t steps, ddpc_bench_result *r)
{
    if (steps < 1 || steps > 100000)
        return ddpc_errorf(DDPC_EINVAL, "bench steps must be in [1, 100000], got %lld",
                           (long long)steps);
    /* dt (steps), then exposed and comm (steps each), adjacent so one all-reduce averages both. */
    double *buf = ddpc_malloc(3 * (size_t)steps * sizeof(double));
    if (!buf)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for %lld bench timings", (long long)steps);
    double *dt = buf, *exposed = buf + steps, *comm = buf + 2 * steps;
    ddpc_status st = bench_loop(t, warmup, steps, dt, exposed, comm);
    /* A synchronised step lasts as long as its slowest rank; communication is averaged. */
    if (st == DDPC_OK && t->world > 1)
        st = ddpc_pg_all_reduce(t->pg, dt, dt, (size_t)steps, DDPC_DTYPE_F64, DDPC_REDUCE_MAX);
    if (st == DDPC_OK && t->world > 1)
        st = ddpc_pg_all_reduce(t->pg, exposed, exposed, 2 * (size_t)steps, DDPC_DTYPE_F64,
                                DDPC_REDUCE_AVG);
    if (st == DDPC_OK) {
        int64_t n = t->set.batch_size * t->set.accum_steps, tok = t->tokens_per_sample;
        double med = median_of(dt, steps), w = (double)t->world;
        /* Means before medians: median_of sorts in place. */
        double exposed_mean = mean_of(exposed, steps), comm_mean = mean_of(comm, steps);
        *r = (ddpc_bench_result){
            .threads = ddpc_kernels_threads(),
            .rank = t->rank,
            .world = t->world,
            .batch = n,
            .steps = steps,
            .median_step_s = med,
            .samples_per_s = (double)n / med,
            .tokens_per_s = tok > 1 ? (double)(n * tok) / med : 0,
            .global_samples_per_s = w * (double)n / med,
            .global_tokens_per_s = tok > 1 ? w * (double)(n * tok) / med : 0,
            .gflops = ddpc_model_train_flops_per_sample(t->model) * (double)n / med * 1e-9,
            .num_buckets = t->reducer ? ddpc_reducer_stats_of(t->reducer).num_buckets : 0,
            .exposed_mean_s = exposed_mean,
            .comm_mean_s = comm_mean,
            .exposed_median_s = median_of(exposed, steps),
            .comm_median_s = median_of(comm, steps),
        };
    }
    ddpc_free(buf);
    return st;
}
