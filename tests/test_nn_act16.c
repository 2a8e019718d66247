// SPDX-License-Identifier: MIT
/* Where a gpt takes the kernel table's 16-bit activation members (act16_applies and the
 * producers and consumers after it; NULL in the CPU table), checked on the CPU through a test
 * table: the CPU's, plus members made of CPU kernels that keep ln1, ln2 and fch_gelu as bf16/fp16
 * copies at the start of their buffers and poison the rest, so a reader of the fp32 value fails.
 * The CPU's 16-bit linear layer rounds x as the producer did (rounding twice changes nothing), so
 * losses, gradients and updated parameters over three steps equal the CPU table's bit for bit,
 * with and without activation checkpointing and dropout; each member runs exactly as often as the
 * pass needs it; a declining table (fp32, or act16_applies false) runs none of them. */
#include <ddpc/alloc.h>
#include <ddpc/device.h>
#include <ddpc/half.h>
#include <ddpc/kernels.h>
#include <ddpc/models.h>
#include <ddpc/nn.h>
#include <ddpc/rng.h>

#include <stdlib.h>
#include <string.h>

#include "check.h"

static ddpc_kernel_table fake;
static const ddpc_kernel_table *cpu;
static bool accept = true;
static int asks, ln16, gelu16, fwd16, bwd16; /* member calls */

static uint16_t narrow(ddpc_precision p, float x)
{
    return p == DDPC_PREC_BF16 ? ddpc_f32_to_bf16(x) : ddpc_f32_to_f16(x);
}

static float widen(ddpc_precision p, uint16_t h)
{
    return p == DDPC_PREC_BF16 ? ddpc_bf16_to_f32(h) : ddpc_f16_to_f32(h);
}

static float *scratch(int64_t n)
{
    float *t = ddpc_malloc((size_t)n * sizeof(float));
    if (!t)
        abort();
    return t;
}

/* buf (n floats) = t (n) in 16 bits at its start, the rest 0xff (NaN as fp32). */
static void store16(ddpc_precision p, float *buf, const float *t, int64_t n)
{
    uint16_t *h = (uint16_t *)buf;
    for (int64_t i = 0; i < n; i++)
        h[i] = narrow(p, t[i]);
    memset(h + n, 0xff, (size_t)n * sizeof(uint16_t));
}

/* The fp32 x (n) whose rounding buf holds. */
static float *load16(ddpc_precision p, const float *buf, int64_t n)
{
    float *t = scratch(n);
    const uint16_t *h = (const uint16_t *)buf;
    for (int64_t i = 0; i < n; i++)
        t[i] = widen(p, h[i]);
    return t;
}

static bool fake_applies(ddpc_precision p, int64_t rows, int64_t cols)
{
    asks++;
    return accept && (p == DDPC_PREC_BF16 || p == DDPC_PREC_FP16) && rows > 0 && cols > 0;
}

static void fake_ln16(ddpc_precision p, float *y16, float *mean, float *rstd, const float *x,
                      const float *w, const float *b, int64_t rows, int64_t c)
{
    ln16++;
    float *t = scratch(rows * c);
    cpu->layernorm_forward(t, mean, rstd, x, w, b, rows, c);
    store16(p, y16, t, rows * c);
    ddpc_free(t);
}

static void fake_gelu16(ddpc_precision p, float *y16, const float *x, int64_t n)
{
    gelu16++;
    float *t = scratch(n);
    cpu->gelu_forward(t, x, n);
    store16(p, y16, t, n);
    ddpc_free(t);
}

static void fake_fwd16(ddpc_precision p, float *y, const float *x16, const float *w, const float *b,
                       const float *r, int64_t n, int64_t in, int64_t out)
{
    fwd16++;
    float *t = load16(p, x16, n * in);
    if (r)
        cpu->linear_residual_forward(p, y, t, w, b, r, n, in, out);
    else
        cpu->linear_forward(p, y, t, w, b, n, in, out);
    ddpc_free(t);
}

static void fake_bwd16(ddpc_precision p, float *dx, float *dw, float *db, const float *dy,
                       const float *x16, const float *w, int64_t n, int64_t in, int64_t out)
{
    bwd16++;
    float *t = load16(p, x16, n * in);
    cpu->linear_backward(p, dx, dw, db, dy, t, w, n, in, out);
    ddpc_free(t);
}

enum { B = 3, T = 8, V = 13, LAYERS = 3, STEPS = 3 };
static const ddpc_gpt_config small = {
    .n_layer = LAYERS, .n_head = 2, .n_embd = 16, .block_size = T};

static ddpc_model *make(const ddpc_kernel_table *k, ddpc_precision p, bool ckpt, float dropout)
{
    ddpc_model_config c = ddpc_model_config_default();
    strcpy(c.type, "gpt");
    c.num_classes = V, c.type_config = &small, c.backend = k, c.precision = p;
    c.activation_checkpointing = ckpt, c.dropout = dropout;
    ddpc_model *m = NULL;
    CHECK_EQ_INT(ddpc_model_create(&m, &c), DDPC_OK);
    return m;
}

