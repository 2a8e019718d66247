/* The multi-task fit loop. One optimizer step takes grad_accum_steps steps of the combined loader;
 * in each, every task with a batch runs forward and back-propagates loss x loss_weight (divided by
 * the accumulation steps) into the shared gradient buffer with the reducer in no_sync mode; after
 * the last pass every tensor is marked ready and the gradients are averaged over ranks once.
 * Heads a step did not run hold zero gradient, so no find_unused_parameters is needed. */
#include "train/trainer_tasks.h"

#include <ddpc/kernels.h>
#include <ddpc/timer.h>
#include <ddpc/weights.h>

#include <stdio.h>
#include <string.h>

/* Task i's forward and backward on batch b (micro-step k); adds its weighted loss to *sum. */
static ddpc_status task_pass(ddpc_trainer *t, int i, const ddpc_batch *b, int64_t k, double *sum)
{
    struct ddpc__trainer_tasks *mt = t->tasks;
    ddpc__task *task = &mt->task[i];
    int64_t accum = t->set.accum_steps;
    /* Dropout stream: distinct for every pass of every micro-step of every rank. */
    uint64_t stream =
        ((((uint64_t)t->step * (uint64_t)accum + (uint64_t)k) * (uint64_t)mt->n + (uint64_t)i) *
         (uint64_t)t->world) +
        (uint64_t)t->rank;
    if (t->reducer)
        ddpc_reducer_prepare(t->reducer, false); /* no_sync: communicate after the last task */
    ddpc_model_input in = {.n = b->n,
                           .x = b->x,
                           .tokens = b->tokens,
                           .targets = b->targets,
                           .rng_stream = stream,
                           .task = i};
    ddpc_model_output out;
    DDPC_TRY(ddpc_model_forward(t->model, &in, true, &out));
    DDPC_TRY(ddpc_model_backward(t->model, task->loss_weight / (float)accum));
    *sum += (double)task->loss_weight * out.loss;
    task->unsynced_loss += out.loss;
    task->unsynced_passes += 1;
    mt->window_samples += b->n;
    return DDPC_OK;
}

/* One optimizer step; *loss = this rank's weighted task-loss sum, averaged over micro-steps. */
static ddpc_status train_step(ddpc_trainer *t, double *loss)
{
    struct ddpc__trainer_tasks *mt = t->tasks;
    ddpc_model *m = t->model;
    int64_t accum = t->set.accum_steps;
    double sum = 0;
    ddpc_model_zero_grad(m);
    for (int64_t k = 0; k < accum; k++) {
        const ddpc_combined_step *st;
        DDPC_TRY(ddpc_combined_next(mt->combined, &st));
        if (!st)
            return ddpc_errorf(DDPC_EINTERNAL,
                               "the combined loader ended its epoch early, at "
                               "step %lld",
                               (long long)t->step);
        t->window_wait += st->wait_s;
        for (int i = 0; i < mt->n; i++)
            if (st->batches[i])
                DDPC_TRY(task_pass(t, i, st->batches[i], k, &sum));
    }
    if (t->reducer) {
        ddpc_reducer_mark_all_ready(t->reducer);
        DDPC_TRY(ddpc_reducer_finish(t->reducer));
    }
    size_t np = ddpc_model_num_params(m);
    if (t->set.grad_clip > 0.0f) /* the gradients are identical on every rank: so is the norm */
        ddpc_clip_grad_norm(ddpc_model_grads(m), np, t->set.grad_clip);
    float lr = ddpc_lr_at(&t->sched, t->step) * ddpc__trainer_lr_scale(t);
    ddpc_optim_step(t->opt, ddpc_model_params(m), ddpc_model_grads(m), ddpc_model_decay_mask(m),
                    lr);
    t->step++;
    *loss = sum / (double)accum;
    return DDPC_OK;
}

/* Averages the losses of every rank since the last sync into the logging window. */
static ddpc_status sync_stats(ddpc_trainer *t)
{
    struct ddpc__trainer_tasks *mt = t->tasks;
    double v[2 + 2 * DDPC_MODEL_MAX_HEADS];
    size_t n = 2 + 2 * (size_t)mt->n;
    v[0] = t->unsynced_loss;
    v[1] = (double)t->unsynced_steps;
    for (int i = 0; i < mt->n; i++) {
        v[2 + 2 * i] = mt->task[i].unsynced_loss;
        v[3 + 2 * i] = mt->task[i].unsynced_passes;
        mt->task[i].unsynced_loss = mt->task[i].unsynced_passes = 0;
    }
    DDPC_TRY(ddpc__trainer_sum(t, v, n));
    t->window_loss += v[0] / (double)t->world;
    t->window_steps += t->unsynced_steps;
    for (int i = 0; i < mt->n; i++) {
        mt->task[i].window_loss += v[2 + 2 * i];
        mt->task[i].window_passes += v[3 + 2 * i];
    }
    t->unsynced_loss = 0;
    t->unsynced_steps = 0;
    return DDPC_OK;
}

