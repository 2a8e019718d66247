// SPDX-License-Identifier: MIT
/* The CUDA table's head16 members (the LM head and its loss with 16-bit logits, bf16/fp16
 * training's default) against the composition of the fp32-logits members evaluation and fp32
 * keep: linear_forward (fp32 logits), the logits rounded to 16 bits, cross_entropy_fused and
 * argmax_correct_into on them, then linear_backward from the fp32 dlogits. Within bf16's
 * tolerance (the products may take other cuBLAS algorithms at a 16-bit output): gradients over
 * the logits, row losses, dx, dw; the valid count exactly, the loss sum within 1e-3, the argmax
 * count within one row. Zeros in the padding (rows past n, columns past v) and on ignored rows;
 * a rerun gives the same bits; no host wait, and no allocation on a warm call, nor in an
 * evaluation after training steps. GPT-2's 50257 classes and a small odd width, bf16 and fp16.
 * Then a GPT on the GPU, announced as the engine announces a training step, with and without a
 * loss sink: it takes the path exactly when the precision is 16-bit, within tolerance of the
 * fp32-logits path, and an evaluation forward keeps fp32 logits. Skips (exit 77) without a GPU. */
#include <ddpc/half.h>
#include <ddpc/models.h>
#include <ddpc/nn.h>

#include "backend_testutil.h"
#include "nn/model_impl.h" /* ce_half: which path the model took */

#include <stdlib.h>
#include <string.h>

static const ddpc_kernel_table *gpu;

enum { IGNORE = -1 };

/* gemm.cu's padded(): the head16 product's row stride and row count. */
static int64_t padded(int64_t x)
{
    int64_t mult = x >= 4096 ? 128 : 8;
    return x % 8 == 0 ? x : (x + mult - 1) / mult * mult;
}

/* 16-bit device bits (rows, ld) to host floats. */
static float *widen_down(const void *d, int64_t count, bool bf)
{
    uint16_t *h = ddpc_malloc((size_t)count * sizeof(uint16_t));
    float *f = tu_alloc(count);
    if (!h)
        abort();
    gpu->to_host(h, d, (size_t)count * sizeof(uint16_t));
    for (int64_t i = 0; i < count; i++)
        f[i] = bf ? ddpc_bf16_to_f32(h[i]) : ddpc_f16_to_f32(h[i]);
    ddpc_free(h);
    return f;
}

/* Targets: row 1 ignored, row 2 out of range; every third row the argmax of `logits` (n, v), so
 * the argmax count is not 0; the rest spread over the classes. */
static void make_targets(int32_t *tg, const float *logits, int64_t n, int64_t v, bool none)
{
    for (int64_t i = 0; i < n; i++) {
        tg[i] = none ? IGNORE : (int32_t)((i * 7919 + 13) % v);
        if (!none && i % 3 == 0) {
            int64_t at = 0;
            for (int64_t j = 1; j < v; j++)
                if (logits[i * v + j] > logits[i * v + at])
                    at = j;
            tg[i] = (int32_t)at;
        }
    }
    if (!none && n > 2) {
        tg[1] = IGNORE;
        tg[2] = (int32_t)v;
    }
}

