// SPDX-License-Identifier: MIT
/* src/kernels/cuda/loss_smooth.cu's device code on the host (tests/cuda_emu.h) against the CPU
 * table's label-smoothed cross-entropy: probabilities (in place over the logits, as seq2seq runs
 * it) and row losses within 1e-5, the mean within 1e-4, the valid count exact, the backward
 * (accumulating onto a nonzero dlogits, ignored rows untouched) within 1e-5, and the same bits
 * with the count taken from the forward's sums on the device. Rows of 7 to 3000
 * classes (one warp to rows longer than the block), grids smaller than the rows. */
#include "cuda_emu.h"

#include "../src/kernels/cuda/loss_smooth.cu"

#include "emu_testutil.h"

#include "check.h"

static void check_smooth(int64_t n, int64_t v, float eps, unsigned blocks)
{
    const unsigned threads = (unsigned)ddpc__row_threads(v, 1024);
    printf(" n %lld v %lld eps %g: %u blocks of %u threads\n", (long long)n, (long long)v,
           (double)eps, blocks, threads);
    std::vector<float> logits = emu_rand(n * v, 6.0f, 11 + (uint64_t)v);
    std::vector<int32_t> tg((size_t)n);
    for (int64_t i = 0; i < n; i++) /* every third row ignored (0), one out of range */
        tg[(size_t)i] = i % 3 == 1 ? 0 : i == 2 ? (int32_t)v : (int32_t)((i * 7 + 1) % v);
    const ddpc_kernel_table *cpu = emu_cpu();
    std::vector<float> probs = logits, losses((size_t)n);
    int64_t valid = -1;
    const float loss = cpu->cross_entropy_smooth_forward(probs.data(), losses.data(), probs.data(),
                                                         tg.data(), n, v, 0, eps, &valid);
    std::vector<float> eprobs = logits, elosses = emu_poison(n);
    emu_launch(blocks, threads, 0, [&] {
        ce_smooth_forward_kernel(eprobs.data(), elosses.data(), eprobs.data(), tg.data(), n, v, 0,
                                 eps);
    });
    double sums[2] = {NAN, NAN};
    emu_launch(1, 1024, 0, [&] { ce_smooth_sum_kernel(sums, elosses.data(), tg.data(), n, v, 0); });
    CHECK(emu_rel_err("probs", eprobs.data(), probs.data(), n * v) <= 1e-5);
    CHECK(emu_rel_err("losses", elosses.data(), losses.data(), n) <= 1e-5);
    CHECK_EQ_INT((int64_t)sums[1], valid);
    const float eloss = valid ? (float)(sums[0] / sums[1]) : 0.0f;
    printf("  loss %.9g, CPU %.9g\n", (double)eloss, (double)loss);
    CHECK_NEAR(eloss, loss, 1e-4);

    const float dloss = 0.75f;
    std::vector<float> d = emu_rand(n * v, 0.1f, 12 + (uint64_t)v), ed = d;
    cpu->cross_entropy_smooth_backward(d.data(), probs.data(), tg.data(), n, v, 0, eps, valid,
                                       dloss);
    const smooth_coefs k = smooth_coefs_of(dloss, (float)valid, eps, v);
    const unsigned bgrid = emu_grid(n * v, 256) > 3 ? 3 : emu_grid(n * v, 256);
    emu_launch(bgrid, 256, 0, [&] {
        ce_smooth_backward_kernel(ed.data(), probs.data(), tg.data(), n, v, 0, k, nullptr, 0.0f,
                                  0.0f);
    });
    /* The _from form: the count from the forward's sums, the coefficients on the device. */
    std::vector<float> efrom = emu_rand(n * v, 0.1f, 12 + (uint64_t)v);
    emu_launch(bgrid, 256, 0, [&] {
        ce_smooth_backward_kernel(efrom.data(), probs.data(), tg.data(), n, v, 0,
                                  smooth_coefs{NAN, NAN, NAN}, sums, dloss, eps);
    });
    CHECK(emu_same_bits("dlogits from the sums", efrom.data(), ed.data(), n * v, sizeof(float)));
    CHECK(emu_rel_err("dlogits", ed.data(), d.data(), n * v) <= 1e-5);
}

static void test_smooth(void)
{
    check_smooth(6, 7, 0.1f, 6);
    check_smooth(9, 50, 0.0f, 4);   /* eps 0: plain cross-entropy */
    check_smooth(5, 300, 0.2f, 2);  /* 512 threads: several warps */
    check_smooth(4, 3000, 0.1f, 3); /* rows longer than 1024 threads */
}

static void test_no_emulator_faults(void)
{
    CHECK_EQ_INT(emu_failures, 0);
}

int main(void)
{
    RUN_TEST(test_smooth);
    RUN_TEST(test_no_emulator_faults);
    return check_summary();
}
