// SPDX-License-Identifier: MIT
/* gpu_step_profile: where one GPT-2 124M training step's time goes on the GPU (bf16 products,
 * batch B x 1024, AdamW). Part 1 times the step's phases through the public API (median of 5 warm
 * steps); part 2 times every kernel-table member the step calls at the step's exact shapes, on
 * fresh random data, each checked finite once, and ranks them by time x calls per step; part 3
 * times cuBLAS alone on the LM head's three products, on operands already rounded to bf16, and
 * the biased linear layers' members as they ran before their 16-bit passes were fused (reference
 * rows "before: ...", against which the "linear_forward/backward qkv/fc" rows show the gain).
 * Every timing is (synchronize; t0; R calls; synchronize; t1): the host clock, device work only.
 * usage: gpu_step_profile [batch]   (default 16; exit 77 without a GPU) */
#include <ddpc/alloc.h>
#include <ddpc/device.h>
#include <ddpc/engine.h>
#include <ddpc/half.h>
#include <ddpc/models.h>
#include <ddpc/nn.h>
#include <ddpc/rng.h>
#include <ddpc/status.h>
#include <ddpc/timer.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define L 12
#define NH 12
#define C 768
#define T 1024
#define V 50257
#define CHUNK ((size_t)1 << 22) /* floats per host staging chunk */

typedef struct {
    const ddpc_kernel_table *k;
    int64_t B, BT;
    size_t n_params;
    /* (BT, 4C) covers every activation shape a block uses */
    float *x, *y, *dy, *dx, *res;
    float *mean, *rstd;           /* (BT) */
    float *lnw, *lnb;             /* (C) */
    float *w, *dw;                /* (V, C): every linear's weight is a prefix of it; also wte */
    float *bias, *db;             /* (4C) */
    float *qkv, *dqkv, *att, *ws; /* (BT, 3C), (BT, 3C), attention's saved state, workspace */
    float *wpe, *dwpe;            /* (T, C) */
    float *logits, *dlogits;      /* (BT, V) */
    float *losses;                /* (BT) */
    double *sums; /* (3) the fused cross-entropy's loss sum, valid rows (and head16's hits) */
    int32_t *tokens, *targets;    /* (BT) */
    int64_t n_valid;
    float *p, *g, *m, *v;       /* (n_params) AdamW */
    uint8_t *mask;              /* (n_params) */
    uint16_t *x16, *w16, *dl16; /* bf16 copies for cuBLAS alone: (BT, C), (V, C), (BT, V) */
    float *a16; /* (BT, 4C) floats: the act16 members' 16-bit activation (device.h's x16) */
    cublasHandle_t blas;
    bool bad; /* a result was not finite */
} bench;

typedef struct {
    const char *name, *shape;
    double calls, bytes, flops, s_per_call;
} row;

static const ddpc_kernel_table *K;

static void die_status(const char *what)
{
    fprintf(stderr, "gpu_step_profile: %s: %s\n", what, ddpc_last_error());
    exit(1);
}

static void *dev(size_t bytes)
{
    void *p = K->alloc(bytes);
    if (!p) {
        fprintf(stderr, "gpu_step_profile: cannot allocate %.2f GiB on the GPU\n",
                (double)bytes / (1 << 30));
        exit(1);
    }
    return p;
}

/* dst (n) = uniform in [lo, hi): one random host chunk (per call) tiled over dst. */
static void fill_random(float *dst, size_t n, float lo, float hi, uint64_t stream)
{
    static float *h;
    if (!h && !(h = ddpc_malloc(CHUNK * sizeof *h)))
        die_status("host staging");
    ddpc_rng r = ddpc_rng_make(1337, stream);
    for (size_t i = 0; i < CHUNK; i++)
        h[i] = lo + (hi - lo) * ddpc_rng_uniform(&r);
    for (size_t i = 0; i < n; i += CHUNK)
        K->to_device(dst + i, h, (n - i < CHUNK ? n - i : CHUNK) * sizeof *h);
}

/* dst (n) = bf16 of uniform [lo, hi), tiled as fill_random. */
static void fill_random16(uint16_t *dst, size_t n, float lo, float hi, uint64_t stream)
{
    static uint16_t *h;
    if (!h && !(h = ddpc_malloc(CHUNK * sizeof *h)))
        die_status("host staging");
    ddpc_rng r = ddpc_rng_make(1337, stream);
    for (size_t i = 0; i < CHUNK; i++)
        h[i] = ddpc_f32_to_bf16(lo + (hi - lo) * ddpc_rng_uniform(&r));
    for (size_t i = 0; i < n; i += CHUNK)
        K->to_device(dst + i, h, (n - i < CHUNK ? n - i : CHUNK) * sizeof *h);
}

static void fill_ids(int32_t *dst, size_t n, int32_t below, uint64_t stream)
{
    int32_t *h = ddpc_malloc(n * sizeof *h);
    if (!h)
        die_status("host ids");
    ddpc_rng r = ddpc_rng_make(1337, stream);
    for (size_t i = 0; i < n; i++)
        h[i] = (int32_t)ddpc_rng_below(&r, (uint64_t)below);
    K->to_device(dst, h, n * sizeof *h);
    ddpc_free(h);
}

/* Whether src (n, device) is all finite; arrays past 64M floats are checked at their start,
 * middle and end (16M floats each), which covers every row kind a kernel writes. */
static void check_finite(bench *b, const char *what, const float *src, size_t n)
{
    static float *h;
    if (!h && !(h = ddpc_malloc(CHUNK * 4 * sizeof *h)))
        die_status("host check buffer");
    size_t span = CHUNK * 4, starts[3] = {0, n / 2, n > span ? n - span : 0};
    int parts = n > 4 * span ? 3 : 1;
    for (int p = 0; p < parts; p++) {
        size_t lo = parts == 1 ? 0 : starts[p], hi = parts == 1 ? n : lo + span;
        for (size_t i = lo; i < hi; i += span) {
            size_t len = hi - i < span ? hi - i : span;
            K->to_host(h, src + i, len * sizeof *h);
            for (size_t j = 0; j < len; j++)
                if (!isfinite(h[j])) {
                    fprintf(stderr, "NOT FINITE: %s element %zu is %g\n", what, i + j,
                            (double)h[j]);
                    b->bad = true;
                    return;
                }
        }
    }
}

