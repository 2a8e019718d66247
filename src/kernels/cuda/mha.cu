// SPDX-License-Identifier: MIT
/* Multi-head attention with a key padding mask, optional causality and different query and key
 * lengths on the GPU (seq2seq's), with kernels/cpu/mha.c's contract: q, k, v (and dout) are
 * permuted from their strided rows into head-major (b*nh, t, hs) arrays in ws, every product is
 * ONE cuBLAS strided-batched GEMM over the b*nh heads, and one kernel scatters out (dq, dk, dv)
 * back. At bf16/fp16 the permute, softmax and softmax backward write the products' operands
 * rounded to 16 bits (nearest even, as the CPU's ddpc_gemm rounds them), multiplied with fp32
 * accumulation. The host sequence is outside the host fence, so tests/test_mha_emu.cpp runs the
 * same launches and products. Row kernels use fixed-order block reductions: reruns give the same
 * bits. Invariant: att is exactly 0 at every masked (query, key), so backward needs no mask. */
#ifndef DDPC_CUDA_EMULATE /* tests/test_mha_emu.cpp runs the kernels on the host */
#include "kernels/cuda/cuda_impl.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif
#include "kernels/cuda/row_reduce.cuh"

#include <math.h>

/* v as an operand of type T: itself, or rounded to nearest even into 16 bits. */
template <typename T> static __device__ T mha_round(float v);
template <> __device__ float mha_round<float>(float v)
{
    return v;
}
template <> __device__ __nv_bfloat16 mha_round<__nv_bfloat16>(float v)
{
    return __float2bfloat16_rn(v);
}
template <> __device__ __half mha_round<__half>(float v)
{
    return __float2half_rn(v);
}

/* One operand between its caller's rows x (b, t, ld; batch rows bs apart; the first c = nh * hs
 * columns) and its head-major copy heads (b * nh, t, ldh; the first hs columns of each row). */
struct mha_rows {
    float *x;
    void *heads;
    int64_t t, ld, bs;
};
/* Up to four operands of one shape's batch and heads, one per blockIdx.y. */
struct mha_perm {
    mha_rows op[4];
    int64_t b;
    int nh, hs, ldh;
};

/* heads = x rounded to T, every operand of p. One block per x row (rows looping past the grid;
 * 32-bit column arithmetic: c < 2^31). */
template <typename T> static __global__ void mha_gather_kernel(mha_perm p)
{
    const mha_rows o = p.op[blockIdx.y];
    const int c = p.nh * p.hs;
    for (int64_t row = blockIdx.x; row < p.b * o.t; row += gridDim.x) {
        const int64_t bi = row / o.t, ti = row % o.t;
        const float *x = o.x + bi * o.bs + ti * o.ld;
        T *h0 = (T *)o.heads + (bi * p.nh * o.t + ti) * p.ldh;
        for (int col = threadIdx.x; col < c; col += blockDim.x)
            h0[(int64_t)(col / p.hs) * o.t * p.ldh + col % p.hs] = mha_round<T>(x[col]);
    }
}

/* x = heads (fp32), every operand of p: the reverse of mha_gather_kernel. */
static __global__ void mha_scatter_kernel(mha_perm p)
{
    const mha_rows o = p.op[blockIdx.y];
    const int c = p.nh * p.hs;
    for (int64_t row = blockIdx.x; row < p.b * o.t; row += gridDim.x) {
        const int64_t bi = row / o.t, ti = row % o.t;
        float *x = o.x + bi * o.bs + ti * o.ld;
        const float *h0 = (const float *)o.heads + (bi * p.nh * o.t + ti) * p.ldh;
        for (int col = threadIdx.x; col < c; col += blockDim.x)
            x[col] = h0[(int64_t)(col / p.hs) * o.t * p.ldh + col % p.hs];
    }
}

/* att rows (b * nh * tq of tk) hold scaled scores; row (bi, h, i) becomes the softmax over the
 * keys it may see (j <= i when causal, key_pad[bi, j] == 0), exactly 0 elsewhere, and all 0 when
 * it sees none (the CPU's masked_softmax_row, multiplying by 1/sum as it does). p16 (rows of ldp),
 * when given, gets the row rounded: the values product's operand. */
