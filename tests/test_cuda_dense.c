// SPDX-License-Identifier: MIT
/* The CUDA table's memory, elementwise, GEMM, linear and LayerNorm kernels against the CPU table on
 * the same random inputs: outputs poisoned with NaN first, accumulating outputs seeded with the
 * same values on both sides, sizes that are not multiples of 32 plus GPT-2's (4096, 768) rows.
 * fp32 within 1e-5 relative (sums over rows or long rows 1e-4), bf16 / fp16 within 1e-2; a second
 * call of each kernel allocates nothing; layernorm_backward gives the same bits twice; with TF32
 * allowed an fp32 product is TF32's (within 1e-2, not 1e-5), and fp32's again when it is not.
 * Skips (exit 77, saying why) where this build or machine has no GPU. */
#include "backend_testutil.h"

#define TOL_F32 1e-5
#define TOL_SUM 1e-4
#define TOL_16 1e-2

static const ddpc_kernel_table *cpu, *gpu;

static double tol_of(ddpc_precision p, double fp32_tol)
{
    return p == DDPC_PREC_FP32 ? fp32_tol : TOL_16;
}

static void test_memory(void)
{
    int64_t n = 1000;
    float *h = tu_rand(n, -1, 1, 11);
    uint64_t a0 = gpu->alloc_count();
    float *d = gpu->alloc((size_t)n * sizeof(float));
    CHECK(d != NULL);
    CHECK_EQ_INT(gpu->alloc_count(), a0 + 1);
    float *z = bt_down(gpu, d, n); /* alloc zeroes */
    CHECK_EQ_INT(tu_max_abs(z, n) == 0.0, 1);
    gpu->to_device(d, h, (size_t)n * sizeof(float));
    float *d2 = bt_poison(gpu, n);
    gpu->copy(d2, d, (size_t)n * sizeof(float));
    float *back = bt_down(gpu, d2, n);
    CHECK_EQ_INT(memcmp(back, h, (size_t)n * sizeof(float)), 0);
    gpu->free(d);
    gpu->free(d2);
    gpu->free(NULL);
    ddpc_free(h);
    ddpc_free(z);
    ddpc_free(back);
}

static void test_elementwise(void)
{
    int64_t n = 100003;
    float *a = tu_rand(n, -4, 4, 21), *b = tu_rand(n, -4, 4, 22), *r = tu_alloc(n);
    float *da = bt_up(gpu, a, n), *db = bt_up(gpu, b, n), *dy = bt_poison(gpu, n);

    gpu->fill_f32(dy, 1.5f, n);
    cpu->fill_f32(r, 1.5f, n);
    BT_CHECK_ERR(bt_err(gpu, "fill_f32", dy, r, n), 0.0);
    BT_CHECK_WARM(gpu, gpu->fill_f32(dy, 1.5f, n));

    gpu->fill_f32(dy, NAN, n);
    gpu->add_f32(dy, da, db, n);
    cpu->add_f32(r, a, b, n);
    BT_CHECK_ERR(bt_err(gpu, "add_f32", dy, r, n), TOL_F32);
    BT_CHECK_WARM(gpu, gpu->add_f32(dy, da, db, n));

    gpu->to_device(dy, b, (size_t)n * sizeof(float)); /* axpy accumulates into y = b */
    memcpy(r, b, (size_t)n * sizeof(float));
    gpu->axpy_f32(dy, -0.75f, da, n);
    cpu->axpy_f32(r, -0.75f, a, n);
    BT_CHECK_ERR(bt_err(gpu, "axpy_f32", dy, r, n), TOL_F32);
    BT_CHECK_WARM(gpu, gpu->axpy_f32(dy, -0.75f, da, n));

    gpu->fill_f32(dy, NAN, n);
    gpu->gelu_forward(dy, da, n);
    cpu->gelu_forward(r, a, n);
    BT_CHECK_ERR(bt_err(gpu, "gelu_forward", dy, r, n), TOL_F32);
    BT_CHECK_WARM(gpu, gpu->gelu_forward(dy, da, n));

    gpu->fill_f32(dy, NAN, n); /* gelu_backward overwrites dx */
    gpu->gelu_backward(dy, db, da, n);
    cpu->gelu_backward(r, b, a, n);
    BT_CHECK_ERR(bt_err(gpu, "gelu_backward", dy, r, n), TOL_F32);
    BT_CHECK_WARM(gpu, gpu->gelu_backward(dy, db, da, n));

    gpu->to_device(dy, b, (size_t)n * sizeof(float)); /* in place: dx = dy */
    gpu->gelu_backward(dy, dy, da, n);
    BT_CHECK_ERR(bt_err(gpu, "gelu_backward in place", dy, r, n), TOL_F32);

    gpu->free(da);
    gpu->free(db);
    gpu->free(dy);
    ddpc_free(a);
    ddpc_free(b);
    ddpc_free(r);
}

