// SPDX-License-Identifier: MIT
/* The CUDA linear layer's 16-bit paths against the composition they replace and against the CPU:
 * linear_backward (dy rounded once for both products) must give the same bits as two gemm calls
 * plus the bias sum, accumulating into existing dx, dw, db; linear_forward with a bias (added in
 * cuBLASLt's epilogue) must match seeding y with the bias and a gemm with beta = 1 within 1e-5
 * relative (the number of elements whose bits differ is printed), rerun bitwise, and stay within
 * 1e-2 of the CPU. bf16 and fp16; odd sizes (padded to 8, or to 128 past 4096, as V = 50257 is),
 * k not a multiple of 8, unaligned rows, unaligned bias and output pointers; a warm call allocates
 * nothing. Skips (exit 77, saying why) where this build or machine has no GPU. */
#include "backend_testutil.h"

#define TOL_16 1e-2
#define TOL_SUM 1e-4
#define TOL_SAME 1e-5

static const ddpc_kernel_table *cpu, *gpu;

/* How many of device arrays a and b's n floats differ in their bits; prints it, with the largest
 * difference relative to b's largest magnitude, under `what`. */
static int64_t bits_differ(const char *what, const float *a, const float *b, int64_t n, double *rel)
{
    float *ha = bt_down(gpu, a, n), *hb = bt_down(gpu, b, n);
    int64_t diff = 0;
    for (int64_t i = 0; i < n; i++)
        diff += memcmp(&ha[i], &hb[i], sizeof(float)) != 0;
    double e = tu_rel_err(ha, hb, n, 1e-6);
    for (int64_t i = 0; i < n; i++)
        if (isnan(ha[i]) != isnan(hb[i]))
            e = INFINITY;
    printf("  %-44s %lld of %lld elements differ in bits, rel err %.3g\n", what, (long long)diff,
           (long long)n, e);
    if (rel)
        *rel = e;
    ddpc_free(ha);
    ddpc_free(hb);
    return diff;
}

/* Backward: the fused path against gemm (dx) + gemm (dw) + the bias sum, all accumulating into
 * the same starting dx, dw, db; then against the CPU. */
static void check_backward(ddpc_precision p, int64_t n, int64_t in, int64_t out)
{
    float *x = tu_rand(n * in, -1, 1, 71), *w = tu_rand(out * in, -0.2f, 0.2f, 72);
    float *dy = tu_rand(n * out, -1, 1, 73), *dx = tu_rand(n * in, -1, 1, 74);
    float *dw = tu_rand(out * in, -1, 1, 75), *db = tu_rand(out, -1, 1, 76);
    float *gx = bt_up(gpu, x, n * in), *gw = bt_up(gpu, w, out * in),
          *gdy = bt_up(gpu, dy, n * out);
    float *gdx = bt_up(gpu, dx, n * in), *gdw = bt_up(gpu, dw, out * in),
          *gdb = bt_up(gpu, db, out);
    float *odx = bt_up(gpu, dx, n * in), *odw = bt_up(gpu, dw, out * in),
          *odb = bt_up(gpu, db, out);

    gpu->linear_backward(p, gdx, gdw, gdb, gdy, gx, gw, n, in, out);
    gpu->gemm(p, DDPC_NO_TRANS, DDPC_NO_TRANS, n, in, out, 1.0f, gdy, out, gw, in, 1.0f, odx, in);
    gpu->gemm(p, DDPC_TRANS, DDPC_NO_TRANS, out, in, n, 1.0f, gdy, out, gx, in, 1.0f, odw, in);
    gpu->linear_backward(p, NULL, NULL, odb, gdy, NULL, NULL, n, in, out);
    CHECK_EQ_INT(bits_differ("backward dx vs two gemms", gdx, odx, n * in, NULL), 0);
    CHECK_EQ_INT(bits_differ("backward dw vs two gemms", gdw, odw, out * in, NULL), 0);
    CHECK_EQ_INT(bits_differ("backward db vs the bias sum alone", gdb, odb, out, NULL), 0);

    cpu->linear_backward(p, dx, dw, db, dy, x, w, n, in, out);
    BT_CHECK_ERR(bt_err(gpu, "backward dx vs CPU", gdx, dx, n * in), TOL_16);
    BT_CHECK_ERR(bt_err(gpu, "backward dw vs CPU", gdw, dw, out * in), TOL_16);
    BT_CHECK_ERR(bt_err(gpu, "backward db vs CPU", gdb, db, out), TOL_SUM);
    BT_CHECK_WARM(gpu, gpu->linear_backward(p, gdx, gdw, gdb, gdy, gx, gw, n, in, out));

    /* One gradient alone takes the single-product path: still the CPU's result. */
    gpu->to_device(gdx, dx, (size_t)(n * in) * sizeof(float));
    gpu->linear_backward(p, gdx, NULL, NULL, gdy, gx, gw, n, in, out);
    cpu->linear_backward(p, dx, NULL, NULL, dy, x, w, n, in, out);
    BT_CHECK_ERR(bt_err(gpu, "backward dx alone vs CPU", gdx, dx, n * in), TOL_16);

    float *list[] = {x, w, dy, dx, dw, db};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++)
        ddpc_free(list[i]);
    float *glist[] = {gx, gw, gdy, gdx, gdw, gdb, odx, odw, odb};
    for (size_t i = 0; i < sizeof glist / sizeof glist[0]; i++)
        gpu->free(glist[i]);
}

