// SPDX-License-Identifier: MIT
/* src/kernels/cuda/pool.cu's device code on the host (tests/cuda_emu.h) against the CPU table, bit
 * for bit: forward y and idx (ties broken to the first maximum: inputs with many equal values),
 * backward accumulating onto nonzero dx through the scatter kernel (stride >= k) and the gather
 * kernel (overlapping windows, stride < k, which adds in the CPU's order). Odd planes and sizes
 * with leftover rows and columns, the host side's grid and 2 blocks. */
#include "cuda_emu.h"

#include "../src/kernels/cuda/pool.cu"

#include "emu_testutil.h"

#include "check.h"

static void check_pool(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t stride,
                       bool small_grid)
{
    const int64_t oh = (h - k) / stride + 1, ow = (w - k) / stride + 1, planes = n * c;
    const int64_t no = planes * oh * ow, ni = planes * h * w;
    printf(" n %lld c %lld %lldx%lld k %lld stride %lld%s\n", (long long)n, (long long)c,
           (long long)h, (long long)w, (long long)k, (long long)stride,
           small_grid ? ", 2 blocks" : "");
    std::vector<float> x = emu_rand(ni, 2.0f, 1 + (uint64_t)k);
    for (int64_t i = 0; i < ni; i++) /* a quarter of the inputs on a few values: ties */
        if (i % 4 == 1)
            x[(size_t)i] = (float)(i % 3);
    const ddpc_kernel_table *cpu = emu_cpu();
    std::vector<float> y(no), ey = emu_poison(no);
    std::vector<int32_t> idx(no), eidx(no, -7);
    cpu->maxpool2d_forward(y.data(), idx.data(), x.data(), n, c, h, w, k, stride);
    emu_launch(small_grid ? 2 : emu_grid(no, kThreads), kThreads, 0, [&] {
        pool_forward_kernel(ey.data(), eidx.data(), x.data(), planes, h, w, oh, ow, k, stride);
    });
    CHECK(emu_same_bits("y", ey.data(), y.data(), no, 4));
    CHECK(emu_same_bits("idx", eidx.data(), idx.data(), no, 4));

    const std::vector<float> dy = emu_rand(no, 1.0f, 2);
    std::vector<float> dx = emu_rand(ni, 1.0f, 3), edx = dx;
    cpu->maxpool2d_backward(dx.data(), dy.data(), idx.data(), n, c, h, w, k, stride);
    if (stride >= k)
        emu_launch(small_grid ? 2 : emu_grid(no, kThreads), kThreads, 0, [&] {
            pool_backward_scatter_kernel(edx.data(), dy.data(), idx.data(), planes, h * w, oh * ow);
        });
    else
        emu_launch(small_grid ? 2 : emu_grid(ni, kThreads), kThreads, 0, [&] {
            pool_backward_gather_kernel(edx.data(), dy.data(), idx.data(), planes, h, w, oh, ow, k,
                                        stride);
        });
    CHECK(emu_same_bits("dx", edx.data(), dx.data(), ni, 4));
}

static void test_pool(void)
{
    check_pool(2, 3, 9, 11, 2, 2, false); /* leftover row and column */
    check_pool(1, 5, 8, 8, 2, 3, true);   /* stride > k: gaps */
    check_pool(2, 2, 9, 10, 3, 1, false); /* overlapping: gather */
    check_pool(1, 3, 13, 7, 3, 2, true);  /* overlapping, stride 2 */
    check_pool(3, 1, 5, 5, 5, 1, false);  /* one window */
}

static void test_no_emulator_faults(void)
{
    CHECK_EQ_INT(emu_failures, 0);
}

int main(void)
{
    RUN_TEST(test_pool);
    RUN_TEST(test_no_emulator_faults);
    return check_summary();
}
