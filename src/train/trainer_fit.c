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

/* One optimizer step; its weighted task-loss sum, averaged over micro-steps, goes to the logging
 * window now, or, on a GPU, when it is read (trainer_pending.c). */
static ddpc_status train_step(ddpc_trainer *t)
{
    int64_t accum = t->set.accum_steps;
    DDPC_TRY(ddpc__trainer_make_room(t));
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
            DDPC_TRY(ddpc__trainer_note_pass(t, i, &out));
            t->win.samples += b->n;
        }
    }
    ddpc_engine_step_info info;
    DDPC_TRY(ddpc_engine_update(t->engine, &info));
    ddpc__trainer_note_step(t);
    const ddpc_kernel_table *k = ddpc_model_backend(t->model);
    if (k->kind != DDPC_DEVICE_CPU) { /* the counts at step 2 and at the latest step */
        t->gpu.allocs_last = k->alloc_count();
        if (++t->gpu.steps == 2)
            t->gpu.allocs_warm = t->gpu.allocs_last;
        t->gpu.used_last = k->memory_total() - k->memory_free();
        t->gpu.used_most = t->gpu.used_last > t->gpu.used_most ? t->gpu.used_last
                                                               : t->gpu.used_most;
    }
    if (!ddpc_engine_deferred(t->engine)) /* else read with the losses */
        t->win.last_grad_norm = info.grad_norm;
    t->win.last_comm_bytes = ddpc_pg_ring_bytes(t->dist.pg) - bytes0;
    return DDPC_OK;
}

/* Periodic work after a step: stats sync, progress line, validation. */
static ddpc_status after_step(ddpc_trainer *t, int64_t epoch, bool epoch_end, double start)
{
    const trainer_settings *s = &t->set;
    int64_t step = ddpc_engine_step(t->engine), total = t->total_steps;
    bool log_now = step % s->log_every == 0 || step == total;
    if (step % s->stats_sync_every == 0 || log_now) {
        /* On a GPU this read waits for the steps the host queued: their time is training time,
         * the window's (without it, tokens/s counted only the host's queuing: 30% high). */
        double s0 = ddpc_time_now();
        DDPC_TRY(ddpc__trainer_sync_stats(t));
        t->win.time += ddpc_time_now() - s0;
    }
    if (log_now)
        DDPC_TRY(ddpc__trainer_log_progress(t, epoch, ddpc_time_now() - start));
    ddpc__trainer_waits_end(t, log_now);
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
    ddpc__trainer_log_start(t);
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
            double t0 = ddpc_time_now();
            ddpc__trainer_waits_begin(t);
            DDPC_TRY(train_step(t));
            /* Throughput counts training steps and the reads of their results (after_step), not
             * evaluation, checkpoints or logging. */
            double t1 = ddpc_time_now();
            t->win.time += t1 - t0;
            ddpc__trainer_phases_step(t, t1);
            DDPC_TRY(ddpc__trainer_trace_after(t, t0, t1));
            /* After the first step everything a step needs is allocated: the measured peak. */
            DDPC_TRY(ddpc__trainer_report_memory(t));
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
    ddpc__trainer_log_device_allocs(t);
    ddpc__trainer_log_host_waits(t);
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
