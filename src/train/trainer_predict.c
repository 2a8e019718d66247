// SPDX-License-Identifier: MIT
/* Prediction, on rank 0 only, through the task kind: class predictions per task (predictions.csv,
 * or predictions_<task>.csv with tasks), for a language model text sampled from a prompt, for a
 * translation model the translations of a file (trainer_translate_predict.c). */
#include "train/trainer_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/fs.h>
#include <ddpc/rng.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Gathers samples idx[0..n) of d into the batch buffers and runs head `task` in eval mode. */
static ddpc_status forward_samples(ddpc_trainer *t, const ddpc_dataset *d, const int64_t *idx,
                                   int64_t n, int task, ddpc_model_output *out)
{
    DDPC_TRY(ddpc_dataset_get_batch(d, idx, n, t->buf.x, t->buf.tokens, t->buf.targets));
    ddpc_model_input in = {
        .n = n, .x = t->buf.x, .tokens = t->buf.tokens, .targets = t->buf.targets, .task = task};
    return ddpc_model_forward(t->model, &in, false, out);
}

static ddpc_status predict_classes(ddpc_trainer *t, const ddpc_dataset *d, int task, FILE *f,
                                   const char *file)
{
    int64_t size = ddpc_dataset_size(d);
    int64_t k = ddpc_model_config_of(t->model)->n_heads
                    ? ddpc_model_config_of(t->model)->head_classes[task]
                    : ddpc_dataset_num_classes(d);
    if (t->set.predict_samples > 0 && t->set.predict_samples < size)
        size = t->set.predict_samples;
    fprintf(f, "index,label,predicted,confidence\n");
    int64_t correct = 0;
    for (int64_t i = 0; i < size; i++) {
        ddpc_model_output out;
        DDPC_TRY(forward_samples(t, d, &i, 1, task, &out));
        const float *p = ddpc_model_probs(t->model);
        int64_t best = 0;
        for (int64_t j = 1; j < k; j++)
            best = p[j] > p[best] ? j : best;
        correct += best == t->buf.targets[0];
        fprintf(f, "%lld,%d,%lld,%.4f\n", (long long)i, t->buf.targets[0], (long long)best,
                p[best]);
    }
    if (t->log)
        fprintf(t->log, "predicted %lld test samples (%.2f%% correct) into %s/%s\n",
                (long long)size, 100.0 * (double)correct / (double)size, t->set.run_dir, file);
    return DDPC_OK;
}

/* Float targets (regression, multi-label): each sample's targets and the model's outputs (the
 * predictions; bce_logits: the probabilities). */
static ddpc_status predict_values(ddpc_trainer *t, const ddpc_dataset *d, FILE *f,
                                  const char *file)
{
    int64_t size = ddpc_dataset_size(d), k = ddpc_dataset_target_width(d);
    float y[256];
    if (k > 256)
        return ddpc_errorf(DDPC_EINVAL, "predict: at most 256 target columns, got %lld",
                           (long long)k);
    if (t->set.predict_samples > 0 && t->set.predict_samples < size)
        size = t->set.predict_samples;
    fprintf(f, "index");
    for (int64_t j = 0; j < k; j++)
        fprintf(f, ",target_%lld", (long long)j);
    for (int64_t j = 0; j < k; j++)
        fprintf(f, ",predicted_%lld", (long long)j);
    fprintf(f, "\n");
    for (int64_t i = 0; i < size; i++) {
        ddpc_model_output out;
        DDPC_TRY(ddpc_dataset_get_batch(d, &i, 1, t->buf.x, NULL, NULL));
        DDPC_TRY(ddpc_dataset_get_float_targets(d, &i, 1, y));
        ddpc_model_input in = {.n = 1, .x = t->buf.x, .float_targets = y};
        DDPC_TRY(ddpc_model_forward(t->model, &in, false, &out));
        const float *p = ddpc_model_probs(t->model);
        fprintf(f, "%lld", (long long)i);
        for (int64_t j = 0; j < k; j++)
            fprintf(f, ",%.9g", y[j]);
        for (int64_t j = 0; j < k; j++)
            fprintf(f, ",%.9g", p[j]);
        fprintf(f, "\n");
    }
    if (t->log)
        fprintf(t->log, "predicted %lld test samples into %s/%s\n", (long long)size,
                t->set.run_dir, file);
    return DDPC_OK;
}

/* Samples one token from probabilities p (v) sharpened by temperature (0: argmax):
 * weight_j = (p_j / p_max)^(1/temperature), drawn by inverse CDF in two passes. */