static void check_value(bench *b, const char *what, double v, double lo, double hi)
{
    if (!(v >= lo && v <= hi)) {
        fprintf(stderr, "BAD VALUE: %s returned %g, outside [%g, %g]\n", what, v, lo, hi);
        b->bad = true;
    }
}

/* ---- part 1: the step's phases through the public API ---- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct {
    double zero, fwd, bwd, upd, step;
} phases;

static phases step_phases(int64_t B, size_t *n_params)
{
    ddpc_model_config cfg = ddpc_model_config_default();
    ddpc_gpt_config own = ddpc_gpt_config_default();
    cfg.type_config = &own;
    snprintf(cfg.type, sizeof cfg.type, "gpt");
    own.n_layer = L;
    own.n_head = NH;
    own.n_embd = C;
    own.block_size = T;
    cfg.num_classes = V;
    cfg.precision = DDPC_PREC_BF16;
    cfg.dropout = 0.0f;
    cfg.backend = K;
    cfg.seed = 1337;
    ddpc_model *m = NULL;
    if (ddpc_model_create(&m, &cfg) != DDPC_OK)
        die_status("building GPT-2 124M on the GPU");
    *n_params = ddpc_model_num_params(m);
    ddpc_engine_config ec = ddpc_engine_config_default();
    ec.optim.type = DDPC_OPTIM_ADAMW;
    ec.optim.lr = 6e-4f;
    ec.optim.weight_decay = 0.1f;
    ec.optim.beta1 = 0.9f;
    ec.optim.beta2 = 0.95f;
    ec.optim.eps = 1e-8f;
    ec.grad_clip = 1.0f;
    ddpc_engine *e = NULL;
    if (ddpc_engine_create(m, NULL, 0, 1, &ec, &e) != DDPC_OK)
        die_status("creating the engine");
    size_t bt = (size_t)B * T;
    int32_t *tok = ddpc_malloc((bt + 1) * sizeof *tok);
    if (!tok)
        die_status("host tokens");
    ddpc_rng r = ddpc_rng_make(7, 0);
    for (size_t i = 0; i <= bt; i++)
        tok[i] = (int32_t)ddpc_rng_below(&r, V);
    ddpc_model_input in = {.n = B, .tokens = tok, .targets = tok + 1};
    double t[4][5];
    for (int s = 0; s < 8; s++) {
        ddpc_model_output out;
        ddpc_engine_step_info info;
        K->synchronize();
        double t0 = ddpc_time_now();
        ddpc_engine_zero_grad(e);
        K->synchronize();
        double t1 = ddpc_time_now();
        ddpc_model_expect_backward(m, 1.0f); /* as the engine does: the fused cross-entropy */
        if (ddpc_model_forward(m, &in, true, &out) != DDPC_OK)
            die_status("forward");
        K->synchronize();
        double t2 = ddpc_time_now();
        if (ddpc_model_backward(m, 1.0f) != DDPC_OK)
            die_status("backward");
        K->synchronize();
        double t3 = ddpc_time_now();
        if (ddpc_engine_update(e, &info) != DDPC_OK)
            die_status("update");
        K->synchronize();
        double t4 = ddpc_time_now();
        printf("step %d: loss %.4f grad norm %.4f  %.1f ms%s\n", s, (double)out.loss,
               info.grad_norm, (t4 - t0) * 1e3, s < 3 ? " (warm-up)" : "");
        if (!isfinite(out.loss) || !isfinite(info.grad_norm)) {
            fprintf(stderr, "gpu_step_profile: the step's loss or gradient norm is not finite\n");
            exit(1);
        }
        if (s >= 3) {
            double d[4] = {t1 - t0, t2 - t1, t3 - t2, t4 - t3};
            for (int p = 0; p < 4; p++)
                t[p][s - 3] = d[p];
        }
    }
    double med[4];
    for (int p = 0; p < 4; p++) {
        qsort(t[p], 5, sizeof t[p][0], cmp_double);
        med[p] = t[p][2];
    }
    ddpc_free(tok);
    ddpc_engine_destroy(e);
    ddpc_model_destroy(m);
    K->synchronize();
    return (phases){med[0], med[1], med[2], med[3], med[0] + med[1] + med[2] + med[3]};
}

/* ---- part 2: each member at the step's shapes ---- */

enum {
    OP_FILL_GRADS,
    OP_EMB_FWD,
    OP_LN_FWD,
    OP_LIN_QKV,
    OP_ATT_FWD,
    OP_LIN_PROJ,
    OP_LIN_FC,
    OP_GELU_FWD,
    OP_LIN_FCPROJ,
    OP_LIN_HEAD,
    OP_ARGMAX,
    OP_CE_FWD,
    OP_FILL_DLOGITS,
    OP_CE_BWD,
    OP_CE_FUSED,
    OP_FILL_C,
    OP_FILL_4C,
    OP_LINB_HEAD,
    OP_LN_BWD,
    OP_LINB_FCPROJ,
    OP_GELU_BWD,
    OP_LINB_FC,
    OP_LINB_PROJ,
    OP_ATT_BWD,
    OP_LINB_QKV,
    OP_EMB_BWD,
    OP_SUMSQ,
    OP_SCALE,
    OP_ADAMW,
    OP_GEMM_HEAD_FWD,
    OP_GEMM_HEAD_DX,
    OP_GEMM_HEAD_DW,
    OP_BLAS_HEAD_FWD,
    OP_BLAS_HEAD_DX,
    OP_BLAS_HEAD_DW,
    OP_SEED_GEMM_QKV,
    OP_SEED_GEMM_FC,
    OP_TWO_GEMMS_QKV,
    OP_TWO_GEMMS_FC,
    OP_LN_FWD16,
    OP_LIN16_QKV,
    OP_LIN16_FC,
    OP_GELU_FWD16,
    OP_LIN16_FCPROJ,
    OP_LINB16_FCPROJ,
    OP_LINB16_FC,
    OP_LINB16_QKV,
    OP_HEAD16_FWD,
    OP_HEAD16_BWD,
    OP_COUNT
};

