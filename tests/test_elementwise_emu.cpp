// SPDX-License-Identifier: MIT
/* src/kernels/cuda/elementwise.cu's device code on the host (tests/cuda_emu.h) against the CPU
 * table: fill, add, axpy bit for bit (one rounding each, nothing to fuse but axpy's a * x + y,
 * which the host does not fuse), GELU forward and backward within 1e-5 (expf on both sides, the
 * CPU's own contraction), backward in place (dx aliasing dy). Odd sizes, the host side's grid and
 * 2-3 blocks (the grid-stride loops go round), with float4s (aligned arrays) and without. GELU's
 * 16-bit forward (act16.cu's) equals the fp32 kernel's y rounded to nearest even, bit for bit, in
 * bf16 and fp16, also where y overflows fp16 and on infinities and NaN. */
#include "cuda_emu.h"

#include "../src/kernels/cuda/elementwise.cu"

#include <algorithm>

#include "emu_testutil.h"

#include "check.h"

/* `off` floats into each array (1: not 16-byte aligned) and n4 float4s (vec: n / 4, as the host
 * side passes for aligned arrays; else 0, all single floats). */
static void check_all(int64_t n, unsigned blocks, bool vec, int64_t off)
{
    const int64_t n4 = vec ? n / 4 : 0;
    const unsigned g = blocks ? blocks : emu_grid(n4 > n - 4 * n4 ? n4 : n - 4 * n4, THREADS);
    printf(" n %lld, %u blocks, %lld float4s, offset %lld\n", (long long)n, g, (long long)n4,
           (long long)off);
    const ddpc_kernel_table *cpu = emu_cpu();
    const std::vector<float> a0 = emu_rand(n + off, 6.0f, 1), b0 = emu_rand(n + off, 2.0f, 2);
    const float *a = a0.data() + off, *b = b0.data() + off;
    std::vector<float> ref(n), got0 = emu_poison(n + off);
    float *got = got0.data() + off;
    /* Poison in place, so got stays valid. */
    const auto repoison = [&] {
        const std::vector<float> p = emu_poison(n + off);
        std::copy(p.begin(), p.end(), got0.begin());
    };

    cpu->fill_f32(ref.data(), -2.5f, n);
    emu_launch(g, THREADS, 0, [&] { fill_kernel(got, -2.5f, n4, n); });
    CHECK(emu_same_bits("fill", got, ref.data(), n, 4));

    repoison();
    cpu->add_f32(ref.data(), a, b, n);
    emu_launch(g, THREADS, 0, [&] { add_kernel(got, a, b, n4, n); });
    CHECK(emu_same_bits("add", got, ref.data(), n, 4));

    ref.assign(b, b + n);
    std::copy(b, b + n, got);
    cpu->axpy_f32(ref.data(), 0.3f, a, n);
    emu_launch(g, THREADS, 0, [&] { axpy_kernel(got, 0.3f, a, n4, n); });
    CHECK(emu_rel_err("axpy", got, ref.data(), n) <= 1e-6);

    repoison();
    cpu->gelu_forward(ref.data(), a, n);
    emu_launch(g, THREADS, 0, [&] { gelu_forward_kernel(got, a, n4, n); });
    CHECK(emu_rel_err("gelu forward", got, ref.data(), n) <= 1e-5);

    ref.assign(b, b + n); /* in place: dx is dy */
    std::copy(b, b + n, got);
    cpu->gelu_backward(ref.data(), ref.data(), a, n);
    emu_launch(g, THREADS, 0, [&] { gelu_backward_kernel(got, got, a, n4, n); });
    CHECK(emu_rel_err("gelu backward", got, ref.data(), n) <= 1e-5);
}

/* gelu_forward16_kernel (y of type Y) against gelu_forward_kernel's fp32 ref (n), rounded. */
template <typename Y>
static void check_gelu16(const char *what, const float *ref, const float *x, int64_t n, int64_t n4,
                         unsigned g)
{
    std::vector<Y> y(n); /* 16-byte aligned (operator new), as the host side asks for n4 > 0 */
    memset(y.data(), 0xff, y.size() * sizeof(Y));
    std::vector<uint16_t> want(n), got(n);
    emu_launch(g, THREADS, 0, [&] { gelu_forward16_kernel(y.data(), x, n4, n); });
    const bool bf = std::is_same<Y, __nv_bfloat16>::value;
    for (int64_t i = 0; i < n; i++) {
        want[i] = bf ? ddpc_f32_to_bf16(ref[i]) : ddpc_f32_to_f16(ref[i]);
        memcpy(&got[i], &y[i], sizeof(uint16_t));
    }
    CHECK(emu_same_bits(what, got.data(), want.data(), n, 2));
}

/* GELU's 16-bit y on n inputs of scale amp (past fp16's range at 1e5), with specials in place. */
static void check_gelu16_all(int64_t n, float amp, bool vec, unsigned blocks)
{
    std::vector<float> x = emu_rand(n, amp, 21 + (uint64_t)n);
    const float specials[] = {INFINITY, -INFINITY, NAN, 0.0f, -0.0f, 1e-40f, -1e30f, 70000.0f};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0] && (int64_t)i * 3 < n; i++)
        x[i * 3] = specials[i];
    const int64_t n4 = vec ? n / 4 : 0;
    const unsigned g = blocks ? blocks : emu_grid(n4 > n - 4 * n4 ? n4 : n - 4 * n4, THREADS);
    printf(" gelu 16-bit: n %lld, amplitude %g, %u blocks, %lld float4s\n", (long long)n,
           (double)amp, g, (long long)n4);
    std::vector<float> ref = emu_poison(n);
    emu_launch(g, THREADS, 0, [&] { gelu_forward_kernel(ref.data(), x.data(), n4, n); });
    check_gelu16<__nv_bfloat16>("gelu bf16", ref.data(), x.data(), n, n4, g);
    check_gelu16<__half>("gelu fp16", ref.data(), x.data(), n, n4, g);
}

static void test_gelu16(void)
{
    for (int vec = 0; vec < 2; vec++) {
        check_gelu16_all(1, 3.0f, vec, 0);
        check_gelu16_all(1001, 6.0f, vec, 0);
        check_gelu16_all(3001, 1e5f, vec, 2);  /* overflows fp16 */
        check_gelu16_all(4096, 0.01f, vec, 3); /* small values: fp16 subnormals */
    }
}

static void test_elementwise(void)
{
    for (int vec = 0; vec < 2; vec++) {
        check_all(1, 0, vec, 0);
        check_all(1001, 0, vec, 0);
        check_all(3001, 2, vec, 0);
        check_all(4096, 3, vec, 0);
    }
    check_all(1003, 0, false, 1); /* unaligned: the host side passes no float4s */
}

static void test_no_emulator_faults(void)
{
    CHECK_EQ_INT(emu_failures, 0);
}

int main(void)
{
    RUN_TEST(test_elementwise);
    RUN_TEST(test_gelu16);
    RUN_TEST(test_no_emulator_faults);
    return check_summary();
}
