// SPDX-License-Identifier: MIT
/* The CUDA cross-entropy's own device code (src/kernels/cuda/loss.cu, compiled for the host against
 * tests/cuda_emu.h): the forward and the fused forward+backward kernels (the row staged in shared
 * memory with 16-byte loads, and the fallbacks reading it from memory), and the backward written
 * over the probabilities (count from the sums or the host), against the unfused kernels they
 * replace (forward, mean, backward onto zeroed dlogits) bit for bit, dlogits, row losses and sums
 * alike, and the fused one against the CPU table's fused member within 1e-5 (the block reductions
 * and the host's expf differ from the CPU's serial SIMD sum and exp). Blocks of 1, 2 and 32 warps,
 * rows longer than the block, fewer blocks than rows (the grid-stride loop), in place and not,
 * ignored and out-of-range targets, every row ignored, GPT-2's padded 50304 and raw 50257 (rows at
 * every 16-byte offset), rows narrower than the 16-byte head, one row, a row past sm_90's shared
 * memory; and the row softmax against the CPU table's within 1e-6. head16.cu's row kernel
 * on 16-bit logits (bf16, fp16) against the fused kernel on them widened, its gradient rounded,
 * and argmax_kernel, bit for bit (rows whose loss is near 0 expose the sum's order). Outputs start
 * as NaN. What it cannot see: the device's own expf/logf (the GPU test compares those,
 * tests/test_cuda_loss.c), nor a misaligned 16-byte load (the host allows it;
 * tests/test_cuda_ce_fused.c's 50257 would fail). */
#define DDPC_CUDA_EMULATE 1
#include "cuda_emu.h"

#include <climits>
#include <cstdint>
#include <vector>

/* What loss.cu needs beyond cuda_emu.h: a 64-bit atomicAdd (the argmax count). */
static inline unsigned long long atomicAdd(unsigned long long *p, unsigned long long v)
{
    return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}

/* The argmax kernel runs only as the 16-bit kernel's reference: this test is about the loss (and
 * the softmax, which shares its row statistics). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "../src/kernels/cuda/loss.cu"
#pragma GCC diagnostic pop

#include <ddpc/kernels.h>
#include <ddpc/rng.h>

#include "check.h"

enum { IGNORE = -100 };

static std::vector<float> nan_vec(int64_t n)
{
    return std::vector<float>((size_t)n, NAN);
}

/* Targets for n rows: every 5th ignore_index, every 7th v (out of range), every 11th negative. */
static std::vector<int32_t> make_targets(int64_t n, int64_t v, bool none)
{
    std::vector<int32_t> t((size_t)n);
    for (int64_t i = 0; i < n; i++)
        t[(size_t)i] = none || i % 5 == 1 ? IGNORE
                       : i % 7 == 2       ? (int32_t)v
                       : i % 11 == 3      ? -3
                                          : (int32_t)((i * 7919 + 13) % v);
    return t;
}

/* The number of elements where a and b differ in their bits; prints the first. */
static int64_t bit_diffs(const char *what, const float *a, const float *b, int64_t n)
{
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0 && bad++ == 0)
            printf("  %s[%lld]: %.9g vs %.9g\n", what, (long long)i, (double)a[i], (double)b[i]);
    if (bad)
        printf("  %s: %lld of %lld differ\n", what, (long long)bad, (long long)n);
    return bad;
}

/* One shape, `threads` per row block (the host launches ddpc__row_threads(v, 1024)), `blocks`
 * row blocks (the host launches one per row; fewer makes the blocks loop). */
