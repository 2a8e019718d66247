// SPDX-License-Identifier: MIT
/* The fit loop, the one for every config: epochs of the combined loader over the tasks (one task
 * for a `data.*` config), grad_accum_steps combined steps per optimizer step, every task with a
 * batch runs one pass through the engine; progress every log_every steps, evaluation every
 * eval_every steps (or each epoch's end), a final evaluation on the test splits, then
 * weights_out. Deterministic given config, seed and world size. */
#include <ddpc/device.h>

#include "train/trainer_impl.h"

#include <ddpc/kernels.h>
#include <ddpc/timer.h>
#include <ddpc/weights.h>

#include <signal.h>
#include <stdio.h>

/* fault.kill_at_*: dies as a crashed worker would, in a run that started from scratch. */
static void maybe_kill(const ddpc_trainer *t, int64_t micro)
{
    const trainer_settings *s = &t->set;
    if (s->kill_at_step > 0 && ddpc_engine_step(t->engine) + 1 == s->kill_at_step &&
        micro == s->kill_at_micro && t->dist.rank == s->kill_rank && !t->resumed_from[0] &&
        t->pos.restart_count == 0)
        raise(SIGKILL);
}

/* The next combined step. When the ranks' epochs differ in length (task sharding), a rank whose
 * loaders ran out before the agreed epoch's end starts them over, in the same epoch, so the same
 * order again (max_size_cycle's rule, across ranks). */
static ddpc_status next_step(ddpc_trainer *t, const ddpc_combined_step **st)
{
    DDPC_TRY(ddpc_combined_next(t->data.combined, st));
    if (*st || !t->data.cycle)
        return DDPC_OK;
    DDPC_TRY(ddpc_combined_start_epoch(t->data.combined, t->pos.epoch));
    return ddpc_combined_next(t->data.combined, st);
}

/* One optimizer step; *loss = this rank's weighted task-loss sum, averaged over micro-steps. */
static ddpc_status train_step(ddpc_trainer *t, double *loss)
{
    int64_t accum = t->set.accum_steps;
    double sum = 0;
    uint64_t bytes0 = ddpc_pg_ring_bytes(t->dist.pg);
    ddpc_engine_zero_grad(t->engine);
    for (int64_t k = 0; k < accum; k++) {
        const ddpc_combined_step *st;
        maybe_kill(t, k);
        /* Each micro-batch is used before the next is asked for: the loader may reuse its
         * buffer as soon as next is called again. */
        ddpc_pg_set_phase(t->dist.pg, DDPC_PHASE_DATA);
        double d0 = ddpc__trainer_phase_now(t);
        DDPC_TRY(next_step(t, &st));
        double d1 = ddpc__trainer_phase_now(t);
        t->ph.data += d1 - d0;
        ddpc_trace_add(DDPC_TRACE_COMPUTE, "data", d0, d1, -1, NULL, 0);
        if (!st)
            return ddpc_errorf(DDPC_EINTERNAL, "the loader ended its epoch early, at step %lld",
                               (long long)ddpc_engine_step(t->engine));
        t->win.wait += st->wait_s;
        for (int j = 0; j < t->data.n_local; j++) {
            const ddpc_batch *b = st->batches[j];
            if (!b)
                continue;
            int i = t->data.local_task[j]; /* the task, and the head it runs */
            ddpc__task *task = &t->data.task[i];
            ddpc__trainer_log_indices(t, ddpc_engine_step(t->engine) + 1, k, i, b);
            ddpc_model_input in = ddpc__trainer_input_of(b, i);
            ddpc_model_output out;
            /* One task: its last backward communicates while it runs. */
            bool sync = !t->data.multi && k == accum - 1;
            DDPC_TRY(ddpc_engine_pass(t->engine, &in, k, task->loss_weight, sync, &out));
            sum += (double)task->loss_weight * out.loss;
            task->unsynced_loss += out.loss;
            task->unsynced_passes += 1;
            t->win.samples += b->n;
        }
    }
    ddpc_engine_step_info info;
    DDPC_TRY(ddpc_engine_update(t->engine, &info));
    const ddpc_kernel_table *k = ddpc_model_backend(t->model);
    if (k->kind != DDPC_DEVICE_CPU) { /* the counts at step 2 and at the latest step */
        t->gpu.allocs_last = k->alloc_count();
        if (++t->gpu.steps == 2)
            t->gpu.allocs_warm = t->gpu.allocs_last;
    }
    t->win.last_grad_norm = info.grad_norm;
    t->win.last_comm_bytes = ddpc_pg_ring_bytes(t->dist.pg) - bytes0;
    *loss = sum / (double)accum;
    return DDPC_OK;
}

