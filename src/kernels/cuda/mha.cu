// SPDX-License-Identifier: MIT
/* Multi-head attention with a key padding mask, optional causality and different query and key
 * lengths on the GPU (seq2seq's), with kernels/cpu/mha.c's contract: every product is
 * ddpc__cuda_gemm on strided views of q, k, v, one per (batch, head) (a first version: a batched
 * product over heads would launch fewer), derived outside the host fence so the emulator test
 * runs the same calls; the masked softmax and its backward are row kernels with fixed-order block
 * reductions, so reruns give the same bits. Invariant: att is exactly 0 at every masked (query,
 * key), so backward needs no mask. Also the key padding mask from tokens. */
#ifndef DDPC_CUDA_EMULATE /* tests/test_mha_emu.cpp runs the kernels on the host */
#include "kernels/cuda/cuda_impl.h"
#endif
#include "kernels/cuda/row_reduce.cuh"

#include <math.h>

/* att rows (b * nh * tq of tk) hold scaled scores; row (bi, h, i) becomes the softmax over the
 * keys it may see (j <= i when causal, key_pad[bi, j] == 0), exactly 0 elsewhere, and all 0 when
 * it sees none (the CPU's masked_softmax_row, multiplying by 1/sum as it does). */
static __global__ void mha_softmax_kernel(float *att, const uint8_t *key_pad, int64_t rows,
                                          int64_t nh, int64_t tq, int64_t tk, bool causal)
{
    __shared__ float sh[32];
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        float *p = att + row * tk;
        const int64_t i = row % tq, bi = row / (nh * tq);
        const uint8_t *pad = key_pad ? key_pad + bi * tk : nullptr;
        const int64_t len = causal && i + 1 < tk ? i + 1 : tk;
        float mx = -INFINITY, any = 0.0f;
        for (int64_t j = threadIdx.x; j < len; j += blockDim.x)
            if (!pad || !pad[j]) {
                mx = ddpc__max_op()(mx, p[j]);
                any = 1.0f;
            }
        mx = ddpc__block_reduce(mx, ddpc__max_op(), -INFINITY, sh);
        any = ddpc__block_reduce(any, ddpc__max_op(), 0.0f, sh);
        float sum = 0.0f;
        for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
            const float e = !pad || !pad[j] ? expf(p[j] - mx) : 0.0f;
            p[j] = e;
            sum += e;
        }
        sum = ddpc__block_reduce(sum, ddpc__sum_op(), 0.0f, sh);
        const float inv = 1.0f / sum;
        for (int64_t j = threadIdx.x; j < tk; j += blockDim.x)
            p[j] = any != 0.0f && j < len ? p[j] * inv : 0.0f;
    }
}

/* In place: each row of dp (rows of tk) becomes dS = scale * P * (dP - rowsum(P * dP)) (the CPU's
 * softmax_backward; P is 0 at masked keys, so dS is too). */
static __global__ void mha_softmax_backward_kernel(float *dp, const float *att, int64_t rows,
                                                   int64_t tk, float scale)
{
    __shared__ float sh[32];
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        float *d = dp + row * tk;
        const float *p = att + row * tk;
        float dot = 0.0f;
        for (int64_t j = threadIdx.x; j < tk; j += blockDim.x)
            dot += p[j] * d[j];
        dot = ddpc__block_reduce(dot, ddpc__sum_op(), 0.0f, sh);
        for (int64_t j = threadIdx.x; j < tk; j += blockDim.x)
            d[j] = __fmul_rn(__fmul_rn(scale, p[j]), __fsub_rn(d[j], dot));
    }
}

/* mask (n) = tokens (n) == pad. */
static __global__ void pad_mask_kernel(uint8_t *mask, const int32_t *tokens, int64_t n, int32_t pad)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        mask[i] = tokens[i] == pad;
}

/* The products, one per (batch, head) job, each through `gemm` (ddpc__cuda_gemm's arguments and
 * row-major contract; kernels/cpu/mha.c's calls): outside the host fence, so
 * tests/test_mha_emu.cpp runs these very shapes, leading dimensions and offsets with a host
 * product. A job's q (dq) rows start at q, its k, v (dk, dv) rows at kv, its out (dout) rows at
 * out, its (tq, tk) matrix of att (dP, dS) at att. */
struct mha_job {
    int64_t q, kv, out, att;
};
static mha_job mha_job_of(const ddpc_mha_shape *s, int64_t job)
{
    const int64_t bi = job / s->nh, hs = s->c / s->nh, h = job % s->nh;
    return mha_job{bi * ddpc_mha_q_batch_stride(s) + h * hs,
                   bi * ddpc_mha_kv_batch_stride(s) + h * hs, bi * s->tq * s->c + h * hs,
                   job * s->tq * s->tk};
}

/* att = scale q k^T, every job's (tq, tk) scores. */
template <typename Gemm>
static void mha_scores(Gemm gemm, ddpc_precision prec, const ddpc_mha_shape *s, float *att,
                       const float *q, const float *k, float scale)
{
    for (int64_t job = 0; job < s->b * s->nh; job++) {
        const mha_job j = mha_job_of(s, job);
        gemm(prec, DDPC_NO_TRANS, DDPC_TRANS, s->tq, s->tk, s->c / s->nh, scale, q + j.q, s->ldq,
             k + j.kv, s->ldk, 0.0f, att + j.att, s->tk);
    }
}