static void blas_check(cublasStatus_t s, const char *what)
{
    if (s != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "gpu_step_profile: cuBLAS %s failed with status %d\n", what, (int)s);
        exit(1);
    }
}

/* Row-major c (m, n) = op(a) (m, k) op(b) (k, n) + beta c on bf16 operands, fp32 out, fp32
 * accumulate: ddpc's own cublasGemmEx call after its rounding (m and n swap, column-major). */
static void blas_bf16(bench *b, bool ta, bool tb, int m, int n, int k, const void *a, int lda,
                      const void *bb, int ldb, float beta, float *c, int ldc)
{
    const float one = 1.0f;
    blas_check(cublasGemmEx(b->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                            n, m, k, &one, bb, CUDA_R_16BF, ldb, a, CUDA_R_16BF, lda, &beta, c,
                            CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "GemmEx");
}

/* The biased 16-bit linear forward as it ran before the bias moved into cuBLASLt's epilogue: y
 * seeded with the bias (linear_forward with in = 0 is the seed alone: its product has k = 0 and
 * beta = 1), then the product adding onto it. */
static void seed_gemm(bench *b, int64_t out)
{
    const ddpc_kernel_table *k = b->k;
    k->linear_forward(DDPC_PREC_BF16, b->y, b->x, b->w, b->bias, b->BT, 0, out);
    k->gemm(DDPC_PREC_BF16, DDPC_NO_TRANS, DDPC_TRANS, b->BT, out, C, 1.0f, b->x, C, b->w, C, 1.0f,
            b->y, out);
}

/* The 16-bit linear backward as it ran before dy was rounded once for both products: two gemms
 * (each rounding dy) and the bias sum alone. */
static void two_gemms(bench *b, const float *dy, int64_t out)
{
    const ddpc_kernel_table *k = b->k;
    const ddpc_precision bf = DDPC_PREC_BF16;
    int64_t BT = b->BT;
    k->gemm(bf, DDPC_NO_TRANS, DDPC_NO_TRANS, BT, C, out, 1.0f, dy, out, b->w, C, 1.0f, b->dx, C);
    k->gemm(bf, DDPC_TRANS, DDPC_NO_TRANS, out, C, BT, 1.0f, dy, out, b->x, C, 1.0f, b->dw, C);
    k->linear_backward(bf, NULL, NULL, b->db, dy, NULL, NULL, BT, C, out);
}

static void op_run(bench *b, int op)
{
    const ddpc_kernel_table *k = b->k;
    const ddpc_precision bf = DDPC_PREC_BF16;
    int64_t BT = b->BT, B = b->B;
    switch (op) {
    /* zero_grad's fill, into dlogits (which the step zeroes anyway) so that g stays random */
    case OP_FILL_GRADS:
        k->fill_f32(b->dlogits, 0.0f, (int64_t)b->n_params);
        break;
    case OP_EMB_FWD:
        k->embedding_forward(b->y, b->tokens, b->w, b->wpe, B, T, C);
        break;
    case OP_LN_FWD:
        k->layernorm_forward(b->y, b->mean, b->rstd, b->x, b->lnw, b->lnb, BT, C);
        break;
    case OP_LIN_QKV:
        k->linear_forward(bf, b->y, b->x, b->w, b->bias, BT, C, 3 * C);
        break;
    case OP_ATT_FWD:
        k->attention_forward(bf, b->y, b->att, b->qkv, B, T, C, NH, b->ws);
        break;
    case OP_LIN_PROJ:
        k->linear_residual_forward(bf, b->y, b->x, b->w, b->bias, b->res, BT, C, C);
        break;
    case OP_LIN_FC:
        k->linear_forward(bf, b->y, b->x, b->w, b->bias, BT, C, 4 * C);
        break;
    case OP_GELU_FWD:
        k->gelu_forward(b->y, b->x, BT * 4 * C);
        break;
    case OP_LIN_FCPROJ:
        k->linear_residual_forward(bf, b->y, b->x, b->w, b->bias, b->res, BT, 4 * C, C);
        break;
    case OP_LIN_HEAD:
        k->linear_forward(bf, b->logits, b->x, b->w, NULL, BT, C, V);
        break;
    case OP_ARGMAX: {
        int64_t hits = k->argmax_correct(b->logits, b->targets, BT, V, -1);
        check_value(b, "argmax_correct", (double)hits, 0, (double)BT);
        break;
    }
    case OP_CE_FWD: {
        float loss = k->cross_entropy_forward(b->logits, b->losses, b->logits, b->targets, BT, V,
                                              -1, &b->n_valid);
        check_value(b, "cross_entropy_forward", loss, 0, 100);
        break;
    }
    case OP_FILL_DLOGITS:
        k->fill_f32(b->dlogits, 0.0f, BT * V);
        break;
    case OP_CE_BWD:
        k->cross_entropy_backward(b->dlogits, b->logits, b->targets, BT, V, -1, b->n_valid, 1.0f);
        break;
    case OP_CE_FUSED: /* from the probabilities over the logits: any finite rows time the same */
        k->cross_entropy_fused(b->sums, b->dlogits, b->losses, b->logits, b->targets, BT, V, -1,
                               1.0f);
        break;
    case OP_FILL_C:
        k->fill_f32(b->dx, 0.0f, BT * C);
        break;
    case OP_FILL_4C:
        k->fill_f32(b->dx, 0.0f, BT * 4 * C);
        break;
    case OP_LINB_HEAD:
        k->linear_backward(bf, b->dx, b->dw, NULL, b->dlogits, b->x, b->w, BT, C, V);
        break;
    case OP_LN_BWD:
        k->layernorm_backward(b->dx, b->dw, b->db, b->dy, b->x, b->lnw, b->mean, b->rstd, BT, C);
        break;
    case OP_LINB_FCPROJ:
        k->linear_backward(bf, b->dx, b->dw, b->db, b->dy, b->x, b->w, BT, 4 * C, C);
        break;
    case OP_GELU_BWD:
        k->gelu_backward(b->dx, b->dy, b->x, BT * 4 * C);
        break;
    case OP_LINB_FC:
        k->linear_backward(bf, b->dx, b->dw, b->db, b->dy, b->x, b->w, BT, C, 4 * C);
        break;
    case OP_LINB_PROJ:
        k->linear_backward(bf, b->dx, b->dw, b->db, b->dy, b->x, b->w, BT, C, C);
        break;
    case OP_ATT_BWD:
        k->attention_backward(bf, b->dqkv, b->dy, b->qkv, b->att, B, T, C, NH, b->ws);
        break;
    case OP_LINB_QKV:
        k->linear_backward(bf, b->dx, b->dw, b->db, b->dqkv, b->x, b->w, BT, C, 3 * C);
        break;
    case OP_EMB_BWD:
        k->embedding_backward(b->dw, b->dwpe, b->dy, b->tokens, B, T, C);
        break;
    case OP_SUMSQ: {
        double s = k->sumsq(b->g, (int64_t)b->n_params);
        check_value(b, "sumsq", s, 0, 1e30);
        break;
    }
    case OP_SCALE:
        k->scale(b->g, (int64_t)b->n_params, 0.9999f);
        break;
    case OP_ADAMW: {
        ddpc_adamw_coef c = {.b1 = 0.9f,
                             .b2 = 0.95f,
                             .a1 = 0.1f,
                             .a2 = 0.05f,
                             .eps = 1e-8f,
                             .neg_step = -6e-4f,
                             .bc2_sqrt = 0.2236f,
                             .decay = 1.0f - 6e-5f};
        k->adamw_update(b->p, b->g, b->m, b->v, b->mask, (int64_t)b->n_params, &c);
        break;
    }
    /* The candidate act16's members (they run whether or not it is named; act16_applies alone
     * asks): LayerNorm then GELU write a16's 16-bit copy, the linear layers read it. */
    case OP_LN_FWD16:
        k->layernorm_forward16(bf, b->a16, b->mean, b->rstd, b->x, b->lnw, b->lnb, BT, C);
        break;
    case OP_LIN16_QKV:
        k->linear_forward16(bf, b->y, b->a16, b->w, b->bias, NULL, BT, C, 3 * C);
        break;
    case OP_LIN16_FC:
        k->linear_forward16(bf, b->y, b->a16, b->w, b->bias, NULL, BT, C, 4 * C);
        break;
    case OP_GELU_FWD16:
        k->gelu_forward16(bf, b->a16, b->x, BT * 4 * C);
        break;
    case OP_LIN16_FCPROJ:
        k->linear_forward16(bf, b->y, b->a16, b->w, b->bias, b->res, BT, 4 * C, C);
        break;
    case OP_LINB16_FCPROJ:
        k->linear_backward16(bf, b->dx, b->dw, b->db, b->dy, b->a16, b->w, BT, 4 * C, C);
        break;
    case OP_LINB16_FC:
        k->linear_backward16(bf, b->dx, b->dw, b->db, b->dy, b->a16, b->w, BT, C, 4 * C);
        break;
    case OP_LINB16_QKV:
        k->linear_backward16(bf, b->dx, b->dw, b->db, b->dqkv, b->a16, b->w, BT, C, 3 * C);
        break;
    /* The candidate head16 (DDPC_CUDA_CANDIDATES=head16; otherwise its forward declines at once
     * and its backward reads whatever bits the logits hold): the product, argmax and fused loss
     * over 16-bit logits, then the backward's two products from the 16-bit gradient. Last in
     * the enum: the forward overwrites the logits with 16-bit values. */
    case OP_HEAD16_FWD:
        (void)k->head16_forward(bf, b->sums, b->logits, (size_t)(BT * V) * sizeof(float), b->losses,
                                b->x, b->w, b->targets, BT, C, V, -1, 1.0f);
        break;
    case OP_HEAD16_BWD:
        k->head16_backward(bf, b->dx, b->dw, b->logits, b->x, b->w, BT, C, V);
        break;
    case OP_GEMM_HEAD_FWD:
        k->gemm(bf, DDPC_NO_TRANS, DDPC_TRANS, BT, V, C, 1.0f, b->x, C, b->w, C, 0.0f, b->logits,
                V);
        break;
    case OP_GEMM_HEAD_DX:
        k->gemm(bf, DDPC_NO_TRANS, DDPC_NO_TRANS, BT, C, V, 1.0f, b->dlogits, V, b->w, C, 1.0f,
                b->dx, C);
        break;
    case OP_GEMM_HEAD_DW:
        k->gemm(bf, DDPC_TRANS, DDPC_NO_TRANS, V, C, BT, 1.0f, b->dlogits, V, b->x, C, 1.0f, b->dw,
                C);
        break;
    case OP_BLAS_HEAD_FWD:
        blas_bf16(b, false, true, (int)BT, V, C, b->x16, C, b->w16, C, 0.0f, b->logits, V);
        break;
    case OP_BLAS_HEAD_DX:
        blas_bf16(b, false, false, (int)BT, C, V, b->dl16, V, b->w16, C, 1.0f, b->dx, C);
        break;
    case OP_BLAS_HEAD_DW:
        blas_bf16(b, true, false, V, C, (int)BT, b->dl16, V, b->x16, C, 1.0f, b->dw, C);
        break;
    case OP_SEED_GEMM_QKV:
        seed_gemm(b, 3 * C);
        break;
    case OP_SEED_GEMM_FC:
        seed_gemm(b, 4 * C);
        break;
    case OP_TWO_GEMMS_QKV:
        two_gemms(b, b->dqkv, 3 * C);
        break;
    case OP_TWO_GEMMS_FC:
        two_gemms(b, b->dy, 4 * C);
        break;
    }
}

/* What op writes (checked finite after its first call). */
static void op_check(bench *b, int op, const char *name)
{
    size_t BT = (size_t)b->BT;
    switch (op) {
    case OP_FILL_GRADS:
        check_finite(b, name, b->dlogits, b->n_params);
        break;
    case OP_SUMSQ:
    case OP_SCALE:
        check_finite(b, name, b->g, b->n_params);
        break;
    case OP_ADAMW:
        check_finite(b, name, b->p, b->n_params);
        check_finite(b, name, b->v, b->n_params);
        break;
    case OP_EMB_FWD:
    case OP_LN_FWD:
    case OP_LIN_PROJ:
    case OP_LIN_FCPROJ:
    case OP_LIN16_FCPROJ:
        check_finite(b, name, b->y, BT * C);
        break;
    case OP_ATT_FWD:
        check_finite(b, name, b->y, BT * C);
        check_finite(b, name, b->att, K->attention_saved_floats(DDPC_PREC_BF16, b->B, T, C, NH));
        break;
    case OP_LIN_QKV:
    case OP_SEED_GEMM_QKV:
    case OP_LIN16_QKV:
        check_finite(b, name, b->y, BT * 3 * C);
        break;
    case OP_LIN_FC:
    case OP_SEED_GEMM_FC:
    case OP_LIN16_FC:
    case OP_GELU_FWD:
        check_finite(b, name, b->y, BT * 4 * C);
        break;
    case OP_LIN_HEAD:
    case OP_CE_FWD:
    case OP_GEMM_HEAD_FWD:
    case OP_BLAS_HEAD_FWD:
        check_finite(b, name, b->logits, BT * V);
        break;
    case OP_FILL_DLOGITS:
    case OP_CE_BWD:
    case OP_CE_FUSED:
        check_finite(b, name, b->dlogits, BT * V);
        break;
    case OP_FILL_C:
    case OP_LN_BWD:
    case OP_GEMM_HEAD_DX:
    case OP_BLAS_HEAD_DX:
        check_finite(b, name, b->dx, BT * C);
        break;
    case OP_FILL_4C:
    case OP_GELU_BWD:
        check_finite(b, name, b->dx, BT * 4 * C);
        break;
    case OP_LINB_HEAD:
    case OP_LINB_FCPROJ:
    case OP_LINB_FC:
    case OP_LINB_PROJ:
    case OP_LINB_QKV:
    case OP_TWO_GEMMS_QKV:
    case OP_TWO_GEMMS_FC:
    case OP_LINB16_FCPROJ:
    case OP_LINB16_FC:
    case OP_LINB16_QKV:
        check_finite(b, name, b->dx, BT * 4 * C);
        check_finite(b, name, b->dw, (size_t)V * C);
        break;
    case OP_GEMM_HEAD_DW:
    case OP_BLAS_HEAD_DW:
    case OP_EMB_BWD:
        check_finite(b, name, b->dw, (size_t)V * C);
        break;
    case OP_ATT_BWD:
        check_finite(b, name, b->dqkv, BT * 3 * C);
        break;
    case OP_ARGMAX:
        break; /* its count was range-checked */
    case OP_LN_FWD16:
    case OP_GELU_FWD16:
        break; /* 16 bits, in a layout of the table's: the products after them are checked */
    }
}

static void sync_all(void)
{
    K->synchronize();
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        fprintf(stderr, "gpu_step_profile: CUDA error %s\n", cudaGetErrorString(e));
        exit(1);
    }
}

