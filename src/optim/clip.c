// SPDX-License-Identifier: MIT
/* Global-norm gradient clipping, torch.nn.utils.clip_grad_norm_ semantics, split so that a
 * distributed caller can all-reduce the sum of squares between measuring and scaling.
 * Invariant: the sum of squares uses a partition fixed by n alone (not by the thread count), so
 * it is bit-reproducible across runs, thread counts and resumes. */
#include "core/simd_dispatch.h"
#include "optim/optim_impl.h"

#include <math.h>

#define SUMSQ_CHUNKS 64

static double chunk_sumsq(const float *g, size_t lo, size_t hi)
{
    double s[4] = {0.0, 0.0, 0.0, 0.0};
    size_t i = lo;
    for (; i + 4 <= hi; i += 4)
        for (int k = 0; k < 4; k++)
            s[k] += (double)g[i + k] * (double)g[i + k];
    for (; i < hi; i++)
        s[0] += (double)g[i] * (double)g[i];
    return (s[0] + s[1]) + (s[2] + s[3]);
}

double DDPC_SIMD(ddpc_grad_sumsq)(const float *g, size_t n)
{
    double part[SUMSQ_CHUNKS];
    const size_t chunk = (n + SUMSQ_CHUNKS - 1) / SUMSQ_CHUNKS;
#pragma omp parallel for schedule(static) if (n >= DDPC_OPTIM_PARALLEL_MIN)
    for (int c = 0; c < SUMSQ_CHUNKS; c++) {
        size_t lo = (size_t)c * chunk, hi = lo + chunk;
        if (lo > n)
            lo = n;
        if (hi > n)
            hi = n;
        part[c] = chunk_sumsq(g, lo, hi);
    }
    double total = 0.0;
    for (int c = 0; c < SUMSQ_CHUNKS; c++)
        total += part[c];
    return total;
}
DDPC_SIMD_DISPATCH(double, ddpc_grad_sumsq, (const float *g, size_t n), (g, n))

float DDPC_SIMD(ddpc_grad_clip_scale)(float *g, size_t n, double norm, float max_norm)
{
    const float coef = ddpc_grad_clip_coef(norm, max_norm);
    if (coef == 1.0f)
        return 1.0f;
    const int64_t len = (int64_t)n;
#pragma omp parallel for schedule(static) if (len >= DDPC_OPTIM_PARALLEL_MIN)
    for (int64_t i = 0; i < len; i++)
        g[i] *= coef;
    return coef;
}
DDPC_SIMD_DISPATCH(float, ddpc_grad_clip_scale, (float *g, size_t n, double norm, float max_norm),
                   (g, n, norm, max_norm))

float DDPC_SIMD(ddpc_clip_grad_norm)(float *g, size_t n, float max_norm)
{
    const double norm = sqrt(ddpc_grad_sumsq(g, n));
    ddpc_grad_clip_scale(g, n, norm, max_norm);
    return (float)norm;
}
DDPC_SIMD_DISPATCH(float, ddpc_clip_grad_norm, (float *g, size_t n, float max_norm),
                   (g, n, max_norm))
