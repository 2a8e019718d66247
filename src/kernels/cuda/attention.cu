// SPDX-License-Identifier: MIT
/* Causal multi-head self-attention (Vaswani et al. 2017) in GPT-2's layout on the GPU, with the
 * CPU kernel's contract (kernels/cpu/attention.c): qkv (B, T, 3C) = q | k | v, head h owns columns
 * h*hs .. (h+1)*hs of each; att (B, NH, T, T) holds the softmax probabilities, exactly 0 above the
 * diagonal; backward OVERWRITES dqkv. q, k, v (and dout) are permuted into (B*NH, T, hs) in the
 * workspace so every product is one cuBLAS strided-batched GEMM over B*NH heads; softmax and its
 * backward are ddpc's row kernels with fixed-order reductions (reruns give the same bits).
 * At bf16/fp16 with head dims 32, 64 and 128 the fused kernels of attention_flash.cu run instead
 * (where ddpc__cuda_flash_applies), and att holds their saved state
 * (ddpc__cuda_attention_saved_floats). */
#ifndef DDPC_CUDA_EMULATE /* tests/test_attention_emu.cpp runs the kernels on the host */
#include "kernels/cuda/cuda_impl.h"
#endif
#include "kernels/cuda/row_reduce.cuh"

#include <math.h>

/* Between packed rows of `parts` (B, T, parts, NH, hs) slices and `parts` head-major arrays
 * (B, NH, T, hs), `stride` floats apart: to_heads gathers packed into heads, else the reverse.
 * One block per packed row (32-bit column arithmetic: a row is parts * C < 2^31 floats); every
 * element of the destination is written once. */
static __global__ void permute_kernel(float *heads, float *packed, int64_t b, int64_t t, int nh,
                                      int hs, int parts, int64_t stride, bool to_heads)
{
    const int c = nh * hs, width = parts * c;
    for (int64_t row = blockIdx.x; row < b * t; row += gridDim.x) {
        const int64_t bi = row / t, ti = row % t;
        for (int col = threadIdx.x; col < width; col += blockDim.x) {
            const int part = col / c, h = col % c / hs, d = col % hs;
            const int64_t at = part * stride + ((bi * nh + h) * t + ti) * hs + d;
            const int64_t e = row * width + col;
            if (to_heads)
                heads[at] = packed[e];
            else
                packed[e] = heads[at];
        }
    }
}

/* att rows (rows = B*NH*T of T) hold scaled scores; row i of each head becomes a softmax over keys
 * 0..i and exactly 0 after (the CPU's causal_softmax_rows, multiplying by 1/sum as it does). */
static __global__ void causal_softmax_kernel(float *att, int64_t rows, int64_t t)
{
    __shared__ float sh[32];
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        float *p = att + row * t;
        const int64_t len = row % t + 1;
        const float inv = 1.0f / ddpc__row_max_expsum(p, p, len, sh).sum;
        for (int64_t j = threadIdx.x; j < t; j += blockDim.x)
            p[j] = j < len ? p[j] * inv : 0.0f;
    }
}

/* In place: datt row i becomes dpre = scale * P * (dP - rowsum(P * dP)) over keys 0..i, 0 after
 * (the CPU's softmax_backward_rows, same order of operations). */
static __global__ void causal_softmax_backward_kernel(float *datt, const float *att, int64_t rows,
                                                      int64_t t, float scale)
{
    __shared__ float sh[32];
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        float *d = datt + row * t;
        const float *p = att + row * t;
        const int64_t len = row % t + 1;
        float dot = 0.0f;
        for (int64_t j = threadIdx.x; j < len; j += blockDim.x)
            dot += p[j] * d[j];
        dot = ddpc__block_reduce(dot, ddpc__sum_op(), 0.0f, sh);
        for (int64_t j = threadIdx.x; j < t; j += blockDim.x)
            d[j] = j < len ? scale * p[j] * (d[j] - dot) : 0.0f;
    }
}

#ifndef DDPC_CUDA_EMULATE /* the host side: launches */
/* Workspace regions start on 256-byte boundaries, which cuBLAS's vectorised paths like. */
static int64_t region(int64_t floats)
{
    return (floats + 63) / 64 * 64;
}

/* Forward uses q, k, v (y reuses q's region); backward q, k, v, dout, dq, dk, dv, then datt.
 * Unlike the CPU kernel, forward needs ws too (it may not be NULL here). The fused kernels use it
 * in backward only: D (B, NH, T), q, k, v, dout at 16 bits and every causal tile pair's dS
 * (attention_flash.cu), about 315 MB for GPT-2 124M at B 16. */
extern "C" size_t ddpc__cuda_attention_workspace_floats(ddpc_precision prec, int64_t b, int64_t t,
                                                        int64_t c, int64_t nh)
{
    if (ddpc__cuda_flash_applies(prec, b, t, c, nh))
        return ddpc__cuda_flash_workspace_floats(b, t, c, nh);
    return (size_t)(7 * region(b * t * c) + region(b * nh * t * t));
}

/* The probabilities (B, NH, T, T); the fused kernels' row logsumexps (B, NH, T) and a copy of out
 * (B, T, C), from which backward's D = rowsum(dout * out) comes (backward is not given out). */
