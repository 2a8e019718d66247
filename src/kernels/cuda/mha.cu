// SPDX-License-Identifier: MIT
/* Multi-head attention with a key padding mask, optional causality and different query and key
 * lengths on the GPU (seq2seq's), with kernels/cpu/mha.c's contract: every product is
 * ddpc__cuda_gemm on strided views of q, k, v, one per (batch, head) (a first version: a batched
 * product over heads would launch fewer); the masked softmax and its backward are row kernels with
 * fixed-order block reductions, so reruns give the same bits. Invariant: att is exactly 0 at every
 * masked (query, key), so backward needs no mask. Also the key padding mask from tokens. */
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
    const int64_t hs = s->c / s->nh, tq = s->tq, tk = s->tk;
    const int64_t sq = ddpc_mha_q_batch_stride(s), sk = ddpc_mha_kv_batch_stride(s);
    const int64_t rows = s->b * s->nh * tq;
    if (rows <= 0 || tk <= 0 || hs <= 0)
        return;
    const float scale = 1.0f / sqrtf((float)hs);
    for (int64_t job = 0; job < s->b * s->nh; job++) {
        const int64_t bi = job / s->nh, h = job % s->nh;
        ddpc__cuda_gemm(prec, DDPC_NO_TRANS, DDPC_TRANS, tq, tk, hs, scale, q + bi * sq + h * hs,
                        s->ldq, k + bi * sk + h * hs, s->ldk, 0.0f, att + job * tq * tk, tk);
    }
    mha_softmax_kernel<<<row_grid(rows), ddpc__row_threads(tk, 256), 0, ddpc__cuda_stream()>>>(
        att, key_pad, rows, s->nh, tq, tk, s->causal);
    DDPC_CUDA_LAUNCHED();
    for (int64_t job = 0; job < s->b * s->nh; job++) {
        const int64_t bi = job / s->nh, h = job % s->nh;
        ddpc__cuda_gemm(prec, DDPC_NO_TRANS, DDPC_NO_TRANS, tq, hs, tk, 1.0f, att + job * tq * tk,
                        tk, v + bi * sk + h * hs, s->ldk, 0.0f, out + bi * tq * s->c + h * hs,
                        s->c);
    }
}

extern "C" void ddpc__cuda_mha_backward(ddpc_precision prec, float *dq, float *dk, float *dv,
                                        const float *dout, const float *q, const float *k,
                                        const float *v, const float *att, const ddpc_mha_shape *s,
                                        float *ws)
{
    const int64_t hs = s->c / s->nh, tq = s->tq, tk = s->tk;
    const int64_t sq = ddpc_mha_q_batch_stride(s), sk = ddpc_mha_kv_batch_stride(s);
    const int64_t ldq = s->ldq, ldk = s->ldk, c = s->c, jobs = s->b * s->nh, rows = jobs * tq;
    if (rows <= 0 || tk <= 0 || hs <= 0)
        return;
    DDPC_ASSERT(ws != NULL); /* a caller that sized no workspace: a bug, not input */
    const float scale = 1.0f / sqrtf((float)hs);
    /* dP = dout v^T for every head; dS in place; then dq = dS k, dk = dS^T q, dv = P^T dout. */
    for (int64_t job = 0; job < jobs; job++) {
        const int64_t bi = job / s->nh, h = job % s->nh;
        ddpc__cuda_gemm(prec, DDPC_NO_TRANS, DDPC_TRANS, tq, tk, hs, 1.0f,
                        dout + bi * tq * c + h * hs, c, v + bi * sk + h * hs, ldk, 0.0f,
                        ws + job * tq * tk, tk);
    }
    mha_softmax_backward_kernel<<<row_grid(rows), ddpc__row_threads(tk, 256), 0,
                                  ddpc__cuda_stream()>>>(ws, att, rows, tk, scale);
    DDPC_CUDA_LAUNCHED();
    for (int64_t job = 0; job < jobs; job++) {
        const int64_t bi = job / s->nh, h = job % s->nh;
        const int64_t qo = bi * sq + h * hs, ko = bi * sk + h * hs;
        const float *ds = ws + job * tq * tk, *p = att + job * tq * tk;
        ddpc__cuda_gemm(prec, DDPC_NO_TRANS, DDPC_NO_TRANS, tq, hs, tk, 1.0f, ds, tk, k + ko, ldk,
                        0.0f, dq + qo, ldq);
        ddpc__cuda_gemm(prec, DDPC_TRANS, DDPC_NO_TRANS, tk, hs, tq, 1.0f, ds, tk, q + qo, ldq,
                        0.0f, dk + ko, ldk);
        ddpc__cuda_gemm(prec, DDPC_TRANS, DDPC_NO_TRANS, tk, hs, tq, 1.0f, p, tk,
                        dout + bi * tq * c + h * hs, c, 0.0f, dv + ko, ldk);
    }
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
