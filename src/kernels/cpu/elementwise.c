// SPDX-License-Identifier: MIT
/* Elementwise fp32 helpers: fill, add, axpy over flat arrays.
 * Invariant: each element is computed independently, so any aliasing of output with input
 * element-for-element is safe and the loops split across threads without synchronisation. */
#include <ddpc/kernels.h>

#include "core/simd_dispatch.h"
#include "kernels/cpu/cpu_impl.h"

void DDPC_SIMD(ddpc_fill_f32)(float *x, float value, int64_t n)
{
#pragma omp parallel for schedule(static) if (n >= 8 * DDPC__PAR_MIN_WORK)
    for (int64_t i = 0; i < n; i++)
        x[i] = value;
}
DDPC_SIMD_DISPATCH_VOID(ddpc_fill_f32, (float *x, float value, int64_t n), (x, value, n))

void DDPC_SIMD(ddpc_add_f32)(float *y, const float *a, const float *b, int64_t n)
{
#pragma omp parallel for schedule(static) if (n >= 8 * DDPC__PAR_MIN_WORK)
    for (int64_t i = 0; i < n; i++)
        y[i] = a[i] + b[i];
}
DDPC_SIMD_DISPATCH_VOID(ddpc_add_f32, (float *y, const float *a, const float *b, int64_t n),
                        (y, a, b, n))

void DDPC_SIMD(ddpc_axpy_f32)(float *restrict y, float alpha, const float *restrict x, int64_t n)
{
#pragma omp parallel for schedule(static) if (n >= 8 * DDPC__PAR_MIN_WORK)
    for (int64_t i = 0; i < n; i++)
        y[i] += alpha * x[i];
}
DDPC_SIMD_DISPATCH_VOID(ddpc_axpy_f32,
                        (float *restrict y, float alpha, const float *restrict x, int64_t n),
                        (y, alpha, x, n))