/* c (m, n; ldc) = alpha op(a) op(b) + beta c on both tables, with padded leading dimensions;
 * beta = 0 on a poisoned c checks that c is not read. */
static void check_gemm(ddpc_precision p, ddpc_transpose ta, ddpc_transpose tb, int64_t m, int64_t n,
                       int64_t k, float beta)
{
    int64_t ra = ta == DDPC_NO_TRANS ? m : k, ca = ta == DDPC_NO_TRANS ? k : m;
    int64_t rb = tb == DDPC_NO_TRANS ? k : n, cb = tb == DDPC_NO_TRANS ? n : k;
    int64_t lda = ca + 3, ldb = cb + 5, ldc = n + 7;
    float *a = tu_rand(ra * lda, -1, 1, 31), *b = tu_rand(rb * ldb, -1, 1, 32);
    float *c = tu_rand(m * ldc, -1, 1, 33);
    float *da = bt_up(gpu, a, ra * lda), *db = bt_up(gpu, b, rb * ldb);
    float *dc = beta == 0.0f ? bt_poison(gpu, m * ldc) : bt_up(gpu, c, m * ldc);
    gpu->gemm(p, ta, tb, m, n, k, 0.5f, da, lda, db, ldb, beta, dc, ldc);
    cpu->gemm(p, ta, tb, m, n, k, 0.5f, a, lda, b, ldb, beta, c, ldc);
    /* Compare only the m x n block (the padding columns keep their poison or seed). */
    float *h = bt_down(gpu, dc, m * ldc);
    double e = 0.0, s = 0.0;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double d = fabs((double)h[i * ldc + j] - c[i * ldc + j]);
            e = isnan(h[i * ldc + j]) ? INFINITY : d > e ? d : e;
            s = fabs(c[i * ldc + j]) > s ? fabs(c[i * ldc + j]) : s;
        }
    e /= s > 1e-6 ? s : 1e-6;
    printf("  gemm %s %c%c m %lld n %lld k %lld beta %g: rel err %.3g\n", ddpc_precision_name(p),
           ta == DDPC_TRANS ? 'T' : 'N', tb == DDPC_TRANS ? 'T' : 'N', (long long)m, (long long)n,
           (long long)k, (double)beta, e);
    BT_CHECK_ERR(e, tol_of(p, TOL_F32));
    BT_CHECK_WARM(gpu, gpu->gemm(p, ta, tb, m, n, k, 0.5f, da, lda, db, ldb, beta, dc, ldc));
    gpu->free(da);
    gpu->free(db);
    gpu->free(dc);
    ddpc_free(a);
    ddpc_free(b);
    ddpc_free(c);
    ddpc_free(h);
}

static void test_gemm(void)
{
    for (int p = 0; p < DDPC_PREC_COUNT; p++)
        for (int t = 0; t < 4; t++) {
            ddpc_transpose ta = (t & 1) ? DDPC_TRANS : DDPC_NO_TRANS;
            ddpc_transpose tb = (t & 2) ? DDPC_TRANS : DDPC_NO_TRANS;
            check_gemm((ddpc_precision)p, ta, tb, 37, 45, 53, 0.0f);
            check_gemm((ddpc_precision)p, ta, tb, 61, 29, 131, 0.75f);
        }
    check_gemm(DDPC_PREC_FP32, DDPC_NO_TRANS, DDPC_NO_TRANS, 13, 17, 0, 0.0f); /* k = 0 */
    check_gemm(DDPC_PREC_FP32, DDPC_NO_TRANS, DDPC_TRANS, 13, 17, 0, 0.5f);
}

/* The fp32 product's relative error against the CPU's at (m, n, k) = 512^3, under allow_tf32(on). */
static double fp32_product_err(bool on)
{
    const int64_t s = 512;
    float *a = tu_rand(s * s, -1, 1, 41), *b = tu_rand(s * s, -1, 1, 42), *c = tu_alloc(s * s);
    float *da = bt_up(gpu, a, s * s), *db = bt_up(gpu, b, s * s), *dc = bt_poison(gpu, s * s);
    gpu->allow_tf32(on);
    gpu->gemm(DDPC_PREC_FP32, DDPC_NO_TRANS, DDPC_NO_TRANS, s, s, s, 1.0f, da, s, db, s, 0.0f, dc,
              s);
    gpu->allow_tf32(false);
    cpu->gemm(DDPC_PREC_FP32, DDPC_NO_TRANS, DDPC_NO_TRANS, s, s, s, 1.0f, a, s, b, s, 0.0f, c, s);
    double e = bt_err(gpu, on ? "fp32 product, TF32 allowed" : "fp32 product, TF32 off", dc, c,
                      s * s);
    gpu->free(da);
    gpu->free(db);
    gpu->free(dc);
    ddpc_free(a);
    ddpc_free(b);
    ddpc_free(c);
    return e;
}

