// SPDX-License-Identifier: MIT
/* Pointwise activations: ReLU, and GELU in its tanh form (Hendrycks & Gimpel 2016, PyTorch's
 * approximate='tanh'). Invariant: 0.5 (1 + tanh(u)) is evaluated as the logistic sigmoid(2u)
 * through ddpc__expf, which is branch-free (loops vectorise) and has no cancellation near 0. */
#include <ddpc/kernels.h>

#include "core/simd_dispatch.h"
#include "kernels/cpu/cpu_impl.h"

#define GELU_K0 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_K1 0.044715f

void DDPC_SIMD(ddpc_relu_forward)(float *y, const float *x, int64_t n)
{
#pragma omp parallel for schedule(static) if (n >= 8 * DDPC__PAR_MIN_WORK)
    for (int64_t i = 0; i < n; i++)
        y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
DDPC_SIMD_DISPATCH_VOID(ddpc_relu_forward, (float *y, const float *x, int64_t n), (y, x, n))

void DDPC_SIMD(ddpc_relu_backward)(float *restrict dx, const float *restrict dy,
                                   const float *restrict y, int64_t n)
{
#pragma omp parallel for schedule(static) if (n >= 8 * DDPC__PAR_MIN_WORK)
    for (int64_t i = 0; i < n; i++)
        dx[i] += y[i] > 0.0f ? dy[i] : 0.0f;
}
DDPC_SIMD_DISPATCH_VOID(ddpc_relu_backward,
                        (float *restrict dx, const float *restrict dy, const float *restrict y,
                         int64_t n),
                        (dx, dy, y, n))

void DDPC_SIMD(ddpc_gelu_forward)(float *restrict y, const float *restrict x, int64_t n)
{
#pragma omp parallel for schedule(static) if (n >= DDPC__PAR_MIN_WORK)
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        float u = GELU_K0 * (v + GELU_K1 * v * v * v);
        y[i] = v / (1.0f + ddpc__expf(-2.0f * u)); /* x * sigmoid(2u) */
    }
}
DDPC_SIMD_DISPATCH_VOID(ddpc_gelu_forward, (float *restrict y, const float *restrict x, int64_t n),
                        (y, x, n))

/* gelu'(v) = d/dx [x s(2u)] = s + x * 2 s (1 - s) u', with s = sigmoid(2u) = 0.5 (1 + tanh u). */
static inline float gelu_grad(float v)
{
    float u = GELU_K0 * (v + GELU_K1 * v * v * v);
    float du = GELU_K0 * (1.0f + 3.0f * GELU_K1 * v * v);
    float s = 1.0f / (1.0f + ddpc__expf(-2.0f * u));
    return s + 2.0f * v * s * (1.0f - s) * du;
}

/* Overwrites dx, which may be dy itself; the in-place loop keeps restrict (and so vectorises
 * without a runtime alias check falling back to scalar code). */
void DDPC_SIMD(ddpc_gelu_backward)(float *dx, const float *dy, const float *restrict x, int64_t n)
{
    if (dx == dy) {
        float *restrict d = dx;
#pragma omp parallel for schedule(static) if (n >= DDPC__PAR_MIN_WORK)
        for (int64_t i = 0; i < n; i++)
            d[i] *= gelu_grad(x[i]);
        return;
    }
    float *restrict out = dx;
    const float *restrict in = dy;
#pragma omp parallel for schedule(static) if (n >= DDPC__PAR_MIN_WORK)
    for (int64_t i = 0; i < n; i++)
        out[i] = in[i] * gelu_grad(x[i]);
}
DDPC_SIMD_DISPATCH_VOID(ddpc_gelu_backward,
                        (float *dx, const float *dy, const float *restrict x, int64_t n),
                        (dx, dy, x, n))

void DDPC_SIMD(ddpc_relu_mask)(float *restrict x, const float *restrict y, int64_t n)
{
#pragma omp parallel for schedule(static) if (n >= 8 * DDPC__PAR_MIN_WORK)
    for (int64_t i = 0; i < n; i++)
        x[i] = y[i] > 0.0f ? x[i] : 0.0f;
}
DDPC_SIMD_DISPATCH_VOID(ddpc_relu_mask, (float *restrict x, const float *restrict y, int64_t n),
                        (x, y, n))
