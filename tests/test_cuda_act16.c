// SPDX-License-Identifier: MIT
/* The CUDA table's 16-bit activation members (bf16/fp16's default where act16_applies) against
 * the fp32 path (fp32 outputs, then the fp32 members: fp32's and the declined shapes'), bit for
 * bit: layernorm_forward16's and gelu_forward16's copies are the fp32 outputs rounded to nearest
 * even (mean and rstd the same bits); linear_forward16 (bias, bias and residual, no bias; an
 * output width that needs padding) and linear_backward16 (dx, dw, db accumulated onto nonzero
 * values; dx or dw alone) on such a copy give linear_forward's,
 * linear_residual_forward's and linear_backward's bits on the fp32 x; reruns give the same bits,
 * warm calls allocate nothing and wait for nothing. act16_applies says yes exactly for bf16/fp16
 * and sizes padded() keeps. Then a GPT's training steps (with and without activation
 * checkpointing and dropout) give the same losses, gradients and updated parameters, bit for bit,
 * with the members (taken at bf16/fp16, not at fp32) and with a copy of the table without them.
 * Skips (exit 77) without a GPU. */
#include <ddpc/half.h>
#include <ddpc/models.h>
#include <ddpc/nn.h>

#include "backend_testutil.h"
#include "nn/gpt_impl.h" /* act16: which path the model took */

#include <stdlib.h>
#include <string.h>

static const ddpc_kernel_table *gpu;
static ddpc_kernel_table plain; /* gpu's members, without the act16 ones */

static bool same_bits(const char *what, const void *d, const void *ref_d, size_t bytes)
{
    unsigned char *a = ddpc_malloc(bytes), *b = ddpc_malloc(bytes);
    if (!a || !b)
        abort();
    gpu->to_host(a, d, bytes);
    gpu->to_host(b, ref_d, bytes);
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < bytes; i++)
        if (a[i] != b[i] && bad++ == 0)
            first = i;
    printf("  %-44s %s", what, bad ? "DIFFERENT" : "same bits");
    if (bad)
        printf(" (%zu bytes, first at byte %zu)", bad, first);
    printf("\n");
    ddpc_free(a);
    ddpc_free(b);
    return bad == 0;
}

/* The 16-bit copy in its fp32-sized buffer: from its first 256-byte boundary on (act16.cu). */
static const void *at16(const float *buf)
{
    return (const void *)(((uintptr_t)buf + 255) & ~(uintptr_t)255);
}

/* The 16-bit copy of buf (n) equals fp32 ref (n, device) rounded by the table's own rounding. */
static bool copy_is_rounded(const char *what, ddpc_precision p, const float *buf, const float *ref,
                            int64_t n)
{
    uint16_t *want = gpu->alloc((size_t)n * sizeof(uint16_t));
    gpu->f32_to_half_array(want, ref, (size_t)n, p == DDPC_PREC_BF16);
    bool ok = same_bits(what, at16(buf), want, (size_t)n * sizeof(uint16_t));
    gpu->free(want);
    return ok;
}

static void test_applies(void)
{
    CHECK(gpu->act16_applies(DDPC_PREC_BF16, 16384, 768));
    CHECK(gpu->act16_applies(DDPC_PREC_FP16, 16384, 3072));
    CHECK(gpu->act16_applies(DDPC_PREC_BF16, 64, 64));
    CHECK(!gpu->act16_applies(DDPC_PREC_FP32, 16384, 768));
    CHECK(!gpu->act16_applies(DDPC_PREC_BF16, 12, 768)); /* padded rows */
    CHECK(!gpu->act16_applies(DDPC_PREC_BF16, 64, 33));  /* padded columns */
    CHECK(!gpu->act16_applies(DDPC_PREC_BF16, 8, 8));    /* too small for the 256-byte shift */
}

/* One linear layer (n, in) -> out on a 16-bit x from `producer` (0: LayerNorm over in columns,
 * 1: GELU) against the fp32 members on the fp32 output, bit for bit. */
