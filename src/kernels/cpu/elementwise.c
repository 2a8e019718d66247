/* Elementwise fp32 helpers: fill, add, axpy over flat arrays.
 * Invariant: each element is computed independently, so any aliasing of output with input
 * element-for-element is safe and the loops split across threads without synchronisation. */
#include <ddpc/kernels.h>

#include "kernels/cpu/cpu_impl.h"

void ddpc_fill_f32(float *x, float value, int64_t n)
{
#pragma omp parallel for schedule(static) if (n >= 8 * DDPC__PAR_MIN_WORK)
    for (int64_t i = 0; i < n; i++)
        x[i] = value;
}

void ddpc_add_f32(float *y, const float *a, const float *b, int64_t n)
{
#pragma omp parallel for schedule(static) if (n >= 8 * DDPC__PAR_MIN_WORK)
    for (int64_t i = 0; i < n; i++)
        y[i] = a[i] + b[i];
}

void ddpc_axpy_f32(float *restrict y, float alpha, const float *restrict x, int64_t n)
{
#pragma omp parallel for schedule(static) if (n >= 8 * DDPC__PAR_MIN_WORK)
    for (int64_t i = 0; i < n; i++)
        y[i] += alpha * x[i];
}
