// SPDX-License-Identifier: MIT
/* Causal multi-head self-attention (Vaswani et al. 2017) in GPT-2's layout: qkv (B, T, 3C) holds
 * q | k | v and head h owns columns h*hs .. (h+1)*hs of each. Every matmul is an sgemm on strided
 * views of qkv/out (no gathers); one OpenMP job per (batch, head) runs its sgemms serially.
 * Invariant: causality is exploited by row blocks — rows [r0, r1) only touch keys [0, r1) — and
 * att (B, NH, T, T) is exactly zero above the diagonal, which backward relies on. */
#include <ddpc/kernels.h>

#include <math.h>
#include <omp.h>

#include "core/simd_dispatch.h"
#include "kernels/cpu/cpu_impl.h"

enum { ROW_BLOCK = 32 }; /* causal blocking: smaller saves flops, larger keeps sgemms efficient */

#if !DDPC_SIMD_CLONE /* one definition: not a hot loop */
size_t ddpc_attention_workspace_floats(int64_t b, int64_t t, int64_t c, int64_t nh)
{
    (void)b;
    (void)c;
    (void)nh;
    /* One (T, T) dP matrix per thread slot; see ddpc__kernel_slots for the thread rule. */
    return (size_t)ddpc__kernel_slots() * (size_t)(t * t);
}
#endif

/* p (rows i = r0..r1, cols 0..T) holds scaled scores; makes row i a softmax over 0..i, 0 after. */
static void causal_softmax_rows(float *p, int64_t r0, int64_t r1, int64_t t)
{
    for (int64_t i = r0; i < r1; i++) {
        float *restrict row = p + i * t;
        const int64_t len = i + 1; /* keys 0..i; a `j <= i` bound defeats the vectoriser */
        float inv = 1.0f / ddpc__exp_sum_f32(row, row, len, ddpc__max_f32(row, len));
        for (int64_t j = 0; j < len; j++)
            row[j] *= inv;
        for (int64_t j = len; j < t; j++)
            row[j] = 0.0f;
    }
}

/* One (batch, head): att_bh (T, T) = softmax(scale q k^T), out_h (T, hs) = att_bh @ v. */
static void head_forward(ddpc_precision prec, float *out_h, float *att_bh, const float *q,
                         int64_t t, int64_t c, int64_t hs, float scale)
{
    const float *k = q + c, *v = q + 2 * c;
    for (int64_t r0 = 0; r0 < t; r0 += ROW_BLOCK) {
        int64_t r1 = r0 + ROW_BLOCK < t ? r0 + ROW_BLOCK : t;
        ddpc_gemm(prec, DDPC_NO_TRANS, DDPC_TRANS, r1 - r0, r1, hs, scale, q + r0 * 3 * c, 3 * c, k,
                  3 * c, 0.0f, att_bh + r0 * t, t);
        causal_softmax_rows(att_bh, r0, r1, t);
        ddpc_gemm(prec, DDPC_NO_TRANS, DDPC_NO_TRANS, r1 - r0, hs, r1, 1.0f, att_bh + r0 * t, t, v,
                  3 * c, 0.0f, out_h + r0 * c, c);
    }
}

void DDPC_SIMD(ddpc_attention_forward)(ddpc_precision prec, float *out, float *att,
                                       const float *qkv, int64_t b, int64_t t, int64_t c,
                                       int64_t nh, float *ws)
{
    (void)ws;
    int64_t hs = c / nh, jobs = b * nh;
    float scale = 1.0f / sqrtf((float)hs);
    int par = jobs >= omp_get_max_threads() && jobs * t * t * hs >= DDPC__PAR_MIN_MACS;
#pragma omp parallel for schedule(static) if (par)
    for (int64_t job = 0; job < jobs; job++) {
        int64_t bi = job / nh, h = job % nh;
        head_forward(prec, out + bi * t * c + h * hs, att + job * t * t,
                     qkv + bi * t * 3 * c + h * hs, t, c, hs, scale);
    }
}
DDPC_SIMD_DISPATCH_VOID(ddpc_attention_forward,
                        (ddpc_precision prec, float *out, float *att, const float *qkv, int64_t b,
                         int64_t t, int64_t c, int64_t nh, float *ws),
                        (prec, out, att, qkv, b, t, c, nh, ws))