static void check_layer(ddpc_precision p, int producer, int64_t n, int64_t in, int64_t out,
                        bool bias, bool residual)
{
    printf(" %s %s (%lld, %lld) -> %lld%s%s\n", ddpc_precision_name(p),
           producer ? "gelu" : "layernorm", (long long)n, (long long)in, (long long)out,
           bias ? ", bias" : "", residual ? ", residual" : "");
    float *hx = tu_rand(n * in, -2.0f, 2.0f, 91), *hlw = tu_rand(in, 0.5f, 1.5f, 92);
    float *hlb = tu_rand(in, -0.5f, 0.5f, 93), *hw = tu_rand(out * in, -0.2f, 0.2f, 94);
    float *hb = tu_rand(out, -1.0f, 1.0f, 95), *hr = tu_rand(n * out, -1.0f, 1.0f, 96);
    float *hdy = tu_rand(n * out, -1.0f, 1.0f, 97), *hdx = tu_rand(n * in, -1.0f, 1.0f, 98);
    float *hdw = tu_rand(out * in, -1.0f, 1.0f, 99), *hdb = tu_rand(out, -1.0f, 1.0f, 100);
    float *x = bt_up(gpu, hx, n * in), *lw = bt_up(gpu, hlw, in), *lb = bt_up(gpu, hlb, in);
    float *w = bt_up(gpu, hw, out * in), *b = bias ? bt_up(gpu, hb, out) : NULL;
    float *r = residual ? bt_up(gpu, hr, n * out) : NULL, *dy = bt_up(gpu, hdy, n * out);

    /* The fp32 path: the fp32 output, then the fp32 members on it. */
    float *act = bt_poison(gpu, n * in), *mean = bt_poison(gpu, n), *rstd = bt_poison(gpu, n);
    if (producer)
        gpu->gelu_forward(act, x, n * in);
    else
        gpu->layernorm_forward(act, mean, rstd, x, lw, lb, n, in);
    float *y = bt_poison(gpu, n * out);
    if (residual)
        gpu->linear_residual_forward(p, y, act, w, b, r, n, in, out);
    else
        gpu->linear_forward(p, y, act, w, b, n, in, out);
    float *dx = bt_up(gpu, hdx, n * in), *dw = bt_up(gpu, hdw, out * in);
    float *db = bias ? bt_up(gpu, hdb, out) : NULL;
    gpu->linear_backward(p, dx, dw, db, dy, act, w, n, in, out);

    for (int rep = 0; rep < 2; rep++) {
        float *act16 = bt_poison(gpu, n * in), *m16 = bt_poison(gpu, n), *r16 = bt_poison(gpu, n);
        float *y16 = bt_poison(gpu, n * out), *dx16 = bt_up(gpu, hdx, n * in);
        float *dw16 = bt_up(gpu, hdw, out * in), *db16 = bias ? bt_up(gpu, hdb, out) : NULL;
        const uint64_t waits = gpu->host_waits(), allocs = gpu->alloc_count();
        if (producer)
            gpu->gelu_forward16(p, act16, x, n * in);
        else
            gpu->layernorm_forward16(p, act16, m16, r16, x, lw, lb, n, in);
        gpu->linear_forward16(p, y16, act16, w, b, r, n, in, out);
        gpu->linear_backward16(p, dx16, dw16, db16, dy, act16, w, n, in, out);
        CHECK_EQ_INT(gpu->host_waits(), waits);
        if (rep == 1)
            CHECK_EQ_INT(gpu->alloc_count(), allocs);
        CHECK(copy_is_rounded("16-bit copy == rounded fp32 output", p, act16, act, n * in));
        if (!producer) {
            CHECK(same_bits("mean", m16, mean, (size_t)n * sizeof(float)));
            CHECK(same_bits("rstd", r16, rstd, (size_t)n * sizeof(float)));
        }
        CHECK(same_bits("y", y16, y, (size_t)(n * out) * sizeof(float)));
        CHECK(same_bits("dx", dx16, dx, (size_t)(n * in) * sizeof(float)));
        CHECK(same_bits("dw", dw16, dw, (size_t)(out * in) * sizeof(float)));
        if (bias)
            CHECK(same_bits("db", db16, db, (size_t)out * sizeof(float)));
        /* dx alone and dw alone: linear_backward's other branch. */
        float *dxa = bt_up(gpu, hdx, n * in), *dwa = bt_up(gpu, hdw, out * in);
        float *dxb = bt_up(gpu, hdx, n * in), *dwb = bt_up(gpu, hdw, out * in);
        gpu->linear_backward(p, dxa, NULL, NULL, dy, act, w, n, in, out);
        gpu->linear_backward(p, NULL, dwa, NULL, dy, act, w, n, in, out);
        gpu->linear_backward16(p, dxb, NULL, NULL, dy, act16, w, n, in, out);
        gpu->linear_backward16(p, NULL, dwb, NULL, dy, act16, w, n, in, out);
        CHECK(same_bits("dx alone", dxb, dxa, (size_t)(n * in) * sizeof(float)));
        CHECK(same_bits("dw alone", dwb, dwa, (size_t)(out * in) * sizeof(float)));
        float *bufs[] = {act16, m16, r16, y16, dx16, dw16, db16, dxa, dwa, dxb, dwb};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
            gpu->free(bufs[i]);
    }
    float *dbufs[] = {x, lw, lb, w, b, r, dy, act, mean, rstd, y, dx, dw, db};
    for (size_t i = 0; i < sizeof dbufs / sizeof dbufs[0]; i++)
        gpu->free(dbufs[i]);
    float *hbufs[] = {hx, hlw, hlb, hw, hb, hr, hdy, hdx, hdw, hdb};
    for (size_t i = 0; i < sizeof hbufs / sizeof hbufs[0]; i++)
        ddpc_free(hbufs[i]);
}