/* Averages the losses of every rank since the last sync into the logging window. */
static ddpc_status sync_stats(ddpc_trainer *t)
{
    double v[2 + 2 * DDPC_MODEL_MAX_HEADS];
    size_t n = 2 + 2 * (size_t)t->data.n_tasks;
    v[0] = t->win.unsynced_loss;
    v[1] = (double)t->win.unsynced_steps;
    for (int i = 0; i < t->data.n_tasks; i++) {
        v[2 + 2 * i] = t->data.task[i].unsynced_loss;
        v[3 + 2 * i] = t->data.task[i].unsynced_passes;
        t->data.task[i].unsynced_loss = t->data.task[i].unsynced_passes = 0;
    }
    DDPC_TRY(ddpc__trainer_sum(t, v, n));
    t->win.loss += v[0] / (double)t->dist.world;
    t->win.steps += t->win.unsynced_steps;
    for (int i = 0; i < t->data.n_tasks; i++) {
        t->data.task[i].window_loss += v[2 + 2 * i];
        t->data.task[i].window_passes += v[3 + 2 * i];
    }
    t->win.unsynced_loss = 0;
    t->win.unsynced_steps = 0;
    return DDPC_OK;
}

/* The per-task losses of the window into the record and as text; resets them. A task that ran no
 * batch in the window (data.combined_mode sequential or max_size) has no loss: no key in the
 * record, "-" in the text. */
static void task_losses(ddpc_trainer *t, char *text, size_t text_cap)
{
    size_t tl = 0;
    text[0] = '\0';
    for (int i = 0; i < t->data.n_tasks; i++) {
        ddpc__task *k = &t->data.task[i];
        const char *sep = i ? ", " : "";
        if (k->window_passes > 0) {
            double l = k->window_loss / k->window_passes;
            char key[DDPC__TASK_NAME_MAX + 16];
            snprintf(key, sizeof key, "task_loss/%s", k->name);
            if (t->data.multi)
                ddpc_metrics_f64(t->metrics, key, l, 6);
            tl += (size_t)snprintf(text + tl, text_cap - tl, "%s%s %.4f", sep, k->name, l);
        } else {
            tl += (size_t)snprintf(text + tl, text_cap - tl, "%s%s -", sep, k->name);
        }
        k->window_loss = k->window_passes = 0;
    }
}