/* In place: dp (rows r0..r1) becomes dS = scale * P * (dP - rowsum(P * dP)), zero above diag. */
static void softmax_backward_rows(float *dp, const float *p, int64_t r0, int64_t r1, int64_t t,
                                  float scale)
{
    for (int64_t i = r0; i < r1; i++) {
        float *restrict d = dp + i * t;
        const float *restrict pi = p + i * t;
        const int64_t len = i + 1;
        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (int64_t j = 0; j < len; j++)
            dot += pi[j] * d[j];
        for (int64_t j = 0; j < len; j++)
            d[j] = scale * pi[j] * (d[j] - dot);
        for (int64_t j = len; j < r1; j++)
            d[j] = 0.0f;
    }
}

/* One (batch, head): writes dq, dk, dv (strided in dqkv) from dout_h and att_bh. Each row block
 * of each is the output of exactly one sgemm, which overwrites it: dqkv needs no zeroing first. */
static void head_backward(ddpc_precision prec, float *dq, const float *dout_h, const float *q,
                          const float *att_bh, int64_t t, int64_t c, int64_t hs, float scale,
                          float *dp)
{
    const int64_t ld = 3 * c;
    const float *k = q + c, *v = q + 2 * c;
    float *dk = dq + c, *dv = dq + 2 * c;
    for (int64_t r0 = 0; r0 < t; r0 += ROW_BLOCK) {
        int64_t r1 = r0 + ROW_BLOCK < t ? r0 + ROW_BLOCK : t, n = r1 - r0;
        /* dP rows r0..r1 (keys 0..r1) = dout @ v^T; then dS in place; then dq = dS @ k. */
        ddpc_gemm(prec, DDPC_NO_TRANS, DDPC_TRANS, n, r1, hs, 1.0f, dout_h + r0 * c, c, v, ld, 0.0f,
                  dp + r0 * t, t);
        softmax_backward_rows(dp, att_bh, r0, r1, t, scale);
        ddpc_gemm(prec, DDPC_NO_TRANS, DDPC_NO_TRANS, n, hs, r1, 1.0f, dp + r0 * t, t, k, ld, 0.0f,
                  dq + r0 * ld, ld);
    }
    for (int64_t r0 = 0; r0 < t; r0 += ROW_BLOCK) {
        int64_t r1 = r0 + ROW_BLOCK < t ? r0 + ROW_BLOCK : t, n = r1 - r0;
        /* Keys r0..r1 hear from queries r0..T only (causal): dk = dS^T @ q, dv = P^T @ dout */
        ddpc_gemm(prec, DDPC_TRANS, DDPC_NO_TRANS, n, hs, t - r0, 1.0f, dp + r0 * t + r0, t,
                  q + r0 * ld, ld, 0.0f, dk + r0 * ld, ld);
        ddpc_gemm(prec, DDPC_TRANS, DDPC_NO_TRANS, n, hs, t - r0, 1.0f, att_bh + r0 * t + r0, t,
                  dout_h + r0 * c, c, 0.0f, dv + r0 * ld, ld);
    }
}

void DDPC_SIMD(ddpc_attention_backward)(ddpc_precision prec, float *dqkv, const float *dout,
                                        const float *qkv, const float *att, int64_t b, int64_t t,
                                        int64_t c, int64_t nh, float *ws)
{
    int64_t hs = c / nh, jobs = b * nh;
    float scale = 1.0f / sqrtf((float)hs);
    int par = jobs >= omp_get_max_threads() && jobs * t * t * hs >= DDPC__PAR_MIN_MACS;
#pragma omp parallel for schedule(static) if (par)
    for (int64_t job = 0; job < jobs; job++) {
        int64_t bi = job / nh, h = job % nh;
        float *dp = ws + (int64_t)omp_get_thread_num() * t * t;
        head_backward(prec, dqkv + bi * t * 3 * c + h * hs, dout + bi * t * c + h * hs,
                      qkv + bi * t * 3 * c + h * hs, att + job * t * t, t, c, hs, scale, dp);
    }
}
DDPC_SIMD_DISPATCH_VOID(ddpc_attention_backward,
                        (ddpc_precision prec, float *dqkv, const float *dout, const float *qkv,
                         const float *att, int64_t b, int64_t t, int64_t c, int64_t nh, float *ws),
                        (prec, dqkv, dout, qkv, att, b, t, c, nh, ws))
