// SPDX-License-Identifier: MIT
/* Tests for low-precision matrix products (src/kernels/cpu/gemm_lowp.c, onednn.c) and the 16-bit
 * round trip in src/core/half.c: ddpc_gemm at bf16/fp16 equals an fp32 product of the rounded
 * inputs, oneDNN's matmul wrapper equals sgemm in fp32 on every CPU (so the primitive cache, the
 * strides, alpha and beta are exercised everywhere), and its bf16 path, where the CPU has one,
 * agrees with the rounded sgemm. The layers take the precision through to every product. */
#include <ddpc/half.h>
#include <ddpc/models.h>
#include <ddpc/nn.h>

#include <stdio.h>

#include "kernels_testutil.h"

static double max_rel_diff(const float *a, const float *b, int64_t n)
{
    double num = 0.0, den = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        num = d > num ? d : num;
        den = fabs((double)b[i]) > den ? fabs((double)b[i]) : den;
    }
    return num / (den > 1e-30 ? den : 1e-30);
}

static void test_round_trip_matches_scalar_conversions(void)
{
    int64_t n = 4099; /* odd: vector body and scalar tail */
    float *x = tu_rand(n, -70000.0f, 70000.0f, 1), *y = tu_alloc(n);
    x[0] = NAN;
    x[1] = INFINITY;
    x[2] = -0.0f;
    x[3] = 1e-7f;       /* fp16 subnormal */
    x[4] = 65519.0f;    /* rounds to fp16's largest finite */
    x[5] = 65520.0f;    /* rounds to inf in fp16 */
    x[6] = 1.00390625f; /* 1 + 2^-8: a bf16 tie, rounds to even (1) */
    for (int bf16 = 0; bf16 < 2; bf16++) {
        ddpc_round_half_array(y, x, (size_t)n, bf16);
        int bad = 0;
        for (int64_t i = 0; i < n; i++) {
            float want = bf16 ? ddpc_bf16_to_f32(ddpc_f32_to_bf16(x[i]))
                              : ddpc_f16_to_f32(ddpc_f32_to_f16(x[i]));
            bad += !(memcmp(&want, &y[i], sizeof want) == 0 || (isnan(want) && isnan(y[i])));
        }
        CHECK_EQ_INT(bad, 0);
    }
    ddpc_round_half_array(y, x, (size_t)n, 1);
    CHECK(y[6] == 1.0f);
    ddpc_round_half_array(y, x, (size_t)n, 0);
    CHECK(y[4] == 65504.0f && isinf(y[5]));
    ddpc_round_half_array(x, x, (size_t)n, 1); /* in place */
    CHECK(x[6] == 1.0f);
    ddpc_free(x);
    ddpc_free(y);
}

/* Rounded copy of a whole buffer. */
static float *rounded(const float *x, int64_t n, ddpc_precision p)
{
    float *r = tu_alloc(n);
    if (p == DDPC_PREC_FP32)
        memcpy(r, x, (size_t)n * sizeof *r);
    else
        ddpc_round_half_array(r, x, (size_t)n, p == DDPC_PREC_BF16);
    return r;
}

/* ddpc_gemm(p) against sgemm of the rounded operands, with padded leading dimensions. On the
 * rounded path the two are the same computation (bit for bit); oneDNN sums in another order. */
