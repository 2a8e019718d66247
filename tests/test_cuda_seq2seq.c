// SPDX-License-Identifier: MIT
/* The CUDA table's seq2seq members (kernels/cuda/mha.cu, loss_smooth.cu, positional.cu, copy2d)
 * against the CPU table on the same inputs, fp32: masked attention forward (out, att) within 1e-5
 * relative and backward within 1e-4 (self-attention with padding and a row of masked keys, causal,
 * cross-attention with tq != tk, one query against a key/value cache), and at bf16 and fp16 each
 * within 1e-2 of the CPU's at that precision; the label-smoothed loss
 * within 1e-4, its probabilities 1e-5 and backward 1e-5 (the no-wait forms: no host wait, the
 * same backward bits from the device's count); positions, the scaled embedding, the pad
 * mask and copy2d within 1e-5 or exactly; second calls with the same shapes allocate nothing. Then
 * a small seq2seq model trains a few steps and translates on the GPU as on the CPU (losses within
 * 1e-4, the same tokens). Skips (exit 77) without a GPU; device outputs are poisoned first. */
#include "backend_testutil.h"

#include <ddpc/models.h>
#include <ddpc/nn.h>

#include <string.h>

static const ddpc_kernel_table *gpu;
static const ddpc_kernel_table *cpu;

static void check_mha_at(ddpc_precision prec, const char *what, ddpc_mha_shape s, uint64_t seed)
{
    printf(" %s (%s): b %lld tq %lld tk %lld c %lld nh %lld%s\n", what, ddpc_precision_name(prec),
           (long long)s.b, (long long)s.tq, (long long)s.tk, (long long)s.c, (long long)s.nh,
           s.causal ? " causal" : "");
    /* At 16 bits both multiply the same rounded operands; P and dS, computed in fp32 on each, can
     * round apart where they differ in the last bits: the repo's bf16 tolerance. */
    const bool f32 = prec == DDPC_PREC_FP32;
    const double tf = f32 ? 1e-5 : 1e-2, tb = f32 ? 1e-4 : 1e-2;
    const int64_t sk = ddpc_mha_kv_batch_stride(&s);
    const int64_t nq = s.b * ddpc_mha_q_batch_stride(&s), nk = s.b * sk, nout = s.b * s.tq * s.c;
    const int64_t natt = s.b * s.nh * s.tq * s.tk;
    float *q = tu_rand(nq, -1.0f, 1.0f, seed), *kv = tu_rand(nk, -1.0f, 1.0f, seed + 1);
    float *dout = tu_rand(nout, -1.0f, 1.0f, seed + 2);
    uint8_t *pad = ddpc_calloc((size_t)(s.b * s.tk), 1);
    for (int64_t bi = 1; bi < s.b; bi++) /* row 0 sees every key; the last row none when b > 2 */
        for (int64_t j = bi == s.b - 1 && s.b > 2 ? 0 : s.tk - bi; j < s.tk; j++)
            pad[bi * s.tk + j] = 1;
    float *out = tu_alloc(nout), *att = tu_alloc(natt), *dq = tu_alloc(nq), *dkv = tu_alloc(nk);
    float *ws = tu_alloc((int64_t)cpu->mha_workspace_floats(&s));
    cpu->mha_forward(prec, out, att, q, kv, kv + s.c, pad, &s, NULL);
    cpu->mha_backward(prec, dq, dkv, dkv + s.c, dout, q, kv, kv + s.c, att, &s, ws);

    float *d_q = bt_up(gpu, q, nq), *d_kv = bt_up(gpu, kv, nk), *d_dout = bt_up(gpu, dout, nout);
    uint8_t *d_pad = bt_up_bytes(gpu, pad, (size_t)(s.b * s.tk));
    float *d_out = bt_poison(gpu, nout), *d_att = bt_poison(gpu, natt);
    float *d_dq = bt_up(gpu, dq, nq), *d_dkv = bt_up(gpu, dkv, nk); /* columns past c kept */
    float *d_ws = bt_poison(gpu, (int64_t)gpu->mha_workspace_floats(&s));
    gpu->fill_f32(d_dq, NAN, nq);
    gpu->fill_f32(d_dkv, NAN, nk);
    gpu->mha_forward(prec, d_out, d_att, d_q, d_kv, d_kv + s.c, d_pad, &s, d_ws);
    gpu->mha_backward(prec, d_dq, d_dkv, d_dkv + s.c, d_dout, d_q, d_kv, d_kv + s.c,
                      d_att, &s, d_ws);
    BT_CHECK_ERR(bt_err(gpu, "out", d_out, out, nout), tf);
    BT_CHECK_ERR(bt_err(gpu, "att", d_att, att, natt), tf);
    /* Only the first c columns of each row are written: compare those. */
    float *hq = bt_down(gpu, d_dq, nq), *hkv = bt_down(gpu, d_dkv, nk);
    for (int64_t i = 0; i < nq; i++)
        if ((i % ddpc_mha_q_batch_stride(&s)) % s.ldq >= s.c)
            hq[i] = dq[i];
    for (int64_t i = 0; i < nk; i++)
        if ((i % sk) % s.ldk >= 2 * s.c || (i % sk) / s.ldk >= s.tk)
            hkv[i] = dkv[i];
    double eq = tu_rel_err(hq, dq, nq, 1e-6), ekv = tu_rel_err(hkv, dkv, nk, 1e-6);
    printf("  dq rel err %.3g, dk | dv rel err %.3g\n", eq, ekv);
    BT_CHECK_ERR(eq, tb);
    BT_CHECK_ERR(ekv, tb);
    BT_CHECK_WARM(gpu,
                  gpu->mha_forward(prec, d_out, d_att, d_q, d_kv, d_kv + s.c, d_pad, &s, d_ws));
    void *all[] = {d_q, d_kv, d_dout, d_pad, d_out, d_att, d_dq, d_dkv, d_ws};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        gpu->free(all[i]);
    void *host[] = {q, kv, dout, pad, out, att, dq, dkv, ws, hq, hkv};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++)
        ddpc_free(host[i]);
}

