// SPDX-License-Identifier: MIT
/* The ddpc half of the PyTorch parity test: builds a gpt or cnn at a precision, saves its initial
 * weights, deterministic batches, the output probabilities and gradients of step 1 and the losses
 * of STEPS AdamW steps under OUT_DIR; tests/parity/parity.py replays the same steps in PyTorch
 * (under autocast for bf16) and compares.
 * cnn_bn is the cnn with BatchNorm2d after each convolution; its run also saves the model after
 * the last step (final.safetensors: parameters and running statistics) and the probabilities of
 * an evaluation-mode forward of batch 0 then (probs_eval.safetensors).
 * usage: parity_run gpt|cnn|cnn_bn OUT_DIR [fp32|bf16|fp16 [STEPS]] */
#include <ddpc/alloc.h>
#include <ddpc/kernels.h>
#include <ddpc/models.h>
#include <ddpc/nn.h>
#include <ddpc/optim.h>
#include <ddpc/rng.h>
#include <ddpc/safetensors.h>
#include <ddpc/weights.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_STEPS 100

typedef struct {
    int64_t batch, in_floats, target_count; /* per batch */
    bool tokens;
    int64_t vocab;
} batch_shape;

static ddpc_status make_model(const char *type, ddpc_precision prec, ddpc_model **m, batch_shape *bs)
{
    ddpc_model_config c = ddpc_model_config_default();
    ddpc_gpt_config gpt = {.n_layer = 2, .n_head = 4, .n_embd = 64, .block_size = 32};
    ddpc_cnn_config cnn = ddpc_cnn_config_default(); /* channels [32, 64], kernel 3, hidden [128] */
    c.precision = prec;
    cnn.batchnorm = strcmp(type, "cnn_bn") == 0;
    snprintf(c.type, sizeof c.type, "%s", cnn.batchnorm ? "cnn" : type);
    c.seed = 7;
    if (strcmp(type, "gpt") == 0) {
        c.num_classes = 256, c.type_config = &gpt;
        *bs = (batch_shape){.batch = 4, .in_floats = 4 * 32, .target_count = 4 * 32, .tokens = true, .vocab = 256};
    } else {
        c.type_config = &cnn;
        *bs = (batch_shape){.batch = 8, .in_floats = 8 * 28 * 28, .target_count = 8, .vocab = 10};
    }
    return ddpc_model_create(m, &c);
}

/* Batch i: inputs as floats (token ids are exact in fp32) and targets. */
static void make_batch(const batch_shape *bs, int i, float *x, float *y)
{
    ddpc_rng r = ddpc_rng_make(11, (uint64_t)i);
    for (int64_t k = 0; k < bs->in_floats; k++)
        x[k] = bs->tokens ? (float)ddpc_rng_below(&r, (uint64_t)bs->vocab) : ddpc_rng_normal(&r);
    for (int64_t k = 0; k < bs->target_count; k++)
        y[k] = (float)ddpc_rng_below(&r, (uint64_t)bs->vocab);
}