static void check_lowp_gemm(ddpc_precision p, int ta, int tb, int64_t m, int64_t n, int64_t k)
{
    int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    int64_t lda = ac + 2, ldb = bc + 5, ldc = n + 3;
    float *a = tu_rand(ar * lda, -2, 2, 11), *b = tu_rand(br * ldb, -2, 2, 12);
    float *c = tu_rand(m * ldc, -1, 1, 13), *ref = tu_alloc(m * ldc);
    memcpy(ref, c, (size_t)(m * ldc) * sizeof *c);
    float *ra = rounded(a, ar * lda, p), *rb = rounded(b, br * ldb, p);
    ddpc_gemm(p, (ddpc_transpose)ta, (ddpc_transpose)tb, m, n, k, 0.75f, a, lda, b, ldb, 0.5f, c,
              ldc);
    ddpc_gemm_f32((ddpc_transpose)ta, (ddpc_transpose)tb, m, n, k, 0.75f, ra, lda, rb, ldb, 0.5f,
                  ref, ldc);
    bool native = false;
    ddpc_kernels_matmul_info(p, &native);
    double tol = native ? 1e-5 : 1e-6;
    CHECK(max_rel_diff(c, ref, m * ldc) <= tol);
    /* The product differs from fp32's: the rounding really happened. */
    float *f32 = tu_rand(m * ldc, -1, 1, 13);
    ddpc_gemm_f32((ddpc_transpose)ta, (ddpc_transpose)tb, m, n, k, 0.75f, a, lda, b, ldb, 0.5f, f32,
                  ldc);
    CHECK(max_rel_diff(c, f32, m * ldc) > 1e-5);
    ddpc_free(a);
    ddpc_free(b);
    ddpc_free(c);
    ddpc_free(ref);
    ddpc_free(ra);
    ddpc_free(rb);
    ddpc_free(f32);
}