static void check_emu(int64_t n, int64_t v, unsigned threads, unsigned blocks, float dloss,
                      bool none, bool in_place, uint64_t seed)
{
    /* The one-block count and mean kernels: 1024 threads as the host launches them for GPT-2's
     * shape; fewer elsewhere, which only changes the order of the (unchanged) mean's sum, the
     * same for both sides, and keeps the emulation's thread starts few. */
    const unsigned one = threads == 1024 ? 1024 : 128;
    printf(" emulated n %lld v %lld threads %u blocks %u dloss %g%s%s\n", (long long)n,
           (long long)v, threads, blocks, (double)dloss, none ? " all ignored" : "",
           in_place ? " in place" : "");
    const std::vector<int32_t> tg = make_targets(n, v, none);
    std::vector<float> logits((size_t)(n * v));
    for (int64_t i = 0; i < n * v; i++)
        logits[(size_t)i] = 16.0f * ddpc_rng_uniform_at(seed, 3, (uint64_t)i) - 8.0f;
    const int32_t *t = tg.data();
    const int before = emu_failures;

    /* The unfused kernels as the models ran them: probs over the logits, the mean, then the
     * backward (g from the sums) onto zeroed dlogits. */
    std::vector<float> probs = logits, ref_loss = nan_vec(n);
    std::vector<float> ref_d((size_t)(n * v), 0.0f);
    double ref_sums[2] = {NAN, NAN};
    const unsigned bwd = (unsigned)ddpc__row_threads(v, 256);
    emu_launch(blocks, threads, 0, [&] {
        ce_forward_kernel(probs.data(), ref_loss.data(), probs.data(), t, n, v, IGNORE);
    });
    emu_launch(1, one, 0, [&] { ce_mean_kernel(ref_sums, ref_loss.data(), t, n, v, IGNORE); });

    /* The forward that stages the row in shared memory (the host's choice where it fits): the
     * same probabilities and row losses. */
    {
        std::vector<float> sx = logits, sp = nan_vec(n * v), sl = nan_vec(n);
        float *out = in_place ? sx.data() : sp.data();
        emu_launch(blocks, threads, ce_stage_bytes(v), [&] {
            ce_forward_smem_kernel(out, sl.data(), sx.data(), t, n, v, IGNORE);
        });
        CHECK_EQ_INT(emu_failures, before);
        CHECK_EQ_INT(bit_diffs("staged probs", out, probs.data(), n * v), 0);
        CHECK_EQ_INT(bit_diffs("staged forward's row loss", sl.data(), ref_loss.data(), n), 0);
    }
    emu_launch(blocks, bwd, 0, [&] {
        ce_backward_kernel(ref_d.data(), probs.data(), t, n, v, IGNORE, 0, ref_sums, dloss, false);
    });

    /* The backward over the probabilities (as the models run it now), the count from the sums and
     * from the host: the same bits. Ignored rows' probabilities are NaN: never read, set to 0. */
    for (int host = 0; host < 2; host++) {
        std::vector<float> over = probs;
        for (int64_t i = 0; i < n; i++)
            if (!ddpc__valid_target(t[i], v, IGNORE))
                std::fill(over.begin() + i * v, over.begin() + (i + 1) * v, NAN);
        const int64_t n_valid = host ? (int64_t)ref_sums[1] : -1;
        emu_launch(blocks, bwd, 0, [&] {
            ce_backward_kernel(over.data(), over.data(), t, n, v, IGNORE, n_valid,
                               host ? nullptr : ref_sums, dloss, true);
        });
        CHECK_EQ_INT(bit_diffs(host ? "in place, host count" : "in place", over.data(),
                               ref_d.data(), n * v),
                     0);
    }

    /* The fused member's three launches, as ddpc__cuda_cross_entropy_fused makes them, with the
     * kernel that stages the row in shared memory (the host's choice where the row fits) and the
     * fallback that reads it three times: the same bits. */
    std::vector<float> x = logits, sep = nan_vec(n * v), loss = nan_vec(n);
    float *d = in_place ? x.data() : sep.data();
    double sums[2] = {NAN, NAN};
    for (int staged = 0; staged < 2; staged++) {
        const char *which = staged ? "staged" : "fallback";
        printf("  %s kernel\n", which);
        x = logits;
        std::fill(sep.begin(), sep.end(), NAN);
        std::fill(loss.begin(), loss.end(), NAN);
        sums[0] = sums[1] = NAN;
        emu_launch(1, one, 0, [&] { ce_count_kernel(sums, t, n, v, IGNORE); });
        CHECK(sums[1] == ref_sums[1]);
        if (staged)
            emu_launch(blocks, threads, ce_stage_bytes(v), [&] {
                ce_fused_smem_kernel(d, loss.data(), x.data(), t, n, v, IGNORE, sums, dloss);
            });
        else
            emu_launch(blocks, threads, 0, [&] {
                ce_fused_kernel(d, loss.data(), x.data(), t, n, v, IGNORE, sums, dloss);
            });
        emu_launch(1, one, 0, [&] { ce_mean_kernel(sums, loss.data(), t, n, v, IGNORE); });
        CHECK_EQ_INT(emu_failures, before); /* full-warp shuffles, matched barriers */

        CHECK_EQ_INT(bit_diffs("dlogits", d, ref_d.data(), n * v), 0);
        CHECK_EQ_INT(bit_diffs("row loss", loss.data(), ref_loss.data(), n), 0);
        CHECK(memcmp(sums, ref_sums, sizeof sums) == 0);
    }

    /* The CPU table's fused member: the same count, the loss and gradient within 1e-5. */
    std::vector<float> cd = nan_vec(n * v), cl = nan_vec(n);
    double csums[2] = {NAN, NAN};
    ddpc_cross_entropy_fused(csums, cd.data(), cl.data(), logits.data(), t, n, v, IGNORE, dloss);
    CHECK(csums[1] == sums[1]);
    const double e_d = emu_rel_err(d, cd.data(), n * v);
    const double e_l = emu_rel_err(loss.data(), cl.data(), n);
    const double e_s = std::fabs(sums[0] - csums[0]) / std::fmax(std::fabs(csums[0]), 1e-30);
    printf("  against the CPU: dlogits %.3g, row losses %.3g, loss sum %.3g\n", e_d, e_l, e_s);
    CHECK(e_d <= 1e-5);
    CHECK(e_l <= 1e-5);
    CHECK(csums[0] == 0.0 ? sums[0] == 0.0 : e_s <= 1e-5);
}

