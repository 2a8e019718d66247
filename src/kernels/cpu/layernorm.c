// SPDX-License-Identifier: MIT
/* LayerNorm over the last dimension (Ba et al. 2016) with PyTorch's eps = 1e-5 and biased variance.
 * Invariant: mean and rstd (rows) saved by forward are exactly what backward uses, so backward
 * never recomputes statistics; w or b may be NULL (treated as ones / zeros). */
#include <ddpc/kernels.h>

#include <math.h>

#include "core/simd_dispatch.h"
#include "kernels/cpu/cpu_impl.h"

#define LN_EPS 1e-5f

void DDPC_SIMD(ddpc_layernorm_forward)(float *y, float *mean, float *rstd, const float *x,
                                       const float *w, const float *b, int64_t rows, int64_t c)
{
#pragma omp parallel for schedule(static) if (rows * c >= DDPC__PAR_MIN_WORK)
    for (int64_t i = 0; i < rows; i++) {
        const float *restrict xi = x + i * c;
        float *restrict yi = y + i * c;
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int64_t j = 0; j < c; j++)
            s += xi[j];
        float m = s / (float)c;
        float v = 0.0f; /* two-pass variance: no cancellation for rows with a large mean */
#pragma omp simd reduction(+ : v)
        for (int64_t j = 0; j < c; j++) {
            float d = xi[j] - m;
            v += d * d;
        }
        float r = 1.0f / sqrtf(v / (float)c + LN_EPS);
        if (w && b) {
            for (int64_t j = 0; j < c; j++)
                yi[j] = (xi[j] - m) * r * w[j] + b[j];
        } else {
            for (int64_t j = 0; j < c; j++)
                yi[j] = (xi[j] - m) * r * (w ? w[j] : 1.0f) + (b ? b[j] : 0.0f);
        }
        if (mean)
            mean[i] = m;
        if (rstd)
            rstd[i] = r;
    }
}
DDPC_SIMD_DISPATCH_VOID(ddpc_layernorm_forward,
                        (float *y, float *mean, float *rstd, const float *x, const float *w,
                         const float *b, int64_t rows, int64_t c),
                        (y, mean, rstd, x, w, b, rows, c))

/* dw (c) += sum_i dy * xhat, db (c) += sum_i dy. Threads own contiguous column ranges (see
 * ddpc__thread_cols), walked in strips of whole row segments so dy and x stream through memory. */
static void params_backward(float *dw, float *db, const float *dy, const float *x,
                            const float *mean, const float *rstd, int64_t rows, int64_t c)
{
    enum { STRIP = 512 };
#pragma omp parallel if (rows * c >= DDPC__PAR_MIN_WORK)
    {
        int64_t j0, j1;
        ddpc__thread_cols(c, &j0, &j1);
        for (int64_t s = j0; s < j1; s += STRIP) {
            int64_t len = j1 - s < STRIP ? j1 - s : STRIP;
            float aw[STRIP], ab[STRIP];
            for (int64_t j = 0; j < len; j++)
                aw[j] = ab[j] = 0.0f;
            for (int64_t i = 0; i < rows; i++) {
                const float *restrict xi = x + i * c + s, *restrict gi = dy + i * c + s;
                float m = mean[i], r = rstd[i];
                for (int64_t j = 0; j < len; j++) {
                    aw[j] += gi[j] * (xi[j] - m) * r;
                    ab[j] += gi[j];
                }
            }
            for (int64_t j = 0; j < len; j++) {
                if (dw)
                    dw[s + j] += aw[j];
                if (db)
                    db[s + j] += ab[j];
            }
        }
    }
}

void DDPC_SIMD(ddpc_layernorm_backward)(float *dx, float *dw, float *db, const float *dy,
                                        const float *x, const float *w, const float *mean,
                                        const float *rstd, int64_t rows, int64_t c)
{
    if (dw || db)
        params_backward(dw, db, dy, x, mean, rstd, rows, c);
    if (!dx)
        return;
        /* dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * w. */
#pragma omp parallel for schedule(static) if (rows * c >= DDPC__PAR_MIN_WORK)
    for (int64_t i = 0; i < rows; i++) {
        const float *restrict xi = x + i * c, *restrict gi = dy + i * c;
        float *restrict dxi = dx + i * c;
        float m = mean[i], r = rstd[i];
        float sg = 0.0f, sgx = 0.0f;
#pragma omp simd reduction(+ : sg, sgx)
        for (int64_t j = 0; j < c; j++) {
            float g = gi[j] * (w ? w[j] : 1.0f);
            sg += g;
            sgx += g * (xi[j] - m) * r;
        }
        sg /= (float)c;
        sgx /= (float)c;
        for (int64_t j = 0; j < c; j++) {
            float g = gi[j] * (w ? w[j] : 1.0f);
            dxi[j] += r * (g - sg - (xi[j] - m) * r * sgx);
        }
    }
}
DDPC_SIMD_DISPATCH_VOID(ddpc_layernorm_backward,
                        (float *dx, float *dw, float *db, const float *dy, const float *x,
                         const float *w, const float *mean, const float *rstd, int64_t rows,
                         int64_t c),
                        (dx, dw, db, dy, x, w, mean, rstd, rows, c))
