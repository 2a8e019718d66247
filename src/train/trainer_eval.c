// SPDX-License-Identifier: MIT
/* Evaluation. Each task's test split is split into contiguous per-rank shares (the `case`
 * sampler: no padding) and read through the combined loader in sequential mode — every task's
 * batches, one task after another, the last batch partial; the sums of every task are added over
 * ranks in one collective, so every sample counts exactly once. The loss is the mean over all
 * valid targets (samples, or tokens for text). The "val" split is a task's validation split when
 * it has one (translation), else its test split. A task kind may add its own sums (translation
 * decodes and scores: BLEU, exact match, the trivial baselines: trainer_translate_eval.c). */
#include "train/trainer_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define SUMS 6 /* per task; see evaluate_shares */

typedef struct {
    ddpc_sampler *sampler[DDPC_MODEL_MAX_HEADS];
    ddpc_loader *loader[DDPC_MODEL_MAX_HEADS];
    ddpc_combined *combined;
} eval_data;

static void eval_data_free(eval_data *e, int n)
{
    ddpc_combined_destroy(e->combined);
    for (int i = 0; i < n; i++) {
        ddpc_loader_destroy(e->loader[i]);
        ddpc_sampler_destroy(e->sampler[i]);
    }
}

/* The split a task evaluates on. */
static const ddpc_dataset *split_of(const ddpc__task *k, const char *split)
{
    return strcmp(split, "val") == 0 && k->valid ? k->valid : k->test;
}

static ddpc_status eval_data_build(ddpc_trainer *t, const char *split, eval_data *e)
{
    const char *names[DDPC_MODEL_MAX_HEADS];
    for (int i = 0; i < t->data.n_tasks; i++) {
        const ddpc__task *k = &t->data.task[i];
        ddpc_sampler_config sc = ddpc_sampler_config_default();
        sc.kind = DDPC_SAMPLER_CASE;
        sc.rank = t->dist.rank;
        sc.world = t->dist.world;
        sc.size = ddpc_dataset_size(split_of(k, split));
        DDPC_TRY(ddpc_sampler_create(&sc, &e->sampler[i]));
        ddpc_loader_config lc = ddpc_loader_config_default();
        lc.batch_size = k->eval_batch_size;
        lc.num_workers = t->set.num_workers;
        lc.prefetch_factor = t->set.prefetch_factor;
        const ddpc_dataset *ds[1] = {split_of(k, split)};
        DDPC_TRY(ddpc_loader_create(ds, 1, e->sampler[i], &lc, &e->loader[i]));
        names[i] = k->name;
    }
    return ddpc_combined_create(e->loader, names, t->data.n_tasks, DDPC_COMBINED_SEQUENTIAL,
                                &e->combined);
}

/* Runs this rank's shares (at most max_batches batches of each task, 0 = all); sums[SUMS * task +
 * {0..5}] += {loss x targets, targets, correct, rows, |error|, error^2}; the task kind's sums
 * follow at sums[SUMS * n_tasks]. */
static ddpc_status evaluate_shares(ddpc_trainer *t, const char *split, int64_t max_batches,
                                   double *sums)
{
    eval_data e = {0};
    ddpc_status st = eval_data_build(t, split, &e);
    if (st == DDPC_OK)
        st = ddpc_combined_start_epoch(e.combined, 0);
    while (st == DDPC_OK) {
        const ddpc_combined_step *step;
        st = ddpc_combined_next(e.combined, &step);
        if (st != DDPC_OK || !step)
            break;
        /* Batches past the limit are still read (sequential mode yields them), not run. */
        if (max_batches > 0 && step->index >= max_batches)
            continue;
        const ddpc_batch *b = step->batches[step->task];
        ddpc_model_input in = ddpc__trainer_input_of(b, step->task);
        ddpc_model_output out;
        st = ddpc_model_forward(t->model, &in, false, &out);
        if (st == DDPC_OK && t->kind->eval_batch)
            st = t->kind->eval_batch(t, split_of(&t->data.task[step->task], split), b,
                                     sums + SUMS * t->data.n_tasks);
        if (st != DDPC_OK)
            break;
        double *s = sums + SUMS * step->task;
        s[0] += (double)out.loss * (double)out.n_valid;
        s[1] += (double)out.n_valid;
        s[2] += (double)out.n_correct;
        s[3] += (double)b->n;
        s[4] += out.sum_abs_err;
        s[5] += out.sum_sq_err;
    }
    eval_data_free(&e, t->data.n_tasks);
    return st;
}

