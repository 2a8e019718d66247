// SPDX-License-Identifier: MIT
/* Transformer input embeddings (Vaswani et al. 2017, 3.4-3.5) on the GPU, with
 * kernels/cpu/positional.c's contract: token embeddings scaled by a constant plus fixed
 * sinusoidal positions (computed in double, rounded once to fp32, as the CPU does). Invariant:
 * backward scales dy into scratch and hands it to embedding.cu's backward, whose sum per token row
 * runs in ascending position (the CPU's order, no float atomics): the same bits on every rerun. */
#ifndef DDPC_CUDA_EMULATE /* tests/test_positional_emu.cpp runs the kernels on the host */
#include "kernels/cuda/cuda_impl.h"
#endif

#include <math.h>

/* pe (t, c): pe[p, 2i] = sin(p / 10000^(2i/c)), pe[p, 2i+1] = cos(...), one thread per pair. */
static __global__ void sinusoidal_kernel(float *pe, int64_t t, int64_t c)
{
    const int64_t pairs = (c + 1) / 2;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < t * pairs;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t p = e / pairs, i = 2 * (e % pairs);
        const double angle = (double)p * exp((double)i * (-log(10000.0) / (double)c));
        pe[p * c + i] = (float)sin(angle);
        if (i + 1 < c)
            pe[p * c + i + 1] = (float)cos(angle);
    }
}

/* y (b*t, c) = scale * w[tokens] + pe[position], each product and sum rounded on its own. */
static __global__ void embedding_scaled_kernel(float *y, const int32_t *tokens, const float *w,
                                               float scale, const float *pe, int64_t bt, int64_t t,
                                               int64_t c)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < bt * c;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t i = e / c, j = e % c;
        const float s = __fmul_rn(scale, w[(int64_t)tokens[i] * c + j]);
        y[e] = pe ? __fadd_rn(s, pe[(i % t) * c + j]) : s;
    }
}

/* out (n) = scale * x (n). */
static __global__ void scale_copy_kernel(float *out, const float *x, float scale, int64_t n)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x)
        out[e] = __fmul_rn(scale, x[e]);
}

#ifndef DDPC_CUDA_EMULATE /* the host side: launches */
extern "C" void ddpc__cuda_sinusoidal_positions(float *pe, int64_t t, int64_t c)
{
    const int64_t n = t * ((c + 1) / 2);
    if (n <= 0)
        return;
    sinusoidal_kernel<<<ddpc__cuda_blocks(n, 256), 256, 0, ddpc__cuda_stream()>>>(pe, t, c);
    DDPC_CUDA_LAUNCHED();
}

extern "C" void ddpc__cuda_embedding_scaled_forward(float *y, const int32_t *tokens, const float *w,
                                                    float scale, const float *pe, int64_t b,
                                                    int64_t t, int64_t c)
{
    const int64_t n = b * t * c;
    if (n <= 0)
        return;
    embedding_scaled_kernel<<<ddpc__cuda_blocks(n, 256), 256, 0, ddpc__cuda_stream()>>>(
        y, tokens, w, scale, pe, b * t, t, c);
    DDPC_CUDA_LAUNCHED();
}

/* The CPU adds scale * dy[i] to its token's row in position order; so does embedding.cu's
 * backward with dy scaled first (the same rounded products). */
extern "C" void ddpc__cuda_embedding_scaled_backward(float *dw, const float *dy,
                                                     const int32_t *tokens, float scale, int64_t b,
                                                     int64_t t, int64_t c)
{
    const int64_t n = b * t * c;
    if (n <= 0)
        return;
    float *scaled = (float *)ddpc__cuda_scratch(DDPC__CUDA_SCRATCH_S2S, (size_t)n * sizeof(float));
    scale_copy_kernel<<<ddpc__cuda_blocks(n, 256), 256, 0, ddpc__cuda_stream()>>>(scaled, dy, scale,
                                                                                  n);
    DDPC_CUDA_LAUNCHED();
    ddpc__cuda_embedding_backward(dw, NULL, scaled, tokens, b, t, c);
}
#endif