/* Seconds per call: one call (checked), one timed call to size R for ~0.15 s, then R calls. */
static double time_op(bench *b, int op, const char *name)
{
    op_run(b, op);
    sync_all();
    op_check(b, op, name);
    sync_all();
    double t0 = ddpc_time_now();
    op_run(b, op);
    sync_all();
    double once = ddpc_time_now() - t0;
    int reps = once > 0 ? (int)(0.15 / once) : 50;
    reps = reps < 3 ? 3 : reps > 50 ? 50 : reps;
    t0 = ddpc_time_now();
    for (int i = 0; i < reps; i++)
        op_run(b, op);
    sync_all();
    return (ddpc_time_now() - t0) / reps;
}

static void bench_alloc(bench *b)
{
    size_t BT = (size_t)b->BT, act = BT * 4 * C, f = sizeof(float);
    b->x = dev(act * f), b->y = dev(act * f), b->dy = dev(act * f), b->dx = dev(act * f);
    b->res = dev(act * f);
    b->mean = dev(BT * f), b->rstd = dev(BT * f), b->losses = dev(BT * f);
    b->sums = dev(3 * sizeof(double));
    b->lnw = dev(C * f), b->lnb = dev(C * f), b->bias = dev(4 * C * f), b->db = dev(4 * C * f);
    b->w = dev((size_t)V * C * f), b->dw = dev((size_t)V * C * f);
    b->qkv = dev(BT * 3 * C * f), b->dqkv = dev(BT * 3 * C * f);
    b->att = dev(K->attention_saved_floats(DDPC_PREC_BF16, b->B, T, C, NH) * f);
    b->ws = dev((K->attention_workspace_floats(DDPC_PREC_BF16, b->B, T, C, NH) + 1) * f);
    b->wpe = dev((size_t)T * C * f), b->dwpe = dev((size_t)T * C * f);
    b->logits = dev(BT * V * f), b->dlogits = dev(BT * V * f);
    b->tokens = dev(BT * sizeof(int32_t)), b->targets = dev(BT * sizeof(int32_t));
    size_t n = b->n_params;
    b->p = dev(n * f), b->g = dev(n * f), b->m = dev(n * f), b->v = dev(n * f), b->mask = dev(n);
    b->x16 = dev(BT * C * 2), b->w16 = dev((size_t)V * C * 2), b->dl16 = dev(BT * V * 2);
    b->a16 = dev(act * f);

    fill_random(b->x, act, -2.0f, 2.0f, 1), fill_random(b->dy, act, -1e-3f, 1e-3f, 2);
    fill_random(b->res, act, -1.0f, 1.0f, 3), fill_random(b->y, act, -1.0f, 1.0f, 4);
    fill_random(b->dx, act, -1e-3f, 1e-3f, 5);
    fill_random(b->lnw, C, 0.8f, 1.2f, 6), fill_random(b->lnb, C, -0.1f, 0.1f, 7);
    fill_random(b->bias, 4 * C, -0.02f, 0.02f, 8), fill_random(b->db, 4 * C, -1e-3f, 1e-3f, 9);
    fill_random(b->w, (size_t)V * C, -0.04f, 0.04f, 10);
    fill_random(b->dw, (size_t)V * C, -1e-3f, 1e-3f, 11);
    fill_random(b->qkv, BT * 3 * C, -2.0f, 2.0f, 12), fill_random(b->dqkv, BT * 3 * C, -1, 1, 13);
    fill_random(b->wpe, (size_t)T * C, -0.02f, 0.02f, 14);
    fill_random(b->dwpe, (size_t)T * C, -1e-3f, 1e-3f, 15);
    fill_random(b->logits, BT * V, -4.0f, 4.0f, 16);
    fill_random(b->dlogits, BT * V, -1e-5f, 1e-5f, 17);
    fill_random(b->p, n, -0.05f, 0.05f, 18), fill_random(b->g, n, -1e-3f, 1e-3f, 19);
    fill_random(b->m, n, -1e-4f, 1e-4f, 20), fill_random(b->v, n, 0.0f, 1e-6f, 21);
    fill_random(b->mean, BT, -0.1f, 0.1f, 22), fill_random(b->rstd, BT, 0.5f, 2.0f, 23);
    fill_ids(b->tokens, BT, V, 24), fill_ids(b->targets, BT, V, 25);
    uint8_t *h = ddpc_malloc(n);
    if (!h)
        die_status("host mask");
    for (size_t i = 0; i < n; i++)
        h[i] = (uint8_t)(i % 3 != 0);
    K->to_device(b->mask, h, n);
    ddpc_free(h);
    fill_random16(b->x16, BT * C, -2.0f, 2.0f, 26);
    fill_random16(b->w16, (size_t)V * C, -0.04f, 0.04f, 27);
    fill_random16(b->dl16, BT * V, -1e-5f, 1e-5f, 28);
    b->n_valid = (int64_t)BT;
    sync_all();
}