static int32_t sample_token(const float *p, int64_t v, float temperature, ddpc_rng *r)
{
    int64_t best = 0;
    for (int64_t j = 1; j < v; j++)
        best = p[j] > p[best] ? j : best;
    if (temperature <= 0.0f)
        return (int32_t)best;
    double inv_t = 1.0 / (double)temperature, total = 0;
    for (int64_t j = 0; j < v; j++)
        total += pow((double)p[j] / (double)p[best], inv_t);
    double u = (double)ddpc_rng_uniform(r) * total;
    for (int64_t j = 0; j < v; j++)
        if ((u -= pow((double)p[j] / (double)p[best], inv_t)) <= 0)
            return (int32_t)j;
    return (int32_t)best;
}

/* Autoregressive generation: the context (at most block_size tokens) is left-aligned and the
 * rest padded; causal attention makes the padding invisible to the last real position. */
static ddpc_status generate_text(ddpc_trainer *t, FILE *f)
{
    int64_t T = t->buf.tokens_per_sample, v = ddpc_dataset_num_classes(t->data.task[0].train);
    int64_t len = (int64_t)strlen(t->set.prompt), total = len + t->set.predict_tokens;
    unsigned char *text = ddpc_malloc((size_t)total + 1);
    if (!text)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for %lld generated bytes", (long long)total);
    memcpy(text, t->set.prompt, (size_t)len);
    ddpc_rng r = ddpc_rng_make(t->set.seed, 7);
    ddpc_status s = DDPC_OK;
    for (int64_t pos = len; pos < total && s == DDPC_OK; pos++) {
        int64_t start = pos > T ? pos - T : 0, ctx = pos - start;
        for (int64_t i = 0; i < T; i++)
            t->buf.tokens[i] = i < ctx ? text[start + i] : 0;
        ddpc_model_input in = {.n = 1, .tokens = t->buf.tokens};
        s = ddpc_model_forward(t->model, &in, false, NULL);
        if (s == DDPC_OK)
            text[pos] = (unsigned char)sample_token(ddpc_model_probs(t->model) + (ctx - 1) * v, v,
                                                    t->set.temperature, &r);
    }
    if (s == DDPC_OK) {
        fwrite(text, 1, (size_t)total, f);
        if (t->log) {
            fwrite(text, 1, (size_t)total, t->log);
            fputc('\n', t->log);
        }
    }
    ddpc_free(text);
    return s;
}

static ddpc_status write_file(ddpc_trainer *t, const char *file, const ddpc_dataset *d, int task)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/%s", t->set.run_dir, file);
    ddpc_fs_out o;
    DDPC_TRY(ddpc_fs_out_open(&o, path, NULL));
    ddpc_status s = !d                                ? generate_text(t, o.f)
                    : ddpc_dataset_target_width(d) > 0 ? predict_values(t, d, o.f, file)
                                                       : predict_classes(t, d, task, o.f, file);
    ddpc_status c = ddpc_fs_out_commit(&o, s != DDPC_OK);
    return s != DDPC_OK ? s : c;
}

/* Classes or values per task: predictions.csv, or predictions_<task>.csv with tasks. */
static ddpc_status predict_tasks(ddpc_trainer *t)
{
    if (!t->data.multi)
        return write_file(t, "predictions.csv", t->data.task[0].test, 0);
    for (int i = 0; i < t->data.n_tasks; i++) {
        char file[64];
        snprintf(file, sizeof file, "predictions_%s.csv", t->data.task[i].name);
        DDPC_TRY(write_file(t, file, t->data.task[i].test, i));
    }
    return DDPC_OK;
}

static ddpc_status predict_text(ddpc_trainer *t)
{
    return write_file(t, "samples.txt", NULL, 0);
}

const ddpc__task_kind ddpc__kind_classify = {.name = "classification", .predict = predict_tasks};
const ddpc__task_kind ddpc__kind_language_model = {.name = "language model",
                                                   .predict = predict_text};

ddpc_status ddpc__trainer_predict(ddpc_trainer *t)
{
    /* ZeRO-3: rank 0 alone reads the parameters, so they are gathered first. */
    DDPC_TRY(ddpc_engine_gather_params(t->engine));
    ddpc_status st = t->dist.rank == 0 ? t->kind->predict(t) : DDPC_OK;
    ddpc_engine_release_params(t->engine);
    return st;
}