/* Forward with a bias: the epilogue path against seed + gemm (beta = 1), twice for bits, and
 * against the CPU. bias_off / y_off shift the bias and y by that many floats from their
 * allocations' (256-byte aligned) starts, as parameter and activation views are. */
static void check_forward(ddpc_precision p, int64_t n, int64_t in, int64_t out, int64_t bias_off,
                          int64_t y_off)
{
    float *x = tu_rand(n * in, -1, 1, 81), *w = tu_rand(out * in, -0.2f, 0.2f, 82);
    float *b = tu_rand(out + bias_off, -1, 1, 83), *y = tu_alloc(n * out);
    float *seed = tu_alloc(n * out);
    for (int64_t i = 0; i < n; i++)
        memcpy(seed + i * out, b + bias_off, (size_t)out * sizeof(float));
    float *gx = bt_up(gpu, x, n * in), *gw = bt_up(gpu, w, out * in);
    float *gbase = bt_up(gpu, b, out + bias_off), *gb = gbase + bias_off;
    float *ybase = bt_poison(gpu, n * out + y_off), *gy = ybase + y_off;
    float *gy2 = bt_poison(gpu, n * out), *oy = bt_up(gpu, seed, n * out);
    printf(" forward %s n %lld in %lld out %lld, bias at +%lld, y at +%lld floats\n",
           ddpc_precision_name(p), (long long)n, (long long)in, (long long)out, (long long)bias_off,
           (long long)y_off);

    gpu->linear_forward(p, gy, gx, gw, gb, n, in, out);
    gpu->gemm(p, DDPC_NO_TRANS, DDPC_TRANS, n, out, in, 1.0f, gx, in, gw, in, 1.0f, oy, out);
    double rel = INFINITY;
    bits_differ("forward vs seed + gemm (beta 1)", gy, oy, n * out, &rel);
    BT_CHECK_ERR(rel, TOL_SAME);
    gpu->linear_forward(p, gy2, gx, gw, gb, n, in, out);
    CHECK_EQ_INT(bits_differ("forward rerun", gy2, gy, n * out, NULL), 0);

    cpu->linear_forward(p, y, x, w, b + bias_off, n, in, out);
    BT_CHECK_ERR(bt_err(gpu, "forward vs CPU", gy, y, n * out), TOL_16);
    BT_CHECK_WARM(gpu, gpu->linear_forward(p, gy, gx, gw, gb, n, in, out));

    ddpc_free(x);
    ddpc_free(w);
    ddpc_free(b);
    ddpc_free(y);
    ddpc_free(seed);
    float *glist[] = {gx, gw, gbase, ybase, gy2, oy};
    for (size_t i = 0; i < sizeof glist / sizeof glist[0]; i++)
        gpu->free(glist[i]);
}

/* {n, in, out}: every size odd (each padded to 8); out past 4096 (padded to 128, as the LM head's
 * 50257) with k = 131; rows of 776 floats (not 64-byte aligned: the padded-c path); GPT-2's qkv
 * shape with nothing padded (the product writes y itself). */
static const int64_t shapes[][3] = {
    {77, 67, 93}, {300, 131, 5003}, {256, 776, 776}, {512, 768, 2304}};

static void test_backward(void)
{
    for (int p = DDPC_PREC_BF16; p <= DDPC_PREC_FP16; p++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            printf(" backward %s n %lld in %lld out %lld\n", ddpc_precision_name(p),
                   (long long)shapes[s][0], (long long)shapes[s][1], (long long)shapes[s][2]);
            check_backward((ddpc_precision)p, shapes[s][0], shapes[s][1], shapes[s][2]);
        }
}

static void test_forward(void)
{
    for (int p = DDPC_PREC_BF16; p <= DDPC_PREC_FP16; p++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            check_forward((ddpc_precision)p, shapes[s][0], shapes[s][1], shapes[s][2], 0, 0);
    /* Views: a bias 4 bytes past alignment (copied aligned), y likewise (a narrower algorithm). */
    check_forward(DDPC_PREC_BF16, 512, 768, 2304, 1, 0);
    check_forward(DDPC_PREC_BF16, 512, 768, 2304, 3, 1);
    check_forward(DDPC_PREC_FP16, 77, 67, 93, 1, 1);
}

int main(void)
{
    cpu = ddpc_kernel_table_cpu();
    gpu = bt_cuda_or_skip();
    RUN_TEST(test_backward);
    RUN_TEST(test_forward);
    return check_summary();
}
