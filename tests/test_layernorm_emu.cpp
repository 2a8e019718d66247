// SPDX-License-Identifier: MIT
/* src/kernels/cuda/layernorm.cu's device code on the host (tests/cuda_emu.h) against the CPU
 * table's layernorm: forward mean, rstd within 1e-5 and y within 1e-4; backward dx (accumulated
 * onto nonzero values) within 1e-5 of its terms' size and dw, db (two-pass column sums over row
 * chunks) within 1e-4. Both paths (the float4 kernels and the scalar ones, for odd or long rows
 * and unaligned pointers), rows longer than a warp's 32 lanes, c = 1, one row, more rows than the
 * grid's warps (the row loop goes round), several row chunks, w and b absent, mean and rstd not
 * asked for. The 16-bit forward (act16.cu's) writes bf16 / fp16 y equal bit for bit to
 * the fp32 kernel's y rounded to nearest even, with the same mean and rstd bits, on every case and
 * on rows that overflow fp16, hold an infinity or a NaN. */
#include "cuda_emu.h"

#include "../src/kernels/cuda/layernorm.cu"

#include "emu_testutil.h"

#include "check.h"

/* The host side's launches, path chosen by ln_vec as there; `blocks` 0 means the row kernels' own
 * grid (the fast backward's grid is its row chunks, always). */
static void emu_forward(float *y, float *mean, float *rstd, const float *x, const float *w,
                        const float *b, int64_t rows, int64_t c, unsigned blocks)
{
    const unsigned g = blocks ? blocks : emu_grid(rows, ROWS_PER_BLOCK);
    const int vec = ln_vec(c, y, x, w, b);
    emu_launch(g, THREADS, 0,
               [&] { ln_forward_kernel<float>(vec)(y, mean, rstd, x, w, b, rows, c); });
}

/* The 16-bit forward (y of type Y) against the fp32 one: its y is ref (rows, c) rounded, bit for
 * bit, and mean and rstd are ref_mean's and ref_rstd's bits. */
template <typename Y>
static void check_forward16(const char *what, const float *ref, const float *ref_mean,
                            const float *ref_rstd, const float *x, const float *w, const float *b,
                            int64_t rows, int64_t c, unsigned blocks, int64_t off)
{
    const int64_t n = rows * c;
    std::vector<Y> yb(n + off);
    memset(yb.data(), 0xff, yb.size() * sizeof(Y));
    Y *y = yb.data() + off;
    std::vector<float> m = emu_poison(rows), r = emu_poison(rows);
    std::vector<uint16_t> want(n), got(n);
    const int vec = ln_vec(c, y, x, w, b);
    const unsigned g = blocks ? blocks : emu_grid(rows, ROWS_PER_BLOCK);
    emu_launch(g, THREADS, 0,
               [&] { ln_forward_kernel<Y>(vec)(y, m.data(), r.data(), x, w, b, rows, c); });
    const bool bf = std::is_same<Y, __nv_bfloat16>::value;
    for (int64_t i = 0; i < n; i++) {
        want[i] = bf ? ddpc_f32_to_bf16(ref[i]) : ddpc_f32_to_f16(ref[i]);
        memcpy(&got[i], &y[i], sizeof(uint16_t));
    }
    printf("  16-bit y (%s, %s path)\n", what, vec ? "float4" : "scalar");
    CHECK(emu_same_bits(what, got.data(), want.data(), n, 2));
    CHECK(emu_same_bits("16-bit forward's mean", m.data(), ref_mean, rows, 4));
    CHECK(emu_same_bits("16-bit forward's rstd", r.data(), ref_rstd, rows, 4));
}

static void emu_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                         const float *w, const float *mean, const float *rstd, int64_t rows,
                         int64_t c, unsigned blocks)
{
    int64_t chunks, per;
    ddpc__row_chunks(rows, &chunks, &per);
    std::vector<float> pw = emu_poison(chunks * c), pb = emu_poison(chunks * c);
    float *pwp = dw || db ? pw.data() : NULL, *pbp = dw || db ? pb.data() : NULL;
    const int vec = ln_vec(c, dx, dy, x, w);
    if (vec) {
        emu_launch((unsigned)chunks, BWD_THREADS, 0,
                   [&] { ln_backward_vec[vec](dx, pwp, pbp, dy, x, w, mean, rstd, rows, c, per); });
    } else {
        if (pwp) {
            const unsigned col_blocks = (unsigned)((c + THREADS - 1) / THREADS);
            emu_launch2(col_blocks, (unsigned)chunks, THREADS, 0,
                        [&] { params_partial_kernel(pwp, pbp, dy, x, mean, rstd, rows, c, per); });
        }
        if (dx) {
            const unsigned g = blocks ? blocks : emu_grid(rows, ROWS_PER_BLOCK);
            emu_launch(g, THREADS, 0, [&] { dx_kernel(dx, dy, x, w, mean, rstd, rows, c); });
        }
    }
    if (pwp)
        emu_launch((unsigned)((c + 31) / 32), 32 * SUM_GROUPS, 0,
                   [&] { params_sum_kernel(dw, db, pwp, pbp, chunks, c); });
}

