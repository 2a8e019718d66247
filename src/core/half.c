// SPDX-License-Identifier: MIT
/* bf16 and f16 conversions in portable bit arithmetic (no _Float16, so every compiler builds it).
 * bf16 is the top half of an f32 rounded to nearest even; f16 rebiases the exponent and rounds the
 * 13 dropped mantissa bits to even, with subnormals, infinities and quiet NaNs. The exhaustive
 * checks are in tests/test_comm_reduce.c. */
#include <ddpc/half.h>

#include "core/simd_dispatch.h"

#include <string.h>
#ifdef __F16C__
#include <immintrin.h>
#endif

/* One definition of the scalar conversions; the array loops below are compiled per ISA and call
 * them only for tails. */
#if !DDPC_SIMD_CLONE
static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float ddpc_bf16_to_f32(uint16_t h)
{
    return bits_f32((uint32_t)h << 16);
}

uint16_t ddpc_f32_to_bf16(float f)
{
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep sign and top payload, force quiet */
        return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even; overflow carries into inf */
    return (uint16_t)(u >> 16);
}

float ddpc_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1f) /* inf or NaN: payload moves to the top of the f32 mantissa, a NaN made
                      * quiet as F16C's vcvtph2ps makes it (the array loops use that) */
        return bits_f32(sign | 0x7f800000u | (man << 13) | (man ? 0x00400000u : 0u));
    if (exp == 0) { /* zero or subnormal: man * 2^-24, exact in f32 */
        float v = (float)man * 0x1p-24f;
        return bits_f32(sign | f32_bits(v));
    }
    return bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

uint16_t ddpc_f32_to_f16(float f)
{
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    u &= 0x7fffffffu;
    if (u > 0x7f800000u) /* NaN: quiet, keep the top payload bits */
        return (uint16_t)(sign | 0x7e00u | ((u >> 13) & 0x3ffu));
    if (u >= 0x477ff000u) /* >= 65520 rounds to inf (65504 is the largest finite) */
        return (uint16_t)(sign | 0x7c00u);
    if (u < 0x38800000u) { /* below 2^-14: f16 subnormal; adding 0.5 rounds at 2^-24 (RNE) */
        float r = bits_f32(u) + 0.5f;
        return (uint16_t)(sign | (f32_bits(r) - f32_bits(0.5f)));
    }
    uint32_t odd = (u >> 13) & 1u; /* rebias 127 -> 15 and round the 13 dropped bits to even */
    u += ((uint32_t)(15 - 127) << 23) + 0xfffu + odd;
    return (uint16_t)(sign | (u >> 13));
}
#endif

/* Chunk conversions: bf16 is a shift (the compiler vectorises it); f16 uses F16C when built for
 * it (the avx2 and avx512 variants, or -march=native), with the scalar code for the tail. */
static void bf16_load(float *restrict out, const uint16_t *restrict in, size_t m)
{
    for (size_t i = 0; i < m; i++) {
        uint32_t u = (uint32_t)in[i] << 16;
        memcpy(out + i, &u, sizeof u);
    }
}

static void bf16_store(uint16_t *restrict out, const float *restrict in, size_t m)
{
    for (size_t i = 0; i < m; i++) {
        uint32_t u;
        memcpy(&u, in + i, sizeof u);
        uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
        uint32_t nan = (u >> 16) | 0x0040u;
        out[i] = (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
    }
}

static void f16_load(float *restrict out, const uint16_t *restrict in, size_t m)
{
    size_t i = 0;
#ifdef __F16C__
    for (; i + 8 <= m; i += 8)
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(in + i))));
#endif
    for (; i < m; i++)
        out[i] = ddpc_f16_to_f32(in[i]);
}

static void f16_store(uint16_t *restrict out, const float *restrict in, size_t m)
{
    size_t i = 0;
#ifdef __F16C__
    for (; i + 8 <= m; i += 8) {
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
        _mm_storeu_si128((__m128i *)(out + i), h);
    }
#endif
    for (; i < m; i++)
        out[i] = ddpc_f32_to_f16(in[i]);
}

void DDPC_SIMD(ddpc_f32_to_half_array)(uint16_t *restrict dst, const float *restrict src, size_t n,
                                       int bf16)
{
    if (bf16)
        bf16_store(dst, src, n);
    else
        f16_store(dst, src, n);
}
DDPC_SIMD_DISPATCH_VOID(ddpc_f32_to_half_array,
                        (uint16_t *restrict dst, const float *restrict src, size_t n, int bf16),
                        (dst, src, n, bf16))

void DDPC_SIMD(ddpc_half_to_f32_array)(float *restrict dst, const uint16_t *restrict src, size_t n,
                                       int bf16)
{
    if (bf16)
        bf16_load(dst, src, n);
    else
        f16_load(dst, src, n);
}
DDPC_SIMD_DISPATCH_VOID(ddpc_half_to_f32_array,
                        (float *restrict dst, const uint16_t *restrict src, size_t n, int bf16),
                        (dst, src, n, bf16))

/* Round trips: bf16 keeps the top half (rounded, NaN quieted) in place; f16 goes through F16C. */
static void bf16_round(float *out, const float *in, size_t m)
{
    for (size_t i = 0; i < m; i++) {
        uint32_t u;
        memcpy(&u, in + i, sizeof u);
        uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
        uint32_t nan = (u & 0xffff0000u) | 0x00400000u;
        uint32_t r = (u & 0x7fffffffu) > 0x7f800000u ? nan : rounded;
        memcpy(out + i, &r, sizeof r);
    }
}

static void f16_round(float *out, const float *in, size_t m)
{
    size_t i = 0;
#ifdef __F16C__
    for (; i + 8 <= m; i += 8) {
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
    }
#endif
    for (; i < m; i++)
        out[i] = ddpc_f16_to_f32(ddpc_f32_to_f16(in[i]));
}

void DDPC_SIMD(ddpc_round_half_array)(float *dst, const float *src, size_t n, int bf16)
{
    if (bf16)
        bf16_round(dst, src, n);
    else
        f16_round(dst, src, n);
}
DDPC_SIMD_DISPATCH_VOID(ddpc_round_half_array, (float *dst, const float *src, size_t n, int bf16),
                        (dst, src, n, bf16))
