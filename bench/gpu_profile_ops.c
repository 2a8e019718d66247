// SPDX-License-Identifier: MIT
/* gpu_step_profile's members: how each op (gpu_profile.h's enum) calls the kernel table at one
 * GPT-2 124M step's shapes, what it writes (checked finite once), and its row: name, shape, calls
 * per step, the least bytes it must move and its FLOPs. Each op is one case of one group below;
 * op_run and op_check ask the groups in turn, so an op is named once in each. */
#include "gpu_profile.h"

#include <ddpc/nn.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void blas_check(cublasStatus_t s, const char *what)
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

/* ---- op_run's groups: each runs op and returns true if op is one of its members ---- */

/* Fills, embedding, LayerNorm and GELU. */
static bool run_elementwise(bench *b, int op)
{
    const ddpc_kernel_table *k = b->k;
    int64_t BT = b->BT, B = b->B;
    switch (op) {
    /* zero_grad's fill, into dlogits (which the step zeroes anyway) so that g stays random */
    case OP_FILL_GRADS:
        k->fill_f32(b->dlogits, 0.0f, (int64_t)b->n_params);
        return true;
    case OP_EMB_FWD:
        k->embedding_forward(b->y, b->tokens, b->w, b->wpe, B, T, C);
        return true;
    case OP_LN_FWD:
        k->layernorm_forward(b->y, b->mean, b->rstd, b->x, b->lnw, b->lnb, BT, C);
        return true;
    case OP_GELU_FWD:
        k->gelu_forward(b->y, b->x, BT * 4 * C);
        return true;
    case OP_FILL_DLOGITS:
        k->fill_f32(b->dlogits, 0.0f, BT * V);
        return true;
    case OP_FILL_C:
        k->fill_f32(b->dx, 0.0f, BT * C);
        return true;
    case OP_FILL_4C:
        k->fill_f32(b->dx, 0.0f, BT * 4 * C);
        return true;
    case OP_LN_BWD:
        k->layernorm_backward(b->dx, b->dw, b->db, b->dy, b->x, b->lnw, b->mean, b->rstd, BT, C);
        return true;
    case OP_GELU_BWD:
        k->gelu_backward(b->dx, b->dy, b->x, BT * 4 * C);
        return true;
    case OP_EMB_BWD:
        k->embedding_backward(b->dw, b->dwpe, b->dy, b->tokens, B, T, C);
        return true;
    default:
        return false;
    }
}

/* The linear layers on an fp32 x, forward and backward: proj's in a bf16 step, the others as the
 * reference rows the 16-bit ones replaced. */
static bool run_linear(bench *b, int op)
{
    const ddpc_kernel_table *k = b->k;
    const ddpc_precision bf = DDPC_PREC_BF16;
    int64_t BT = b->BT;
    switch (op) {
    case OP_LIN_QKV:
        k->linear_forward(bf, b->y, b->x, b->w, b->bias, BT, C, 3 * C);
        return true;
    case OP_LIN_PROJ:
        k->linear_residual_forward(bf, b->y, b->x, b->w, b->bias, b->res, BT, C, C);
        return true;
    case OP_LIN_FC:
        k->linear_forward(bf, b->y, b->x, b->w, b->bias, BT, C, 4 * C);
        return true;
    case OP_LIN_FCPROJ:
        k->linear_residual_forward(bf, b->y, b->x, b->w, b->bias, b->res, BT, 4 * C, C);
        return true;
    case OP_LIN_HEAD:
        k->linear_forward(bf, b->logits, b->x, b->w, NULL, BT, C, V);
        return true;
    case OP_LINB_HEAD:
        k->linear_backward(bf, b->dx, b->dw, NULL, b->dlogits, b->x, b->w, BT, C, V);
        return true;
    case OP_LINB_FCPROJ:
        k->linear_backward(bf, b->dx, b->dw, b->db, b->dy, b->x, b->w, BT, 4 * C, C);
        return true;
    case OP_LINB_FC:
        k->linear_backward(bf, b->dx, b->dw, b->db, b->dy, b->x, b->w, BT, C, 4 * C);
        return true;
    case OP_LINB_PROJ:
        k->linear_backward(bf, b->dx, b->dw, b->db, b->dy, b->x, b->w, BT, C, C);
        return true;
    case OP_LINB_QKV:
        k->linear_backward(bf, b->dx, b->dw, b->db, b->dqkv, b->x, b->w, BT, C, 3 * C);
        return true;
    default:
        return false;
    }
}