template <typename T>
static __global__ void mha_softmax_kernel(float *att, T *p16, int64_t ldp, const uint8_t *key_pad,
                                          int64_t rows, int64_t nh, int64_t tq, int64_t tk,
                                          bool causal)
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
        for (int64_t j = threadIdx.x; j < tk; j += blockDim.x) {
            const float pj = any != 0.0f && j < len ? p[j] * inv : 0.0f;
            p[j] = pj;
            if (p16)
                p16[row * ldp + j] = mha_round<T>(pj);
        }
    }
}

/* In place: each row of dp (rows of tk) becomes dS = scale * P * (dP - rowsum(P * dP)) (the CPU's
 * softmax_backward; P is 0 at masked keys, so dS is too). ds16 and p16 (rows of ldp), when given,
 * get dS and P rounded: the gradient products' operands. */
template <typename T>
static __global__ void mha_softmax_backward_kernel(float *dp, const float *att, T *ds16, T *p16,
                                                   int64_t ldp, int64_t rows, int64_t tk,
                                                   float scale)
{
    __shared__ float sh[32];
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        float *d = dp + row * tk;
        const float *p = att + row * tk;
        float dot = 0.0f;
        for (int64_t j = threadIdx.x; j < tk; j += blockDim.x)
            dot += p[j] * d[j];
        dot = ddpc__block_reduce(dot, ddpc__sum_op(), 0.0f, sh);
        for (int64_t j = threadIdx.x; j < tk; j += blockDim.x) {
            const float g = __fmul_rn(__fmul_rn(scale, p[j]), __fsub_rn(d[j], dot));
            d[j] = g;
            if (ds16) {
                ds16[row * ldp + j] = mha_round<T>(g);
                p16[row * ldp + j] = mha_round<T>(p[j]);
            }
        }
    }
}

/* mask (n) = tokens (n) == pad. */
static __global__ void pad_mask_kernel(uint8_t *mask, const int32_t *tokens, int64_t n, int32_t pad)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        mask[i] = tokens[i] == pad;
}

/* Where the operands sit in ws, in floats from its start, each region 256-byte aligned (cuBLAS's
 * vectorised paths like it). Head-major q, k, v, dout (b*nh, t, ldh) are T; at 16 bits their
 * rows, and those of P and dS (b*nh, tq, ldp), are padded to 8 elements (16 bytes, the tensor
 * cores' alignment; the padding is never read). y (forward's out; backward's dq) (b*nh, tq, hs),
 * dk, dv (b*nh, tk, hs) and dP (b*nh, tq, tk) are fp32; at fp32, att and dP are P and dS. */
struct mha_layout {
    int64_t hs, bh, ldh, ldp;
    int64_t q, k, v, dout, y, dk, dv, dp, p16, ds16, floats;
};

static int64_t mha_region(int64_t floats)
{
    return (floats + 63) / 64 * 64;
}

/* Floats of `elems` elements of `half` (2 bytes) or fp32, as a region. */
static int64_t mha_take(int64_t *at, int64_t elems, bool half)
{
    const int64_t from = *at;
    *at += mha_region(half ? (elems + 1) / 2 : elems);
    return from;
}

static mha_layout mha_layout_of(const ddpc_mha_shape *s, bool half)
{
    mha_layout l;
    const int64_t tq = s->tq, tk = s->tk;
    l.hs = s->c / s->nh, l.bh = s->b * s->nh;
    l.ldh = half ? (l.hs + 7) / 8 * 8 : l.hs;
    l.ldp = half ? (tk + 7) / 8 * 8 : tk;
    int64_t at = 0;
    l.q = mha_take(&at, l.bh * tq * l.ldh, half);
    l.k = mha_take(&at, l.bh * tk * l.ldh, half);
    l.v = mha_take(&at, l.bh * tk * l.ldh, half);
    l.dout = mha_take(&at, l.bh * tq * l.ldh, half);
    l.y = mha_take(&at, l.bh * tq * l.hs, false);
    l.dk = mha_take(&at, l.bh * tk * l.hs, false);
    l.dv = mha_take(&at, l.bh * tk * l.hs, false);
    l.dp = mha_take(&at, l.bh * tq * tk, false);
    l.p16 = mha_take(&at, half ? l.bh * tq * l.ldp : 0, true);
    l.ds16 = mha_take(&at, half ? l.bh * tq * l.ldp : 0, true);
    l.floats = at;
    return l;
}

