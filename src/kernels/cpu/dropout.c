// SPDX-License-Identifier: MIT
/* Inverted dropout whose mask is recomputed, never stored: keep_i = uniform(seed, stream, i) >= p.
 * Invariant: mask_uniform below is bit-identical to ddpc_rng_uniform_at (a test checks it); it is
 * inlined here, with the per-(seed, stream) key hoisted, so the mask loop vectorises. */
#include <ddpc/kernels.h>

#include "core/simd_dispatch.h"
#include "kernels/cpu/cpu_impl.h"

/* SplitMix64's finaliser, as in src/core/rng.c. */
static inline uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline uint64_t stream_key(uint64_t seed, uint64_t stream)
{
    return mix64(seed * 0x9e3779b97f4a7c15ULL + mix64(stream + 0x632be59bd9b4e019ULL));
}

/* == ddpc_rng_uniform_at(seed, stream, i) for key = stream_key(seed, stream). */
static inline float mask_uniform(uint64_t key, uint64_t i)
{
    uint64_t z = mix64(key + (i + 1) * 0x9e3779b97f4a7c15ULL);
    return (float)(int32_t)(z >> 40) * (1.0f / 16777216.0f);
}

/* out (n) = (accumulate ? out : 0) + in * keep / (1 - p). */
static void apply_mask(float *out, const float *in, int64_t n, float p, uint64_t seed,
                       uint64_t stream, int accumulate)
{
    const uint64_t key = stream_key(seed, stream);
    const float scale = 1.0f / (1.0f - p);
    if (accumulate) {
#pragma omp parallel for schedule(static) if (n >= DDPC__PAR_MIN_WORK)
        for (int64_t i = 0; i < n; i++)
            out[i] += ddpc__select(mask_uniform(key, (uint64_t)i) >= p, in[i] * scale, 0.0f);
    } else {
#pragma omp parallel for schedule(static) if (n >= DDPC__PAR_MIN_WORK)
        for (int64_t i = 0; i < n; i++)
            out[i] = ddpc__select(mask_uniform(key, (uint64_t)i) >= p, in[i] * scale, 0.0f);
    }
}

void DDPC_SIMD(ddpc_dropout_forward)(float *y, const float *x, int64_t n, float p, uint64_t seed,
                                     uint64_t stream)
{
    if (p <= 0.0f) {
        if (y != x)
            for (int64_t i = 0; i < n; i++)
                y[i] = x[i];
        return;
    }
    apply_mask(y, x, n, p, seed, stream, 0);
}
DDPC_SIMD_DISPATCH_VOID(ddpc_dropout_forward,
                        (float *y, const float *x, int64_t n, float p, uint64_t seed,
                         uint64_t stream),
                        (y, x, n, p, seed, stream))

void DDPC_SIMD(ddpc_dropout_backward)(float *dx, const float *dy, int64_t n, float p, uint64_t seed,
                                      uint64_t stream)
{
    if (!dx)
        return;
    if (p <= 0.0f) {
        ddpc_axpy_f32(dx, 1.0f, dy, n);
        return;
    }
    apply_mask(dx, dy, n, p, seed, stream, 1);
}
DDPC_SIMD_DISPATCH_VOID(ddpc_dropout_backward,
                        (float *dx, const float *dy, int64_t n, float p, uint64_t seed,
                         uint64_t stream),
                        (dx, dy, n, p, seed, stream))