/* One case: `off` floats into their buffers for x, y, dy and dx (1: not 16-byte aligned), `vec`
 * the path ln_vec must pick (0: the scalar kernels). */
static void check_ln(int64_t rows, int64_t c, bool affine, unsigned blocks, int64_t off, int vec)
{
    printf(" layernorm rows %lld c %lld %s, %u blocks, offset %lld: %s\n", (long long)rows,
           (long long)c, affine ? "w, b" : "no w, b", blocks, (long long)off,
           vec ? "float4 path" : "scalar path");
    const int64_t n = rows * c;
    std::vector<float> xb = emu_rand(n + off, 3.0f, 1 + (uint64_t)c),
                       dyb = emu_rand(n + off, 1.0f, 2 + (uint64_t)c);
    float *xs = xb.data() + off;
    const float *dy = dyb.data() + off;
    for (int64_t i = 0; i < n; i++)
        xs[i] += (float)(i / c % 5) * 10.0f; /* rows with a large mean */
    const std::vector<float> w = emu_rand(c, 2.0f, 3), b = emu_rand(c, 1.0f, 4);
    const float *wp = affine ? w.data() : NULL, *bp = affine ? b.data() : NULL;
    const ddpc_kernel_table *cpu = emu_cpu();

    std::vector<float> y(n), mean(rows), rstd(rows);
    cpu->layernorm_forward(y.data(), mean.data(), rstd.data(), xs, wp, bp, rows, c);
    std::vector<float> eyb = emu_poison(n + off), em = emu_poison(rows), er = emu_poison(rows);
    float *ey = eyb.data() + off;
    CHECK_EQ_INT(ln_vec(c, ey, xs, wp, bp), vec);
    emu_forward(ey, em.data(), er.data(), xs, wp, bp, rows, c, blocks);
    /* y = (x - mean) rstd: rows whose mean is about 23 standard deviations out turn the means'
     * 1e-6 (summation order; -O1 differs from -O3) into 1e-5 here: the reduction bound. */
    CHECK(emu_rel_err("y", ey, y.data(), n) <= 1e-4);
    CHECK(emu_rel_err("mean", em.data(), mean.data(), rows) <= 1e-5);
    CHECK(emu_rel_err("rstd", er.data(), rstd.data(), rows) <= 1e-5);
    std::vector<float> ey2b = emu_poison(n + off); /* mean and rstd not asked for */
    emu_forward(ey2b.data() + off, NULL, NULL, xs, wp, bp, rows, c, blocks);
    CHECK(emu_same_bits("y without mean, rstd", ey2b.data() + off, ey, n, 4));
    /* An odd offset in 16-bit elements is only 2-byte aligned: the scalar path, as for fp32. */
    check_forward16<__nv_bfloat16>("bf16", ey, em.data(), er.data(), xs, wp, bp, rows, c, blocks,
                                   off);
    check_forward16<__half>("fp16", ey, em.data(), er.data(), xs, wp, bp, rows, c, blocks, off);

    const std::vector<float> dx0 = emu_rand(n, 0.5f, 5), dw0 = emu_rand(c, 0.5f, 6),
                             db0 = emu_rand(c, 0.5f, 7);
    std::vector<float> dx = dx0, dw = dw0, db = db0, edxb(n + off), edw = dw0, edb = db0;
    float *edx = edxb.data() + off;
    memcpy(edx, dx0.data(), (size_t)n * sizeof(float));
    CHECK_EQ_INT(ln_vec(c, edx, dy, xs, wp), vec);
    cpu->layernorm_backward(dx.data(), affine ? dw.data() : NULL, affine ? db.data() : NULL, dy, xs,
                            wp, mean.data(), rstd.data(), rows, c);
    emu_backward(edx, affine ? edw.data() : NULL, affine ? edb.data() : NULL, dy, xs, wp,
                 mean.data(), rstd.data(), rows, c, blocks);
    /* dx's terms are rstd * dy * w in size, and its increments cancel to 0 when c is 1 (x is its
     * row's mean), where the CPU's fused multiply-adds leave rounding residue of that size: the
     * bound is relative to the larger of dx and its terms. */
    double dx_max = 1e-6, term_max = 0.0;
    for (int64_t i = 0; i < n; i++) {
        dx_max = fmax(dx_max, fabs(dx[(size_t)i]));
        term_max = fmax(term_max, rstd[(size_t)(i / c)] * fabs(dy[i] * (wp ? wp[i % c] : 1)));
    }
    CHECK(emu_rel_err("dx", edx, dx.data(), n) * dx_max <= 1e-5 * fmax(dx_max, term_max));
    CHECK(emu_rel_err("dw", edw.data(), dw.data(), c) <= 1e-4);
    CHECK(emu_rel_err("db", edb.data(), db.data(), c) <= 1e-4);
    if (!affine)
        return;

    /* dx alone and dw, db alone give the bits they give together (one kernel serves all three). */
    std::vector<float> edx2b(n + off), edw2 = dw0, edb2 = db0;
    memcpy(edx2b.data() + off, dx0.data(), (size_t)n * sizeof(float));
    emu_backward(edx2b.data() + off, NULL, NULL, dy, xs, wp, mean.data(), rstd.data(), rows, c,
                 blocks);
    CHECK(emu_same_bits("dx alone", edx2b.data() + off, edx, n, 4));
    emu_backward(NULL, edw2.data(), edb2.data(), dy, xs, wp, mean.data(), rstd.data(), rows, c,
                 blocks);
    CHECK(emu_same_bits("dw alone", edw2.data(), edw.data(), c, 4));
    CHECK(emu_same_bits("db alone", edb2.data(), edb.data(), c, 4));
}