static int cmp_row(const void *a, const void *b)
{
    const row *x = a, *y = b;
    double p = x->calls * x->s_per_call, q = y->calls * y->s_per_call;
    return (p < q) - (p > q);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* rows reach the log even if a later call aborts */
    int64_t B = argc > 1 ? atoll(argv[1]) : 16;
    if (B < 1 || B > 64) {
        fprintf(stderr, "usage: gpu_step_profile [batch in 1..64]\n");
        return 2;
    }
    if (ddpc_device_select(DDPC_DEVICE_CUDA, 0, &K) != DDPC_OK) {
        printf("gpu_step_profile: SKIPPED: %s\n", ddpc_last_error());
        return 77;
    }
    printf("device: %s\nGPT-2 124M, bf16 products, batch %lld x %d, AdamW\n",
           ddpc_device_describe(K), (long long)B, T);
    double start = ddpc_time_now();
    bench b = {.k = K, .B = B, .BT = B * T};
    phases ph = step_phases(B, &b.n_params);
    printf("\n== phases (median of 5 warm steps, ms): zero_grad %.2f  forward %.2f  backward %.2f"
           "  update %.2f  step (sum of medians) %.2f\n",
           ph.zero * 1e3, ph.fwd * 1e3, ph.bwd * 1e3, ph.upd * 1e3, ph.step * 1e3);

    bench_alloc(&b);
    blas_check(cublasCreate(&b.blas), "Create");
    double bt = (double)b.BT, n = (double)b.n_params, f = 4.0, l = L;
    /* The fused (flash) kernels save the logsumexps and a copy of out instead of (B, NH, T, T):
     * the least they move is qkv, out, its copy and lse forward; qkv, dout, the copy, lse, D
     * and dqkv backward. */
    const bool flash =
        K->attention_saved_floats(DDPC_PREC_BF16, B, T, C, NH) < (size_t)B * NH * T * T;
    const double att = flash ? (double)B * NH * T : (double)B * NH * T * T;
    const double att_fwd = flash ? f * (bt * 5 * C + att) : f * (bt * 4 * C + att);
    const double att_bwd = flash ? f * (bt * 8 * C + 3 * att) : f * (bt * 7 * C + att);
    const char *att_shape = flash ? "flash hs 64" : "B,NH,T,T";
    printf("attention: %s\n", flash ? "the fused (flash) kernels, bf16 tensor cores"
                                    : "probabilities materialised (B, NH, T, T)");
#define LINF(in, out) (2.0 * bt * (in) * (out))
#define LINFB(in, out, ib) (f * (bt * (in) + (double)(in) * (out) + bt * (out)) + (ib))
    /* backward: reads dy, x, w; dx and dw are read and written (they accumulate) */
#define LINBB(in, out) (f * (bt * (out) + 3 * bt * (in) + 3.0 * (in) * (out)))
    /* {op, name, shape, calls per step, bytes one call must move, flops} */
    row rows[OP_COUNT] = {
        [OP_FILL_GRADS] = {"fill_f32 (zero_grad)", "124M", 1, f * n, 0, 0},
        [OP_EMB_FWD] = {"embedding_forward", "BT x C", 1, f * (2 * bt * C + T * C) + 4 * bt, 0, 0},
        [OP_LN_FWD] = {"layernorm_forward", "BT x C", 2 * l + 1, f * (2 * bt * C + 2 * bt + 2 * C),
                       0, 0},
        [OP_LIN_QKV] = {"linear_forward qkv", "C->3C", l, LINFB(C, 3 * C, f * 3 * C),
                        LINF(C, 3 * C), 0},
        [OP_ATT_FWD] = {"attention_forward", att_shape, l, att_fwd, 4.0 * B * T * T * C, 0},
        [OP_LIN_PROJ] = {"linear_residual_fwd proj", "C->C +r", l, LINFB(C, C, f * bt * C),
                         LINF(C, C), 0},
        [OP_LIN_FC] = {"linear_forward fc", "C->4C", l, LINFB(C, 4 * C, 0), LINF(C, 4 * C), 0},
        [OP_GELU_FWD] = {"gelu_forward", "BT x 4C", l, f * 2 * bt * 4 * C, 0, 0},
        [OP_LIN_FCPROJ] = {"linear_residual_fwd fcproj", "4C->C +r", l, LINFB(4 * C, C, f * bt * C),
                           LINF(4 * C, C), 0},
        [OP_LIN_HEAD] = {"linear_forward LM head", "C->V", 1, LINFB(C, V, 0), LINF(C, V), 0},
        [OP_ARGMAX] = {"argmax_correct", "BT x V", 1, f * bt * V, 0, 0},
        /* A training step runs the fused member; the three it replaces are reference rows. */
        [OP_CE_FWD] = {"  cross_entropy_forward", "BT x V", 0, f * 2 * bt * V, 0, 0},
        [OP_FILL_DLOGITS] = {"  fill_f32 dlogits", "BT x V", 0, f * bt * V, 0, 0},
        [OP_CE_BWD] = {"  cross_entropy_backward", "BT x V", 0, f * 3 * bt * V, 0, 0},
        [OP_CE_FUSED] = {"cross_entropy_fused", "BT x V", 1, f * 2 * bt * V, 0, 0},
        [OP_FILL_C] = {"fill_f32 dln/dres/datty", "BT x C", 3 * l + 2, f * bt * C, 0, 0},
        [OP_FILL_4C] = {"fill_f32 dfch", "BT x 4C", l, f * bt * 4 * C, 0, 0},
        [OP_LINB_HEAD] = {"linear_backward LM head", "C->V", 1,
                          f * (2 * bt * C + bt * V + 3.0 * V * C), 2 * LINF(C, V), 0},
        /* reads dy, x, mean, rstd, w; dx, dw, db are read and written (they accumulate) */
        [OP_LN_BWD] = {"layernorm_backward", "BT x C", 2 * l + 1, f * (4 * bt * C + 2 * bt + 5 * C),
                       0, 0},
        [OP_LINB_FCPROJ] = {"linear_backward fcproj", "4C->C", l, LINBB(4 * C, C),
                            2 * LINF(4 * C, C), 0},
        [OP_GELU_BWD] = {"gelu_backward", "BT x 4C", l, f * 3 * bt * 4 * C, 0, 0},
        [OP_LINB_FC] = {"linear_backward fc", "C->4C", l, LINBB(C, 4 * C), 2 * LINF(C, 4 * C), 0},
        [OP_LINB_PROJ] = {"linear_backward proj", "C->C", l, LINBB(C, C), 2 * LINF(C, C), 0},
        [OP_ATT_BWD] = {"attention_backward", att_shape, l, att_bwd, 8.0 * B * T * T * C, 0},
        [OP_LINB_QKV] = {"linear_backward qkv", "C->3C", l, LINBB(C, 3 * C), 2 * LINF(C, 3 * C), 0},
        [OP_EMB_BWD] = {"embedding_backward", "BT x C", 1, f * (3 * bt * C + 2.0 * T * C), 0, 0},
        [OP_SUMSQ] = {"sumsq (grad norm)", "124M", 1, f * n, 0, 0},
        [OP_SCALE] = {"scale (clip)", "124M", 1, f * 2 * n, 0, 0},
        [OP_ADAMW] = {"adamw_update", "124M", 1, n * (7 * f + 1), 0, 0},
        [OP_GEMM_HEAD_FWD] = {"  k->gemm bf16 head fwd", "BTxC @ CxV", 0, LINFB(C, V, 0),
                              LINF(C, V), 0},
        [OP_GEMM_HEAD_DX] = {"  k->gemm bf16 head dx", "BTxV @ VxC", 0,
                             f * (bt * V + V * C + 2 * bt * C), LINF(C, V), 0},
        [OP_GEMM_HEAD_DW] = {"  k->gemm bf16 head dw", "VxBT @ BTxC", 0,
                             f * (bt * V + bt * C + 2.0 * V * C), LINF(C, V), 0},
        [OP_BLAS_HEAD_FWD] = {"  cuBLAS alone head fwd", "bf16 in", 0,
                              2 * (bt * C + V * C) + f * bt * V, LINF(C, V), 0},
        [OP_BLAS_HEAD_DX] = {"  cuBLAS alone head dx", "bf16 in", 0,
                             2 * (bt * V + V * C) + f * 2 * bt * C, LINF(C, V), 0},
        [OP_BLAS_HEAD_DW] = {"  cuBLAS alone head dw", "bf16 in", 0,
                             2 * (bt * V + bt * C) + f * 2.0 * V * C, LINF(C, V), 0},
        /* The linear members as they ran before (same least bytes as their rows above): against
         * "linear_forward qkv/fc" and "linear_backward qkv/fc", the time the new paths save. */
        [OP_SEED_GEMM_QKV] = {"  before: seed+gemm qkv", "C->3C", 0, LINFB(C, 3 * C, f * 3 * C),
                              LINF(C, 3 * C), 0},
        [OP_SEED_GEMM_FC] = {"  before: seed+gemm fc", "C->4C", 0, LINFB(C, 4 * C, 0),
                             LINF(C, 4 * C), 0},
        [OP_TWO_GEMMS_QKV] = {"  before: 2 gemms+db qkv", "C->3C", 0, LINBB(C, 3 * C),
                              2 * LINF(C, 3 * C), 0},
        [OP_TWO_GEMMS_FC] = {"  before: 2 gemms+db fc", "C->4C", 0, LINBB(C, 4 * C),
                             2 * LINF(C, 4 * C), 0},
        /* Against "layernorm_forward", "gelu_forward" and the qkv, fc and fcproj linear rows:
         * what the candidate act16 saves (bytes: its activation written and read in 16 bits). */
        [OP_LN_FWD16] = {"  act16 layernorm fwd", "BT x C", 0,
                         (f + 2) * bt * C + f * (2 * bt + 2 * C), 0, 0},
        [OP_LIN16_QKV] = {"  act16 linear fwd qkv", "C->3C", 0,
                          LINFB(C, 3 * C, f * 3 * C) - (f - 2) * bt * C, LINF(C, 3 * C), 0},
        [OP_LIN16_FC] = {"  act16 linear fwd fc", "C->4C", 0, LINFB(C, 4 * C, 0) - (f - 2) * bt * C,
                         LINF(C, 4 * C), 0},
        [OP_GELU_FWD16] = {"  act16 gelu fwd", "BT x 4C", 0, (f + 2) * bt * 4 * C, 0, 0},
        [OP_LIN16_FCPROJ] = {"  act16 linear fwd fcproj", "4C->C +r", 0,
                             LINFB(4 * C, C, f * bt * C) - (f - 2) * bt * 4 * C, LINF(4 * C, C), 0},
        [OP_LINB16_FCPROJ] = {"  act16 linear bwd fcproj", "4C->C", 0,
                              LINBB(4 * C, C) - (f - 2) * bt * 4 * C, 2 * LINF(4 * C, C), 0},
        [OP_LINB16_FC] = {"  act16 linear bwd fc", "C->4C", 0, LINBB(C, 4 * C) - (f - 2) * bt * C,
                          2 * LINF(C, 4 * C), 0},
        [OP_LINB16_QKV] = {"  act16 linear bwd qkv", "C->3C", 0, LINBB(C, 3 * C) - (f - 2) * bt * C,
                           2 * LINF(C, 3 * C), 0},
        /* Against "linear_forward LM head" + argmax + cross_entropy_fused, and "linear_backward
         * LM head": what the candidate head16 saves (bytes: x and w in fp32, 16-bit logits
         * written, read and written again; the backward's dlogits read in 16 bits). */
        [OP_HEAD16_FWD] = {"  head16_forward (cand.)", "C->V + CE", 0,
                           f * (bt * C + (double)V * C) + 6.0 * bt * V, LINF(C, V), 0},
        [OP_HEAD16_BWD] = {"  head16_backward (cand.)", "C->V", 0,
                           f * (3 * bt * C + 3.0 * V * C) + 2.0 * bt * V, 2 * LINF(C, V), 0},
    };
    /* In enum order: each op's inputs were written by the ops before it (att by attention
     * forward, probs by cross_entropy_forward, dqkv by attention backward). */
    for (int op = 0; op < OP_COUNT; op++)
        rows[op].s_per_call = time_op(&b, op, rows[op].name);
    qsort(rows, OP_COUNT, sizeof rows[0], cmp_row);
    double sum = 0;
    printf(
        "\n== kernel-table members at one step's shapes (calls 0: reference rows, not summed)\n");
    printf("%-28s %-11s %5s %10s %9s %6s %9s %8s %8s\n", "member", "shape", "calls", "us/call",
           "ms/step", "%step", "MB/call", "GB/s", "TFLOP/s");
    for (int i = 0; i < OP_COUNT; i++) {
        const row *r = &rows[i];
        double ms = r->calls * r->s_per_call * 1e3;
        sum += ms;
        char tf[16] = "-";
        if (r->flops > 0)
            snprintf(tf, sizeof tf, "%.1f", r->flops / r->s_per_call / 1e12);
        printf("%-28s %-11s %5.0f %10.1f %9.2f %6.1f %9.1f %8.0f %8s\n", r->name, r->shape,
               r->calls, r->s_per_call * 1e6, ms, 100 * ms / (ph.step * 1e3), r->bytes / 1e6,
               r->bytes / r->s_per_call / 1e9, tf);
    }
    printf("\nsum of members x calls: %.2f ms; measured step: %.2f ms (forward %.2f, backward "
           "%.2f, update %.2f, zero_grad %.2f); unaccounted: %.2f ms\n",
           sum, ph.step * 1e3, ph.fwd * 1e3, ph.bwd * 1e3, ph.upd * 1e3, ph.zero * 1e3,
           ph.step * 1e3 - sum);
    printf("(bytes: the least each call must read and write in fp32; attention FLOPs count the "
           "full T x T products, causal or not; the cuBLAS-alone rows take operands already in "
           "bf16, so k->gemm minus them is the rounding into scratch)\n");
    cublasDestroy(b.blas);
    printf("total %.1f s; %s\n", ddpc_time_now() - start,
           b.bad ? "FAILED: a result was not finite (above)" : "every result finite");
    return b.bad ? 1 : 0;
}
