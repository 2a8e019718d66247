// SPDX-License-Identifier: MIT
/* src/kernels/cuda/half.cu's device code on the host (tests/cuda_emu.h) against ddpc/half.h, bit
 * for bit, as the file claims: every bf16 and every f16 value back to f32, and to bf16/f16 the
 * special values (zeros, f32 and f16 subnormals, ties at each rounding point, the overflow
 * threshold 65520, infinities, NaNs with payloads of either sign) and a spread of 2^16 bit
 * patterns over all exponents. It found f16 -> f32 keeping a signalling NaN signalling on the
 * GPU and in the CPU's scalar path while the CPU's F16C path made it quiet. Launched with the host
 * side's grid and with a few blocks, so the grid-stride loops go round. */
#include "cuda_emu.h"

#include "../src/kernels/cuda/half.cu"

#include "emu_testutil.h"

#include "check.h"

static std::vector<float> from_bits(const std::vector<uint32_t> &u)
{
    std::vector<float> f(u.size());
    memcpy(f.data(), u.data(), u.size() * sizeof(float));
    return f;
}

/* The f32 inputs: special values, then every 65537th bit pattern (all exponents, both signs). */
static std::vector<float> inputs(void)
{
    std::vector<uint32_t> u = {
        0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, /* zeros, f32 subnormals */
        0x7f800000u, 0xff800000u,                           /* infinities */
        0x7f800001u, 0xffbfffffu, 0x7fc00000u, 0xffc12345u, /* NaNs: signalling, quiet, payloads */
        0x7f7fffffu, 0x477fe000u, 0x477fefffu, 0x477ff000u, /* max f32, 65504, under/at 65520 */
        0x387fc000u, 0x38800000u, 0x33800000u, 0x33000000u, /* f16 subnormal/normal edge, 2^-24 */
        0x33000001u, 0x33c00000u, 0x3f801000u, 0x3f803000u, /* ties: 2^-25 (to 0), 1.5*2^-24 */
        0x3f808000u, 0x3f818000u, 0x3f7fffffu, 0x3effffffu, /* bf16 ties to even, near 1 */
    };
    for (uint64_t x = 0; x <= 0xffffffffu; x += 65537)
        u.push_back((uint32_t)x);
    /* f16 ties in the subnormal range: (2k + 1) * 2^-25 */
    for (uint32_t k = 0; k < 1024; k += 37)
        u.push_back(__float_as_uint((float)(2 * k + 1) * 0x1p-25f));
    return from_bits(u);
}

static void check_to_half(int bf16, unsigned blocks)
{
    const std::vector<float> x = inputs();
    const int64_t n = (int64_t)x.size();
    std::vector<uint16_t> ref((size_t)n), got((size_t)n, 0xdead);
    emu_cpu()->f32_to_half_array(ref.data(), x.data(), (size_t)n, bf16);
    emu_launch(blocks, THREADS, 0, [&] { to_half_kernel(got.data(), x.data(), n, bf16); });
    printf(" f32 -> %s, %lld values, %u blocks\n", bf16 ? "bf16" : "f16", (long long)n, blocks);
    CHECK(emu_same_bits(bf16 ? "to bf16" : "to f16", got.data(), ref.data(), n, 2));
}

/* Every 16-bit pattern back to f32, then 7 signalling NaNs, which the CPU's array function
 * converts in its scalar tail (the bulk may use F16C's instruction): both must make them quiet. */
static void check_from_half(int bf16, unsigned blocks)
{
    const int64_t n = 65536 + 7;
    std::vector<uint16_t> h((size_t)n);
    for (int64_t i = 0; i < n; i++)
        h[(size_t)i] = (uint16_t)(i < 65536 ? i : (bf16 ? 0x7f80 : 0x7c00) + i - 65535);
    std::vector<float> ref((size_t)n), got = emu_poison(n);
    emu_cpu()->half_to_f32_array(ref.data(), h.data(), (size_t)n, bf16);
    emu_launch(blocks, THREADS, 0, [&] { from_half_kernel(got.data(), h.data(), n, bf16); });
    printf(" %s -> f32, all 65536 values and 7 more NaNs, %u blocks\n", bf16 ? "bf16" : "f16",
           blocks);
    CHECK(emu_same_bits(bf16 ? "from bf16" : "from f16", got.data(), ref.data(), n, 4));
}

static void test_to_half(void)
{
    const unsigned grid = emu_grid((int64_t)inputs().size(), THREADS);
    for (int bf16 = 0; bf16 <= 1; bf16++) {
        check_to_half(bf16, grid);
        check_to_half(bf16, 3);
    }
}

static void test_from_half(void)
{
    for (int bf16 = 0; bf16 <= 1; bf16++)
        check_from_half(bf16, 5);
}

int main(void)
{
    CHECK(emu_cpu()->f32_to_half_array != NULL && emu_cpu()->half_to_f32_array != NULL);
    RUN_TEST(test_to_half);
    RUN_TEST(test_from_half);
    return check_summary();
}