static ddpc_status log_result(ddpc_trainer *t, const char *split, int i, const ddpc_eval_result *r,
                              const double *kind_sums)
{
    char kind_text[160] = "";
    long long step = (long long)(t->engine ? ddpc_engine_step(t->engine) : 0);
    ddpc_metrics *m = t->metrics;
    ddpc_metrics_begin(m, step);
    ddpc_metrics_str(m, "split", split);
    if (t->data.multi)
        ddpc_metrics_str(m, "task", t->data.task[i].name);
    ddpc_metrics_f64(m, "eval_loss", r->loss, 6);
    bool regression = ddpc_loss_is_regression(ddpc_model_config_of(t->model)->loss);
    if (regression) {
        ddpc_metrics_f64(m, "eval_rmse", r->rmse, 6);
        ddpc_metrics_f64(m, "eval_mae", r->mae, 6);
    } else {
        ddpc_metrics_f64(m, "eval_accuracy", r->accuracy, 6);
    }
    ddpc_metrics_i64(m, "eval_samples", r->samples);
    if (t->kind->eval_record)
        t->kind->eval_record(t, kind_sums, (double)r->samples, kind_text, sizeof kind_text);
    ddpc__progress_clear(t); /* the line goes above the bar, which the next step redraws */
    if (t->log && t->data.multi)
        fprintf(t->log,
                "eval %-4s step %6lld | task %-12s | loss %.4f | accuracy %.2f%% | %lld samples\n",
                split, step, t->data.task[i].name, r->loss, 100.0 * r->accuracy,
                (long long)r->samples);
    else if (t->log && regression)
        fprintf(t->log, "eval %-4s step %6lld | loss %.6f | rmse %.6f | mae %.6f | %lld samples\n",
                split, step, r->loss, r->rmse, r->mae, (long long)r->samples);
    else if (t->log)
        fprintf(t->log, "eval %-4s step %6lld | loss %.4f | accuracy %.2f%%%s | %lld samples\n",
                split, step, r->loss, 100.0 * r->accuracy, kind_text, (long long)r->samples);
    return ddpc_metrics_end(m);
}

ddpc_status ddpc__trainer_evaluate(ddpc_trainer *t, const char *split, int64_t max_batches)
{
    ddpc_pg_set_phase(t->dist.pg, DDPC_PHASE_EVAL);
    double sums[SUMS * DDPC_MODEL_MAX_HEADS + DDPC__KIND_MAX_SUMS] = {0};
    size_t n_sums = SUMS * (size_t)t->data.n_tasks + t->kind->eval_sums;
    /* DDP's broadcast_buffers: every rank evaluates with rank 0's BatchNorm statistics. */
    DDPC_TRY(ddpc_engine_sync_buffers(t->engine));
    /* ZeRO-3: ranks run different numbers of batches here, so no gather may happen inside. */
    DDPC_TRY(ddpc_engine_gather_params(t->engine));
    ddpc_status st = evaluate_shares(t, split, max_batches, sums);
    ddpc_engine_release_params(t->engine);
    DDPC_TRY(st);
    DDPC_TRY(ddpc__trainer_sum(t, sums, n_sums));
    for (int i = 0; i < t->data.n_tasks; i++) {
        const double *s = sums + SUMS * i;
        int64_t valid = (int64_t)s[1], correct = (int64_t)s[2], samples = (int64_t)s[3];
        ddpc_eval_result r = {
            .loss = valid ? s[0] / (double)valid : 0.0,
            .accuracy = valid ? (double)correct / (double)valid : 0.0,
            .mae = valid ? s[4] / (double)valid : 0.0,
            .rmse = valid ? sqrt(s[5] / (double)valid) : 0.0,
            .samples = samples,
        };
        t->data.task[i].last_eval = r;
        if (i == 0)
            t->last_eval = r;
        DDPC_TRY(log_result(t, split, i, &r, sums + SUMS * t->data.n_tasks));
    }
    return DDPC_OK;
}
