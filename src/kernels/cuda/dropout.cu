// SPDX-License-Identifier: MIT
/* Inverted dropout on the device with the CPU's masks: keep_i = uniform(seed, stream, i) >= p,
 * where uniform is src/core/rng.c's counter-based SplitMix64 generator ported bit for bit (64-bit
 * integer arithmetic wraps the same way on both sides; the 24-bit value and the power-of-two scale
 * make the float exact). The mask is recomputed in backward, never stored. */
#ifndef DDPC_CUDA_EMULATE /* tests/test_dropout_emu.cpp runs the kernels on the host */
#include "kernels/cuda/cuda_impl.h"
#endif

static const int kThreads = 256;

/* SplitMix64's finaliser, as mix64 in src/core/rng.c. */
static __host__ __device__ __forceinline__ uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* The per-(seed, stream) key of ddpc_rng_at, computed once on the host. */
static uint64_t stream_key(uint64_t seed, uint64_t stream)
{
    return mix64(seed * 0x9e3779b97f4a7c15ULL + mix64(stream + 0x632be59bd9b4e019ULL));
}

/* == ddpc_rng_uniform_at(seed, stream, i) for key = stream_key(seed, stream). */
static __device__ __forceinline__ float mask_uniform(uint64_t key, uint64_t i)
{
    uint64_t z = mix64(key + (i + 1) * 0x9e3779b97f4a7c15ULL);
    return __fmul_rn((float)(int32_t)(z >> 40), 1.0f / 16777216.0f);
}

/* out (n) = (accumulate ? out : 0) + in * keep / (1 - p); the product is rounded before the sum,
 * as on the CPU, where the select between it and 0 keeps the two apart. */
static __global__ void dropout_kernel(float *out, const float *in, int64_t n, float p, float scale,
                                      uint64_t key, int accumulate)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float v = mask_uniform(key, (uint64_t)i) >= p ? __fmul_rn(in[i], scale) : 0.0f;
        out[i] = accumulate ? __fadd_rn(out[i], v) : v;
    }
}

static __global__ void accumulate_kernel(float *out, const float *in, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        out[i] = __fadd_rn(out[i], in[i]);
}

#ifndef DDPC_CUDA_EMULATE /* the host side: launches */
static void apply_mask(float *out, const float *in, int64_t n, float p, uint64_t seed,
                       uint64_t stream, int accumulate)
{
    const float scale = 1.0f / (1.0f - p); /* host fp32 division, as the CPU kernel computes it */
    dropout_kernel<<<ddpc__cuda_blocks(n, kThreads), kThreads, 0, ddpc__cuda_stream()>>>(
        out, in, n, p, scale, stream_key(seed, stream), accumulate);
    DDPC_CUDA_LAUNCHED();
}

extern "C" void ddpc__cuda_dropout_forward(float *y, const float *x, int64_t n, float p,
                                           uint64_t seed, uint64_t stream)
{
    if (n <= 0)
        return;
    if (p <= 0.0f) {
        if (y != x)
            DDPC_CUDA_CHECK(cudaMemcpyAsync(y, x, (size_t)n * sizeof(float),
                                            cudaMemcpyDeviceToDevice, ddpc__cuda_stream()));
        return;
    }
    apply_mask(y, x, n, p, seed, stream, 0);
}

extern "C" void ddpc__cuda_dropout_backward(float *dx, const float *dy, int64_t n, float p,
                                            uint64_t seed, uint64_t stream)
{
    if (!dx || n <= 0)
        return;
    if (p <= 0.0f) { /* the CPU's axpy with alpha 1: dx += dy */
        accumulate_kernel<<<ddpc__cuda_blocks(n, kThreads), kThreads, 0, ddpc__cuda_stream()>>>(
            dx, dy, n);
        DDPC_CUDA_LAUNCHED();
        return;
    }
    apply_mask(dx, dy, n, p, seed, stream, 1);
}
#endif