extern "C" size_t ddpc__cuda_attention_saved_floats(ddpc_precision prec, int64_t b, int64_t t,
                                                    int64_t c, int64_t nh)
{
    if (ddpc__cuda_flash_applies(prec, b, t, c, nh))
        return (size_t)(b * nh * t + b * t * c);
    return (size_t)(b * nh * t * t);
}

static void permute(float *heads, float *packed, int64_t b, int64_t t, int64_t nh, int64_t hs,
                    int parts, int64_t stride, bool to_heads)
{
    const int64_t rows = b * t;
    permute_kernel<<<(unsigned)(rows < 65535 * 16 ? rows : 65535 * 16), 256, 0,
                     ddpc__cuda_stream()>>>(heads, packed, b, t, (int)nh, (int)hs, parts, stride,
                                            to_heads);
    DDPC_CUDA_LAUNCHED();
}

/* Rows handled by one block each, looping when there are more than the grid. */
static unsigned row_grid(int64_t rows)
{
    return (unsigned)(rows < 65535 * 16 ? rows : 65535 * 16);
}

extern "C" void ddpc__cuda_attention_forward(ddpc_precision prec, float *out, float *att,
                                             const float *qkv, int64_t b, int64_t t, int64_t c,
                                             int64_t nh, float *ws)
{
    if (b <= 0 || t <= 0 || c <= 0 || nh <= 0)
        return;
    if (ddpc__cuda_flash_applies(prec, b, t, c, nh)) {
        ddpc__cuda_flash_forward(prec, out, att, qkv, b, t, c, nh);
        return;
    }
    DDPC_ASSERT(ws != NULL); /* a caller that sized no workspace: a bug, not input */
    const int64_t hs = c / nh, r = region(b * t * c), bh = b * nh, rows = bh * t;
    const float scale = 1.0f / sqrtf((float)hs);
    float *q = ws, *k = ws + r, *v = ws + 2 * r, *y = q; /* y overwrites q once scores exist */
    permute(q, (float *)qkv, b, t, nh, hs, 3, r, true);  /* reads qkv only */
    /* att (T, T) per head = scale q k^T, the full square; the softmax zeroes above the diagonal. */
    ddpc__cuda_gemm_batched(prec, false, false, true, t, t, hs, scale, q, hs, t * hs, k, hs,
                            t * hs, att, t, t * t, bh);
    causal_softmax_kernel<<<row_grid(rows), ddpc__row_threads(t, 256), 0, ddpc__cuda_stream()>>>(
        att, rows, t);
    DDPC_CUDA_LAUNCHED();
    /* y (T, hs) per head = att v: the zeros above the diagonal keep it causal. */
    ddpc__cuda_gemm_batched(prec, false, false, false, t, hs, t, 1.0f, att, t, t * t, v, hs,
                            t * hs, y, hs, t * hs, bh);
    permute(y, out, b, t, nh, hs, 1, r, false);
}

extern "C" void ddpc__cuda_attention_backward(ddpc_precision prec, float *dqkv, const float *dout,
                                              const float *qkv, const float *att, int64_t b,
                                              int64_t t, int64_t c, int64_t nh, float *ws)
{
    if (b <= 0 || t <= 0 || c <= 0 || nh <= 0)
        return;
    DDPC_ASSERT(ws != NULL); /* a caller that sized no workspace: a bug, not input */
    if (ddpc__cuda_flash_applies(prec, b, t, c, nh)) {
        ddpc__cuda_flash_backward(prec, dqkv, dout, qkv, att, b, t, c, nh, ws);
        return;
    }
    const int64_t hs = c / nh, r = region(b * t * c), bh = b * nh, rows = bh * t;
    const int64_t th = t * hs, tt = t * t;
    const float scale = 1.0f / sqrtf((float)hs);
    float *q = ws, *k = ws + r, *v = ws + 2 * r, *dy = ws + 3 * r;
    float *dq = ws + 4 * r, *dk = ws + 5 * r, *dv = ws + 6 * r, *datt = ws + 7 * r;
    permute(q, (float *)qkv, b, t, nh, hs, 3, r, true);   /* reads qkv only */
    permute(dy, (float *)dout, b, t, nh, hs, 1, r, true); /* reads dout only */
    /* datt = dy v^T; dv = att^T dy (att is 0 above the diagonal: only later queries count). */
    ddpc__cuda_gemm_batched(prec, false, false, true, t, t, hs, 1.0f, dy, hs, th, v, hs, th, datt,
                            t, tt, bh);
    ddpc__cuda_gemm_batched(prec, false, true, false, t, hs, t, 1.0f, att, t, tt, dy, hs, th, dv,
                            hs, th, bh);
    causal_softmax_backward_kernel<<<row_grid(rows), ddpc__row_threads(t, 256), 0,
                                     ddpc__cuda_stream()>>>(datt, att, rows, t, scale);
    DDPC_CUDA_LAUNCHED();
    /* dq = dpre k; dk = dpre^T q. */
    ddpc__cuda_gemm_batched(prec, false, false, false, t, hs, t, 1.0f, datt, t, tt, k, hs, th, dq,
                            hs, th, bh);
    ddpc__cuda_gemm_batched(prec, false, true, false, t, hs, t, 1.0f, datt, t, tt, q, hs, th, dk,
                            hs, th, bh);
    /* dq, dk, dv are consecutive regions r apart: one scatter writes every element of dqkv. */
    permute(dq, dqkv, b, t, nh, hs, 3, r, false);
}
#endif