/* Attention, argmax and the cross-entropy members. */
static bool run_attention_loss(bench *b, int op)
{
    const ddpc_kernel_table *k = b->k;
    const ddpc_precision bf = DDPC_PREC_BF16;
    int64_t BT = b->BT, B = b->B;
    switch (op) {
    case OP_ATT_FWD:
        k->attention_forward(bf, b->y, b->att, b->qkv, B, T, C, NH, b->ws);
        return true;
    case OP_ATT_BWD:
        k->attention_backward(bf, b->dqkv, b->dy, b->qkv, b->att, B, T, C, NH, b->ws);
        return true;
    case OP_ARGMAX: {
        int64_t hits = k->argmax_correct(b->logits, b->targets, BT, V, -1);
        check_value(b, "argmax_correct", (double)hits, 0, (double)BT);
        return true;
    }
    case OP_CE_FWD: {
        float loss = k->cross_entropy_forward(b->logits, b->losses, b->logits, b->targets, BT, V,
                                              -1, &b->n_valid);
        check_value(b, "cross_entropy_forward", loss, 0, 100);
        return true;
    }
    case OP_CE_BWD:
        k->cross_entropy_backward(b->dlogits, b->logits, b->targets, BT, V, -1, b->n_valid, 1.0f);
        return true;
    case OP_CE_FUSED: /* from the probabilities over the logits: any finite rows time the same */
        k->cross_entropy_fused(b->sums, b->dlogits, b->losses, b->logits, b->targets, BT, V, -1,
                               1.0f);
        return true;
    default:
        return false;
    }
}

/* The optimizer: the gradient norm, the clip's scale and AdamW over all parameters. */
static bool run_optimizer(bench *b, int op)
{
    const ddpc_kernel_table *k = b->k;
    switch (op) {
    case OP_SUMSQ: {
        double s = k->sumsq(b->g, (int64_t)b->n_params);
        check_value(b, "sumsq", s, 0, 1e30);
        return true;
    }
    case OP_SCALE:
        k->scale(b->g, (int64_t)b->n_params, 0.9999f);
        return true;
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
        return true;
    }
    default:
        return false;
    }
}

/* The 16-bit members a bf16 step runs: act16.cu's and head16.cu's. */
static bool run_half(bench *b, int op)
{
    const ddpc_kernel_table *k = b->k;
    const ddpc_precision bf = DDPC_PREC_BF16;
    int64_t BT = b->BT;
    switch (op) {
    /* LayerNorm then GELU write a16's 16-bit copy, the linear layers read it. */
    case OP_LN_FWD16:
        k->layernorm_forward16(bf, b->a16, b->mean, b->rstd, b->x, b->lnw, b->lnb, BT, C);
        return true;
    case OP_LIN16_QKV:
        k->linear_forward16(bf, b->y, b->a16, b->w, b->bias, NULL, BT, C, 3 * C);
        return true;
    case OP_LIN16_FC:
        k->linear_forward16(bf, b->y, b->a16, b->w, b->bias, NULL, BT, C, 4 * C);
        return true;
    case OP_GELU_FWD16:
        k->gelu_forward16(bf, b->a16, b->x, BT * 4 * C);
        return true;
    case OP_LIN16_FCPROJ:
        k->linear_forward16(bf, b->y, b->a16, b->w, b->bias, b->res, BT, 4 * C, C);
        return true;
    case OP_LINB16_FCPROJ:
        k->linear_backward16(bf, b->dx, b->dw, b->db, b->dy, b->a16, b->w, BT, 4 * C, C);
        return true;
    case OP_LINB16_FC:
        k->linear_backward16(bf, b->dx, b->dw, b->db, b->dy, b->a16, b->w, BT, C, 4 * C);
        return true;
    case OP_LINB16_QKV:
        k->linear_backward16(bf, b->dx, b->dw, b->db, b->dqkv, b->a16, b->w, BT, C, 3 * C);
        return true;
    /* The product, argmax and fused loss over 16-bit logits, then the backward's two products
     * from the 16-bit gradient. Last in the enum: the forward overwrites the logits with 16-bit
     * values. */
    case OP_HEAD16_FWD:
        (void)k->head16_forward(bf, b->sums, b->logits, (size_t)(BT * V) * sizeof(float), b->losses,
                                b->x, b->w, b->targets, BT, C, V, -1, 1.0f);
        return true;
    case OP_HEAD16_BWD:
        k->head16_backward(bf, b->dx, b->dw, b->logits, b->x, b->w, BT, C, V);
        return true;
    default:
        return false;
    }
}