/* matmul_precision high (allow_tf32): fp32 products run as TF32, whose 10-bit mantissa inputs
 * put them near 1e-3 of fp32's, not within fp32's 1e-5 (so TF32 did run), and off again
 * restores fp32. The CPU table has no such member. */
static void test_tf32(void)
{
    CHECK(cpu->allow_tf32 == NULL);
    const double with = fp32_product_err(true), without = fp32_product_err(false);
    BT_CHECK_ERR(with, 1e-2);
    CHECK(with > TOL_F32);
    BT_CHECK_ERR(without, TOL_F32);
}

/* Linear forward (with bias, with bias and residual, residual in place with and without a bias)
 * and backward against the CPU for one shape at precision p. */
static void check_linear(ddpc_precision p, int64_t n, int64_t in, int64_t out)
{
    printf(" linear %s n %lld in %lld out %lld\n", ddpc_precision_name(p), (long long)n,
           (long long)in, (long long)out);
    float *x = tu_rand(n * in, -1, 1, 41), *w = tu_rand(out * in, -0.2f, 0.2f, 42);
    float *b = tu_rand(out, -1, 1, 43), *r = tu_rand(n * out, -1, 1, 44);
    float *dy = tu_rand(n * out, -1, 1, 45), *y = tu_alloc(n * out);
    float *dx = tu_rand(n * in, -1, 1, 46), *dw = tu_rand(out * in, -1, 1, 47);
    float *dbias = tu_rand(out, -1, 1, 48);
    float *gx = bt_up(gpu, x, n * in), *gw = bt_up(gpu, w, out * in), *gb = bt_up(gpu, b, out);
    float *gr = bt_up(gpu, r, n * out), *gdy = bt_up(gpu, dy, n * out);
    float *gy = bt_poison(gpu, n * out);
    double tf = tol_of(p, TOL_F32), ts = tol_of(p, TOL_SUM);

    gpu->linear_forward(p, gy, gx, gw, gb, n, in, out);
    cpu->linear_forward(p, y, x, w, b, n, in, out);
    BT_CHECK_ERR(bt_err(gpu, "linear_forward", gy, y, n * out), tf);
    BT_CHECK_WARM(gpu, gpu->linear_forward(p, gy, gx, gw, gb, n, in, out));

    gpu->fill_f32(gy, NAN, n * out);
    gpu->linear_forward(p, gy, gx, gw, NULL, n, in, out);
    cpu->linear_forward(p, y, x, w, NULL, n, in, out);
    BT_CHECK_ERR(bt_err(gpu, "linear_forward, no bias", gy, y, n * out), tf);

    gpu->fill_f32(gy, NAN, n * out);
    gpu->linear_residual_forward(p, gy, gx, gw, gb, gr, n, in, out);
    cpu->linear_residual_forward(p, y, x, w, b, r, n, in, out);
    BT_CHECK_ERR(bt_err(gpu, "linear_residual_forward", gy, y, n * out), tf);
    BT_CHECK_WARM(gpu, gpu->linear_residual_forward(p, gy, gx, gw, gb, gr, n, in, out));

    gpu->copy(gy, gr, (size_t)(n * out) * sizeof(float)); /* r aliasing y, with a bias */
    gpu->linear_residual_forward(p, gy, gx, gw, gb, gy, n, in, out);
    cpu->linear_residual_forward(p, y, x, w, b, r, n, in, out);
    BT_CHECK_ERR(bt_err(gpu, "linear_residual_forward, r = y, bias", gy, y, n * out), tf);

    gpu->copy(gy, gr, (size_t)(n * out) * sizeof(float)); /* r aliasing y, no bias */
    gpu->linear_residual_forward(p, gy, gx, gw, NULL, gy, n, in, out);
    cpu->linear_residual_forward(p, y, x, w, NULL, r, n, in, out);
    BT_CHECK_ERR(bt_err(gpu, "linear_residual_forward, r = y", gy, y, n * out), tf);

    /* Backward accumulates: both sides start from the same dx, dw, db. */
    float *gdx = bt_up(gpu, dx, n * in), *gdw = bt_up(gpu, dw, out * in);
    float *gdb = bt_up(gpu, dbias, out);
    gpu->linear_backward(p, gdx, gdw, gdb, gdy, gx, gw, n, in, out);
    cpu->linear_backward(p, dx, dw, dbias, dy, x, w, n, in, out);
    BT_CHECK_ERR(bt_err(gpu, "linear_backward dx", gdx, dx, n * in), tf);
    BT_CHECK_ERR(bt_err(gpu, "linear_backward dw (sum over rows)", gdw, dw, out * in), ts);
    BT_CHECK_ERR(bt_err(gpu, "linear_backward db (sum over rows)", gdb, dbias, out), TOL_SUM);
    BT_CHECK_WARM(gpu, gpu->linear_backward(p, gdx, gdw, gdb, gdy, gx, gw, n, in, out));

    float *list[] = {x, w, b, r, dy, y, dx, dw, dbias};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++)
        ddpc_free(list[i]);
    float *glist[] = {gx, gw, gb, gr, gdy, gy, gdx, gdw, gdb};
    for (size_t i = 0; i < sizeof glist / sizeof glist[0]; i++)
        gpu->free(glist[i]);
}

