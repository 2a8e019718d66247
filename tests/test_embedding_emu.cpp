// SPDX-License-Identifier: MIT
/* src/kernels/cuda/embedding.cu's device code on the host (tests/cuda_emu.h) against the CPU table,
 * bit for bit, as the file claims: forward with and without wpe; backward's dwpe, and dwte
 * through the kernels that follow CUB's sort. CUB itself does not compile for the host, so the
 * sort is std::stable_sort of (token, position) by token, which is what CUB's LSD radix sort of
 * all 32 bits produces (stable, negatives first). Repeated and unused tokens, long runs of one
 * token, c not a multiple of 256 (two channel tiles), grids smaller than the data. */
#include "cuda_emu.h"

#include "../src/kernels/cuda/embedding.cu"

#include "emu_testutil.h"

#include <algorithm>
#include <numeric>

#include "check.h"

static void check_embedding(int64_t b, int64_t t, int64_t c, int64_t v, bool with_wpe,
                            bool small_grid)
{
    const int64_t n = b * t;
    printf(" b %lld t %lld c %lld v %lld%s%s\n", (long long)b, (long long)t, (long long)c,
           (long long)v, with_wpe ? "" : ", no wpe", small_grid ? ", small grids" : "");
    std::vector<int32_t> tok((size_t)n);
    for (int64_t i = 0; i < n; i++) /* token 1 often (long runs), v - 1 never */
        tok[(size_t)i] = i % 3 == 0 ? 1 : (int32_t)((i * 7 + i / 5) % (v - 1));
    const std::vector<float> wte = emu_rand(v * c, 1.0f, 1), wpe = emu_rand(t * c, 1.0f, 2);
    const float *wp = with_wpe ? wpe.data() : NULL;
    const ddpc_kernel_table *cpu = emu_cpu();

    std::vector<float> y(n * c), ey = emu_poison(n * c);
    cpu->embedding_forward(y.data(), tok.data(), wte.data(), wp, b, t, c);
    emu_launch(small_grid ? 3 : emu_grid(n * c, 256), 256, 0,
               [&] { embedding_forward_kernel(ey.data(), tok.data(), wte.data(), wp, n, t, c); });
    CHECK(emu_same_bits("y", ey.data(), y.data(), n * c, 4));

    const std::vector<float> dy = emu_rand(n * c, 1.0f, 3);
    std::vector<float> dwte = emu_rand(v * c, 0.5f, 4), dwpe = emu_rand(t * c, 0.5f, 5);
    std::vector<float> edwte = dwte, edwpe = dwpe;
    cpu->embedding_backward(dwte.data(), with_wpe ? dwpe.data() : NULL, dy.data(), tok.data(), b, t,
                            c);
    if (with_wpe)
        emu_launch(small_grid ? 2 : emu_grid(t * c, 256), 256, 0,
                   [&] { embedding_dwpe_kernel(edwpe.data(), dy.data(), b, t, c); });
    std::vector<int32_t> pos_in((size_t)n, -1), key = tok, pos((size_t)n);
    emu_launch(small_grid ? 1 : emu_grid(n, 256), 256, 0, [&] { iota_kernel(pos_in.data(), n); });
    std::vector<int32_t> iota((size_t)n);
    std::iota(iota.begin(), iota.end(), 0);
    CHECK(pos_in == iota);
    pos = pos_in; /* the sort: stable by token */
    std::stable_sort(pos.begin(), pos.end(),
                     [&](int32_t i, int32_t j) { return tok[(size_t)i] < tok[(size_t)j]; });
    for (int64_t i = 0; i < n; i++)
        key[(size_t)i] = tok[(size_t)pos[(size_t)i]];
    emu_launch2((unsigned)n, (unsigned)((c + 255) / 256), 256, 0, [&] {
        embedding_dwte_kernel(edwte.data(), dy.data(), key.data(), pos.data(), n, c);
    });
    CHECK(emu_same_bits("dwte", edwte.data(), dwte.data(), v * c, 4));
    if (with_wpe)
        CHECK(emu_same_bits("dwpe", edwpe.data(), dwpe.data(), t * c, 4));
}

static void test_embedding(void)
{
    check_embedding(3, 17, 40, 11, true, false);
    check_embedding(2, 9, 300, 7, true, true); /* two channel tiles */
    check_embedding(1, 13, 33, 5, false, false);
}

static void test_no_emulator_faults(void)
{
    CHECK_EQ_INT(emu_failures, 0);
}

int main(void)
{
    RUN_TEST(test_embedding);
    RUN_TEST(test_no_emulator_faults);
    return check_summary();
}
