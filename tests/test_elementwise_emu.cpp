// SPDX-License-Identifier: MIT
/* src/kernels/cuda/elementwise.cu's device code on the host (tests/cuda_emu.h) against the CPU
 * table: fill, add, axpy bit for bit (one rounding each, nothing to fuse but axpy's a * x + y,
 * which the host does not fuse), GELU forward and backward within 1e-5 (expf on both sides, the
 * CPU's own contraction), backward in place (dx aliasing dy). Odd sizes, the host side's grid and
 * 2 blocks (the grid-stride loops go round). */
#include "cuda_emu.h"

#include "../src/kernels/cuda/elementwise.cu"

#include "emu_testutil.h"

#include "check.h"

static void check_all(int64_t n, unsigned blocks)
{
    const unsigned g = blocks ? blocks : emu_grid(n, THREADS);
    printf(" n %lld, %u blocks\n", (long long)n, g);
    const ddpc_kernel_table *cpu = emu_cpu();
    const std::vector<float> a = emu_rand(n, 6.0f, 1), b = emu_rand(n, 2.0f, 2);
    std::vector<float> ref(n), got = emu_poison(n);

    cpu->fill_f32(ref.data(), -2.5f, n);
    emu_launch(g, THREADS, 0, [&] { fill_kernel(got.data(), -2.5f, n); });
    CHECK(emu_same_bits("fill", got.data(), ref.data(), n, 4));

    got = emu_poison(n);
    cpu->add_f32(ref.data(), a.data(), b.data(), n);
    emu_launch(g, THREADS, 0, [&] { add_kernel(got.data(), a.data(), b.data(), n); });
    CHECK(emu_same_bits("add", got.data(), ref.data(), n, 4));

    ref = b;
    got = b;
    cpu->axpy_f32(ref.data(), 0.3f, a.data(), n);
    emu_launch(g, THREADS, 0, [&] { axpy_kernel(got.data(), 0.3f, a.data(), n); });
    CHECK(emu_rel_err("axpy", got.data(), ref.data(), n) <= 1e-6);

    got = emu_poison(n);
    cpu->gelu_forward(ref.data(), a.data(), n);
    emu_launch(g, THREADS, 0, [&] { gelu_forward_kernel(got.data(), a.data(), n); });
    CHECK(emu_rel_err("gelu forward", got.data(), ref.data(), n) <= 1e-5);

    ref = b; /* in place: dx is dy */
    got = b;
    cpu->gelu_backward(ref.data(), ref.data(), a.data(), n);
    emu_launch(g, THREADS, 0, [&] { gelu_backward_kernel(got.data(), got.data(), a.data(), n); });
    CHECK(emu_rel_err("gelu backward", got.data(), ref.data(), n) <= 1e-5);
}

static void test_elementwise(void)
{
    check_all(1, 0);
    check_all(1001, 0);
    check_all(3001, 2);
}

static void test_no_emulator_faults(void)
{
    CHECK_EQ_INT(emu_failures, 0);
}

int main(void)
{
    RUN_TEST(test_elementwise);
    RUN_TEST(test_no_emulator_faults);
    return check_summary();
}