/* Both passes' workspace for s at any precision: every region grows with b, tq and tk. */
static size_t mha_workspace_floats(const ddpc_mha_shape *s)
{
    const int64_t f32 = mha_layout_of(s, false).floats, f16 = mha_layout_of(s, true).floats;
    return (size_t)(f32 > f16 ? f32 : f16);
}

/* The permutes' shape, operands unset. */
static mha_perm mha_perm_of(const ddpc_mha_shape *s, int64_t ldh)
{
    mha_perm p = {};
    p.b = s->b, p.nh = (int)s->nh, p.hs = (int)(s->c / s->nh), p.ldh = (int)ldh;
    return p;
}

static mha_rows mha_rows_of(const float *x, void *heads, int64_t t, int64_t ld, int64_t bs)
{
    return mha_rows{(float *)x, heads, t, ld, bs};
}

/* The host sequences, on a device `dev` that gives grid(rows) (blocks for a row loop), launch(
 * kernel, blocks, operands, threads, args...) and gemm(prec, in16, ta, tb, m, n, k, alpha, a,
 * lda, sa, b, ldb, sb, c, ldc, sc, batch): ddpc__cuda_gemm_batched's contract. T is the products'
 * operand type. Forward: gather q, k, v; att = scale q k^T; softmax; y = P v; scatter y to out. */
template <typename T, typename Dev>
static void mha_forward_t(Dev &dev, ddpc_precision prec, float *out, float *att, const float *q,
                          const float *k, const float *v, const uint8_t *key_pad,
                          const ddpc_mha_shape *s, float *ws)
{
    const bool half = sizeof(T) == 2;
    const mha_layout L = mha_layout_of(s, half);
    const int64_t tq = s->tq, tk = s->tk, hs = L.hs, rows = L.bh * tq, ldh = L.ldh, ldp = L.ldp;
    const int64_t sk = ddpc_mha_kv_batch_stride(s);
    T *hq = (T *)(ws + L.q), *hk = (T *)(ws + L.k), *hv = (T *)(ws + L.v);
    T *p16 = half ? (T *)(ws + L.p16) : nullptr;
    float *y = ws + L.y;
    const unsigned row_threads = (unsigned)ddpc__row_threads(s->c, 256);
    mha_perm in = mha_perm_of(s, ldh);
    in.op[0] = mha_rows_of(q, hq, tq, s->ldq, ddpc_mha_q_batch_stride(s));
    in.op[1] = mha_rows_of(k, hk, tk, s->ldk, sk);
    in.op[2] = mha_rows_of(v, hv, tk, s->ldk, sk);
    dev.launch(mha_gather_kernel<T>, dev.grid(s->b * (tq > tk ? tq : tk)), 3, row_threads, in);
    dev.gemm(prec, half, false, true, tq, tk, hs, 1.0f / sqrtf((float)hs), hq, ldh, tq * ldh, hk,
             ldh, tk * ldh, att, tk, tq * tk, L.bh);
    dev.launch(mha_softmax_kernel<T>, dev.grid(rows), 1, (unsigned)ddpc__row_threads(tk, 256), att,
               p16, ldp, key_pad, rows, s->nh, tq, tk, s->causal);
    const void *p = half ? (const void *)p16 : att; /* at fp32 ldp is tk: att's own rows */
    dev.gemm(prec, half, false, false, tq, hs, tk, 1.0f, p, ldp, tq * ldp, hv, ldh, tk * ldh, y, hs,
             tq * hs, L.bh);
    mha_perm o = mha_perm_of(s, hs);
    o.op[0] = mha_rows_of(out, y, tq, s->c, tq * s->c);
    dev.launch(mha_scatter_kernel, dev.grid(s->b * tq), 1, row_threads, o);
}