static void check_members(ddpc_precision p, int64_t n, int64_t c, int64_t v, float dloss, bool none)
{
    const bool bf = p == DDPC_PREC_BF16;
    printf(" %s n %lld c %lld v %lld dloss %g%s\n", ddpc_precision_name(p), (long long)n,
           (long long)c, (long long)v, (double)dloss, none ? " all ignored" : "");
    float *x = tu_rand(n * c, -1.0f, 1.0f, 81), *w = tu_rand(v * c, -0.3f, 0.3f, 82);
    float *dx0 = tu_rand(n * c, -1.0f, 1.0f, 83), *dw0 = tu_rand(v * c, -1.0f, 1.0f, 84);
    float *gx = bt_up(gpu, x, n * c), *gw = bt_up(gpu, w, v * c);

    /* The fp32-logits members: the logits rounded to 16 bits and back, then the fused loss. */
    float *ref = bt_poison(gpu, n * v), *ref_l = bt_poison(gpu, n);
    gpu->linear_forward(p, ref, gx, gw, NULL, n, c, v);
    uint16_t *h16 = gpu->alloc((size_t)(n * v) * sizeof(uint16_t));
    gpu->f32_to_half_array(h16, ref, (size_t)(n * v), bf);
    gpu->half_to_f32_array(ref, h16, (size_t)(n * v), bf);
    float *logits = bt_down(gpu, ref, n * v);
    int32_t *tg = ddpc_malloc((size_t)n * sizeof(int32_t));
    make_targets(tg, logits, n, v, none);
    int32_t *gtg = bt_up_bytes(gpu, tg, (size_t)n * sizeof(int32_t));
    double *ref_sums = gpu->alloc(3 * sizeof(double)), rs[3];
    gpu->argmax_correct_into(ref_sums + 2, ref, gtg, n, v, IGNORE);
    gpu->cross_entropy_fused(ref_sums, ref, ref_l, ref, gtg, n, v, IGNORE, dloss);
    float *ref_dx = bt_up(gpu, dx0, n * c), *ref_dw = bt_up(gpu, dw0, v * c);
    gpu->linear_backward(p, ref_dx, ref_dw, NULL, ref, gx, gw, n, c, v);
    gpu->to_host(rs, ref_sums, sizeof rs);
    float *want_d = bt_down(gpu, ref, n * v), *want_l = bt_down(gpu, ref_l, n);
    float *want_dx = bt_down(gpu, ref_dx, n * c), *want_dw = bt_down(gpu, ref_dw, v * c);

    /* The members, twice: the same bits each time. */
    const int64_t rows = padded(n), ld = padded(v);
    const size_t bytes = (size_t)(n * v) * sizeof(float);
    uint16_t *first = NULL;
    for (int rep = 0; rep < 2; rep++) {
        float *buf = bt_poison(gpu, n * v), *l = bt_poison(gpu, n);
        float *gdx = bt_up(gpu, dx0, n * c), *gdw = bt_up(gpu, dw0, v * c);
        double *sums = gpu->alloc(3 * sizeof(double)), s[3];
        const uint64_t waits = gpu->host_waits(), allocs = gpu->alloc_count();
        CHECK(gpu->head16_forward(p, sums, buf, bytes, l, gx, gw, gtg, n, c, v, IGNORE, dloss));
        gpu->head16_backward(p, gdx, gdw, buf, gx, gw, n, c, v);
        CHECK_EQ_INT(gpu->host_waits(), waits);
        if (rep == 1)
            CHECK_EQ_INT(gpu->alloc_count(), allocs);
        gpu->to_host(s, sums, sizeof s);
        printf("  sums %.9g %.0f %.0f (fp32 logits' %.9g %.0f %.0f)\n", s[0], s[1], s[2], rs[0],
               rs[1], rs[2]);
        CHECK(s[1] == rs[1]);
        CHECK(rs[0] == 0.0 ? s[0] == 0.0 : fabs(s[0] - rs[0]) <= 1e-3 * fabs(rs[0]));
        CHECK(fabs(s[2] - rs[2]) <= 1.0);
        CHECK(none ? s[2] == 0.0 : rs[2] > 0.0);
        float *d = widen_down(buf, rows * ld, bf), *got = tu_alloc(n * v);
        int64_t pad = 0;
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < ld; j++) {
                if (i < n && j < v)
                    got[i * v + j] = d[i * ld + j];
                else
                    pad += d[i * ld + j] != 0.0f;
            }
        CHECK_EQ_INT(pad, 0);
        double e = tu_rel_err(got, want_d, n * v, 1e-6);
        printf("  dlogits rel err %.3g\n", e);
        CHECK(e <= 1e-2);
        if (none)
            CHECK(tu_max_abs(got, n * v) == 0.0);
        CHECK(bt_err(gpu, "row losses", l, want_l, n) <= 1e-2);
        CHECK(bt_err(gpu, "dx += dlogits w", gdx, want_dx, n * c) <= 1e-2);
        CHECK(bt_err(gpu, "dw += dlogits^T x", gdw, want_dw, v * c) <= 1e-2);
        uint16_t *bits = ddpc_malloc((size_t)(rows * ld) * sizeof(uint16_t));
        gpu->to_host(bits, buf, (size_t)(rows * ld) * sizeof(uint16_t));
        if (rep == 0)
            first = bits;
        else {
            CHECK(memcmp(bits, first, (size_t)(rows * ld) * sizeof(uint16_t)) == 0);
            ddpc_free(bits);
        }
        ddpc_free(d);
        ddpc_free(got);
        gpu->free(buf);
        gpu->free(l);
        gpu->free(gdx);
        gpu->free(gdw);
        gpu->free(sums);
    }
    /* Declines what it cannot hold or does not round: too few bytes, fp32. */
    float *small = bt_poison(gpu, n * v);
    double *sums = gpu->alloc(3 * sizeof(double));
    CHECK(!gpu->head16_forward(p, sums, small, (size_t)(rows * ld) * 2 - 16, NULL, gx, gw, gtg, n,
                               c, v, IGNORE, dloss));
    CHECK(!gpu->head16_forward(DDPC_PREC_FP32, sums, small, bytes, NULL, gx, gw, gtg, n, c, v,
                               IGNORE, dloss));
    float *h = bt_down(gpu, small, 1);
    CHECK(isnan(h[0]));
    ddpc_free(h);
    gpu->free(small);
    gpu->free(sums);

    ddpc_free(first);
    void *dev[] = {gx, gw, ref, ref_l, h16, gtg, ref_sums, ref_dx, ref_dw};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        gpu->free(dev[i]);
    float *host[] = {x, w, dx0, dw0, logits, want_d, want_l, want_dx, want_dw};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++)
        ddpc_free(host[i]);
    ddpc_free(tg);
}