static void test_emu_small_blocks(void)
{
    check_emu(10, 300, 64, 3, 1.0f, false, false, 1); /* rows of ~5 blocks, 2 warps, looping */
    check_emu(10, 300, 64, 3, 1.0f, false, true, 1);
    check_emu(23, 13, 32, 23, 0.75f, false, true, 2); /* 1 warp, most threads idle */
    check_emu(7, 13, 32, 2, 1.0f, true, true, 3);     /* every row ignored: dlogits all 0 */
    check_emu(12, 1000, 128, 5, 65536.0f / 3.0f, false, false, 4); /* an fp16 scale */
}

/* Rows narrower than the 16-byte head the staged kernel copies one by one: every row starts at
 * another offset from 16 bytes, some rows end inside the head. */
static void test_emu_narrow_rows(void)
{
    check_emu(9, 1, 32, 4, 1.0f, false, false, 10);
    check_emu(9, 2, 32, 4, 1.0f, false, true, 11);
    check_emu(9, 3, 32, 9, 1.0f, false, false, 12);
    check_emu(6, 5, 32, 6, 1.0f, false, true, 13);
    check_emu(1, 300, 64, 1, 1.0f, false, true, 14); /* one row */
}

static void test_emu_gpt2_vocab(void)
{
    /* The host's launch for GPT-2: 1024 threads, each row ~49 elements per thread; the padded
     * 50304 keeps rows 16-byte aligned, the raw 50257 starts them at every offset. */
    check_emu(6, 50304, (unsigned)ddpc__row_threads(50304, 1024), 6, 1.0f, false, true, 5);
    check_emu(6, 50257, (unsigned)ddpc__row_threads(50257, 1024), 6, 1.0f, false, false, 6);
    check_emu(5, 50257, (unsigned)ddpc__row_threads(50257, 1024), 3, 1.0f, false, true, 7);
}

/* The host's choice between the kernels on sm_90 (227 KiB a block, less the 128 bytes of sh):
 * 50257 is staged, a row one float past the limit falls back; both kernels run such a row above
 * (check_emu runs both on every shape) with the same bits. */
static void test_emu_on_chip_limit(void)
{
    const size_t sm90 = 227 * 1024 - 32 * sizeof(float);
    const int64_t widest = (int64_t)(sm90 / sizeof(float)) - 3;
    CHECK(ce_row_fits(50257, sm90));
    CHECK(ce_row_fits(widest, sm90));
    CHECK(!ce_row_fits(widest + 1, sm90));
    CHECK(!ce_row_fits(50257, 48 * 1024)); /* a device without the opt-in */
    check_emu(2, widest + 1, 1024, 2, 1.0f, false, true, 8);
}