/* Reference members: the LM head's products through k->gemm and through cuBLAS alone, and the
 * biased linear layers as they ran before their 16-bit passes were fused. */
static bool run_reference(bench *b, int op)
{
    const ddpc_kernel_table *k = b->k;
    const ddpc_precision bf = DDPC_PREC_BF16;
    int64_t BT = b->BT;
    switch (op) {
    case OP_GEMM_HEAD_FWD:
        k->gemm(bf, DDPC_NO_TRANS, DDPC_TRANS, BT, V, C, 1.0f, b->x, C, b->w, C, 0.0f, b->logits,
                V);
        return true;
    case OP_GEMM_HEAD_DX:
        k->gemm(bf, DDPC_NO_TRANS, DDPC_NO_TRANS, BT, C, V, 1.0f, b->dlogits, V, b->w, C, 1.0f,
                b->dx, C);
        return true;
    case OP_GEMM_HEAD_DW:
        k->gemm(bf, DDPC_TRANS, DDPC_NO_TRANS, V, C, BT, 1.0f, b->dlogits, V, b->x, C, 1.0f, b->dw,
                C);
        return true;
    case OP_BLAS_HEAD_FWD:
        blas_bf16(b, false, true, (int)BT, V, C, b->x16, C, b->w16, C, 0.0f, b->logits, V);
        return true;
    case OP_BLAS_HEAD_DX:
        blas_bf16(b, false, false, (int)BT, C, V, b->dl16, V, b->w16, C, 1.0f, b->dx, C);
        return true;
    case OP_BLAS_HEAD_DW:
        blas_bf16(b, true, false, V, C, (int)BT, b->dl16, V, b->x16, C, 1.0f, b->dw, C);
        return true;
    case OP_SEED_GEMM_QKV:
        seed_gemm(b, 3 * C);
        return true;
    case OP_SEED_GEMM_FC:
        seed_gemm(b, 4 * C);
        return true;
    case OP_TWO_GEMMS_QKV:
        two_gemms(b, b->dqkv, 3 * C);
        return true;
    case OP_TWO_GEMMS_FC:
        two_gemms(b, b->dy, 4 * C);
        return true;
    default:
        return false;
    }
}

void op_run(bench *b, int op)
{
    (void)(run_elementwise(b, op) || run_linear(b, op) || run_attention_loss(b, op) ||
           run_optimizer(b, op) || run_half(b, op) || run_reference(b, op));
}

/* ---- op_check's groups: each checks what op writes, true if op is one of its ops ---- */

/* Ops that write the parameters, their gradient or the optimizer's state (n_params floats). */
static bool check_params(bench *b, int op, const char *name)
{
    switch (op) {
    case OP_FILL_GRADS:
        check_finite(b, name, b->dlogits, b->n_params);
        return true;
    case OP_SUMSQ:
    case OP_SCALE:
        check_finite(b, name, b->g, b->n_params);
        return true;
    case OP_ADAMW:
        check_finite(b, name, b->p, b->n_params);
        check_finite(b, name, b->v, b->n_params);
        return true;
    default:
        return false;
    }
}

