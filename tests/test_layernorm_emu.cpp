// SPDX-License-Identifier: MIT
/* src/kernels/cuda/layernorm.cu's device code on the host (tests/cuda_emu.h) against the CPU
 * table's layernorm: forward y, mean, rstd within 1e-5; backward dx (accumulated onto nonzero
 * values) within 1e-5 of its terms' size and dw, db (two-pass column sums over row chunks) within
 * 1e-4. Rows longer than a warp's 32 lanes, c = 1, more rows than the grid's warps (the row loop
 * goes round), several row chunks, w and b absent, mean and rstd not asked for. */
#include "cuda_emu.h"

#include "../src/kernels/cuda/layernorm.cu"

#include "emu_testutil.h"

#include "check.h"

/* The host side's launches; `blocks` 0 means its own grid. */
static void emu_forward(float *y, float *mean, float *rstd, const float *x, const float *w,
                        const float *b, int64_t rows, int64_t c, unsigned blocks)
{
    const unsigned g = blocks ? blocks : emu_grid(rows, ROWS_PER_BLOCK);
    emu_launch(g, THREADS, 0, [&] { forward_kernel(y, mean, rstd, x, w, b, rows, c); });
}

static void emu_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                         const float *w, const float *mean, const float *rstd, int64_t rows,
                         int64_t c, unsigned blocks)
{
    if (dw || db) {
        int64_t chunks, per;
        ddpc__row_chunks(rows, &chunks, &per);
        std::vector<float> pw = emu_poison(chunks * c), pb = emu_poison(chunks * c);
        const unsigned col_blocks = (unsigned)((c + THREADS - 1) / THREADS);
        emu_launch2(col_blocks, (unsigned)chunks, THREADS, 0, [&] {
            params_partial_kernel(pw.data(), pb.data(), dy, x, mean, rstd, rows, c, per);
        });
        emu_launch(col_blocks, THREADS, 0,
                   [&] { params_final_kernel(dw, db, pw.data(), pb.data(), chunks, c); });
    }
    if (dx) {
        const unsigned g = blocks ? blocks : emu_grid(rows, ROWS_PER_BLOCK);
        emu_launch(g, THREADS, 0, [&] { dx_kernel(dx, dy, x, w, mean, rstd, rows, c); });
    }
}

static void check_ln(int64_t rows, int64_t c, bool affine, unsigned blocks)
{
    printf(" layernorm rows %lld c %lld %s, %u blocks\n", (long long)rows, (long long)c,
           affine ? "w, b" : "no w, b", blocks);
    const std::vector<float> x = emu_rand(rows * c, 3.0f, 1 + (uint64_t)c),
                             dy = emu_rand(rows * c, 1.0f, 2 + (uint64_t)c);
    std::vector<float> xs = x;
    for (int64_t i = 0; i < rows * c; i++)
        xs[(size_t)i] += (float)(i / c % 5) * 10.0f; /* rows with a large mean */
    const std::vector<float> w = emu_rand(c, 2.0f, 3), b = emu_rand(c, 1.0f, 4);
    const float *wp = affine ? w.data() : NULL, *bp = affine ? b.data() : NULL;
    const ddpc_kernel_table *cpu = emu_cpu();

    std::vector<float> y(rows * c), mean(rows), rstd(rows);
    cpu->layernorm_forward(y.data(), mean.data(), rstd.data(), xs.data(), wp, bp, rows, c);
    std::vector<float> ey = emu_poison(rows * c), em = emu_poison(rows), er = emu_poison(rows);
    emu_forward(ey.data(), em.data(), er.data(), xs.data(), wp, bp, rows, c, blocks);
    CHECK(emu_rel_err("y", ey.data(), y.data(), rows * c) <= 1e-5);
    CHECK(emu_rel_err("mean", em.data(), mean.data(), rows) <= 1e-5);
    CHECK(emu_rel_err("rstd", er.data(), rstd.data(), rows) <= 1e-5);
    std::vector<float> ey2 = emu_poison(rows * c); /* mean and rstd not asked for */
    emu_forward(ey2.data(), NULL, NULL, xs.data(), wp, bp, rows, c, blocks);
    CHECK(emu_same_bits("y without mean, rstd", ey2.data(), ey.data(), rows * c, 4));

    std::vector<float> dx = emu_rand(rows * c, 0.5f, 5), dw = emu_rand(c, 0.5f, 6),
                       db = emu_rand(c, 0.5f, 7);
    std::vector<float> edx = dx, edw = dw, edb = db;
    cpu->layernorm_backward(dx.data(), affine ? dw.data() : NULL, affine ? db.data() : NULL,
                            dy.data(), xs.data(), wp, mean.data(), rstd.data(), rows, c);
    emu_backward(edx.data(), affine ? edw.data() : NULL, affine ? edb.data() : NULL, dy.data(),
                 xs.data(), wp, mean.data(), rstd.data(), rows, c, blocks);
    /* dx's terms are rstd * dy * w in size, and its increments cancel to 0 when c is 1 (x is its
     * row's mean), where the CPU's fused multiply-adds leave rounding residue of that size: the
     * bound is relative to the larger of dx and its terms. */
    double dx_max = 1e-6, term_max = 0.0;
    for (int64_t i = 0; i < rows * c; i++) {
        dx_max = fmax(dx_max, fabs(dx[(size_t)i]));
        term_max =
            fmax(term_max, rstd[(size_t)(i / c)] * fabs(dy[(size_t)i] * (wp ? wp[i % c] : 1)));
    }
    CHECK(emu_rel_err("dx", edx.data(), dx.data(), rows * c) * dx_max <=
          1e-5 * fmax(dx_max, term_max));
    CHECK(emu_rel_err("dw", edw.data(), dw.data(), c) <= 1e-4);
    CHECK(emu_rel_err("db", edb.data(), db.data(), c) <= 1e-4);
}

static void test_layernorm(void)
{
    check_ln(37, 300, true, 0);  /* lanes go round a row; 5 blocks of 8 warps */
    check_ln(77, 33, true, 2);   /* 16 warps for 77 rows; 3 row chunks */
    check_ln(9, 1, true, 0);     /* one column */
    check_ln(40, 70, false, 1);  /* no w, b: no dw, db either */
    check_ln(300, 260, true, 0); /* 10 row chunks, two column blocks */
}

static void test_no_emulator_faults(void)
{
    CHECK_EQ_INT(emu_failures, 0);
}

int main(void)
{
    RUN_TEST(test_layernorm);
    RUN_TEST(test_no_emulator_faults);
    return check_summary();
}
