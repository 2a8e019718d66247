// SPDX-License-Identifier: MIT
/* src/kernels/cuda/positional.cu's device code on the host (tests/cuda_emu.h) against the CPU
 * table: the sinusoidal table and the scaled embedding (with and without positions) bit for bit,
 * and the scaled copy backward hands to embedding.cu's, whose sum per token row then gives the
 * CPU's backward bit for bit (its order is test_embedding_emu's; here the host adds in position
 * order as that kernel does). Odd widths, grids smaller than the work. */
#include "cuda_emu.h"

#include "../src/kernels/cuda/positional.cu"

#include "emu_testutil.h"

#include "check.h"

static void check_positional(int64_t b, int64_t t, int64_t c, int64_t v)
{
    printf(" b %lld t %lld c %lld v %lld\n", (long long)b, (long long)t, (long long)c,
           (long long)v);
    const ddpc_kernel_table *cpu = emu_cpu();
    std::vector<float> pe((size_t)(t * c)), epe = emu_poison(t * c);
    cpu->sinusoidal_positions(pe.data(), t, c);
    emu_launch(2, 64, 0, [&] { sinusoidal_kernel(epe.data(), t, c); });
    CHECK(emu_same_bits("positions", epe.data(), pe.data(), t * c, sizeof(float)));

    const float scale = sqrtf((float)c);
    std::vector<float> w = emu_rand(v * c, 1.0f, 5 + (uint64_t)c);
    std::vector<int32_t> tok((size_t)(b * t));
    for (int64_t i = 0; i < b * t; i++)
        tok[(size_t)i] = (int32_t)((i * 5 + i / 3) % v);
    for (int with_pe = 0; with_pe < 2; with_pe++) {
        const float *p = with_pe ? pe.data() : nullptr;
        std::vector<float> y((size_t)(b * t * c)), ey = emu_poison(b * t * c);
        cpu->embedding_scaled_forward(y.data(), tok.data(), w.data(), scale, p, b, t, c);
        emu_launch(3, 64, 0, [&] {
            embedding_scaled_kernel(ey.data(), tok.data(), w.data(), scale, p, b * t, t, c);
        });
        CHECK(emu_same_bits(with_pe ? "forward" : "forward without positions", ey.data(), y.data(),
                            b * t * c, sizeof(float)));
    }

    std::vector<float> dy = emu_rand(b * t * c, 1.0f, 6 + (uint64_t)c),
                       scaled = emu_poison(b * t * c);
    std::vector<float> dw = emu_rand(v * c, 0.5f, 7 + (uint64_t)c), edw = dw;
    cpu->embedding_scaled_backward(dw.data(), dy.data(), tok.data(), scale, b, t, c);
    emu_launch(2, 64, 0, [&] { scale_copy_kernel(scaled.data(), dy.data(), scale, b * t * c); });
    for (int64_t i = 0; i < b * t; i++) /* embedding.cu's dwte order: ascending position */
        for (int64_t j = 0; j < c; j++)
            edw[(size_t)(tok[(size_t)i] * c + j)] += scaled[(size_t)(i * c + j)];
    CHECK(emu_same_bits("backward", edw.data(), dw.data(), v * c, sizeof(float)));
}

static void test_positional(void)
{
    check_positional(2, 5, 8, 9);
    check_positional(3, 7, 13, 4); /* odd width: the last pair has no cosine */
}

static void test_no_emulator_faults(void)
{
    CHECK_EQ_INT(emu_failures, 0);
}

int main(void)
{
    RUN_TEST(test_positional);
    RUN_TEST(test_no_emulator_faults);
    return check_summary();
}
