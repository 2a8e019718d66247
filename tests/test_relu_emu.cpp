// SPDX-License-Identifier: MIT
/* src/kernels/cuda/relu.cu's device code on the host (tests/cuda_emu.h) against the CPU table, bit
 * for bit: forward (also in place), backward accumulating onto nonzero dx, with zeros, -0, NaN
 * and infinities among the inputs. Odd sizes, the host side's grid and 2 blocks. */
#include "cuda_emu.h"

#include "../src/kernels/cuda/relu.cu"

#include "emu_testutil.h"

#include "check.h"

static void check_relu(int64_t n, unsigned blocks)
{
    const unsigned g = blocks ? blocks : emu_grid(n, kThreads);
    printf(" n %lld, %u blocks\n", (long long)n, g);
    const ddpc_kernel_table *cpu = emu_cpu();
    std::vector<float> x = emu_rand(n, 3.0f, 1);
    const float special[5] = {0.0f, -0.0f, NAN, INFINITY, -INFINITY};
    for (int64_t i = 0; i < n; i += 7)
        x[(size_t)i] = special[i / 7 % 5];
    std::vector<float> y(n), got = emu_poison(n);
    cpu->relu_forward(y.data(), x.data(), n);
    emu_launch(g, kThreads, 0, [&] { relu_forward_kernel(got.data(), x.data(), n); });
    CHECK(emu_same_bits("forward", got.data(), y.data(), n, 4));
    got = x; /* in place */
    emu_launch(g, kThreads, 0, [&] { relu_forward_kernel(got.data(), got.data(), n); });
    CHECK(emu_same_bits("forward in place", got.data(), y.data(), n, 4));

    const std::vector<float> dy = emu_rand(n, 1.0f, 2);
    std::vector<float> dx = emu_rand(n, 1.0f, 3), edx = dx;
    cpu->relu_backward(dx.data(), dy.data(), y.data(), n);
    emu_launch(g, kThreads, 0, [&] { relu_backward_kernel(edx.data(), dy.data(), y.data(), n); });
    CHECK(emu_same_bits("backward", edx.data(), dx.data(), n, 4));
}

static void test_relu(void)
{
    check_relu(1, 0);
    check_relu(1003, 0);
    check_relu(2999, 2);
}

static void test_no_emulator_faults(void)
{
    CHECK_EQ_INT(emu_failures, 0);
}

int main(void)
{
    RUN_TEST(test_relu);
    RUN_TEST(test_no_emulator_faults);
    return check_summary();
}