/* Backward: gather q, k, v, dout; dP = dout v^T; dS (and at 16 bits P) by the softmax backward;
 * dv = P^T dout, dq = dS k, dk = dS^T q; scatter dq, dk, dv. */
template <typename T, typename Dev>
static void mha_backward_t(Dev &dev, ddpc_precision prec, float *dq, float *dk, float *dv,
                           const float *dout, const float *q, const float *k, const float *v,
                           const float *att, const ddpc_mha_shape *s, float *ws)
{
    const bool half = sizeof(T) == 2;
    const mha_layout L = mha_layout_of(s, half);
    const int64_t tq = s->tq, tk = s->tk, hs = L.hs, rows = L.bh * tq, ldh = L.ldh, ldp = L.ldp;
    const int64_t sq = ddpc_mha_q_batch_stride(s), sk = ddpc_mha_kv_batch_stride(s);
    T *hq = (T *)(ws + L.q), *hk = (T *)(ws + L.k), *hv = (T *)(ws + L.v);
    T *hdo = (T *)(ws + L.dout);
    T *p16 = half ? (T *)(ws + L.p16) : nullptr, *ds16 = half ? (T *)(ws + L.ds16) : nullptr;
    float *gq = ws + L.y, *gk = ws + L.dk, *gv = ws + L.dv, *dp = ws + L.dp;
    const unsigned row_threads = (unsigned)ddpc__row_threads(s->c, 256);
    mha_perm in = mha_perm_of(s, ldh);
    in.op[0] = mha_rows_of(q, hq, tq, s->ldq, sq);
    in.op[1] = mha_rows_of(k, hk, tk, s->ldk, sk);
    in.op[2] = mha_rows_of(v, hv, tk, s->ldk, sk);
    in.op[3] = mha_rows_of(dout, hdo, tq, s->c, tq * s->c);
    dev.launch(mha_gather_kernel<T>, dev.grid(s->b * (tq > tk ? tq : tk)), 4, row_threads, in);
    dev.gemm(prec, half, false, true, tq, tk, hs, 1.0f, hdo, ldh, tq * ldh, hv, ldh, tk * ldh, dp,
             tk, tq * tk, L.bh);
    dev.launch(mha_softmax_backward_kernel<T>, dev.grid(rows), 1,
               (unsigned)ddpc__row_threads(tk, 256), dp, att, ds16, p16, ldp, rows, tk,
               1.0f / sqrtf((float)hs));
    /* At fp32 ldp is tk: P and dS are att and dp as they are. */
    const void *p = half ? (const void *)p16 : att, *ds = half ? (const void *)ds16 : dp;
    dev.gemm(prec, half, true, false, tk, hs, tq, 1.0f, p, ldp, tq * ldp, hdo, ldh, tq * ldh, gv,
             hs, tk * hs, L.bh);
    dev.gemm(prec, half, false, false, tq, hs, tk, 1.0f, ds, ldp, tq * ldp, hk, ldh, tk * ldh, gq,
             hs, tq * hs, L.bh);
    dev.gemm(prec, half, true, false, tk, hs, tq, 1.0f, ds, ldp, tq * ldp, hq, ldh, tq * ldh, gk,
             hs, tk * hs, L.bh);
    mha_perm o = mha_perm_of(s, hs);
    o.op[0] = mha_rows_of(dq, gq, tq, s->ldq, sq);
    o.op[1] = mha_rows_of(dk, gk, tk, s->ldk, sk);
    o.op[2] = mha_rows_of(dv, gv, tk, s->ldk, sk);
    dev.launch(mha_scatter_kernel, dev.grid(s->b * (tq > tk ? tq : tk)), 3, row_threads, o);
}