/* Each shape at fp32, then bf16 and fp16 (the 16-bit operands written by mha.cu's kernels). */
static void check_mha(const char *what, ddpc_mha_shape s, uint64_t seed)
{
    const ddpc_precision p[] = {DDPC_PREC_FP32, DDPC_PREC_BF16, DDPC_PREC_FP16};
    for (int i = 0; i < 3; i++)
        check_mha_at(p[i], what, s, seed);
}

static void test_mha(void)
{
    check_mha("self, padded",
              (ddpc_mha_shape){.b = 3, .tq = 9, .tk = 9, .c = 16, .nh = 2, .ldq = 48, .ldk = 48},
              1);
    check_mha(
        "causal",
        (ddpc_mha_shape){
            .b = 2, .tq = 33, .tk = 33, .c = 32, .nh = 4, .ldq = 96, .ldk = 96, .causal = true},
        2);
    check_mha("cross",
              (ddpc_mha_shape){.b = 3, .tq = 7, .tk = 300, .c = 24, .nh = 3, .ldq = 24, .ldk = 48},
              3);
    check_mha("cached step",
              (ddpc_mha_shape){.b = 4,
                               .tq = 1,
                               .tk = 5,
                               .c = 16,
                               .nh = 2,
                               .ldq = 48,
                               .ldk = 32,
                               .bsq = 48,
                               .bsk = 8 * 32},
              4);
}

