// SPDX-License-Identifier: MIT
/* The logging window: the losses of each step and task are summed locally, averaged over ranks
 * every stats_sync_every steps (a collective, so every rank syncs at the same steps), and written
 * as one progress line and metrics record every log_every steps, after which the window starts
 * again. */
#include "train/trainer_impl.h"

#include <stdio.h>

/* Averages the losses of every rank since the last sync into the logging window. */
ddpc_status ddpc__trainer_sync_stats(ddpc_trainer *t)
{
    DDPC_TRY(ddpc__trainer_read_pending(t)); /* a GPU run's losses since the last sync */
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

ddpc_status ddpc__trainer_log_progress(ddpc_trainer *t, int64_t epoch, double elapsed)
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
