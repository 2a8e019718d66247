// SPDX-License-Identifier: MIT
/* ddpc_gemm_f32: the one matrix multiply, row-major, forwarded to CBLAS sgemm (OpenBLAS).
 * Invariant: every matmul in the kernels goes through here or straight to cblas_sgemm, so the
 * BLAS decides blocking and threading (it runs single-threaded inside our parallel regions). */
#include <ddpc/kernels.h>

#include <cblas.h>
#include <string.h>

void ddpc_gemm_f32(ddpc_transpose ta, ddpc_transpose tb, int64_t m, int64_t n, int64_t k,
                   float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                   float beta, float *c, int64_t ldc)
{
    if (m <= 0 || n <= 0)
        return;
    if (beta == 0.0f) {
        /* OpenBLAS runs beta = 0 as a separate zeroing pass (sgemm_beta) and then c += a b; that
         * pass is slow on small strided blocks (attention, per-image convolution). Zeroing the
         * rows just before is cheaper, leaves c hot for the sgemm and gives the same bits. */
        for (int64_t i = 0; i < m; i++)
            memset(c + i * ldc, 0, (size_t)n * sizeof *c);
        beta = 1.0f;
    }
    if (k <= 0) {
        /* BLAS leaves c * beta; do it here so empty reductions need no special case upstream. */
        for (int64_t i = 0; beta != 1.0f && i < m; i++)
            for (int64_t j = 0; j < n; j++)
                c[i * ldc + j] *= beta;
        return;
    }
    cblas_sgemm(CblasRowMajor, ta == DDPC_TRANS ? CblasTrans : CblasNoTrans,
                tb == DDPC_TRANS ? CblasTrans : CblasNoTrans, (blasint)m, (blasint)n, (blasint)k,
                alpha, a, (blasint)lda, b, (blasint)ldb, beta, c, (blasint)ldc);
}
