// SPDX-License-Identifier: MIT
/* src/kernels/cuda/dropout.cu's device code on the host (tests/cuda_emu.h) against the CPU table,
 * bit for bit, as the file claims: its SplitMix64 port draws the CPU's mask (ddpc_rng_uniform_at)
 * for several (seed, stream) pairs and p (0.1, 0.5, 0.9), forward (also in place) and backward
 * accumulating onto nonzero dx; p = 0 backward is the plain sum. Odd sizes, the host side's grid
 * and 2 blocks. */
#include "cuda_emu.h"

#include "../src/kernels/cuda/dropout.cu"

#include "emu_testutil.h"

#include "check.h"

/* apply_mask as the host side launches it. */
static void emu_mask(float *out, const float *in, int64_t n, float p, uint64_t seed,
                     uint64_t stream, int accumulate, unsigned blocks)
{
    const float scale = 1.0f / (1.0f - p);
    const uint64_t key = stream_key(seed, stream);
    emu_launch(blocks, kThreads, 0, [&] { dropout_kernel(out, in, n, p, scale, key, accumulate); });
}

static void check_dropout(int64_t n, float p, uint64_t seed, uint64_t stream, unsigned blocks)
{
    const unsigned g = blocks ? blocks : emu_grid(n, kThreads);
    printf(" n %lld p %g seed %llu stream %llu, %u blocks\n", (long long)n, p,
           (unsigned long long)seed, (unsigned long long)stream, g);
    const ddpc_kernel_table *cpu = emu_cpu();
    const std::vector<float> x = emu_rand(n, 2.0f, 1), dy = emu_rand(n, 1.0f, 2);
    std::vector<float> y(n), got = emu_poison(n);
    cpu->dropout_forward(y.data(), x.data(), n, p, seed, stream);
    emu_mask(got.data(), x.data(), n, p, seed, stream, 0, g);
    CHECK(emu_same_bits("forward", got.data(), y.data(), n, 4));
    int64_t kept = 0;
    for (int64_t i = 0; i < n; i++)
        kept += got[(size_t)i] != 0.0f;
    CHECK(kept > 0 && kept < n); /* the mask is not trivial */
    got = x;
    emu_mask(got.data(), got.data(), n, p, seed, stream, 0, g); /* in place */
    CHECK(emu_same_bits("forward in place", got.data(), y.data(), n, 4));

    std::vector<float> dx = emu_rand(n, 1.0f, 3), edx = dx;
    cpu->dropout_backward(dx.data(), dy.data(), n, p, seed, stream);
    emu_mask(edx.data(), dy.data(), n, p, seed, stream, 1, g);
    CHECK(emu_same_bits("backward", edx.data(), dx.data(), n, 4));
}

static void test_dropout(void)
{
    check_dropout(1001, 0.1f, 1, 0, 0);
    check_dropout(3001, 0.5f, 1234567, 99, 2);
    check_dropout(777, 0.9f, 0xfeedfacecafebeefULL, 0xffffffffffffULL, 0);
}

static void test_p0_backward(void)
{
    const int64_t n = 1001;
    const std::vector<float> dy = emu_rand(n, 1.0f, 4);
    std::vector<float> dx = emu_rand(n, 1.0f, 5), edx = dx;
    emu_cpu()->dropout_backward(dx.data(), dy.data(), n, 0.0f, 3, 4);
    emu_launch(2, kThreads, 0, [&] { accumulate_kernel(edx.data(), dy.data(), n); });
    CHECK(emu_same_bits("p 0 backward", edx.data(), dx.data(), n, 4));
}

static void test_no_emulator_faults(void)
{
    CHECK_EQ_INT(emu_failures, 0);
}

int main(void)
{
    RUN_TEST(test_dropout);
    RUN_TEST(test_p0_backward);
    RUN_TEST(test_no_emulator_faults);
    return check_summary();
}
