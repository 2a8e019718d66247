// SPDX-License-Identifier: MIT
/* The ddpc half of the seq2seq parity test: builds a small seq2seq model (d_model 32, 4 heads, 2+2
 * layers, d_ff 64, label smoothing 0.1, dropout 0) at a precision, saves its initial weights, the
 * batches (sources and targets padded with 0 to different lengths), step 1's output probabilities
 * and gradients and the losses of STEPS AdamW steps under OUT_DIR; parity_seq2seq.py replays them
 * with torch.nn.Transformer and compares.
 * usage: parity_seq2seq_run OUT_DIR [fp32|bf16|fp16 [STEPS]] */
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

enum { B = 4, S = 9, T = 10, VS = 23, VT = 19, MAX_STEPS = 50 };

/* Batch i: source lengths 9, 7, 3, 5 (shifted per step), targets <bos> y .. / y .. <eos>. */
static void make_batch(int i, int32_t *src, int32_t *tok, int32_t *tgt)
{
    ddpc_rng r = ddpc_rng_make(13, (uint64_t)i);
    memset(src, 0, sizeof(int32_t) * B * S);
    memset(tok, 0, sizeof(int32_t) * B * T);
    memset(tgt, 0, sizeof(int32_t) * B * T);
    static const int src_len[B] = {9, 7, 3, 5}, tgt_len[B] = {6, 10, 4, 2};
    for (int b = 0; b < B; b++) {
        int ls = src_len[(b + i) % B], lt = tgt_len[(b + i) % B];
        for (int j = 0; j < ls; j++)
            src[b * S + j] = 4 + (int32_t)ddpc_rng_below(&r, VS - 4);
        tok[b * T] = 1;
        for (int j = 0; j < lt - 1; j++) {
            int32_t y = 4 + (int32_t)ddpc_rng_below(&r, VT - 4);
            tgt[b * T + j] = y;
            tok[b * T + j + 1] = y;
        }
        tgt[b * T + lt - 1] = 2;
    }
}

static ddpc_status save_batches(int steps, const char *dir)
{
    enum { PER = B * S + 2 * B * T };
    float *buf = ddpc_malloc((size_t)(steps * PER) * sizeof(float));
    int32_t src[B * S], tok[B * T], tgt[B * T];
    if (!buf)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for batches");
    ddpc_st_tensor ts[3 * MAX_STEPS];
    char names[3 * MAX_STEPS][32];
    for (int i = 0; i < steps; i++) {
        float *f = buf + i * PER;
        make_batch(i, src, tok, tgt);
        for (int k = 0; k < B * S; k++)
            f[k] = (float)src[k];
        for (int k = 0; k < B * T; k++)
            f[B * S + k] = (float)tok[k], f[B * S + B * T + k] = (float)tgt[k];
        const char *what[3] = {"src", "tok", "tgt"};
        const float *data[3] = {f, f + B * S, f + B * S + B * T};
        for (int w = 0; w < 3; w++) {
            snprintf(names[3 * i + w], 32, "%s.%d", what[w], i);
            ts[3 * i + w] = (ddpc_st_tensor){
                .name = names[3 * i + w], .ndim = 2, .shape = {B, w ? T : S}, .data = data[w]};
        }
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/batches.safetensors", dir);
    ddpc_status s = ddpc_safetensors_write(path, ts, 3 * (size_t)steps, NULL, NULL, 0);
    ddpc_free(buf);
    return s;
}

static ddpc_status run(ddpc_precision prec, int steps, const char *dir)
{
    ddpc_model_config c = ddpc_model_config_default();
    ddpc_seq2seq_config own = ddpc_seq2seq_config_default();
    c.type_config = &own;
    snprintf(c.type, sizeof c.type, "seq2seq");
    own.d_model = 32, own.num_heads = 4, own.num_encoder_layers = 2, own.num_decoder_layers = 2;
    own.d_ff = 64, own.max_len = 16, own.src_vocab = VS, own.tgt_vocab = VT;
    own.label_smoothing = 0.1f;
    c.dropout = 0.0f, c.precision = prec, c.seed = 7;
    ddpc_model *m = NULL;
    DDPC_TRY(ddpc_model_create(&m, &c));
    char path[1024];
    snprintf(path, sizeof path, "%s/init.safetensors", dir);
    ddpc_status s = ddpc_weights_save(m, ddpc_model_params(m), path);
    if (s == DDPC_OK)
        s = save_batches(steps, dir);
    ddpc_optim_config oc = ddpc_optim_config_default();
    oc.type = DDPC_OPTIM_ADAMW, oc.lr = 1e-3f, oc.weight_decay = 0.1f;
    ddpc_optim *opt = NULL;
    if (s == DDPC_OK)
        s = ddpc_optim_create(&opt, &oc, ddpc_model_num_params(m));
    snprintf(path, sizeof path, "%s/losses.txt", dir);
    FILE *losses = s == DDPC_OK ? fopen(path, "w") : NULL;
    if (s == DDPC_OK && !losses)
        s = ddpc_errorf(DDPC_EIO, "cannot write '%s'", path);
    int32_t src[B * S], tok[B * T], tgt[B * T];
    for (int i = 0; i < steps && s == DDPC_OK; i++) {
        make_batch(i, src, tok, tgt);
        ddpc_model_input in = {
            .n = B, .src_tokens = src, .tokens = tok, .targets = tgt, .src_len = S, .tgt_len = T};
        ddpc_model_output out;
        ddpc_model_zero_grad(m);
        s = ddpc_model_forward(m, &in, true, &out);
        if (s == DDPC_OK && i == 0) {
            ddpc_st_tensor t = {
                .name = "probs", .ndim = 2, .shape = {B * T, VT}, .data = ddpc_model_probs(m)};
            snprintf(path, sizeof path, "%s/probs1.safetensors", dir);
            s = ddpc_safetensors_write(path, &t, 1, NULL, NULL, 0);
        }
        if (s == DDPC_OK)
            s = ddpc_model_backward(m, 1.0f);
        if (s == DDPC_OK && i == 0) {
            snprintf(path, sizeof path, "%s/grads1.safetensors", dir);
            s = ddpc_weights_save(m, ddpc_model_grads(m), path);
        }
        if (s == DDPC_OK) {
            ddpc_optim_step(opt, ddpc_model_params(m), ddpc_model_grads(m),
                            ddpc_model_decay_mask(m), oc.lr);
            fprintf(losses, "%.9g\n", out.loss);
        }
    }
    if (losses)
        fclose(losses);
    ddpc_optim_destroy(opt);
    ddpc_model_destroy(m);
    return s;
}

int main(int argc, char **argv)
{
    ddpc_precision prec = DDPC_PREC_FP32;
    int steps = argc > 3 ? atoi(argv[3]) : 5;
    if (argc < 2 || argc > 4 || (argc > 2 && !ddpc_precision_from_name(argv[2], &prec)) ||
        steps < 1 || steps > MAX_STEPS) {
        fprintf(stderr, "usage: parity_seq2seq_run OUT_DIR [fp32|bf16|fp16 [STEPS 1..%d]]\n",
                MAX_STEPS);
        return 2;
    }
    ddpc_kernels_set_threads(1);
    if (run(prec, steps, argv[1]) != DDPC_OK) {
        fprintf(stderr, "parity_seq2seq_run: %s\n", ddpc_last_error());
        return 1;
    }
    return 0;
}
