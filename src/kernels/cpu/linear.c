// SPDX-License-Identifier: MIT
/* Linear layer y = x @ w^T + b (+ r) with PyTorch's weight layout w (out, in).
 * Invariant: forward and all three backward products are single sgemm calls over the whole
 * batch (so the BLAS threads them); only the bias (+ residual) seeding and column sums are our
 * loops, and the column sums add rows in order whatever the thread count. */
#include <ddpc/kernels.h>

#include <string.h>

#include "core/simd_dispatch.h"
#include "kernels/cpu/cpu_impl.h"

/* y (n, out) = b (out) broadcast over rows, plus r (n, out) when given; r may be y itself. */
static void seed_rows(float *y, const float *r, const float *restrict b, int64_t n, int64_t out)
{
#pragma omp parallel for schedule(static) if (n * out >= 4 * DDPC__PAR_MIN_WORK)
    for (int64_t i = 0; i < n; i++) {
        float *yi = y + i * out;
        const float *ri = r ? r + i * out : NULL;
        if (ri && b) {
            for (int64_t j = 0; j < out; j++)
                yi[j] = ri[j] + b[j];
        } else if (ri) {
            if (ri != yi)
                memcpy(yi, ri, (size_t)out * sizeof *yi);
        } else {
            for (int64_t j = 0; j < out; j++)
                yi[j] = b[j];
        }
    }
}

void DDPC_SIMD(ddpc_linear_forward)(ddpc_precision prec, float *y, const float *x, const float *w,
                                    const float *b, int64_t n, int64_t in, int64_t out)
{
    ddpc_linear_residual_forward(prec, y, x, w, b, NULL, n, in, out);
}
DDPC_SIMD_DISPATCH_VOID(ddpc_linear_forward,
                        (ddpc_precision prec, float *y, const float *x, const float *w,
                         const float *b, int64_t n, int64_t in, int64_t out),
                        (prec, y, x, w, b, n, in, out))

void DDPC_SIMD(ddpc_linear_residual_forward)(ddpc_precision prec, float *y, const float *x,
                                             const float *w, const float *b, const float *r,
                                             int64_t n, int64_t in, int64_t out)
{
    float beta = 0.0f;
    if (b || r) {
        /* Seed y with bias (+ residual) so sgemm adds onto it (beta = 1): one pass over y. */
        seed_rows(y, r, b, n, out);
        beta = 1.0f;
    }
    ddpc_gemm(prec, DDPC_NO_TRANS, DDPC_TRANS, n, out, in, 1.0f, x, in, w, in, beta, y, out);
}
DDPC_SIMD_DISPATCH_VOID(ddpc_linear_residual_forward,
                        (ddpc_precision prec, float *y, const float *x, const float *w,
                         const float *b, const float *r, int64_t n, int64_t in, int64_t out),
                        (prec, y, x, w, b, r, n, in, out))

/* db (out) += sum over rows of dy (n, out). Threads own contiguous column ranges and walk them in
 * strips of whole row segments, so dy streams through memory instead of striding down columns. */
static void bias_backward(float *restrict db, const float *restrict dy, int64_t n, int64_t out)
{
    enum { STRIP = 1024 };
#pragma omp parallel if (n * out >= 4 * DDPC__PAR_MIN_WORK)
    {
        int64_t j0, j1;
        ddpc__thread_cols(out, &j0, &j1);
        for (int64_t s = j0; s < j1; s += STRIP) {
            int64_t len = j1 - s < STRIP ? j1 - s : STRIP;
            float acc[STRIP];
            for (int64_t j = 0; j < len; j++)
                acc[j] = 0.0f;
            for (int64_t i = 0; i < n; i++) {
                const float *restrict row = dy + i * out + s;
                for (int64_t j = 0; j < len; j++)
                    acc[j] += row[j];
            }
            for (int64_t j = 0; j < len; j++)
                db[s + j] += acc[j];
        }
    }
}

void DDPC_SIMD(ddpc_linear_backward)(ddpc_precision prec, float *dx, float *dw, float *db,
                                     const float *dy, const float *x, const float *w, int64_t n,
                                     int64_t in, int64_t out)
{
    if (dx) /* dx (n, in) += dy (n, out) @ w (out, in) */
        ddpc_gemm(prec, DDPC_NO_TRANS, DDPC_NO_TRANS, n, in, out, 1.0f, dy, out, w, in, 1.0f, dx,
                  in);
    if (dw) /* dw (out, in) += dy^T (out, n) @ x (n, in) */
        ddpc_gemm(prec, DDPC_TRANS, DDPC_NO_TRANS, out, in, n, 1.0f, dy, out, x, in, 1.0f, dw, in);
    if (db)
        bias_backward(db, dy, n, out);
}
DDPC_SIMD_DISPATCH_VOID(ddpc_linear_backward,
                        (ddpc_precision prec, float *dx, float *dw, float *db, const float *dy,
                         const float *x, const float *w, int64_t n, int64_t in, int64_t out),
                        (prec, dx, dw, db, dy, x, w, n, in, out))