static void test_members(void)
{
    for (int bf = 0; bf < 2; bf++) {
        const ddpc_precision p = bf ? DDPC_PREC_BF16 : DDPC_PREC_FP16;
        check_layer(p, 0, 1024, 768, 2304, true, false); /* GPT-2's qkv */
        check_layer(p, 0, 1024, 768, 3072, true, false); /* fc */
        check_layer(p, 1, 1024, 3072, 768, true, true);  /* fcproj with its residual */
        check_layer(p, 1, 512, 3072, 768, true, false);  /* fcproj under dropout */
        check_layer(p, 0, 64, 40, 13, true, false);      /* y padded: scratch c */
        check_layer(p, 1, 64, 40, 13, true, true);       /* residual, y padded */
        check_layer(p, 0, 48, 1032, 24, false, false);   /* no bias; the scalar LayerNorm */
    }
}

/* STEPS training steps of a GPT with the members (m[1]) and without (m[0]): the same bits. */
static void check_model(ddpc_precision p, bool ckpt, float dropout)
{
    printf(" gpt %s, checkpointing %s, dropout %.1f\n", ddpc_precision_name(p), ckpt ? "on" : "off",
           (double)dropout);
    static const ddpc_gpt_config gc = {.n_layer = 3, .n_head = 2, .n_embd = 64, .block_size = 32};
    enum { B = 4, T = 32, V = 1003, STEPS = 3 };
    ddpc_model *m[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        ddpc_model_config c = ddpc_model_config_default();
        strcpy(c.type, "gpt");
        c.num_classes = V, c.type_config = &gc, c.backend = k ? gpu : &plain, c.precision = p;
        c.activation_checkpointing = ckpt, c.dropout = dropout;
        CHECK_EQ_INT(ddpc_model_create(&m[k], &c), DDPC_OK);
    }
    if (!m[0] || !m[1])
        return;
    const size_t np = ddpc_model_num_params(m[0]);
    int32_t tok[B * T], tgt[B * T];
    for (int s = 0; s < STEPS; s++) {
        for (int i = 0; i < B * T; i++) {
            tok[i] = (i * 37 + 5 + 11 * s) % V;
            tgt[i] = i == 7 ? -1 : (i * 91 + 3 + s) % V;
        }
        ddpc_model_input in = {.n = B, .tokens = tok, .targets = tgt, .rng_stream = 1 + s};
        ddpc_model_output out[2];
        for (int k = 0; k < 2; k++) {
            ddpc_model_zero_grad(m[k]);
            ddpc_model_expect_backward(m[k], 1.0f);
            CHECK_EQ_INT(ddpc_model_forward(m[k], &in, true, &out[k]), DDPC_OK);
            CHECK_EQ_INT(ddpc_model_backward(m[k], 1.0f), DDPC_OK);
        }
        const gpt_impl *g0 = m[0]->impl, *g1 = m[1]->impl;
        CHECK(!g0->act16);
        CHECK(g1->act16 == (p != DDPC_PREC_FP32));
        printf("  step %d: loss %.9g, without the members %.9g\n", s, (double)out[1].loss,
               (double)out[0].loss);
        CHECK(memcmp(&out[0].loss, &out[1].loss, sizeof(float)) == 0);
        CHECK(same_bits("gradients", ddpc_model_device_grads(m[1]), ddpc_model_device_grads(m[0]),
                        np * sizeof(float)));
        for (int k = 0; k < 2; k++)
            gpu->axpy_f32(ddpc_model_device_params(m[k]), -0.5f, ddpc_model_device_grads(m[k]),
                          (int64_t)np);
        CHECK(same_bits("parameters", ddpc_model_device_params(m[1]),
                        ddpc_model_device_params(m[0]), np * sizeof(float)));
    }
    ddpc_model_destroy(m[0]);
    ddpc_model_destroy(m[1]);
}

static void test_model(void)
{
    for (int ckpt = 0; ckpt < 2; ckpt++) {
        check_model(DDPC_PREC_BF16, ckpt, 0.0f);
        check_model(DDPC_PREC_FP16, ckpt, 0.1f);
    }
    check_model(DDPC_PREC_BF16, false, 0.1f);
    check_model(DDPC_PREC_FP32, false, 0.0f);
}

int main(void)
{
    gpu = bt_cuda_or_skip();
    CHECK(gpu->act16_applies && gpu->layernorm_forward16 && gpu->gelu_forward16 &&
          gpu->linear_forward16 && gpu->linear_backward16);
    plain = *gpu;
    plain.act16_applies = NULL;
    plain.layernorm_forward16 = NULL;
    plain.gelu_forward16 = NULL;
    plain.linear_forward16 = NULL;
    plain.linear_backward16 = NULL;
    RUN_TEST(test_applies);
    RUN_TEST(test_members);
    RUN_TEST(test_model);
    return check_summary();
}