/* out = P v, each job's (tq, c/nh) columns of out. */
template <typename Gemm>
static void mha_values(Gemm gemm, ddpc_precision prec, const ddpc_mha_shape *s, float *out,
                       const float *att, const float *v)
{
    for (int64_t job = 0; job < s->b * s->nh; job++) {
        const mha_job j = mha_job_of(s, job);
        gemm(prec, DDPC_NO_TRANS, DDPC_NO_TRANS, s->tq, s->c / s->nh, s->tk, 1.0f, att + j.att,
             s->tk, v + j.kv, s->ldk, 0.0f, out + j.out, s->c);
    }
}

/* dP = dout v^T, laid out as att. */
template <typename Gemm>
static void mha_dp(Gemm gemm, ddpc_precision prec, const ddpc_mha_shape *s, float *dp,
                   const float *dout, const float *v)
{
    for (int64_t job = 0; job < s->b * s->nh; job++) {
        const mha_job j = mha_job_of(s, job);
        gemm(prec, DDPC_NO_TRANS, DDPC_TRANS, s->tq, s->tk, s->c / s->nh, 1.0f, dout + j.out, s->c,
             v + j.kv, s->ldk, 0.0f, dp + j.att, s->tk);
    }
}

/* From dS (laid out as att): dq = dS k, dk = dS^T q, dv = P^T dout. */
template <typename Gemm>
static void mha_grads(Gemm gemm, ddpc_precision prec, const ddpc_mha_shape *s, float *dq,
                      float *dk, float *dv, const float *ds, const float *att, const float *q,
                      const float *k, const float *dout)
{
    const int64_t hs = s->c / s->nh, tq = s->tq, tk = s->tk;
    for (int64_t job = 0; job < s->b * s->nh; job++) {
        const mha_job j = mha_job_of(s, job);
        gemm(prec, DDPC_NO_TRANS, DDPC_NO_TRANS, tq, hs, tk, 1.0f, ds + j.att, tk, k + j.kv, s->ldk,
             0.0f, dq + j.q, s->ldq);
        gemm(prec, DDPC_TRANS, DDPC_NO_TRANS, tk, hs, tq, 1.0f, ds + j.att, tk, q + j.q, s->ldq,
             0.0f, dk + j.kv, s->ldk);
        gemm(prec, DDPC_TRANS, DDPC_NO_TRANS, tk, hs, tq, 1.0f, att + j.att, tk, dout + j.out, s->c,
             0.0f, dv + j.kv, s->ldk);
    }
}

#ifndef DDPC_CUDA_EMULATE /* the host side: launches */
/* dP of every (batch, head), one (tq, tk) matrix each: the CPU's is one per thread slot. */
extern "C" size_t ddpc__cuda_mha_workspace_floats(const ddpc_mha_shape *s)
{
    return (size_t)(s->b * s->nh * s->tq * s->tk);
}

/* One block per row (rows looping past the grid), threads for rows of tk. */
static unsigned row_grid(int64_t rows)
{
    return (unsigned)(rows < 65535 * 16 ? rows : 65535 * 16);
}

extern "C" void ddpc__cuda_mha_forward(ddpc_precision prec, float *out, float *att, const float *q,
                                       const float *k, const float *v, const uint8_t *key_pad,
                                       const ddpc_mha_shape *s)
{
    const int64_t hs = s->c / s->nh, tq = s->tq, tk = s->tk, rows = s->b * s->nh * tq;
    if (rows <= 0 || tk <= 0 || hs <= 0)
        return;
    mha_scores(ddpc__cuda_gemm, prec, s, att, q, k, 1.0f / sqrtf((float)hs));
    mha_softmax_kernel<<<row_grid(rows), ddpc__row_threads(tk, 256), 0, ddpc__cuda_stream()>>>(
        att, key_pad, rows, s->nh, tq, tk, s->causal);
    DDPC_CUDA_LAUNCHED();
    mha_values(ddpc__cuda_gemm, prec, s, out, att, v);
}

extern "C" void ddpc__cuda_mha_backward(ddpc_precision prec, float *dq, float *dk, float *dv,
                                        const float *dout, const float *q, const float *k,
                                        const float *v, const float *att, const ddpc_mha_shape *s,
                                        float *ws)
{
    const int64_t hs = s->c / s->nh, tk = s->tk, rows = s->b * s->nh * s->tq;
    if (rows <= 0 || tk <= 0 || hs <= 0)
        return;
    DDPC_ASSERT(ws != NULL); /* a caller that sized no workspace: a bug, not input */
    /* dP for every head in ws; dS in place; then the gradients. */
    mha_dp(ddpc__cuda_gemm, prec, s, ws, dout, v);
    mha_softmax_backward_kernel<<<row_grid(rows), ddpc__row_threads(tk, 256), 0,
                                  ddpc__cuda_stream()>>>(ws, att, rows, tk,
                                                         1.0f / sqrtf((float)hs));
    DDPC_CUDA_LAUNCHED();
    mha_grads(ddpc__cuda_gemm, prec, s, dq, dk, dv, ws, att, q, k, dout);
}

extern "C" void ddpc__cuda_pad_mask(uint8_t *mask, const int32_t *tokens, int64_t n, int32_t pad)
{
    if (n <= 0)
        return;
    pad_mask_kernel<<<ddpc__cuda_blocks(n, 256), 256, 0, ddpc__cuda_stream()>>>(mask, tokens, n,
                                                                                pad);
    DDPC_CUDA_LAUNCHED();
}
#endif