static ddpc_status save_batches(const batch_shape *bs, int steps, const char *dir)
{
    float *buf = ddpc_malloc((size_t)(steps * (bs->in_floats + bs->target_count)) * sizeof(float));
    if (!buf)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for batches");
    ddpc_st_tensor ts[2 * MAX_STEPS];
    char names[2 * MAX_STEPS][32];
    for (int i = 0; i < steps; i++) {
        float *x = buf + i * (bs->in_floats + bs->target_count), *y = x + bs->in_floats;
        make_batch(bs, i, x, y);
        snprintf(names[2 * i], 32, "x.%d", i);
        snprintf(names[2 * i + 1], 32, "y.%d", i);
        ts[2 * i] = (ddpc_st_tensor){.name = names[2 * i], .ndim = 1, .shape = {bs->in_floats}, .data = x};
        ts[2 * i + 1] = (ddpc_st_tensor){.name = names[2 * i + 1], .ndim = 1, .shape = {bs->target_count}, .data = y};
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/batches.safetensors", dir);
    ddpc_status s = ddpc_safetensors_write(path, ts, 2 * (size_t)steps, NULL, NULL, 0);
    ddpc_free(buf);
    return s;
}

/* probs1.safetensors: the output probabilities of the first forward, (rows, classes). */
static ddpc_status save_probs(ddpc_model *m, const batch_shape *bs, const char *dir,
                              const char *file)
{
    int64_t rows = bs->target_count, cols = bs->vocab;
    ddpc_st_tensor t = {.name = "probs", .ndim = 2, .shape = {rows, cols},
                        .data = ddpc_model_probs(m)};
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    return ddpc_safetensors_write(path, &t, 1, NULL, NULL, 0);
}

static ddpc_status run(const char *type, ddpc_precision prec, int steps, const char *dir)
{
    ddpc_model *m = NULL;
    batch_shape bs;
    DDPC_TRY(make_model(type, prec, &m, &bs));
    char path[1024];
    snprintf(path, sizeof path, "%s/init.safetensors", dir);
    ddpc_status s = ddpc_weights_save_model(m, path);
    if (s == DDPC_OK)
        s = save_batches(&bs, steps, dir);
    ddpc_optim_config oc = ddpc_optim_config_default();
    oc.type = DDPC_OPTIM_ADAMW, oc.lr = 1e-3f, oc.weight_decay = 0.1f;
    ddpc_optim *opt = NULL;
    if (s == DDPC_OK)
        s = ddpc_optim_create(&opt, &oc, ddpc_model_num_params(m));
    float *x = ddpc_malloc((size_t)bs.in_floats * sizeof(float));
    float *y = ddpc_malloc((size_t)bs.target_count * sizeof(float));
    int32_t *tok = ddpc_malloc((size_t)bs.in_floats * sizeof(int32_t));
    int32_t *tgt = ddpc_malloc((size_t)bs.target_count * sizeof(int32_t));
    snprintf(path, sizeof path, "%s/losses.txt", dir);
    FILE *losses = s == DDPC_OK ? fopen(path, "w") : NULL;
    if (s == DDPC_OK && (!x || !y || !tok || !tgt || !losses))
        s = ddpc_errorf(DDPC_EIO, "cannot prepare buffers or '%s'", path);
    for (int i = 0; i < steps && s == DDPC_OK; i++) {
        make_batch(&bs, i, x, y);
        for (int64_t k = 0; k < bs.in_floats; k++)
            tok[k] = (int32_t)x[k];
        for (int64_t k = 0; k < bs.target_count; k++)
            tgt[k] = (int32_t)y[k];
        ddpc_model_input in = {.n = bs.batch, .x = bs.tokens ? NULL : x,
                               .tokens = bs.tokens ? tok : NULL, .targets = tgt};
        ddpc_model_output out;
        ddpc_model_zero_grad(m);
        s = ddpc_model_forward(m, &in, true, &out);
        if (s == DDPC_OK && i == 0)
            s = save_probs(m, &bs, dir, "probs1.safetensors");
        if (s == DDPC_OK)
            s = ddpc_model_backward(m, 1.0f);
        if (s == DDPC_OK && i == 0) {
            snprintf(path, sizeof path, "%s/grads1.safetensors", dir);
            s = ddpc_weights_save(m, ddpc_model_grads(m), path);
        }
        if (s == DDPC_OK) {
            ddpc_optim_step(opt, ddpc_model_params(m), ddpc_model_grads(m), ddpc_model_decay_mask(m), oc.lr);
            fprintf(losses, "%.9g\n", out.loss);
        }
    }
    if (s == DDPC_OK && ddpc_model_num_buffers(m) > 0) {
        snprintf(path, sizeof path, "%s/final.safetensors", dir);
        s = ddpc_weights_save_model(m, path);
        make_batch(&bs, 0, x, y);
        ddpc_model_input in = {.n = bs.batch, .x = x};
        if (s == DDPC_OK)
            s = ddpc_model_forward(m, &in, false, NULL);
        if (s == DDPC_OK)
            s = save_probs(m, &bs, dir, "probs_eval.safetensors");
    }
    if (losses)
        fclose(losses);
    ddpc_free(x);
    ddpc_free(y);
    ddpc_free(tok);
    ddpc_free(tgt);
    ddpc_optim_destroy(opt);
    ddpc_model_destroy(m);
    return s;
}

int main(int argc, char **argv)
{
    ddpc_precision prec = DDPC_PREC_FP32;
    int steps = argc > 4 ? atoi(argv[4]) : 10;
    if (argc < 3 || argc > 5 || (strcmp(argv[1], "gpt") != 0 && strcmp(argv[1], "cnn") != 0 &&
                                   strcmp(argv[1], "cnn_bn") != 0) ||
        (argc > 3 && !ddpc_precision_from_name(argv[3], &prec)) || steps < 1 || steps > MAX_STEPS) {
        fprintf(stderr, "usage: parity_run gpt|cnn|cnn_bn OUT_DIR [fp32|bf16|fp16 [STEPS 1..%d]]\n",
                MAX_STEPS);
        return 2;
    }
    ddpc_kernels_set_threads(1);
    if (run(argv[1], prec, steps, argv[2]) != DDPC_OK) {
        fprintf(stderr, "parity_run: %s\n", ddpc_last_error());
        return 1;
    }
    return 0;
}