/* The 16-bit bits of x in prec's format (round to nearest even), and back. */
static uint16_t narrow16(bool bf, float x)
{
    return bf ? ddpc_f32_to_bf16(x) : ddpc_f32_to_f16(x);
}
static float widen16(bool bf, uint16_t b)
{
    return bf ? ddpc_bf16_to_f32(b) : ddpc_f16_to_f32(b);
}

/* head16.cu's row kernel on 16-bit logits (rows, ld), v of each row's ld columns
 * real, against the fp32 path on the same logits widened: ce_count_kernel, ce_fused_smem_kernel
 * and ce_mean_kernel, then its dlogits rounded to 16 bits as linear_backward rounds them, and
 * argmax_kernel. The same bits for every gradient, row loss and sum, the same argmax count;
 * zeros in the padding columns and rows (which start as garbage here), on ignored rows and for
 * a batch without valid rows. Some rows put their maximum at the target, some tie it earlier. */
static void check_emu16(int64_t n, int64_t v, int64_t ld, int64_t rows, unsigned threads,
                        unsigned blocks, float dloss, bool bf, bool none, uint64_t seed)
{
    const unsigned one = threads == 1024 ? 1024 : 128;
    printf(
        " emulated 16-bit (%s) n %lld v %lld ld %lld rows %lld threads %u blocks %u dloss %g%s\n",
        bf ? "bf16" : "fp16", (long long)n, (long long)v, (long long)ld, (long long)rows, threads,
        blocks, (double)dloss, none ? " all ignored" : "");
    const std::vector<int32_t> tg = make_targets(n, v, none);
    const int32_t *t = tg.data();
    std::vector<uint16_t> h((size_t)(rows * ld), narrow16(bf, 1.5f)); /* the padding: garbage */
    std::vector<float> wide((size_t)(n * v));
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < v; j++) {
            float x = 16.0f * ddpc_rng_uniform_at(seed, 3, (uint64_t)(i * v + j)) - 8.0f;
            const int32_t tj = t[i];
            if (tj >= 0 && tj < v && i % 4 != 2 && (j == tj || (i % 4 == 0 && j == tj / 2)))
                x = 24.0f; /* the target the maximum (alone on odd rows, tied earlier on 4k): its
                            * loss near 0 shows the sum's last bit */
            h[(size_t)(i * ld + j)] = narrow16(bf, x);
            wide[(size_t)(i * v + j)] = widen16(bf, h[(size_t)(i * ld + j)]);
        }
    const int before = emu_failures;

    /* Today's path on the widened logits. */
    std::vector<float> ref_d = nan_vec(n * v), ref_loss = nan_vec(n);
    double ref_sums[2] = {NAN, NAN};
    unsigned long long ref_correct = 0;
    emu_launch(1, one, 0, [&] { ce_count_kernel(ref_sums, t, n, v, IGNORE); });
    emu_launch(blocks, threads, ce_stage_bytes(v), [&] {
        ce_fused_smem_kernel(ref_d.data(), ref_loss.data(), wide.data(), t, n, v, IGNORE, ref_sums,
                             dloss);
    });
    emu_launch(1, one, 0, [&] { ce_mean_kernel(ref_sums, ref_loss.data(), t, n, v, IGNORE); });
    emu_launch(blocks, threads, 0,
               [&] { argmax_kernel(&ref_correct, wide.data(), t, n, v, IGNORE); });

    /* The candidate's four launches, as ddpc__cuda_ce16_fused makes them. */
    std::vector<float> loss = nan_vec(n);
    double sums[3] = {NAN, NAN, NAN};
    unsigned long long correct = 0;
    emu_launch(1, one, 0, [&] { ce_count_kernel(sums, t, n, v, IGNORE); });
    emu_launch(blocks, threads, (size_t)ld * 2, [&] {
        if (bf)
            ce16_fused_kernel<ce16_bf16>(h.data(), loss.data(), &correct, t, n, rows, v, ld, IGNORE,
                                         sums, dloss);
        else
            ce16_fused_kernel<ce16_f16>(h.data(), loss.data(), &correct, t, n, rows, v, ld, IGNORE,
                                        sums, dloss);
    });
    emu_launch(1, one, 0, [&] { ce_mean_kernel(sums, loss.data(), t, n, v, IGNORE); });
    emu_launch(1, 32, 0, [&] { count_to_double_kernel(sums + 2, &correct); });
    CHECK_EQ_INT(emu_failures, before);

    int64_t bad = 0, pad = 0;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < ld; j++) {
            const uint16_t got = h[(size_t)(i * ld + j)];
            if (i >= n || j >= v) {
                pad += got != 0;
                continue;
            }
            const uint16_t want = narrow16(bf, ref_d[(size_t)(i * v + j)]);
            if (got != want && bad++ == 0)
                printf("  dlogits[%lld, %lld]: %#06x vs %#06x\n", (long long)i, (long long)j,
                       (unsigned)got, (unsigned)want);
        }
    printf("  %lld gradients differ, %lld padding not 0; %llu of %.0f rows correct\n",
           (long long)bad, (long long)pad, correct, ref_sums[1]);
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(pad, 0);
    CHECK_EQ_INT(bit_diffs("16-bit row loss", loss.data(), ref_loss.data(), n), 0);
    CHECK(memcmp(sums, ref_sums, sizeof ref_sums) == 0);
    CHECK(sums[2] == (double)ref_correct);
    CHECK(none ? ref_correct == 0 : ref_correct > 0);
}