static void test_members_gpt2_vocab(void)
{
    check_members(DDPC_PREC_BF16, 64, 768, 50257, 1.0f, false);
    check_members(DDPC_PREC_FP16, 37, 128, 50257, 65536.0f / 3.0f, false);
}

static void test_members_small(void)
{
    for (int bf = 0; bf < 2; bf++) {
        ddpc_precision p = bf ? DDPC_PREC_BF16 : DDPC_PREC_FP16;
        check_members(p, 21, 64, 13, 1.0f, false);
        check_members(p, 16, 32, 1000, 0.5f, false);
        check_members(p, 12, 32, 13, 1.0f, true); /* 12 rows padded to 16 */
    }
}

/* A GPT on the GPU, two steps announced as the engine announces them (with a loss sink and
 * without), against the same model unannounced (fp32 logits): the path taken, the loss, the
 * counts and the gradients. */
static void check_model(ddpc_precision p, bool sink)
{
    printf(" gpt %s%s\n", ddpc_precision_name(p), sink ? ", loss sink" : "");
    static const ddpc_gpt_config gc = {.n_layer = 1, .n_head = 2, .n_embd = 64, .block_size = 16};
    ddpc_model_config c = ddpc_model_config_default();
    strcpy(c.type, "gpt");
    c.num_classes = 1003, c.type_config = &gc, c.backend = gpu, c.precision = p;
    enum { B = 3, T = 16 };
    int32_t tok[B * T], tgt[B * T];
    for (int i = 0; i < B * T; i++) {
        tok[i] = (i * 37 + 5) % 1003;
        tgt[i] = i == 7 ? -1 : (i * 91 + 3) % 1003;
    }
    ddpc_model_input in = {.n = B, .tokens = tok, .targets = tgt, .rng_stream = 1};
    ddpc_model *m[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++)
        CHECK_EQ_INT(ddpc_model_create(&m[k], &c), DDPC_OK);
    if (!m[0] || !m[1])
        return;
    double *d_sink = gpu->alloc(3 * sizeof(double)), hs[3];
    if (sink)
        ddpc_model_set_loss_sink(m[1], d_sink);
    const size_t np = ddpc_model_num_params(m[0]);
    for (int step = 0; step < 2; step++) {
        ddpc_model_output out[2];
        for (int k = 0; k < 2; k++) {
            ddpc_model_zero_grad(m[k]);
            if (k == 1)
                ddpc_model_expect_backward(m[k], 1.0f);
            CHECK_EQ_INT(ddpc_model_forward(m[k], &in, true, &out[k]), DDPC_OK);
            CHECK_EQ_INT(ddpc_model_backward(m[k], 1.0f), DDPC_OK);
        }
        CHECK(m[1]->ce_half == (p != DDPC_PREC_FP32));
        CHECK(!m[0]->ce_half);
        if (sink) {
            CHECK(isnan(out[1].loss) && out[1].n_valid == -1 && out[1].n_correct == -1);
            gpu->to_host(hs, d_sink, sizeof hs);
            out[1].n_valid = (int64_t)hs[1];
            out[1].loss = (float)(hs[0] / hs[1]);
            out[1].n_correct = (int64_t)hs[2];
        }
        printf("  step %d: loss %.6f, fp32's %.6f; valid %lld; correct %lld, fp32's %lld\n", step,
               (double)out[1].loss, (double)out[0].loss, (long long)out[1].n_valid,
               (long long)out[1].n_correct, (long long)out[0].n_correct);
        CHECK_EQ_INT(out[1].n_valid, out[0].n_valid);
        CHECK(fabsf(out[1].loss - out[0].loss) <= 1e-2f * out[0].loss);
        CHECK(llabs(out[1].n_correct - out[0].n_correct) <= 1);
        float *g0 = bt_down(gpu, ddpc_model_device_grads(m[0]), (int64_t)np);
        CHECK(bt_err(gpu, "gradients", ddpc_model_device_grads(m[1]), g0, (int64_t)np) <= 5e-2);
        ddpc_free(g0);
        /* An evaluation forward keeps the fp32 logits. */
        CHECK_EQ_INT(ddpc_model_forward(m[1], &in, false, &out[1]), DDPC_OK);
        CHECK(!m[1]->ce_half);
    }
    gpu->free(d_sink);
    ddpc_model_destroy(m[0]);
    ddpc_model_destroy(m[1]);
}

