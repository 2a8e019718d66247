/* Linear layer y = x @ w^T + b with PyTorch's weight layout w (out, in).
 * Invariant: forward and all three backward products are single sgemm calls over the whole
 * batch (so the BLAS threads them); only the bias broadcast and column sums are our loops. */
#include <ddpc/kernels.h>

#include "kernels/cpu/cpu_impl.h"

void ddpc_linear_forward(float *restrict y, const float *restrict x, const float *restrict w,
                         const float *restrict b, int64_t n, int64_t in, int64_t out)
{
    float beta = 0.0f;
    if (b) {
        /* Seed y with the bias so sgemm adds onto it (beta = 1): one pass over y, not two. */
#pragma omp parallel for schedule(static) if (n * out >= 4 * DDPC__PAR_MIN_WORK)
        for (int64_t i = 0; i < n; i++) {
            float *restrict yi = y + i * out;
            for (int64_t j = 0; j < out; j++)
                yi[j] = b[j];
        }
        beta = 1.0f;
    }
    ddpc_gemm_f32(DDPC_NO_TRANS, DDPC_TRANS, n, out, in, 1.0f, x, in, w, in, beta, y, out);
}

/* db (out) += sum over rows of dy (n, out); threads own disjoint column ranges. */
static void bias_backward(float *restrict db, const float *restrict dy, int64_t n, int64_t out)
{
    const int64_t block = 64;
    int64_t nblocks = (out + block - 1) / block;
#pragma omp parallel for schedule(static) if (n * out >= 4 * DDPC__PAR_MIN_WORK)
    for (int64_t jb = 0; jb < nblocks; jb++) {
        int64_t j0 = jb * block, j1 = j0 + block < out ? j0 + block : out;
        float acc[64] = {0};
        for (int64_t i = 0; i < n; i++) {
            const float *restrict row = dy + i * out;
            for (int64_t j = j0; j < j1; j++)
                acc[j - j0] += row[j];
        }
        for (int64_t j = j0; j < j1; j++)
            db[j] += acc[j - j0];
    }
}

void ddpc_linear_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                          const float *w, int64_t n, int64_t in, int64_t out)
{
    if (dx) /* dx (n, in) += dy (n, out) @ w (out, in) */
        ddpc_gemm_f32(DDPC_NO_TRANS, DDPC_NO_TRANS, n, in, out, 1.0f, dy, out, w, in, 1.0f, dx, in);
    if (dw) /* dw (out, in) += dy^T (out, n) @ x (n, in) */
        ddpc_gemm_f32(DDPC_TRANS, DDPC_NO_TRANS, out, in, n, 1.0f, dy, out, x, in, 1.0f, dw, in);
    if (db)
        bias_backward(db, dy, n, out);
}