static ddpc_status log_progress(ddpc_trainer *t, int64_t epoch, double elapsed)
{
    int64_t step = ddpc_engine_step(t->engine), per_sample = t->buf.tokens_per_sample;
    /* Only token streams (gpt) have a fixed count per sample; images have none and sentence
     * pairs vary, so for them tokens_per_s would only repeat samples_per_s. */
    bool tokens = ddpc_dataset_kind_of(t->data.task[0].train) == DDPC_DATASET_TOKENS;
    double samples_per_s = (double)(t->win.samples * t->dist.world) / t->win.time;
    double loss = t->win.steps ? t->win.loss / (double)t->win.steps : 0.0;
    float lr = ddpc_engine_lr(t->engine, step - 1);
    char text[96 * DDPC_MODEL_MAX_HEADS];
    ddpc_metrics *m = t->metrics;
    ddpc_metrics_begin(m, step);
    ddpc_metrics_i64(m, "epoch", epoch);
    ddpc_metrics_f64(m, "loss", loss, 6);
    task_losses(t, text, sizeof text);
    ddpc_metrics_f64(m, "lr", lr, -1);
    ddpc_metrics_f64(m, "samples_per_s", samples_per_s, 1);
    if (tokens)
        ddpc_metrics_f64(m, "tokens_per_s", samples_per_s * (double)per_sample, 1);
    ddpc_metrics_f64(m, "data_wait_s", t->win.wait, 4);
    ddpc_metrics_f64(m, "time_s", elapsed, 3);
    ddpc__trainer_phases_fields(t); /* timings together, before the deterministic fields */
    ddpc_metrics_f64(m, "grad_norm", t->win.last_grad_norm, -1);
    if (t->dist.world > 1) /* ring bytes this rank's last step communicated */
        ddpc_metrics_i64(m, "comm_bytes", (int64_t)t->win.last_comm_bytes);
    ddpc_metrics_i64(m, "skipped_steps", ddpc_engine_skipped(t->engine));
    if (ddpc_engine_config_of(t->engine)->loss_scaling)
        ddpc_metrics_f64(m, "loss_scale", ddpc_engine_loss_scale(t->engine).scale,
                         DDPC_METRICS_EXACT);
    ddpc_status st = ddpc_metrics_end(m);
    if (st == DDPC_OK)
        st = ddpc__trainer_phases_ranks(t, step);
    if (ddpc__progress_on(t)) /* a terminal: the bar, in place of the line */
        ddpc__progress_update(t, epoch, loss, samples_per_s * (double)per_sample, tokens);
    else if (t->log && t->data.multi)
        fprintf(t->log,
                "step %6lld/%lld | epoch %lld | loss %.4f (%s) | lr %.3e | %.0f samples/s | %.1f "
                "s\n",
                (long long)step, (long long)t->total_steps, (long long)epoch, loss, text, lr,
                samples_per_s, elapsed);
    else if (t->log)
        fprintf(t->log, "step %6lld/%lld | epoch %lld | loss %.4f | lr %.3e | %.0f %s/s | %.1f s\n",
                (long long)step, (long long)t->total_steps, (long long)epoch, loss, lr,
                samples_per_s * (double)per_sample, tokens ? "tok" : "samples", elapsed);
    t->win.last_train_loss = loss;
    t->win.loss = 0;
    t->win.steps = 0;
    t->win.time = 0;
    t->win.wait = 0;
    t->win.samples = 0;
    return st;
}

/* The activation arena at the largest training batch, both ways, so the cost of memory is known
 * when choosing model.activation_checkpointing. */
/* ZeRO: what rank 0 holds, so a user sees the sharding took effect. */
static void log_zero(ddpc_trainer *t)
{
    int stage = ddpc_engine_config_of(t->engine)->zero_stage;
    if (stage == 0 || t->dist.world == 1)
        return;
    const ddpc_range *r;
    size_t n, owned = 0;
    ddpc_engine_shard(t->engine, &r, &n);
    for (size_t i = 0; i < n; i++)
        owned += r[i].len;
    const char *what = stage == 1   ? "optimizer state"
                       : stage == 2 ? "optimizer state and gradients"
                                    : "optimizer state, gradients and parameters";
    fprintf(t->log,
            "zero stage %d: rank 0 holds the %s of %zu of %zu parameters (1/%d of each of "
            "%zu buckets)\n",
            stage, what, owned, ddpc_model_num_params(t->model), t->dist.world, n);
}

static void log_activations(ddpc_trainer *t)
{
    int64_t batch = 1;
    for (int i = 0; i < t->data.n_tasks; i++)
        batch = t->data.task[i].batch_size > batch ? t->data.task[i].batch_size : batch;
    const double mib = 1.0 / (1024.0 * 1024.0);
    double on = (double)ddpc_model_activation_bytes(t->model, batch, true) * mib;
    double off = (double)ddpc_model_activation_bytes(t->model, batch, false) * mib;
    const ddpc_model_config *mc = ddpc_model_config_of(t->model);
    fprintf(t->log, "activations: %.1f MiB per %s at batch %lld ",
            mc->activation_checkpointing ? on : off, t->dist.dp_replicas ? "replica" : "rank",
            (long long)batch);
    if (mc->activation_checkpointing)
        fprintf(t->log, "(checkpointing on; %.1f MiB without)\n", off);
    else if (on < off)
        fprintf(t->log, "(checkpointing off; %.1f MiB with)\n", on);
    else
        fprintf(t->log, "(no checkpointing for %s)\n", mc->type);
}