/* STEPS training steps (forward, backward, a plain SGD update) on both models from one seed:
 * losses, gradients and parameters the same bits after each. */
static void check_steps(ddpc_model *m, ddpc_model *ref)
{
    int32_t tok[B * T], tgt[B * T];
    ddpc_rng r = ddpc_rng_make(5, 1);
    const size_t np = ddpc_model_num_params(m);
    CHECK(memcmp(ddpc_model_params(m), ddpc_model_params(ref), np * sizeof(float)) == 0);
    for (int s = 0; s < STEPS; s++) {
        for (int i = 0; i < B * T; i++) {
            tok[i] = (int32_t)ddpc_rng_below(&r, V);
            tgt[i] = i == 3 ? -1 : (int32_t)ddpc_rng_below(&r, V);
        }
        ddpc_model_input in = {.n = B, .tokens = tok, .targets = tgt, .rng_stream = 9 + s};
        ddpc_model *both[2] = {m, ref};
        ddpc_model_output out[2];
        for (int k = 0; k < 2; k++) {
            ddpc_model_zero_grad(both[k]);
            CHECK_EQ_INT(ddpc_model_forward(both[k], &in, true, &out[k]), DDPC_OK);
            CHECK_EQ_INT(ddpc_model_backward(both[k], 1.0f), DDPC_OK);
        }
        CHECK(out[0].loss > 0.0f);
        CHECK(memcmp(&out[0].loss, &out[1].loss, sizeof(float)) == 0);
        CHECK(memcmp(ddpc_model_grads(m), ddpc_model_grads(ref), np * sizeof(float)) == 0);
        for (int k = 0; k < 2; k++) {
            float *p = ddpc_model_params(both[k]);
            const float *g = ddpc_model_grads(both[k]);
            for (size_t i = 0; i < np; i++)
                p[i] -= 0.5f * g[i];
        }
        CHECK(memcmp(ddpc_model_params(m), ddpc_model_params(ref), np * sizeof(float)) == 0);
    }
}

static void test_same_bits(void)
{
    const ddpc_precision precs[2] = {DDPC_PREC_BF16, DDPC_PREC_FP16};
    for (int p = 0; p < 2; p++)
        for (int ckpt = 0; ckpt < 2; ckpt++)
            for (int d = 0; d < 2; d++) {
                const float dropout = d ? 0.2f : 0.0f;
                printf(" %s, checkpointing %s, dropout %.1f\n", ddpc_precision_name(precs[p]),
                       ckpt ? "on" : "off", (double)dropout);
                ddpc_model *m = make(&fake, precs[p], ckpt, dropout);
                ddpc_model *ref = make(cpu, precs[p], ckpt, dropout);
                if (!m || !ref)
                    return;
                asks = ln16 = gelu16 = fwd16 = bwd16 = 0;
                check_steps(m, ref);
                /* Per step: 2 asks (C and 4C); per block 2 LayerNorms, 1 GELU, 3 linear layers
                 * forward and backward; checkpointing recomputes every block but the last up to
                 * its GELU (2 LayerNorms, 1 GELU, 2 linear layers). */
                const int re = ckpt ? LAYERS - 1 : 0;
                CHECK_EQ_INT(asks, 2 * STEPS);
                CHECK_EQ_INT(ln16, STEPS * (2 * LAYERS + 2 * re));
                CHECK_EQ_INT(gelu16, STEPS * (LAYERS + re));
                CHECK_EQ_INT(fwd16, STEPS * (3 * LAYERS + 2 * re));
                CHECK_EQ_INT(bwd16, STEPS * 3 * LAYERS);
                ddpc_model_destroy(m);
                ddpc_model_destroy(ref);
            }
}

/* fp32, or a table that declines: no producer or consumer runs, the CPU table's bits. */
static void test_declined(void)
{
    for (int k = 0; k < 2; k++) {
        const ddpc_precision prec = k ? DDPC_PREC_FP32 : DDPC_PREC_BF16;
        accept = k != 0;
        ddpc_model *m = make(&fake, prec, true, 0.0f), *ref = make(cpu, prec, true, 0.0f);
        if (!m || !ref)
            return;
        asks = ln16 = gelu16 = fwd16 = bwd16 = 0;
        check_steps(m, ref);
        CHECK(asks > 0);
        CHECK_EQ_INT(ln16 + gelu16 + fwd16 + bwd16, 0);
        ddpc_model_destroy(m);
        ddpc_model_destroy(ref);
    }
    accept = true;
}

int main(void)
{
    cpu = ddpc_kernel_table_cpu();
    CHECK(cpu->act16_applies == NULL && cpu->layernorm_forward16 == NULL &&
          cpu->gelu_forward16 == NULL && cpu->linear_forward16 == NULL &&
          cpu->linear_backward16 == NULL);
    fake = *cpu;
    fake.act16_applies = fake_applies;
    fake.layernorm_forward16 = fake_ln16;
    fake.gelu_forward16 = fake_gelu16;
    fake.linear_forward16 = fake_fwd16;
    fake.linear_backward16 = fake_bwd16;
    RUN_TEST(test_same_bits);
    RUN_TEST(test_declined);
    return check_summary();
}
