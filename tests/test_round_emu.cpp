// SPDX-License-Identifier: MIT
/* src/kernels/cuda/round.cu's device code on the host (tests/cuda_emu.h): every element of the
 * padded 16-bit copy equals core/half.c's rounding of the source element, and the padding is 0,
 * for bf16 and fp16; with float4 reads (aligned rows) and without (odd leading dimension, a
 * source one float off alignment), groups crossing cols, zeros, -0, NaN, infinities, subnormals
 * and values that overflow fp16; the host side's grid and 3 blocks (grid-stride loops). */
#include "cuda_emu.h"

#include "../src/kernels/cuda/round.cu"

#include "emu_testutil.h"

#include "check.h"

#include <ddpc/half.h>

#include <type_traits>

template <typename T>
static void check_shape(int64_t rows, int64_t cols, int64_t prows, int64_t pcols, int64_t lds,
                        int64_t offset, unsigned blocks)
{
    const bool bf = std::is_same<T, __nv_bfloat16>::value;
    std::vector<float> buf = emu_rand(offset + rows * lds + 4, 3.0f, (uint64_t)(rows * cols));
    const float special[8] = {0.0f, -0.0f, NAN, INFINITY, -INFINITY, 1e-41f, 7e4f, -1.00390625f};
    for (int64_t i = 0; i < (int64_t)buf.size(); i += 5)
        buf[(size_t)i] = special[i / 5 % 8];
    const float *src = buf.data() + offset;
    std::vector<T> dst((size_t)(prows * pcols));
    for (T &d : dst)
        d.bits = 0x7777; /* poison: every element must be written */
    const bool vec = round4_vectors(src, lds);
    const unsigned g = blocks ? blocks : emu_grid(prows * (pcols / 4), ROUND4_THREADS);
    printf(" %s %lldx%lld in %lldx%lld, lds %lld, offset %lld, float4 %d, %u blocks\n",
           bf ? "bf16" : "fp16", (long long)rows, (long long)cols, (long long)prows,
           (long long)pcols, (long long)lds, (long long)offset, (int)vec, g);
    emu_launch(g, ROUND4_THREADS, 0,
               [&] { round4_kernel<T>(dst.data(), src, rows, cols, prows, pcols, lds, vec); });
    int64_t bad = 0;
    for (int64_t r = 0; r < prows; r++)
        for (int64_t c = 0; c < pcols; c++) {
            const float x = r < rows && c < cols ? src[r * lds + c] : 0.0f;
            const uint16_t want = bf ? ddpc_f32_to_bf16(x) : ddpc_f32_to_f16(x);
            const uint16_t got = dst[(size_t)(r * pcols + c)].bits;
            if (got != want && bad++ < 5)
                fprintf(stderr, "  (%lld, %lld): %04x, want %04x\n", (long long)r, (long long)c,
                        got, want);
        }
    CHECK_EQ_INT(bad, 0);
}

static void test_round(void)
{
    for (int half = 0; half < 2; half++) {
        auto run = half ? check_shape<__half> : check_shape<__nv_bfloat16>;
        run(16, 64, 16, 64, 64, 0, 0);  /* aligned, no padding */
        run(5, 13, 8, 16, 13, 0, 0);    /* odd lds: element by element */
        run(7, 21, 8, 24, 24, 0, 3);    /* float4 rows, groups crossing cols, 3 blocks */
        run(9, 40, 16, 40, 44, 1, 0);   /* one float off alignment */
        run(3, 257, 8, 384, 260, 0, 2); /* wide padding (gemm.cu's 128 for large sizes) */
    }
}

static void test_no_emulator_faults(void)
{
    CHECK_EQ_INT(emu_failures, 0);
}

int main(void)
{
    RUN_TEST(test_round);
    RUN_TEST(test_no_emulator_faults);
    return check_summary();
}