static void test_cross_entropy_smooth(void)
{
    const int64_t n = 37, v = 1500;
    float *logits = tu_rand(n * v, -6.0f, 6.0f, 9), *d = tu_rand(n * v, -0.1f, 0.1f, 10);
    int32_t *tg = ddpc_calloc((size_t)n, sizeof(int32_t));
    for (int64_t i = 0; i < n; i++)
        tg[i] = i % 4 == 1 ? 0 : (int32_t)((i * 37 + 5) % v);
    float *probs = tu_alloc(n * v), *losses = tu_alloc(n);
    int64_t valid = 0, gvalid = -1;
    float loss =
        cpu->cross_entropy_smooth_forward(probs, losses, logits, tg, n, v, 0, 0.1f, &valid);
    float *d_logits = bt_up(gpu, logits, n * v), *d_d = bt_up(gpu, d, n * v);
    int32_t *d_tg = bt_up_bytes(gpu, tg, (size_t)n * sizeof(int32_t));
    float *d_losses = bt_poison(gpu, n);
    /* probs over the logits, as seq2seq runs it */
    float gloss = gpu->cross_entropy_smooth_forward(d_logits, d_losses, d_logits, d_tg, n, v, 0,
                                                    0.1f, &gvalid);
    printf("  loss %.9g, CPU %.9g; valid %lld\n", (double)gloss, (double)loss, (long long)gvalid);
    CHECK_EQ_INT(gvalid, valid);
    CHECK_NEAR(gloss, loss, 1e-4);
    BT_CHECK_ERR(bt_err(gpu, "probs", d_logits, probs, n * v), 1e-5);
    BT_CHECK_ERR(bt_err(gpu, "losses", d_losses, losses, n), 1e-5);
    cpu->cross_entropy_smooth_backward(d, probs, tg, n, v, 0, 0.1f, valid, 0.5f);
    gpu->cross_entropy_smooth_backward(d_d, d_logits, d_tg, n, v, 0, 0.1f, valid, 0.5f);
    BT_CHECK_ERR(bt_err(gpu, "dlogits", d_d, d, n * v), 1e-5);
    /* NULL losses: the member's own scratch. */
    gpu->to_device(d_logits, logits, (size_t)(n * v) * sizeof(float));
    BT_CHECK_WARM(gpu, gloss = gpu->cross_entropy_smooth_forward(d_logits, NULL, d_logits, d_tg, n,
                                                                 v, 0, 0.1f, NULL));
    CHECK_NEAR(gloss, loss, 1e-4);
    /* The no-wait forms: the sums stay on the device (no host wait); backward_from takes the
     * count from them and gives the same bits as backward given it. */
    double *d_sums = gpu->alloc(2 * sizeof(double)), sums[2];
    float *d_from = bt_up(gpu, d, n * v), *d_given = bt_up(gpu, d, n * v);
    gpu->to_device(d_logits, logits, (size_t)(n * v) * sizeof(float));
    uint64_t w0 = gpu->host_waits();
    gpu->cross_entropy_smooth_forward_into(d_sums, d_logits, d_losses, d_logits, d_tg, n, v, 0,
                                           0.1f);
    gpu->cross_entropy_smooth_backward_from(d_from, d_logits, d_tg, n, v, 0, 0.1f, d_sums, 0.5f);
    CHECK_EQ_INT(gpu->host_waits() - w0, 0);
    gpu->cross_entropy_smooth_backward(d_given, d_logits, d_tg, n, v, 0, 0.1f, valid, 0.5f);
    gpu->to_host(sums, d_sums, sizeof sums);
    CHECK_EQ_INT((int64_t)sums[1], valid);
    CHECK_NEAR((float)(sums[0] / sums[1]), loss, 1e-4);
    float *from = bt_down(gpu, d_from, n * v), *given = bt_down(gpu, d_given, n * v);
    CHECK(memcmp(from, given, (size_t)(n * v) * sizeof(float)) == 0);
    gpu->free(d_sums);
    gpu->free(d_from);
    gpu->free(d_given);
    ddpc_free(from);
    ddpc_free(given);
    gpu->free(d_logits);
    gpu->free(d_d);
    gpu->free(d_tg);
    gpu->free(d_losses);
    void *host[] = {logits, d, tg, probs, losses};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++)
        ddpc_free(host[i]);
}

static void test_embeddings(void)
{
    const int64_t b = 3, t = 11, c = 20, v = 13, n = b * t;
    float *pe = tu_alloc(t * c), *w = tu_rand(v * c, -1.0f, 1.0f, 20), *y = tu_alloc(n * c);
    float *dy = tu_rand(n * c, -1.0f, 1.0f, 21), *dw = tu_rand(v * c, -1.0f, 1.0f, 22);
    int32_t *tok = ddpc_calloc((size_t)n, sizeof(int32_t));
    uint8_t *mask = ddpc_calloc((size_t)n, 1), *gmask = ddpc_calloc((size_t)n, 1);
    for (int64_t i = 0; i < n; i++)
        tok[i] = (int32_t)((i * 5 + i / 4) % v);
    const float scale = sqrtf((float)c);
    float *d_pe = bt_poison(gpu, t * c), *d_w = bt_up(gpu, w, v * c), *d_y = bt_poison(gpu, n * c);
    float *d_dy = bt_up(gpu, dy, n * c), *d_dw = bt_up(gpu, dw, v * c);
    int32_t *d_tok = bt_up_bytes(gpu, tok, (size_t)n * sizeof(int32_t));
    uint8_t *d_mask = gpu->alloc((size_t)n);
    cpu->sinusoidal_positions(pe, t, c);
    gpu->sinusoidal_positions(d_pe, t, c);
    BT_CHECK_ERR(bt_err(gpu, "positions", d_pe, pe, t * c), 1e-5);
    cpu->embedding_scaled_forward(y, tok, w, scale, pe, b, t, c);
    gpu->embedding_scaled_forward(d_y, d_tok, d_w, scale, d_pe, b, t, c);
    BT_CHECK_ERR(bt_err(gpu, "scaled embedding", d_y, y, n * c), 1e-5);
    cpu->embedding_scaled_backward(dw, dy, tok, scale, b, t, c);
    gpu->embedding_scaled_backward(d_dw, d_dy, d_tok, scale, b, t, c);
    BT_CHECK_ERR(bt_err(gpu, "scaled embedding backward", d_dw, dw, v * c), 1e-5);
    BT_CHECK_WARM(gpu, gpu->embedding_scaled_backward(d_dw, d_dy, d_tok, scale, b, t, c));
    cpu->pad_mask(mask, tok, n, 3);
    gpu->pad_mask(d_mask, d_tok, n, 3);
    gpu->to_host(gmask, d_mask, (size_t)n);
    CHECK(memcmp(mask, gmask, (size_t)n) == 0);
    /* copy2d: rows 1..3 of y's first 4 columns into pe's rows, 2 columns in. */
    cpu->copy2d(pe + 2, (size_t)c * 4, y + c, (size_t)c * 4, 4 * 4, 3);
    gpu->copy2d(d_pe + 2, (size_t)c * 4, d_y + c, (size_t)c * 4, 4 * 4, 3);
    BT_CHECK_ERR(bt_err(gpu, "copy2d", d_pe, pe, t * c), 0.0);
    void *all[] = {d_pe, d_w, d_y, d_dy, d_dw, d_tok, d_mask};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        gpu->free(all[i]);
    void *host[] = {pe, w, y, dy, dw, tok, mask, gmask};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++)
        ddpc_free(host[i]);
}

