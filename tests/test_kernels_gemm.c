// SPDX-License-Identifier: MIT
/* Tests for src/kernels/cpu gemm.c, elementwise.c, threads.c: sgemm in all four transpose
 * combinations with padded leading dimensions against a naive double reference. */
#include "kernels_testutil.h"

/* c (m, n) = alpha op(a) op(b) + beta c in double, same conventions as ddpc_gemm_f32. */
static void naive_gemm(ddpc_transpose ta, ddpc_transpose tb, int64_t m, int64_t n, int64_t k,
                       float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                       float beta, float *c, int64_t ldc)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0.0;
            for (int64_t p = 0; p < k; p++) {
                double av = ta == DDPC_TRANS ? a[p * lda + i] : a[i * lda + p];
                double bv = tb == DDPC_TRANS ? b[j * ldb + p] : b[p * ldb + j];
                s += av * bv;
            }
            c[i * ldc + j] = (float)(alpha * s + beta * (double)c[i * ldc + j]);
        }
}

static void check_gemm(ddpc_transpose ta, ddpc_transpose tb, int64_t m, int64_t n, int64_t k)
{
    /* Leading dimensions padded by 3 so strided access is exercised. */
    int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    int64_t lda = ac + 3, ldb = bc + 3, ldc = n + 3;
    float *a = tu_rand(ar * lda, -1, 1, 1), *b = tu_rand(br * ldb, -1, 1, 2);
    float *c = tu_rand(m * ldc, -1, 1, 3), *ref = tu_alloc(m * ldc);
    memcpy(ref, c, (size_t)(m * ldc) * sizeof(float));
    ddpc_gemm_f32(ta, tb, m, n, k, 0.7f, a, lda, b, ldb, 0.5f, c, ldc);
    naive_gemm(ta, tb, m, n, k, 0.7f, a, lda, b, ldb, 0.5f, ref, ldc);
    double err = 0.0;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < ldc; j++) {
            double d = fabs((double)c[i * ldc + j] - ref[i * ldc + j]);
            err = d > err ? d : err;
        }
    /* Padding columns j >= n must be untouched (they compare equal to the copied values). */
    CHECK(err < 1e-4 * (double)(k + 1));
    ddpc_free(a);
    ddpc_free(b);
    ddpc_free(c);
    ddpc_free(ref);
}

static void test_gemm_all_transposes(void)
{
    const int64_t shapes[][3] = {{1, 1, 1}, {5, 7, 3}, {17, 9, 33}, {64, 48, 100}, {3, 130, 1}};
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                check_gemm((ddpc_transpose)ta, (ddpc_transpose)tb, shapes[s][0], shapes[s][1],
                           shapes[s][2]);
}

static void test_gemm_empty_k_scales_c(void)
{
    float c[6] = {1, 2, 3, 4, 5, 6}, dummy = 0.0f;
    ddpc_gemm_f32(DDPC_NO_TRANS, DDPC_NO_TRANS, 2, 3, 0, 1.0f, &dummy, 1, &dummy, 3, 2.0f, c, 3);
    CHECK_NEAR(c[5], 12.0, 0);
    ddpc_gemm_f32(DDPC_NO_TRANS, DDPC_NO_TRANS, 2, 3, 0, 1.0f, &dummy, 1, &dummy, 3, 0.0f, c, 3);
    CHECK_NEAR(c[0], 0.0, 0);
}

static void test_elementwise(void)
{
    int64_t n = 1000003; /* large enough to run threaded, odd so tails are exercised */
    float *a = tu_rand(n, -1, 1, 4), *b = tu_rand(n, -1, 1, 5), *y = tu_alloc(n);
    ddpc_add_f32(y, a, b, n);
    CHECK_NEAR(y[n - 1], (double)a[n - 1] + b[n - 1], 1e-7);
    ddpc_axpy_f32(y, -2.0f, b, n);
    int bad = 0;
    for (int64_t i = 0; i < n; i++)
        bad += fabsf(y[i] - (a[i] - b[i])) > 1e-6f;
    CHECK_EQ_INT(bad, 0);
    ddpc_add_f32(a, a, a, n); /* in place */
    CHECK_NEAR(a[7], 2.0 * (y[7] + b[7]), 1e-6);
    ddpc_fill_f32(y, 3.5f, n);
    CHECK(y[0] == 3.5f && y[n - 1] == 3.5f);
    ddpc_free(a);
    ddpc_free(b);
    ddpc_free(y);
}

static void test_threads_and_info(void)
{
    int before = ddpc_kernels_threads();
    ddpc_kernels_set_threads(1);
    CHECK_EQ_INT(ddpc_kernels_threads(), 1);
    ddpc_kernels_set_threads(2);
    CHECK_EQ_INT(ddpc_kernels_threads(), 2);
    ddpc_kernels_set_threads(0);
    CHECK(ddpc_kernels_threads() >= 1);
    ddpc_kernels_set_threads(before);
    const char *info = ddpc_kernels_blas_info();
    CHECK_STR_CONTAINS(info, "OpenBLAS");
    CHECK_STR_CONTAINS(info, "openmp");
    printf("     blas: %s\n", info);
}

int main(void)
{
    RUN_TEST(test_gemm_all_transposes);
    RUN_TEST(test_gemm_empty_k_scales_c);
    RUN_TEST(test_elementwise);
    RUN_TEST(test_threads_and_info);
    return check_summary();
}