static void log_start(ddpc_trainer *t)
{
    const trainer_settings *s = &t->set;
    if (!t->log)
        return;
    int64_t per_rank = 0;
    char parts[64 * DDPC_MODEL_MAX_HEADS] = "";
    size_t len = 0;
    const char *device = ddpc__device_describe(ddpc_model_config_of(t->model)->backend);
    if (t->data.multi)
        fprintf(t->log,
                "training %s with %d task heads: %zu parameters, %lld steps, %d threads "
                "per rank, on %s\n",
                ddpc_model_config_of(t->model)->type, t->data.n_tasks,
                ddpc_model_num_params(t->model), (long long)t->total_steps, ddpc_kernels_threads(),
                device);
    else
        fprintf(t->log,
                "training %s: %zu parameters, %lld samples, %lld steps, %d threads per "
                "rank, on %s\n",
                ddpc_model_config_of(t->model)->type, ddpc_model_num_params(t->model),
                (long long)ddpc_dataset_size(t->data.task[0].train), (long long)t->total_steps,
                ddpc_kernels_threads(), device);
    int64_t per_epoch = t->steps_per_epoch;
    if (s->max_steps > s->epochs * per_epoch) /* said, never a silent change of length */
        fprintf(t->log,
                "max_steps %lld is more than epochs %lld x %lld steps: training runs %lld steps, "
                "%.2f epochs (max_steps decides the length when set)\n",
                (long long)s->max_steps, (long long)s->epochs, (long long)per_epoch,
                (long long)s->max_steps, (double)s->max_steps / (double)per_epoch);
    fputs(t->notes, t->log);
    if (t->kind->log_start)
        t->kind->log_start(t);
    for (int i = 0; i < t->data.n_tasks; i++) {
        const ddpc__task *k = &t->data.task[i];
        if (t->data.multi)
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
    if (t->data.sharding) {
        ddpc__trainer_log_task_sharding(t);
        int64_t global = 0;
        for (int r = 0; r < t->dist.world; r++)
            for (int i = 0; i < t->data.n_tasks; i++)
                if (t->data.holds[(size_t)r * (size_t)t->data.n_tasks + (size_t)i])
                    global += t->data.task[i].batch_size;
        fprintf(t->log, "global batch %lld = every rank's own tasks' batches x %lld accumulation "
                "step%s (", (long long)(global * s->accum_steps), (long long)s->accum_steps,
                s->accum_steps == 1 ? "" : "s");
    } else {
        int dp = t->dist.dp_replicas;
        fprintf(t->log, "global batch %lld = %lld per %s",
                (long long)(per_rank * ddpc__trainer_dp_degree(t) * s->accum_steps),
                (long long)per_rank, dp ? "replica" : "rank");
        if (t->data.multi)
            fprintf(t->log, " (%s)", parts);
        int per = ddpc_engine_replica_threads(t->engine);
        if (dp)
            fprintf(t->log, " x %d replica%s (parallel.mode dp: one process, %d kernel thread%s "
                    "each)", dp, dp == 1 ? "" : "s", per, per == 1 ? "" : "s");
        else
            fprintf(t->log, " x %d rank%s", t->dist.world, t->dist.world == 1 ? "" : "s");
        fprintf(t->log, " x %lld accumulation step%s (", (long long)s->accum_steps,
                s->accum_steps == 1 ? "" : "s");
    }
    if (t->data.multi)
        fprintf(t->log, "combined %s, ", ddpc_combined_mode_name(t->data.mode));
    fprintf(t->log, "backend %s, lr x %.3g)\n", ddpc_backend_name(ddpc_pg_backend(t->dist.pg)),
            ddpc__trainer_lr_scale(t));
    log_zero(t);
    /* Said once, so a CPU without bf16 products is never mistaken for a fast one. */
    bool gpu = ddpc_model_backend(t->model)->kind != DDPC_DEVICE_CPU;
    fprintf(t->log, "precision %s: matrix products in %s\n", ddpc_precision_name(s->precision),
            !gpu ? ddpc_kernels_matmul_info(s->precision, NULL)
            : s->precision == DDPC_PREC_FP32 ? "fp32 cuBLAS (TF32 off)"
                                              : "16-bit inputs on cuBLAS tensor cores, fp32 "
                                                "accumulation");
    log_activations(t);
    ddpc__trainer_log_memory_plan(t);
}

/* Periodic work after a step: stats sync, progress line, validation. */
/* A GPU run's promise that warm training steps allocate nothing on the device, as a line tests
 * read (evaluation at another batch size may grow the buffers once, after the last step). */
static void log_device_allocs(const ddpc_trainer *t)
{
    const ddpc_kernel_table *k = ddpc_model_backend(t->model);
    if (!t->log || k->kind == DDPC_DEVICE_CPU || t->gpu.steps <= 2)
        return;
    fprintf(t->log, "device allocations after step 2: %llu in %lld steps\n",
            (unsigned long long)(t->gpu.allocs_last - t->gpu.allocs_warm),
            (long long)t->gpu.steps - 2);
}

static ddpc_status after_step(ddpc_trainer *t, int64_t epoch, bool epoch_end, double start)
{
    const trainer_settings *s = &t->set;
    int64_t step = ddpc_engine_step(t->engine), total = t->total_steps;
    bool log_now = step % s->log_every == 0 || step == total;
    if (step % s->stats_sync_every == 0 || log_now)
        DDPC_TRY(sync_stats(t));
    if (log_now)
        DDPC_TRY(log_progress(t, epoch, ddpc_time_now() - start));
    ddpc__progress_tick(t, epoch);
    /* Validation reads the test splits: at the last step, with the same limit, it would be the
     * final test evaluation twice. */
    bool repeat = step == total && s->eval_batches == s->test_batches;
    if (!repeat &&
        ((s->eval_every > 0 && step % s->eval_every == 0) || (s->eval_every == 0 && epoch_end)))
        DDPC_TRY(ddpc__trainer_evaluate(t, "val", s->eval_batches));
    return DDPC_OK;
}

/* Reads (without training on) the first `steps` combined steps of the epoch: where a resumed
 * run's position lies. */
static ddpc_status fast_forward(ddpc_trainer *t, int64_t steps)
{
    for (int64_t i = 0; i < steps; i++) {
        const ddpc_combined_step *st;
        double d0 = ddpc__trainer_phase_now(t);
        DDPC_TRY(next_step(t, &st));
        double d1 = ddpc__trainer_phase_now(t);
        t->ph.data += d1 - d0;
        ddpc_trace_add(DDPC_TRACE_COMPUTE, "data", d0, d1, -1, NULL, 0);
        if (!st)
            return ddpc_errorf(DDPC_EINTERNAL, "resume: epoch %lld has fewer than %lld steps",
                               (long long)t->pos.epoch, (long long)steps);
    }
    return DDPC_OK;
}

ddpc_status ddpc__trainer_fit(ddpc_trainer *t)
{
    const trainer_settings *s = &t->set;
    int64_t per_epoch = t->steps_per_epoch, total = t->total_steps;
    log_start(t);
    DDPC_TRY(ddpc__trainer_open_indices_log(t));
    double start = ddpc_time_now();
    DDPC_TRY(ddpc__trainer_phases_start(t, start));
    while (ddpc_engine_step(t->engine) < total) {
        int64_t epoch = t->pos.epoch;
        DDPC_TRY(ddpc_combined_start_epoch(t->data.combined, epoch));
        DDPC_TRY(fast_forward(t, t->pos.epoch_step * s->accum_steps));
        for (int64_t b = t->pos.epoch_step; b < per_epoch && ddpc_engine_step(t->engine) < total;
             b++) {
            DDPC_TRY(ddpc__trainer_trace_before(t, ddpc_engine_step(t->engine) + 1));
            double loss = 0, t0 = ddpc_time_now();
            DDPC_TRY(train_step(t, &loss));
            /* Throughput counts training steps only, not evaluation or logging. */
            double t1 = ddpc_time_now();
            t->win.time += t1 - t0;
            ddpc__trainer_phases_step(t, t1);
            DDPC_TRY(ddpc__trainer_trace_after(t, t0, t1));
            /* After the first step everything a step needs is allocated: the measured peak. */
            DDPC_TRY(ddpc__trainer_report_memory(t));
            t->win.unsynced_loss += loss;
            t->win.unsynced_steps++;
            bool epoch_end = b + 1 == per_epoch;
            t->pos.epoch = epoch_end ? epoch + 1 : epoch; /* the next step's position */
            t->pos.epoch_step = epoch_end ? 0 : b + 1;
            DDPC_TRY(
                after_step(t, epoch, epoch_end || ddpc_engine_step(t->engine) == total, start));
            double ck = t->pos.ckpt_seconds;
            DDPC_TRY(ddpc__trainer_after_step_save(t, epoch_end));
            t->ph.ckpt += t->pos.ckpt_seconds - ck;
        }
    }
    ddpc__progress_finish(t);
    DDPC_TRY(ddpc__trainer_final_save(t));
    DDPC_TRY(ddpc__trainer_evaluate(t, "test", s->test_batches));
    DDPC_TRY(ddpc__trainer_rank_memory(t, ddpc_engine_step(t->engine)));
    double elapsed = ddpc_time_now() - start;
    DDPC_TRY(ddpc__trainer_record_end(t, elapsed));
    if (t->log && t->pos.ckpt_seconds > 0)
        fprintf(t->log, "done in %.1f s (%.2f s, %.2f%%, saving checkpoints)\n", elapsed,
                t->pos.ckpt_seconds, 100.0 * t->pos.ckpt_seconds / elapsed);
    else if (t->log)
        fprintf(t->log, "done in %.1f s\n", elapsed);
    log_device_allocs(t);
    if (!s->weights_out)
        return DDPC_OK;
    DDPC_TRY(ddpc_engine_gather_params(t->engine)); /* ZeRO-3: rank 0 writes them all */
    ddpc_model_to_host(t->model); /* a GPU run's weights are on the device */
    ddpc_status st =
        t->dist.rank == 0 ? ddpc_weights_save_model(t->model, s->weights_out) : DDPC_OK;
    ddpc_engine_release_params(t->engine);
    if (st == DDPC_OK && t->dist.rank == 0 && t->log)
        fprintf(t->log, "saved weights to %s\n", s->weights_out);
    return st;
}

ddpc_status ddpc_trainer_run(ddpc_trainer *t)
{
    if (t->log && t->init_report[0])
        fprintf(t->log, "init_from %s (init_strict: false) left out %s\n", t->set.init_from,
                t->init_report);
    DDPC_TRY(ddpc__trainer_lock_outputs(t)); /* before resume reads another job's state */
    ddpc__trainer_note_metrics(t);            /* before any rank writes them */
    if (t->set.state == STATE_TRAIN)
        DDPC_TRY(ddpc__trainer_resume(t));
    if (t->kind->check_resumed && t->resumed_from[0])
        DDPC_TRY(t->kind->check_resumed(t));
    DDPC_TRY(ddpc__trainer_open_outputs(t));
    switch (t->set.state) {
    case STATE_TRAIN: {
        ddpc_status st = ddpc__trainer_fit(t);
        if (st != DDPC_OK && t->bar.drawn) /* the error goes on its own line */
            ddpc__progress_finish(t);
        return st;
    }
    case STATE_VAL:
        return ddpc__trainer_evaluate(t, "val", t->set.eval_batches);
    case STATE_TEST:
        return ddpc__trainer_evaluate(t, "test", t->set.test_batches);
    case STATE_PREDICT:
        return ddpc__trainer_predict(t);
    }
    return ddpc_errorf(DDPC_EINTERNAL, "unknown trainer state %d", (int)t->set.state);
}
