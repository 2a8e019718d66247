// SPDX-License-Identifier: MIT
/* f32 <-> bf16/f16 arrays on the GPU for DDP's compressed gradient buckets: the bit arithmetic of
 * core/half.c, element for element, so a bucket compressed on the GPU holds the CPU's bits
 * (round to nearest even, NaN kept and quieted, overflow to infinity, f16 subnormals). Integer
 * operations only, except f16's subnormal rounding, which is one IEEE f32 add as on the CPU.
 * Invariant: each element is converted independently by grid-stride loops.
 * tests/test_half_emu.cpp runs the kernels on the host (tests/cuda_emu.h) against core/half.c. */
#ifndef DDPC_CUDA_EMULATE
#include "kernels/cuda/cuda_impl.h"
#endif

#define THREADS 256

#define GRID_STRIDE(i, n)                                                                          \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                      \
         i += (int64_t)gridDim.x * blockDim.x)

static __device__ uint16_t to_bf16(float f)
{
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep sign and top payload, force quiet */
        return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even; overflow carries into inf */
    return (uint16_t)(u >> 16);
}

static __device__ uint16_t to_f16(float f)
{
    uint32_t u = __float_as_uint(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    u &= 0x7fffffffu;
    if (u > 0x7f800000u) /* NaN: quiet, keep the top payload bits */
        return (uint16_t)(sign | 0x7e00u | ((u >> 13) & 0x3ffu));
    if (u >= 0x477ff000u) /* >= 65520 rounds to inf */
        return (uint16_t)(sign | 0x7c00u);
    if (u < 0x38800000u) { /* f16 subnormal: adding 0.5 rounds at 2^-24 (RNE), __fadd_rn: no FMA */
        float r = __fadd_rn(__uint_as_float(u), 0.5f);
        return (uint16_t)(sign | (__float_as_uint(r) - __float_as_uint(0.5f)));
    }
    uint32_t odd = (u >> 13) & 1u; /* rebias 127 -> 15 and round the 13 dropped bits to even */
    u += ((uint32_t)(15 - 127) << 23) + 0xfffu + odd;
    return (uint16_t)(sign | (u >> 13));
}

static __device__ float from_f16(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1f) /* inf or NaN: payload to the top of the f32 mantissa, a NaN made quiet */
        return __uint_as_float(sign | 0x7f800000u | (man << 13) | (man ? 0x00400000u : 0u));
    if (exp == 0) /* zero or subnormal: man * 2^-24, exact in f32 */
        return __uint_as_float(sign | __float_as_uint(__fmul_rn((float)man, 0x1p-24f)));
    return __uint_as_float(sign | ((exp + 112u) << 23) | (man << 13));
}

static __global__ void to_half_kernel(uint16_t *dst, const float *src, int64_t n, int bf16)
{
    GRID_STRIDE(i, n) dst[i] = bf16 ? to_bf16(src[i]) : to_f16(src[i]);
}

static __global__ void from_half_kernel(float *dst, const uint16_t *src, int64_t n, int bf16)
{
    GRID_STRIDE(i, n) dst[i] = bf16 ? __uint_as_float((uint32_t)src[i] << 16) : from_f16(src[i]);
}

#ifndef DDPC_CUDA_EMULATE /* the host side: launches */
extern "C" void ddpc__cuda_f32_to_half_array(uint16_t *dst, const float *src, size_t n, int bf16)
{
    if (n == 0)
        return;
    to_half_kernel<<<ddpc__cuda_blocks((int64_t)n, THREADS), THREADS, 0, ddpc__cuda_stream()>>>(
        dst, src, (int64_t)n, bf16);
    DDPC_CUDA_LAUNCHED();
}

extern "C" void ddpc__cuda_half_to_f32_array(float *dst, const uint16_t *src, size_t n, int bf16)
{
    if (n == 0)
        return;
    from_half_kernel<<<ddpc__cuda_blocks((int64_t)n, THREADS), THREADS, 0, ddpc__cuda_stream()>>>(
        dst, src, (int64_t)n, bf16);
    DDPC_CUDA_LAUNCHED();
}
#endif
