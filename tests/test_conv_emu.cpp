// SPDX-License-Identifier: MIT
/* src/kernels/cuda/conv.cu's device code on the host (tests/cuda_emu.h) against the CPU table's
 * fp32 conv2d: the host side's sequence (im2col, GEMM, to NCHW with bias; bias sums; from NCHW,
 * im2col, GEMM into dw, GEMM then col2im into dx) with a double-accumulating host GEMM standing in
 * for cuBLAS, in chunks of samples (i0 > 0) as the host side cuts them for large shapes. y and dx
 * within 1e-5, dw and db (reductions) within 1e-4. Padding, stride 2, odd sizes, a 1x1 kernel. */
#include "cuda_emu.h"

#include "../src/kernels/cuda/conv.cu"

#include "emu_testutil.h"

#include "check.h"

/* c (m, n) = alpha op(a) op(b) + beta c, row-major, accumulated in double: cuBLAS's stand-in. */
static void host_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a,
                      int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0.0;
            for (int64_t p = 0; p < k; p++)
                s += (double)(ta ? a[p * lda + i] : a[i * lda + p]) *
                     (tb ? b[j * ldb + p] : b[p * ldb + j]);
            c[i * ldc + j] = (float)(s + (beta != 0.0f ? (double)beta * c[i * ldc + j] : 0.0));
        }
}

static void check_conv(ddpc_conv2d_shape s, int64_t nb_max)
{
    const geom g = geom_of(&s);
    printf(" conv n %lld c %lld %lldx%lld k %lld %lldx%lld stride %lld pad %lld, chunks of %lld\n",
           (long long)s.n, (long long)s.c, (long long)s.h, (long long)s.w, (long long)s.k,
           (long long)s.r, (long long)s.s, (long long)s.stride, (long long)s.pad,
           (long long)nb_max);
    const int64_t nx = s.n * s.c * s.h * s.w, nw = s.k * g.crs, ny = s.n * s.k * g.ohw;
    const std::vector<float> x = emu_rand(nx, 1.0f, 1), w = emu_rand(nw, 0.5f, 2),
                             b = emu_rand(s.k, 0.5f, 3), dy = emu_rand(ny, 1.0f, 4);
    const ddpc_kernel_table *cpu = emu_cpu();
    std::vector<float> ws(cpu->conv2d_workspace_floats(&s) + 1);
    std::vector<float> y(ny), dx = emu_rand(nx, 0.5f, 5), dw = emu_rand(nw, 0.5f, 6),
                              db = emu_rand(s.k, 0.5f, 7);
    std::vector<float> ey = emu_poison(ny), edx = dx, edw = dw, edb = db;
    cpu->conv2d_forward(DDPC_PREC_FP32, y.data(), x.data(), w.data(), b.data(), &s, ws.data());
    cpu->conv2d_backward(DDPC_PREC_FP32, dx.data(), dw.data(), db.data(), dy.data(), x.data(),
                         w.data(), &s, ws.data());

    emu_launch((unsigned)g.k, kReduceThreads, 0,
               [&] { bias_backward_kernel(edb.data(), dy.data(), s.n, g.k, g.ohw); });
    for (int64_t i0 = 0; i0 < s.n; i0 += nb_max) {
        const int64_t nb = s.n - i0 < nb_max ? s.n - i0 : nb_max, cols = nb * g.ohw;
        std::vector<float> col = emu_poison(g.crs * cols), t = emu_poison(g.k * cols);
        emu_launch(emu_grid(g.crs * cols, kThreads), kThreads, 0,
                   [&] { im2col_kernel(col.data(), x.data(), g, i0, nb); });
        host_gemm(false, false, g.k, cols, g.crs, w.data(), g.crs, col.data(), cols, 0.0f, t.data(),
                  cols);
        emu_launch(2, kThreads, 0,
                   [&] { to_nchw_kernel(ey.data(), t.data(), b.data(), g, i0, nb); });

        t = emu_poison(g.k * cols);
        emu_launch(emu_grid(g.k * cols, kThreads), kThreads, 0,
                   [&] { from_nchw_kernel(t.data(), dy.data(), g, i0, nb); });
        host_gemm(false, true, g.k, g.crs, cols, t.data(), cols, col.data(), cols, 1.0f, edw.data(),
                  g.crs);
        host_gemm(true, false, g.crs, cols, g.k, w.data(), g.crs, t.data(), cols, 0.0f, col.data(),
                  cols);
        emu_launch(3, kThreads, 0, [&] { col2im_kernel(edx.data(), col.data(), g, i0, nb); });
    }
    CHECK(emu_rel_err("y", ey.data(), y.data(), ny) <= 1e-5);
    CHECK(emu_rel_err("dx", edx.data(), dx.data(), nx) <= 1e-5);
    CHECK(emu_rel_err("dw", edw.data(), dw.data(), nw) <= 1e-4);
    CHECK(emu_rel_err("db", edb.data(), db.data(), s.k) <= 1e-4);
}

static void test_conv(void)
{
    ddpc_conv2d_shape s = {3, 2, 9, 7, 4, 3, 3, 1, 1};
    check_conv(s, 3);
    check_conv(s, 2);                                     /* a chunk starting at sample 2 */
    s = (ddpc_conv2d_shape){2, 3, 11, 10, 5, 3, 2, 2, 1}; /* stride 2, a 3x2 kernel */
    check_conv(s, 1);
    s = (ddpc_conv2d_shape){2, 4, 5, 6, 3, 1, 1, 1, 0}; /* 1x1 */
    check_conv(s, 2);
}

static void test_no_emulator_faults(void)
{
    CHECK_EQ_INT(emu_failures, 0);
}

int main(void)
{
    RUN_TEST(test_conv);
    RUN_TEST(test_no_emulator_faults);
    return check_summary();
}