static void log_progress(ddpc_trainer *t, int64_t epoch, int64_t total, double elapsed)
{
    struct ddpc__trainer_tasks *mt = t->tasks;
    double samples_per_s = (double)(mt->window_samples * t->world) / t->window_time;
    double loss = t->window_steps ? t->window_loss / (double)t->window_steps : 0.0;
    float lr = ddpc_lr_at(&t->sched, t->step - 1) * ddpc__trainer_lr_scale(t);
    char json[96 * DDPC_MODEL_MAX_HEADS] = "", text[96 * DDPC_MODEL_MAX_HEADS] = "";
    size_t jl = 0, tl = 0;
    for (int i = 0; i < mt->n; i++) {
        ddpc__task *k = &mt->task[i];
        double l = k->window_passes > 0 ? k->window_loss / k->window_passes : 0.0;
        jl += (size_t)snprintf(json + jl, sizeof json - jl, "%s\"%s\": %.6f", i ? ", " : "",
                               k->name, l);
        tl += (size_t)snprintf(text + tl, sizeof text - tl, "%s%s %.4f", i ? ", " : "", k->name, l);
        k->window_loss = k->window_passes = 0;
    }
    char fields[256 + sizeof json];
    snprintf(fields, sizeof fields,
             "\"step\": %lld, \"epoch\": %lld, \"loss\": %.6f, \"task_loss\": {%s}, \"lr\": %.6g, "
             "\"samples_per_s\": %.1f, \"data_wait_s\": %.4f, \"time_s\": %.3f",
             (long long)t->step, (long long)epoch, loss, json, lr, samples_per_s, t->window_wait,
             elapsed);
    ddpc__metrics_write(t, fields);
    if (t->log)
        fprintf(t->log,
                "step %6lld/%lld | epoch %lld | loss %.4f (%s) | lr %.3e | %.0f samples/s "
                "| %.1f s\n",
                (long long)t->step, (long long)total, (long long)epoch, loss, text, lr,
                samples_per_s, elapsed);
    t->last_train_loss = loss;
    t->window_loss = 0;
    t->window_steps = 0;
    t->window_time = 0;
    t->window_wait = 0;
    mt->window_samples = 0;
}

static void log_start(ddpc_trainer *t, int64_t total)
{
    const struct ddpc__trainer_tasks *mt = t->tasks;
    if (!t->log)
        return;
    fprintf(t->log,
            "training %s with %d task heads: %zu parameters, %lld steps, %d threads per "
            "rank\n",
            ddpc_model_config_of(t->model)->type, mt->n, ddpc_model_num_params(t->model),
            (long long)total, ddpc_kernels_threads());
    int64_t per_rank = 0;
    char parts[64 * DDPC_MODEL_MAX_HEADS] = "";
    size_t len = 0;
    for (int i = 0; i < mt->n; i++) {
        const ddpc__task *k = &mt->task[i];
        fprintf(t->log,
                "task %s: %s, %lld classes, %lld samples, batch %lld per rank, loss "
                "weight %g\n",
                k->name, k->data_type, (long long)k->num_classes,
                (long long)ddpc_dataset_size(k->train), (long long)k->batch_size,
                (double)k->loss_weight);
        per_rank += k->batch_size;
        len += (size_t)snprintf(parts + len, sizeof parts - len, "%s%s %lld", i ? " + " : "",
                                k->name, (long long)k->batch_size);
    }
    const trainer_settings *s = &t->set;
    fprintf(t->log,
            "global batch %lld = %lld per rank (%s) x %d rank%s x %lld accumulation "
            "step%s (combined %s, backend %s, lr x %.3g)\n",
            (long long)(per_rank * t->world * s->accum_steps), (long long)per_rank, parts, t->world,
            t->world == 1 ? "" : "s", (long long)s->accum_steps, s->accum_steps == 1 ? "" : "s",
            ddpc_combined_mode_name(mt->mode), ddpc_backend_name(ddpc_pg_backend(t->pg)),
            ddpc__trainer_lr_scale(t));
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
    /* Validation uses the test splits, which the final evaluation covers. */
    bool repeat = t->step == total && s->eval_batches == 0;
    if (!repeat &&
        ((s->eval_every > 0 && t->step % s->eval_every == 0) || (s->eval_every == 0 && epoch_end)))
        DDPC_TRY(ddpc__tasks_evaluate(t, "val", true));
    return DDPC_OK;
}

ddpc_status ddpc__tasks_fit(ddpc_trainer *t)
{
    const trainer_settings *s = &t->set;
    struct ddpc__trainer_tasks *mt = t->tasks;
    int64_t per_epoch = ddpc_combined_len(mt->combined) / s->accum_steps;
    int64_t total = t->sched.total_steps;
    log_start(t, total);
    double start = ddpc_time_now();
    for (int64_t epoch = 0; t->step < total; epoch++) {
        DDPC_TRY(ddpc_combined_start_epoch(mt->combined, epoch));
        for (int64_t b = 0; b < per_epoch && t->step < total; b++) {
            double loss = 0, t0 = ddpc_time_now();
            DDPC_TRY(train_step(t, &loss));
            t->window_time += ddpc_time_now() - t0;
            t->unsynced_loss += loss;
            t->unsynced_steps++;
            DDPC_TRY(after_step(t, epoch, total, b + 1 == per_epoch || t->step == total, start));
        }
    }
    DDPC_TRY(ddpc__tasks_evaluate(t, "test", false));
    if (t->log)
        fprintf(t->log, "done in %.1f s\n", ddpc_time_now() - start);
    if (s->weights_out && t->rank == 0) {
        DDPC_TRY(ddpc_weights_save(t->model, ddpc_model_params(t->model), s->weights_out));
        if (t->log)
            fprintf(t->log, "saved weights to %s\n", s->weights_out);
    }
    return DDPC_OK;
}