static void test_lowp_gemm_is_sgemm_of_rounded_inputs(void)
{
    const int64_t shapes[][3] = {{1, 1, 7}, {5, 7, 3}, {17, 9, 33}, {64, 48, 100}};
    for (int p = DDPC_PREC_BF16; p <= DDPC_PREC_FP16; p++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                    check_lowp_gemm((ddpc_precision)p, ta, tb, shapes[s][0], shapes[s][1],
                                    shapes[s][2]);
}

/* oneDNN's fp32 matmul through the same wrapper the bf16 path uses: transposes, strides, alpha,
 * beta = 0 and beta != 0, every shape twice (the second time from the primitive cache), and more
 * shapes than the first cache table holds. */
static void test_onednn_fp32_matches_sgemm(void)
{
    int calls = 0, ok = 0;
    uint64_t created[2] = {0};
    for (int round = 0; round < 3; round++) {
        uint64_t before = ddpc_kernels_matmul_setup_counts().primitives_created;
        for (int64_t m = 1; m <= 41; m += 4)
            for (int ta = 0; ta < 2; ta++)
                for (int tb = 0; tb < 2; tb++) {
                    int64_t n = 3 + m % 7, k = 2 * m + 1;
                    int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
                    int64_t lda = ac + 1, ldb = bc + 2, ldc = n + 4;
                    float beta = (m / 4) % 2 ? 0.0f : -0.5f, alpha = round ? 1.0f : 0.3f;
                    float *a = tu_rand(ar * lda, -1, 1, 21), *b = tu_rand(br * ldb, -1, 1, 22);
                    float *c = tu_rand(m * ldc, -1, 1, 23), *ref = tu_rand(m * ldc, -1, 1, 23);
                    calls++;
                    ok += ddpc_gemm_onednn(DDPC_PREC_FP32, (ddpc_transpose)ta, (ddpc_transpose)tb,
                                           m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
                    ddpc_gemm_f32((ddpc_transpose)ta, (ddpc_transpose)tb, m, n, k, alpha, a, lda, b,
                                  ldb, beta, ref, ldc);
                    CHECK(max_rel_diff(c, ref, m * ldc) <= 1e-5);
                    ddpc_free(a);
                    ddpc_free(b);
                    ddpc_free(c);
                    ddpc_free(ref);
                }
        if (round > 0) /* rounds 1 and 2 run the same products: round 2 creates nothing */
            created[round - 1] = ddpc_kernels_matmul_setup_counts().primitives_created - before;
    }
    CHECK_EQ_INT(ok, calls);
    CHECK(created[0] > 32); /* more than the first table holds: the table grew */
    CHECK_EQ_INT((long long)created[1], 0);
    ddpc_kernels_release_thread();
}

/* Convolution hands its precision to its products too: at fp16 it equals the fp32 convolution of
 * the rounded input and weights (im2col only moves values), forward and weight gradient. */
static void test_conv_rounds_its_products(void)
{
    ddpc_conv2d_shape sh = {
        .n = 3, .c = 2, .h = 9, .w = 7, .k = 4, .r = 3, .s = 3, .stride = 1, .pad = 1};
    int64_t nx = sh.n * sh.c * sh.h * sh.w, nw = sh.k * sh.c * sh.r * sh.s;
    int64_t ny = sh.n * sh.k * ddpc_conv2d_out_h(&sh) * ddpc_conv2d_out_w(&sh);
    float *x = tu_rand(nx, -1, 1, 41), *w = tu_rand(nw, -1, 1, 42), *dy = tu_rand(ny, -1, 1, 43);
    float *rx = rounded(x, nx, DDPC_PREC_FP16), *rw = rounded(w, nw, DDPC_PREC_FP16);
    float *rdy = rounded(dy, ny, DDPC_PREC_FP16);
    float *ws = tu_alloc((int64_t)ddpc_conv2d_workspace_floats(&sh));
    float *y = tu_alloc(ny), *yr = tu_alloc(ny), *dw = tu_alloc(nw), *dwr = tu_alloc(nw);
    ddpc_conv2d_forward(DDPC_PREC_FP16, y, x, w, NULL, &sh, ws);
    ddpc_conv2d_forward(DDPC_PREC_FP32, yr, rx, rw, NULL, &sh, ws);
    CHECK(memcmp(y, yr, (size_t)ny * sizeof *y) == 0);
    ddpc_conv2d_backward(DDPC_PREC_FP16, NULL, dw, NULL, dy, x, w, &sh, ws);
    ddpc_conv2d_backward(DDPC_PREC_FP32, NULL, dwr, NULL, rdy, rx, rw, &sh, ws);
    CHECK(memcmp(dw, dwr, (size_t)nw * sizeof *dw) == 0);
    float *all[] = {x, w, dy, rx, rw, rdy, ws, y, yr, dw, dwr};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        ddpc_free(all[i]);
}

/* A bf16 model step after the first creates and allocates nothing (whichever engine runs). */
static void test_warm_step_sets_nothing_up(void)
{
    ddpc_model_config c = ddpc_model_config_default();
    ddpc_gpt_config own = ddpc_gpt_config_default();
    c.type_config = &own;
    snprintf(c.type, sizeof c.type, "gpt");
    c.num_classes = 64, own.n_layer = 2, own.n_head = 2, own.n_embd = 32, own.block_size = 16;
    c.precision = DDPC_PREC_BF16;
    ddpc_model *m = NULL;
    CHECK(ddpc_model_create(&m, &c) == DDPC_OK);
    int32_t tok[2 * 16], tgt[2 * 16];
    for (int i = 0; i < 32; i++)
        tok[i] = (i * 7) % 64, tgt[i] = (i * 5 + 1) % 64;
    ddpc_model_input in = {.n = 2, .tokens = tok, .targets = tgt};
    ddpc_model_output out;
    ddpc_matmul_setup_counts before = {0};
    for (int step = 0; step < 3; step++) {
        if (step == 2)
            before = ddpc_kernels_matmul_setup_counts();
        CHECK(ddpc_model_forward(m, &in, true, &out) == DDPC_OK);
        CHECK(ddpc_model_backward(m, 1.0f) == DDPC_OK);
    }
    ddpc_matmul_setup_counts after = ddpc_kernels_matmul_setup_counts();
    CHECK(after.scratch_grows == before.scratch_grows);
    CHECK(after.primitives_created == before.primitives_created);
    CHECK(after.scratch_grows > 0 || after.primitives_created > 0);
    ddpc_model_destroy(m);
}

/* Where oneDNN has bf16, ddpc_gemm uses it and agrees with the rounded path; where it has none,
 * the wrapper declines and the report says the inputs are rounded for sgemm instead. */
static void test_bf16_engine_choice(void)
{
    bool native = false;
    const char *info = ddpc_kernels_matmul_info(DDPC_PREC_BF16, &native);
    printf("     bf16: %s\n     %s\n", info, ddpc_kernels_onednn_info());
    CHECK_STR_CONTAINS(ddpc_kernels_onednn_info(), "oneDNN");
    float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {1, 0, 0, 1, 1, 1}, c[4] = {0};
    bool ran = ddpc_gemm_onednn(DDPC_PREC_BF16, DDPC_NO_TRANS, DDPC_NO_TRANS, 2, 2, 3, 1.0f, a, 3,
                                b, 2, 0.0f, c, 2);
    CHECK(ran == native);
    if (native) {
        CHECK_STR_CONTAINS(info, "oneDNN matmul");
        CHECK(c[0] == 4.0f && c[1] == 5.0f && c[2] == 10.0f && c[3] == 11.0f);
    } else {
        CHECK_STR_CONTAINS(info, "bf16-rounded inputs");
    }
    ddpc_kernels_matmul_info(DDPC_PREC_FP16, &native);
    CHECK(!native);
    ddpc_precision p;
    CHECK(ddpc_precision_from_name("bf16", &p) && p == DDPC_PREC_BF16);
    CHECK(ddpc_precision_from_name("fp16", &p) && p == DDPC_PREC_FP16);
    CHECK(ddpc_precision_from_name("fp32", &p) && p == DDPC_PREC_FP32);
    CHECK(!ddpc_precision_from_name("float16", &p));
    CHECK(strcmp(ddpc_precision_name(DDPC_PREC_BF16), "bf16") == 0);
}

/* The layers hand their precision to every product: linear forward and backward at bf16 equal
 * the fp32 layer on rounded operands (bit for bit on the rounded path; dy is rounded too). */
static void test_linear_rounds_every_product(void)
{
    bool native = false;
    ddpc_kernels_matmul_info(DDPC_PREC_FP16, &native); /* fp16 is always the rounded path */
    int64_t n = 13, in = 24, out = 9;
    float *x = tu_rand(n * in, -1, 1, 31), *w = tu_rand(out * in, -1, 1, 32);
    float *bias = tu_rand(out, -1, 1, 33), *dy = tu_rand(n * out, -1, 1, 34);
    float *rx = rounded(x, n * in, DDPC_PREC_FP16), *rw = rounded(w, out * in, DDPC_PREC_FP16);
    float *rdy = rounded(dy, n * out, DDPC_PREC_FP16);
    float *y = tu_alloc(n * out), *yr = tu_alloc(n * out);
    float *dx = tu_alloc(n * in), *dxr = tu_alloc(n * in), *dw = tu_alloc(out * in),
          *dwr = tu_alloc(out * in), *db = tu_alloc(out), *dbr = tu_alloc(out);
    ddpc_linear_forward(DDPC_PREC_FP16, y, x, w, bias, n, in, out);
    ddpc_linear_forward(DDPC_PREC_FP32, yr, rx, rw, bias, n, in, out);
    CHECK(memcmp(y, yr, (size_t)(n * out) * sizeof *y) == 0);
    ddpc_linear_backward(DDPC_PREC_FP16, dx, dw, db, dy, x, w, n, in, out);
    ddpc_linear_backward(DDPC_PREC_FP32, dxr, dwr, NULL, rdy, rx, rw, n, in, out);
    ddpc_linear_backward(DDPC_PREC_FP32, NULL, NULL, dbr, dy, rx, rw, n, in, out);
    CHECK(memcmp(dx, dxr, (size_t)(n * in) * sizeof *dx) == 0);
    CHECK(memcmp(dw, dwr, (size_t)(out * in) * sizeof *dw) == 0);
    CHECK(memcmp(db, dbr, (size_t)out * sizeof *db) == 0); /* the bias sum stays fp32 on dy */
    float *all[] = {x, w, bias, dy, rx, rw, rdy, y, yr, dx, dxr, dw, dwr, db, dbr};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        ddpc_free(all[i]);
}

int main(void)
{
    RUN_TEST(test_round_trip_matches_scalar_conversions);
    RUN_TEST(test_lowp_gemm_is_sgemm_of_rounded_inputs);
    RUN_TEST(test_onednn_fp32_matches_sgemm);
    RUN_TEST(test_bf16_engine_choice);
    RUN_TEST(test_linear_rounds_every_product);
    RUN_TEST(test_conv_rounds_its_products);
    RUN_TEST(test_warm_step_sets_nothing_up);
    ddpc_kernels_release_thread();
    return check_summary();
}