/* Ops that write y, attention's saved state or the logits, and those checked otherwise. */
static bool check_forward(bench *b, int op, const char *name)
{
    size_t BT = (size_t)b->BT;
    switch (op) {
    case OP_EMB_FWD:
    case OP_LN_FWD:
    case OP_LIN_PROJ:
    case OP_LIN_FCPROJ:
    case OP_LIN16_FCPROJ:
        check_finite(b, name, b->y, BT * C);
        return true;
    case OP_ATT_FWD:
        check_finite(b, name, b->y, BT * C);
        check_finite(b, name, b->att, b->k->attention_saved_floats(DDPC_PREC_BF16, b->B, T, C, NH));
        return true;
    case OP_LIN_QKV:
    case OP_SEED_GEMM_QKV:
    case OP_LIN16_QKV:
        check_finite(b, name, b->y, BT * 3 * C);
        return true;
    case OP_LIN_FC:
    case OP_SEED_GEMM_FC:
    case OP_LIN16_FC:
    case OP_GELU_FWD:
        check_finite(b, name, b->y, BT * 4 * C);
        return true;
    case OP_LIN_HEAD:
    case OP_CE_FWD:
    case OP_GEMM_HEAD_FWD:
    case OP_BLAS_HEAD_FWD:
        check_finite(b, name, b->logits, BT * V);
        return true;
    case OP_ARGMAX:
        return true; /* its count was range-checked */
    case OP_LN_FWD16:
    case OP_GELU_FWD16:
        return true; /* 16 bits, in a layout of the table's: the products after them are checked */
    default:
        return false;
    }
}

/* Ops that write dlogits, dx, dw or dqkv. */
static bool check_backward(bench *b, int op, const char *name)
{
    size_t BT = (size_t)b->BT;
    switch (op) {
    case OP_FILL_DLOGITS:
    case OP_CE_BWD:
    case OP_CE_FUSED:
        check_finite(b, name, b->dlogits, BT * V);
        return true;
    case OP_FILL_C:
    case OP_LN_BWD:
    case OP_GEMM_HEAD_DX:
    case OP_BLAS_HEAD_DX:
        check_finite(b, name, b->dx, BT * C);
        return true;
    case OP_FILL_4C:
    case OP_GELU_BWD:
        check_finite(b, name, b->dx, BT * 4 * C);
        return true;
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
        return true;
    case OP_GEMM_HEAD_DW:
    case OP_BLAS_HEAD_DW:
    case OP_EMB_BWD:
        check_finite(b, name, b->dw, (size_t)V * C);
        return true;
    case OP_ATT_BWD:
        check_finite(b, name, b->dqkv, BT * 3 * C);
        return true;
    default:
        return false;
    }
}

/* What op writes (checked finite after its first call); head16's two ops are not checked. */
void op_check(bench *b, int op, const char *name)
{
    (void)(check_params(b, op, name) || check_forward(b, op, name) || check_backward(b, op, name));
}

/* ---- the rows ---- */

bool attention_flash(const bench *b)
{
    return b->k->attention_saved_floats(DDPC_PREC_BF16, b->B, T, C, NH) < (size_t)b->B * NH * T * T;
}

/* The sizes the rows' byte and FLOP counts are written in (doubles, as the counts are). */
typedef struct {
    int64_t B;
    double bt, n, f, l; /* B x T, parameters, bytes per float, layers */
    double att_fwd, att_bwd;
    const char *att_shape;
} sizes;

#define LINF(in, out) (2.0 * bt * (in) * (out))
#define LINFB(in, out, ib) (f * (bt * (in) + (double)(in) * (out) + bt * (out)) + (ib))
/* backward: reads dy, x, w; dx and dw are read and written (they accumulate) */
#define LINBB(in, out) (f * (bt * (out) + 3 * bt * (in) + 3.0 * (in) * (out)))

/* rows = part's rows (those it names). */
static void rows_merge(row *rows, const row *part)
{
    for (int op = 0; op < OP_COUNT; op++)
        if (part[op].name)
            rows[op] = part[op];
}