/* Nothing to do for an empty shape (the CPU's loops run zero times). */
static bool mha_empty(const ddpc_mha_shape *s)
{
    return s->b <= 0 || s->tq <= 0 || s->tk <= 0 || s->nh <= 0 || s->c / s->nh <= 0;
}

template <typename Dev>
static void mha_forward_on(Dev &dev, ddpc_precision prec, float *out, float *att, const float *q,
                           const float *k, const float *v, const uint8_t *key_pad,
                           const ddpc_mha_shape *s, float *ws)
{
    if (mha_empty(s))
        return;
    if (prec == DDPC_PREC_BF16)
        mha_forward_t<__nv_bfloat16>(dev, prec, out, att, q, k, v, key_pad, s, ws);
    else if (prec == DDPC_PREC_FP16)
        mha_forward_t<__half>(dev, prec, out, att, q, k, v, key_pad, s, ws);
    else
        mha_forward_t<float>(dev, prec, out, att, q, k, v, key_pad, s, ws);
}

template <typename Dev>
static void mha_backward_on(Dev &dev, ddpc_precision prec, float *dq, float *dk, float *dv,
                            const float *dout, const float *q, const float *k, const float *v,
                            const float *att, const ddpc_mha_shape *s, float *ws)
{
    if (mha_empty(s))
        return;
    if (prec == DDPC_PREC_BF16)
        mha_backward_t<__nv_bfloat16>(dev, prec, dq, dk, dv, dout, q, k, v, att, s, ws);
    else if (prec == DDPC_PREC_FP16)
        mha_backward_t<__half>(dev, prec, dq, dk, dv, dout, q, k, v, att, s, ws);
    else
        mha_backward_t<float>(dev, prec, dq, dk, dv, dout, q, k, v, att, s, ws);
}

#ifndef DDPC_CUDA_EMULATE /* the host side: launches */
/* The device of the host sequences: the one stream, cuBLAS. */
struct mha_cuda {
    /* One block per row, looping past 65535 * 16 rows. */
    unsigned grid(int64_t rows) const { return (unsigned)(rows < 65535 * 16 ? rows : 65535 * 16); }
    template <typename... P, typename... A>
    void launch(void (*kernel)(P...), unsigned blocks, unsigned operands, unsigned threads,
                A... args) const
    {
        kernel<<<dim3(blocks, operands), threads, 0, ddpc__cuda_stream()>>>(args...);
        DDPC_CUDA_LAUNCHED();
    }
    void gemm(ddpc_precision prec, bool in16, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
              float alpha, const void *a, int64_t lda, int64_t sa, const void *b, int64_t ldb,
              int64_t sb, float *c, int64_t ldc, int64_t sc, int64_t batch) const
    {
        ddpc__cuda_gemm_batched(prec, in16, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, c, ldc,
                                sc, batch);
    }
};

extern "C" size_t ddpc__cuda_mha_workspace_floats(const ddpc_mha_shape *s)
{
    return mha_workspace_floats(s);
}

extern "C" void ddpc__cuda_mha_forward(ddpc_precision prec, float *out, float *att, const float *q,
                                       const float *k, const float *v, const uint8_t *key_pad,
                                       const ddpc_mha_shape *s, float *ws)
{
    if (mha_empty(s))
        return;
    DDPC_ASSERT(ws != NULL); /* a caller that sized no workspace: a bug, not input */
    mha_cuda dev;
    mha_forward_on(dev, prec, out, att, q, k, v, key_pad, s, ws);
}

extern "C" void ddpc__cuda_mha_backward(ddpc_precision prec, float *dq, float *dk, float *dv,
                                        const float *dout, const float *q, const float *k,
                                        const float *v, const float *att, const ddpc_mha_shape *s,
                                        float *ws)
{
    if (mha_empty(s))
        return;
    DDPC_ASSERT(ws != NULL); /* a caller that sized no workspace: a bug, not input */
    mha_cuda dev;
    mha_backward_on(dev, prec, dq, dk, dv, dout, q, k, v, att, s, ws);
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