static void test_linear(void)
{
    for (int p = 0; p < DDPC_PREC_COUNT; p++)
        check_linear((ddpc_precision)p, 77, 67, 93);
    check_linear(DDPC_PREC_FP32, 4096, 768, 768);
    check_linear(DDPC_PREC_BF16, 4096, 768, 768);
}

/* n floats of x on the device, `off` floats into a fresh array (*base, for gpu->free). */
static float *ln_up(const float *x, int64_t n, int64_t off, float **base)
{
    *base = bt_poison(gpu, n + off);
    gpu->to_device(*base + off, x, (size_t)n * sizeof(float));
    return *base + off;
}

/* LayerNorm forward and backward against the CPU; with_params false passes w = b = NULL; x, y, dy
 * and dx sit `off` floats into their arrays (1: not 16-byte aligned, the scalar kernels). */
static void check_layernorm(int64_t rows, int64_t c, bool with_params, int64_t off)
{
    printf(" layernorm rows %lld c %lld%s, offset %lld\n", (long long)rows, (long long)c,
           with_params ? "" : " (no w, b)", (long long)off);
    int64_t n = rows * c;
    float *x = tu_rand(n, -2, 2, 51), *w = tu_rand(c, 0.5f, 1.5f, 52), *b = tu_rand(c, -1, 1, 53);
    float *dy = tu_rand(n, -1, 1, 54), *dx = tu_rand(n, -1, 1, 55);
    float *dw = tu_rand(c, -1, 1, 56), *db = tu_rand(c, -1, 1, 57);
    float *y = tu_alloc(n), *mean = tu_alloc(rows), *rstd = tu_alloc(rows);
    for (int64_t i = 0; i < n; i++)
        x[i] += (float)(i / c % 7); /* rows with different means */
    const float *wp = with_params ? w : NULL, *bp = with_params ? b : NULL;
    float *gxb, *gdyb, *gdxb, *gyb = bt_poison(gpu, n + off), *gy = gyb + off;
    float *gx = ln_up(x, n, off, &gxb), *gw = bt_up(gpu, w, c), *gb = bt_up(gpu, b, c);
    float *gdy = ln_up(dy, n, off, &gdyb);
    float *gmean = bt_poison(gpu, rows), *grstd = bt_poison(gpu, rows);
    const float *gwp = with_params ? gw : NULL, *gbp = with_params ? gb : NULL;

    gpu->layernorm_forward(gy, gmean, grstd, gx, gwp, gbp, rows, c);
    cpu->layernorm_forward(y, mean, rstd, x, wp, bp, rows, c);
    BT_CHECK_ERR(bt_err(gpu, "layernorm_forward y", gy, y, n), TOL_F32);
    BT_CHECK_ERR(bt_err(gpu, "layernorm_forward mean", gmean, mean, rows), TOL_F32);
    BT_CHECK_ERR(bt_err(gpu, "layernorm_forward rstd", grstd, rstd, rows), TOL_F32);
    BT_CHECK_WARM(gpu, gpu->layernorm_forward(gy, gmean, grstd, gx, gwp, gbp, rows, c));

    /* Backward from the CPU's saved statistics on both sides (the GPU's are checked above). */
    gpu->to_device(gmean, mean, (size_t)rows * sizeof(float));
    gpu->to_device(grstd, rstd, (size_t)rows * sizeof(float));
    float *gdx = ln_up(dx, n, off, &gdxb), *gdw = bt_up(gpu, dw, c), *gdb = bt_up(gpu, db, c);
    gpu->layernorm_backward(gdx, gdw, gdb, gdy, gx, gwp, gmean, grstd, rows, c);
    cpu->layernorm_backward(dx, dw, db, dy, x, wp, mean, rstd, rows, c);
    BT_CHECK_ERR(bt_err(gpu, "layernorm_backward dx", gdx, dx, n), TOL_SUM);
    BT_CHECK_ERR(bt_err(gpu, "layernorm_backward dw (sum over rows)", gdw, dw, c), TOL_SUM);
    BT_CHECK_ERR(bt_err(gpu, "layernorm_backward db (sum over rows)", gdb, db, c), TOL_SUM);
    BT_CHECK_WARM(gpu, gpu->layernorm_backward(gdx, gdw, gdb, gdy, gx, gwp, gmean, grstd, rows, c));

    /* dx alone, and dw/db alone (NULL gradients are skipped). */
    gpu->to_device(gdx, dx, (size_t)n * sizeof(float));
    gpu->layernorm_backward(gdx, NULL, NULL, gdy, gx, gwp, gmean, grstd, rows, c);
    cpu->layernorm_backward(dx, NULL, NULL, dy, x, wp, mean, rstd, rows, c);
    BT_CHECK_ERR(bt_err(gpu, "layernorm_backward dx only", gdx, dx, n), TOL_SUM);

    /* Reruns give the same bits: dw and db from zero, twice. */
    float *bits[2][2];
    for (int run = 0; run < 2; run++) {
        gpu->fill_f32(gdw, 0.0f, c);
        gpu->fill_f32(gdb, 0.0f, c);
        gpu->layernorm_backward(NULL, gdw, gdb, gdy, gx, gwp, gmean, grstd, rows, c);
        bits[run][0] = bt_down(gpu, gdw, c);
        bits[run][1] = bt_down(gpu, gdb, c);
    }
    CHECK_EQ_INT(memcmp(bits[0][0], bits[1][0], (size_t)c * sizeof(float)), 0);
    CHECK_EQ_INT(memcmp(bits[0][1], bits[1][1], (size_t)c * sizeof(float)), 0);
    for (int run = 0; run < 2; run++) {
        ddpc_free(bits[run][0]);
        ddpc_free(bits[run][1]);
    }

    float *list[] = {x, w, b, dy, dx, dw, db, y, mean, rstd};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++)
        ddpc_free(list[i]);
    float *glist[] = {gxb, gw, gb, gdyb, gyb, gmean, grstd, gdxb, gdw, gdb};
    for (size_t i = 0; i < sizeof glist / sizeof glist[0]; i++)
        gpu->free(glist[i]);
}