/* An evaluation after announced training steps allocates no device memory: it keeps fp32 logits,
 * whose product pads them through BLAS scratch (v = 1003 is no multiple of 16), more than the
 * 16-bit head takes where B*T exceeds the width; so it must have been grown in training. The first
 * test of the process, as the scratch only ever grows. */
static void test_eval_allocates_nothing(void)
{
    static const ddpc_gpt_config gc = {.n_layer = 1, .n_head = 1, .n_embd = 32, .block_size = 64};
    ddpc_model_config c = ddpc_model_config_default();
    strcpy(c.type, "gpt");
    c.num_classes = 1003, c.type_config = &gc, c.backend = gpu, c.precision = DDPC_PREC_BF16;
    enum { B = 8, T = 64 };
    static int32_t tok[B * T], tgt[B * T];
    for (int i = 0; i < B * T; i++) {
        tok[i] = (i * 37 + 5) % 1003;
        tgt[i] = (i * 91 + 3) % 1003;
    }
    ddpc_model_input in = {.n = B, .tokens = tok, .targets = tgt, .rng_stream = 1};
    ddpc_model *m = NULL;
    CHECK_EQ_INT(ddpc_model_create(&m, &c), DDPC_OK);
    if (!m)
        return;
    ddpc_model_output out;
    for (int step = 0; step < 2; step++) {
        ddpc_model_zero_grad(m);
        ddpc_model_expect_backward(m, 1.0f);
        CHECK_EQ_INT(ddpc_model_forward(m, &in, true, &out), DDPC_OK);
        CHECK_EQ_INT(ddpc_model_backward(m, 1.0f), DDPC_OK);
        CHECK(m->ce_half);
    }
    const uint64_t allocs = gpu->alloc_count();
    CHECK_EQ_INT(ddpc_model_forward(m, &in, false, &out), DDPC_OK);
    CHECK(!m->ce_half);
    printf("  device allocations in the evaluation: %llu\n",
           (unsigned long long)(gpu->alloc_count() - allocs));
    CHECK_EQ_INT(gpu->alloc_count(), allocs);
    ddpc_model_destroy(m);
}

static void test_model_path(void)
{
    check_model(DDPC_PREC_BF16, false);
    check_model(DDPC_PREC_BF16, true);
    check_model(DDPC_PREC_FP16, true);
    check_model(DDPC_PREC_FP32, false);
}

int main(void)
{
    gpu = bt_cuda_or_skip();
    RUN_TEST(test_eval_allocates_nothing); /* first: the scratch has not grown yet */
    RUN_TEST(test_members_small);
    RUN_TEST(test_members_gpt2_vocab);
    RUN_TEST(test_model_path);
    return check_summary();
}
