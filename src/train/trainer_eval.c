/* Evaluation and prediction. Evaluation splits a split into contiguous per-rank shares (no
 * padding), walks each in batches of eval_batch_size with a final partial batch and sums over
 * ranks, so every sample counts exactly once; the loss is the mean over all valid targets
 * (samples, or tokens for text). Prediction runs on rank 0 only. */
#include "train/trainer_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/rng.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Runs this rank's share of d (the `case` sampler: contiguous, unpadded) and adds its sums to
 * sums[4] = {loss x targets, targets, correct, samples}. */
static ddpc_status evaluate_share(ddpc_trainer *t, const ddpc_dataset *d, bool limit, double *sums)
{
    ddpc_sampler_config sc = ddpc_sampler_config_default();
    sc.kind = DDPC_SAMPLER_CASE;
    sc.rank = t->rank;
    sc.world = t->world;
    sc.size = ddpc_dataset_size(d);
    ddpc_sampler *smp = NULL;
    DDPC_TRY(ddpc_sampler_create(&sc, &smp));
    const int64_t *idx = ddpc_sampler_indices(smp);
    int64_t len = ddpc_sampler_len(smp), bs = t->set.eval_batch_size;
    int64_t batches = (len + bs - 1) / bs;
    if (limit && t->set.eval_batches > 0 && t->set.eval_batches < batches)
        batches = t->set.eval_batches; /* per rank */
    ddpc_status st = DDPC_OK;
    for (int64_t b = 0; b < batches && st == DDPC_OK; b++) {
        int64_t n = b * bs + bs <= len ? bs : len - b * bs;
        ddpc_model_output out;
        st = ddpc__trainer_forward(t, d, idx + b * bs, n, 0, false, &out);
        if (st == DDPC_OK) {
            sums[0] += (double)out.loss * (double)out.n_valid;
            sums[1] += (double)out.n_valid;
            sums[2] += (double)out.n_correct;
            sums[3] += (double)n;
        }
    }
    ddpc_sampler_destroy(smp);
    return st;
}

ddpc_status ddpc__trainer_evaluate(ddpc_trainer *t, const ddpc_dataset *d, const char *split,
                                   bool limit, ddpc_eval_result *r)
{
    double sums[4] = {0, 0, 0, 0};
    DDPC_TRY(evaluate_share(t, d, limit, sums));
    /* Every sample was evaluated by exactly one rank: the totals are exact. */
    DDPC_TRY(ddpc__trainer_sum(t, sums, 4));
    double loss_sum = sums[0];
    int64_t valid = (int64_t)sums[1], correct = (int64_t)sums[2], samples = (int64_t)sums[3];
    r->loss = valid ? loss_sum / (double)valid : 0.0;
    r->accuracy = valid ? (double)correct / (double)valid : 0.0;
    r->samples = samples;
    t->last_eval = *r;
    char fields[256];
    snprintf(fields, sizeof fields,
             "\"step\": %lld, \"split\": \"%s\", \"eval_loss\": %.6f, \"eval_accuracy\": %.6f, "
             "\"eval_samples\": %lld",
             (long long)t->step, split, r->loss, r->accuracy, (long long)samples);
    ddpc__metrics_write(t, fields);
    if (t->log)
        fprintf(t->log, "eval %-4s step %6lld | loss %.4f | accuracy %.2f%% | %lld samples\n", split,
                (long long)t->step, r->loss, 100.0 * r->accuracy, (long long)samples);
    return DDPC_OK;
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
        DDPC_TRY(ddpc__trainer_forward(t, d, &i, 1, task, false, &out));
        const float *p = ddpc_model_probs(t->model);
        int64_t best = 0;
        for (int64_t j = 1; j < k; j++)
            best = p[j] > p[best] ? j : best;
        correct += best == t->targets[0];
        fprintf(f, "%lld,%d,%lld,%.4f\n", (long long)i, t->targets[0], (long long)best, p[best]);
    }
    if (t->log)
        fprintf(t->log, "predicted %lld test samples (%.2f%% correct) into %s/%s\n",
                (long long)size, 100.0 * (double)correct / (double)size, t->set.run_dir, file);
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
    int64_t T = t->tokens_per_sample, v = ddpc_dataset_num_classes(t->train);
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
            t->tokens[i] = i < ctx ? text[start + i] : 0;
        ddpc_model_input in = {.n = 1, .tokens = t->tokens};
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
    FILE *f = fopen(path, "w");
    if (!f)
        return ddpc_errorf(DDPC_EIO, "cannot write '%s': %s", path, strerror(errno));
    ddpc_status s = d ? predict_classes(t, d, task, f, file) : generate_text(t, f);
    if (fclose(f) != 0 && s == DDPC_OK)
        s = ddpc_errorf(DDPC_EIO, "cannot write '%s': %s", path, strerror(errno));
    return s;
}

ddpc_status ddpc__trainer_predict_classes(ddpc_trainer *t, const ddpc_dataset *d, int task,
                                          const char *file)
{
    return write_file(t, file, d, task);
}

ddpc_status ddpc__trainer_predict(ddpc_trainer *t)
{
    if (t->rank != 0)
        return DDPC_OK;
    bool images = ddpc_dataset_kind_of(t->train) == DDPC_DATASET_IMAGES;
    return write_file(t, images ? "predictions.csv" : "samples.txt", images ? t->test : NULL, 0);
}