/* ---- the model: training steps and translation on both tables ---- */
enum { B = 3, S = 5, T = 6, STEPS = 4, MAX_OUT = 7 };
static int32_t src[B * S] = {5, 6, 7, 8, 4, 6, 5, 4, 0, 0, 8, 7, 6, 5, 0};
static int32_t tok[B * T] = {1, 5, 6, 7, 8, 9, 1, 6, 5, 4, 0, 0, 1, 0, 0, 0, 0, 0};
static int32_t tgt[B * T] = {5, 6, 7, 8, 9, 2, 6, 5, 4, 2, 0, 0, 2, 0, 0, 0, 0, 0};

static ddpc_model *make(const ddpc_kernel_table *k)
{
    ddpc_model_config c = ddpc_model_config_default();
    ddpc_seq2seq_config own = ddpc_seq2seq_config_default();
    c.type_config = &own;
    strcpy(c.type, "seq2seq");
    own.d_model = 16, own.num_heads = 2, own.num_encoder_layers = 2, own.num_decoder_layers = 2;
    own.d_ff = 24, own.max_len = 8, own.src_vocab = 9, own.tgt_vocab = 11;
    c.dropout = 0.1f;
    c.seed = 3;
    c.backend = k;
    ddpc_model *m = NULL;
    if (ddpc_model_create(&m, &c) != DDPC_OK)
        fprintf(stderr, "create failed: %s\n", ddpc_last_error());
    return m;
}

static void test_model(void)
{
    ddpc_model *a = make(cpu), *b = make(gpu);
    CHECK(a && b);
    if (!a || !b)
        return;
    ddpc_model_input in = {
        .n = B, .src_tokens = src, .tokens = tok, .targets = tgt, .src_len = S, .tgt_len = T};
    ddpc_model *ms[2] = {a, b};
    for (int s = 0; s < STEPS; s++) {
        ddpc_model_output o[2];
        in.rng_stream = (uint64_t)s;
        for (int i = 0; i < 2; i++) {
            const ddpc_kernel_table *k = ddpc_model_backend(ms[i]);
            ddpc_model_zero_grad(ms[i]);
            CHECK_EQ_INT(ddpc_model_forward(ms[i], &in, true, &o[i]), DDPC_OK);
            CHECK_EQ_INT(ddpc_model_backward(ms[i], 1.0f), DDPC_OK);
            k->axpy_f32(ddpc_model_device_params(ms[i]), -0.5f, ddpc_model_device_grads(ms[i]),
                        (int64_t)ddpc_model_num_params(ms[i]));
        }
        printf("  step %d: loss %.9g, CPU %.9g\n", s, (double)o[1].loss, (double)o[0].loss);
        CHECK_NEAR(o[1].loss, o[0].loss, 1e-4);
        CHECK_EQ_INT(o[1].n_valid, o[0].n_valid);
    }
    for (int beam = 1; beam <= 3; beam += 2) {
        int32_t oa[B * MAX_OUT], ob[B * MAX_OUT];
        CHECK_EQ_INT(ddpc_model_translate(a, src, B, S, beam, MAX_OUT, oa), DDPC_OK);
        CHECK_EQ_INT(ddpc_model_translate(b, src, B, S, beam, MAX_OUT, ob), DDPC_OK);
        CHECK(memcmp(oa, ob, sizeof oa) == 0);
    }
    ddpc_model_destroy(a);
    ddpc_model_destroy(b);
}

int main(void)
{
    cpu = ddpc_kernel_table_cpu();
    gpu = bt_cuda_or_skip();
    RUN_TEST(test_mha);
    RUN_TEST(test_cross_entropy_smooth);
    RUN_TEST(test_embeddings);
    RUN_TEST(test_model);
    return check_summary();
}