static void test_layernorm(void)
{
    check_layernorm(37, 131, true, 0); /* odd c: the scalar kernels */
    check_layernorm(53, 45, false, 0);
    check_layernorm(3, 1000, true, 0); /* the float4 kernels, lanes idle past c / 4 */
    check_layernorm(1, 768, true, 0);  /* one row */
    check_layernorm(37, 768, true, 1); /* unaligned: the scalar kernels */
    check_layernorm(4096, 768, true, 0);
    check_layernorm(16384, 768, true, 0); /* GPT-2 124M's batch: 512 row chunks */
}

/* Two runs of linear_backward's bias sum give the same bits too. */
static void test_bias_sum_bitwise(void)
{
    int64_t n = 4099, out = 771;
    float *dy = tu_rand(n * out, -1, 1, 61);
    float *gdy = bt_up(gpu, dy, n * out), *gdb = bt_poison(gpu, out);
    float *bits[2];
    for (int run = 0; run < 2; run++) {
        gpu->fill_f32(gdb, 0.0f, out);
        gpu->linear_backward(DDPC_PREC_FP32, NULL, NULL, gdb, gdy, NULL, NULL, n, 1, out);
        bits[run] = bt_down(gpu, gdb, out);
    }
    CHECK_EQ_INT(memcmp(bits[0], bits[1], (size_t)out * sizeof(float)), 0);
    ddpc_free(bits[0]);
    ddpc_free(bits[1]);
    gpu->free(gdy);
    gpu->free(gdb);
    ddpc_free(dy);
}

int main(void)
{
    cpu = ddpc_kernel_table_cpu();
    gpu = bt_cuda_or_skip();
    RUN_TEST(test_memory);
    RUN_TEST(test_elementwise);
    RUN_TEST(test_gemm);
    RUN_TEST(test_linear);
    RUN_TEST(test_layernorm);
    RUN_TEST(test_bias_sum_bitwise);
    RUN_TEST(test_tf32);
    return check_summary();
}