/* The members a training step calls (calls per step > 0). */
static void rows_step(row *rows, const sizes *s)
{
    const int64_t B = s->B;
    const double bt = s->bt, n = s->n, f = s->f, l = s->l, att_fwd = s->att_fwd,
                 att_bwd = s->att_bwd;
    const char *att_shape = s->att_shape;
    /* {op, name, shape, calls per step, bytes one call must move, flops} */
    const row part[OP_COUNT] = {
        [OP_FILL_GRADS] = {"fill_f32 (zero_grad)", "124M", 1, f * n, 0, 0},
        [OP_EMB_FWD] = {"embedding_forward", "BT x C", 1, f * (2 * bt * C + T * C) + 4 * bt, 0, 0},
        /* ln_f alone: ln1 and ln2 write only 16-bit copies (layernorm_forward16) */
        [OP_LN_FWD] = {"layernorm_forward", "BT x C", 1, f * (2 * bt * C + 2 * bt + 2 * C), 0, 0},
        [OP_LN_FWD16] = {"layernorm_forward16", "BT x C", 2 * l,
                         (f + 2) * bt * C + f * (2 * bt + 2 * C), 0, 0},
        [OP_LIN16_QKV] = {"linear_forward16 qkv", "C->3C", l,
                          LINFB(C, 3 * C, f * 3 * C) - (f - 2) * bt * C, LINF(C, 3 * C), 0},
        [OP_ATT_FWD] = {"attention_forward", att_shape, l, att_fwd, 4.0 * B * T * T * C, 0},
        [OP_LIN_PROJ] = {"linear_residual_fwd proj", "C->C +r", l, LINFB(C, C, f * bt * C),
                         LINF(C, C), 0},
        [OP_LIN16_FC] = {"linear_forward16 fc", "C->4C", l, LINFB(C, 4 * C, 0) - (f - 2) * bt * C,
                         LINF(C, 4 * C), 0},
        [OP_GELU_FWD16] = {"gelu_forward16", "BT x 4C", l, (f + 2) * bt * 4 * C, 0, 0},
        [OP_LIN16_FCPROJ] = {"linear_forward16 fcproj", "4C->C +r", l,
                             LINFB(4 * C, C, f * bt * C) - (f - 2) * bt * 4 * C, LINF(4 * C, C), 0},
        /* x and w in fp32, 16-bit logits written, read and written again */
        [OP_HEAD16_FWD] = {"head16_forward", "C->V + CE", 1,
                           f * (bt * C + (double)V * C) + 6.0 * bt * V, LINF(C, V), 0},
        [OP_FILL_C] = {"fill_f32 dln/dres/datty", "BT x C", 3 * l + 2, f * bt * C, 0, 0},
        [OP_FILL_4C] = {"fill_f32 dfch", "BT x 4C", l, f * bt * 4 * C, 0, 0},
        /* the 16-bit dlogits read as they are */
        [OP_HEAD16_BWD] = {"head16_backward", "C->V", 1,
                           f * (3 * bt * C + 3.0 * V * C) + 2.0 * bt * V, 2 * LINF(C, V), 0},
        /* reads dy, x, mean, rstd, w; dx, dw, db are read and written (they accumulate) */
        [OP_LN_BWD] = {"layernorm_backward", "BT x C", 2 * l + 1, f * (4 * bt * C + 2 * bt + 5 * C),
                       0, 0},
        [OP_LINB16_FCPROJ] = {"linear_backward16 fcproj", "4C->C", l,
                              LINBB(4 * C, C) - (f - 2) * bt * 4 * C, 2 * LINF(4 * C, C), 0},
        [OP_GELU_BWD] = {"gelu_backward", "BT x 4C", l, f * 3 * bt * 4 * C, 0, 0},
        [OP_LINB16_FC] = {"linear_backward16 fc", "C->4C", l, LINBB(C, 4 * C) - (f - 2) * bt * C,
                          2 * LINF(C, 4 * C), 0},
        [OP_LINB_PROJ] = {"linear_backward proj", "C->C", l, LINBB(C, C), 2 * LINF(C, C), 0},
        [OP_ATT_BWD] = {"attention_backward", att_shape, l, att_bwd, 8.0 * B * T * T * C, 0},
        [OP_LINB16_QKV] = {"linear_backward16 qkv", "C->3C", l, LINBB(C, 3 * C) - (f - 2) * bt * C,
                           2 * LINF(C, 3 * C), 0},
        [OP_EMB_BWD] = {"embedding_backward", "BT x C", 1, f * (3 * bt * C + 2.0 * T * C), 0, 0},
        [OP_SUMSQ] = {"sumsq (grad norm)", "124M", 1, f * n, 0, 0},
        [OP_SCALE] = {"scale (clip)", "124M", 1, f * 2 * n, 0, 0},
        [OP_ADAMW] = {"adamw_update", "124M", 1, n * (7 * f + 1), 0, 0},
    };
    rows_merge(rows, part);
}