static void test_layernorm(void)
{
    check_ln(77, 33, true, 2, 0, 0);   /* odd c: scalar; 16 warps for 77 rows; 3 row chunks */
    check_ln(9, 1, true, 0, 0, 0);     /* one column */
    check_ln(40, 70, false, 1, 0, 0);  /* c % 4 == 2; no w, b: no dw, db either */
    check_ln(20, 1028, true, 0, 0, 0); /* over 1024 columns: scalar */
    check_ln(37, 768, true, 0, 1, 0);  /* x, y, dy, dx 4 bytes off 16-byte alignment: scalar */
    check_ln(37, 300, true, 0, 0, 3);  /* float4 path, lanes past c / 4 idle in their third */
    check_ln(1, 768, true, 0, 0, 6);   /* one row: GPT-2 124M's c */
    check_ln(300, 768, true, 2, 0, 6); /* 10 row chunks of 30 rows; the forward's warps go round */
    check_ln(300, 260, true, 0, 0, 3); /* 10 row chunks, 65 float4s */
    check_ln(50, 72, false, 0, 0, 1);  /* float4 path without w, b */
    check_ln(33, 1024, true, 0, 0, 8); /* the widest float4 rows */
    check_ln(5, 128, true, 0, 0, 1);   /* one float4 per lane, fewer rows than warps */
}

/* Rows whose y overflows fp16 (w 1e5), then a row holding +inf and one holding a NaN (their y is
 * all NaN): the 16-bit y is the fp32 y rounded, bit for bit, on both paths. */
static void test_forward16_specials(void)
{
    for (int64_t c : {768, 771}) {
        const int64_t rows = 6, n = rows * c;
        std::vector<float> x = emu_rand(n, 3.0f, 11), w = emu_rand(c, 1e5f, 12),
                           b = emu_rand(c, 1.0f, 13);
        x[(size_t)(3 * c + 7)] = INFINITY;
        x[(size_t)(4 * c + 1)] = NAN;
        x[(size_t)(5 * c + 2)] = -1e30f;
        std::vector<float> y = emu_poison(n), m = emu_poison(rows), r = emu_poison(rows);
        emu_forward(y.data(), m.data(), r.data(), x.data(), w.data(), b.data(), rows, c, 0);
        int inf = 0, nan = 0;
        for (int64_t i = 0; i < n; i++) {
            inf += fabsf(y[(size_t)i]) > 65504.0f && !std::isnan(y[(size_t)i]);
            nan += std::isnan(y[(size_t)i]);
        }
        printf(" specials, c %lld: %d values past fp16's range, %d NaN\n", (long long)c, inf, nan);
        CHECK(inf > 0 && nan >= 2 * c);
        check_forward16<__nv_bfloat16>("bf16 specials", y.data(), m.data(), r.data(), x.data(),
                                       w.data(), b.data(), rows, c, 0, 0);
        check_forward16<__half>("fp16 specials", y.data(), m.data(), r.data(), x.data(), w.data(),
                                b.data(), rows, c, 0, 0);
    }
}

static void test_no_emulator_faults(void)
{
    CHECK_EQ_INT(emu_failures, 0);
}

int main(void)
{
    RUN_TEST(test_layernorm);
    RUN_TEST(test_forward16_specials);
    RUN_TEST(test_no_emulator_faults);
    return check_summary();
}