static void test_emu16_small(void)
{
    for (int bf = 0; bf < 2; bf++) {
        check_emu16(10, 300, 304, 16, 64, 3, 1.0f, bf, false, 21); /* looping blocks, 2 warps */
        check_emu16(23, 13, 16, 24, 32, 23, 0.75f, bf, false, 22); /* 1 warp, most idle */
        check_emu16(7, 13, 16, 8, 32, 2, 1.0f, bf, true, 23);      /* every row ignored */
        check_emu16(12, 1000, 1000, 12, 128, 5, 65536.0f / 3.0f, bf, false, 24); /* no padding */
        check_emu16(9, 1, 8, 16, 32, 4, 1.0f, bf, false, 25);                    /* one class */
    }
}

/* GPT-2's vocabulary as the head16 product lays it out: 50257 classes at a row stride of the
 * padded 50304, the host's 1024 threads. */
static void test_emu16_gpt2_vocab(void)
{
    const unsigned th = (unsigned)ddpc__row_threads(50257, 1024);
    check_emu16(6, 50257, 50304, 8, th, 6, 1.0f, true, false, 26);
    check_emu16(6, 50257, 50304, 6, th, 3, 1.0f, false, false, 27);
}

/* softmax_rows_kernel in place against the CPU table's softmax_rows within 1e-6: rows longer and
 * shorter than the block, fewer blocks than rows. */
static void test_emu_softmax_rows(void)
{
    const int64_t n = 5, shapes[2] = {300, 13};
    for (int k = 0; k < 2; k++) {
        const int64_t v = shapes[k];
        std::vector<float> x((size_t)(n * v));
        for (int64_t i = 0; i < n * v; i++)
            x[(size_t)i] = 16.0f * ddpc_rng_uniform_at(9, 3, (uint64_t)i) - 8.0f;
        std::vector<float> ref = x;
        ddpc_kernel_table_cpu()->softmax_rows(ref.data(), n, v);
        const int before = emu_failures;
        emu_launch(2, 64, 0, [&] { softmax_rows_kernel(x.data(), n, v); });
        CHECK_EQ_INT(emu_failures, before);
        const double e = emu_rel_err(x.data(), ref.data(), n * v);
        printf(" emulated softmax n %lld v %lld: %.3g against the CPU\n", (long long)n,
               (long long)v, e);
        CHECK(e <= 1e-6);
    }
}

int main(void)
{
    RUN_TEST(test_emu_small_blocks);
    RUN_TEST(test_emu_narrow_rows);
    RUN_TEST(test_emu_gpt2_vocab);
    RUN_TEST(test_emu_on_chip_limit);
    RUN_TEST(test_emu_softmax_rows);
    RUN_TEST(test_emu16_small);
    RUN_TEST(test_emu16_gpt2_vocab);
    return check_summary();
}