/* Reference rows (calls 0, not summed): what a member replaced. */
static void rows_reference(row *rows, const sizes *s)
{
    const double bt = s->bt, f = s->f;
    const row part[OP_COUNT] = {
        /* cross_entropy_fused (itself replaced by head16_forward at bf16) and the three it
         * replaced. */
        [OP_CE_FWD] = {"  cross_entropy_forward", "BT x V", 0, f * 2 * bt * V, 0, 0},
        [OP_FILL_DLOGITS] = {"  fill_f32 dlogits", "BT x V", 0, f * bt * V, 0, 0},
        [OP_CE_BWD] = {"  cross_entropy_backward", "BT x V", 0, f * 3 * bt * V, 0, 0},
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
        /* The members a bf16 step ran before its activations and LM head went 16-bit, as fp32
         * and the shapes the 16-bit members decline still run them: against the act16 rows
         * (layernorm_forward16, linear_forward16, gelu_forward16, linear_backward16) and the
         * head16 rows, what those save. */
        [OP_LIN_QKV] = {"  linear_forward qkv", "C->3C", 0, LINFB(C, 3 * C, f * 3 * C),
                        LINF(C, 3 * C), 0},
        [OP_LIN_FC] = {"  linear_forward fc", "C->4C", 0, LINFB(C, 4 * C, 0), LINF(C, 4 * C), 0},
        [OP_GELU_FWD] = {"  gelu_forward", "BT x 4C", 0, f * 2 * bt * 4 * C, 0, 0},
        [OP_LIN_FCPROJ] = {"  linear_residual_fwd fcproj", "4C->C +r", 0,
                           LINFB(4 * C, C, f * bt * C), LINF(4 * C, C), 0},
        [OP_LINB_FCPROJ] = {"  linear_backward fcproj", "4C->C", 0, LINBB(4 * C, C),
                            2 * LINF(4 * C, C), 0},
        [OP_LINB_FC] = {"  linear_backward fc", "C->4C", 0, LINBB(C, 4 * C), 2 * LINF(C, 4 * C), 0},
        [OP_LINB_QKV] = {"  linear_backward qkv", "C->3C", 0, LINBB(C, 3 * C), 2 * LINF(C, 3 * C),
                         0},
        [OP_LIN_HEAD] = {"  linear_forward LM head", "C->V", 0, LINFB(C, V, 0), LINF(C, V), 0},
        [OP_ARGMAX] = {"  argmax_correct", "BT x V", 0, f * bt * V, 0, 0},
        [OP_CE_FUSED] = {"  cross_entropy_fused", "BT x V", 0, f * 2 * bt * V, 0, 0},
        [OP_LINB_HEAD] = {"  linear_backward LM head", "C->V", 0,
                          f * (2 * bt * C + bt * V + 3.0 * V * C), 2 * LINF(C, V), 0},
    };
    rows_merge(rows, part);
}

void rows_init(row *rows, const bench *b)
{
    const int64_t B = b->B;
    const double bt = (double)b->BT, f = 4.0;
    /* The fused (flash) kernels save the logsumexps and a copy of out instead of (B, NH, T, T):
     * the least they move is qkv, out, its copy and lse forward; qkv, dout, the copy, lse, D
     * and dqkv backward (not counted: the backward's scratch, written and read back: 16-bit
     * q, k, v and dout, and each causal tile pair's dS). */
    const bool flash = attention_flash(b);
    const double att = flash ? (double)B * NH * T : (double)B * NH * T * T;
    sizes s = {
        .B = B,
        .bt = bt,
        .n = (double)b->n_params,
        .f = f,
        .l = L,
        .att_fwd = flash ? f * (bt * 5 * C + att) : f * (bt * 4 * C + att),
        .att_bwd = flash ? f * (bt * 8 * C + 3 * att) : f * (bt * 7 * C + att),
        .att_shape = flash ? "flash hs 64" : "B,NH,T,T",
    };
    memset(rows, 0, OP_COUNT * sizeof *rows);
    rows_step(rows, &s);
    rows_reference(rows, &s);
}
