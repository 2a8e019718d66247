// SPDX-License-Identifier: MIT
/* The CUDA table's CNN, dropout and optimizer kernels against the CPU's: relu, conv2d (fp32 and
 * bf16), maxpool2d with ties, every batchnorm step (device sums, no host wait), dropout masks
 * (bit for bit), AdamW and SGD against the CPU optimizer (ddpc_optim_step) over one and three
 * steps, sumsq, unscale with a non-finite gradient, scale. Skips (exit 77) without a GPU.
 * Outputs the kernel overwrites are poisoned with NaN first; outputs it accumulates into start
 * from the same random values on both sides, so a missed element or a missed accumulation
 * fails. */
#include <ddpc/optim.h>

#include "backend_testutil.h"

#include <string.h>

static const ddpc_kernel_table *G; /* the CUDA table */

/* Relative error of device d against host ref, checked against tol. */
static void expect_close(const char *what, const float *d, const float *ref, int64_t n, double tol)
{
    double e = bt_err(G, what, d, ref, n);
    if (!(e <= tol)) {
        fprintf(stderr, "%s: rel err %.3g > %.3g\n", what, e, tol);
        check_failures_in_test++;
    }
}

/* Device d must equal host ref bit for bit. */
static void expect_same(const char *what, const float *d, const float *ref, int64_t n)
{
    float *h = bt_down(G, d, n);
    int64_t bad = -1;
    for (int64_t i = 0; i < n && bad < 0; i++)
        if (memcmp(&h[i], &ref[i], sizeof(float)) != 0)
            bad = i;
    printf("  %-40s %s\n", what, bad < 0 ? "identical" : "DIFFERENT");
    if (bad >= 0) {
        fprintf(stderr, "%s: element %lld is %.9g on the GPU, %.9g on the CPU\n", what,
                (long long)bad, (double)h[bad], (double)ref[bad]);
        check_failures_in_test++;
    }
    ddpc_free(h);
}

/* G->free for device arrays that may be NULL (no bias, no mask, no second state). */
static void gfree(void *p)
{
    if (p)
        G->free(p);
}

static float *copy_of(const float *x, int64_t n)
{
    float *p = tu_alloc(n);
    memcpy(p, x, (size_t)n * sizeof(float));
    return p;
}

/* ---- relu ---- */

static void test_relu(void)
{
    const int64_t n = 10007;
    float *x = tu_rand(n, -1, 1, 1), *dy = tu_rand(n, -1, 1, 2), *dx0 = tu_rand(n, -1, 1, 3);
    float *y = tu_alloc(n), *dx = copy_of(dx0, n);
    ddpc_relu_forward(y, x, n);
    ddpc_relu_backward(dx, dy, y, n);

    float *gx = bt_up(G, x, n), *gy = bt_poison(G, n), *gdy = bt_up(G, dy, n);
    float *gdx = bt_up(G, dx0, n);
    G->relu_forward(gy, gx, n);
    expect_same("relu_forward", gy, y, n);
    G->relu_backward(gdx, gdy, gy, n);
    expect_same("relu_backward (accumulates)", gdx, dx, n);
    G->relu_forward(gx, gx, n); /* in place */
    expect_same("relu_forward in place", gx, y, n);
    gfree(gx), gfree(gy), gfree(gdy), gfree(gdx);
    ddpc_free(x), ddpc_free(dy), ddpc_free(dx0), ddpc_free(y), ddpc_free(dx);
}

/* ---- conv2d ---- */

static void check_conv(const char *name, ddpc_conv2d_shape s, ddpc_precision prec, bool bias)
{
    const double tol = prec == DDPC_PREC_FP32 ? 1e-5 : 1e-2;
    const int64_t oh = ddpc_conv2d_out_h(&s), ow = ddpc_conv2d_out_w(&s);
    const int64_t nx = s.n * s.c * s.h * s.w, nw = s.k * s.c * s.r * s.s, ny = s.n * s.k * oh * ow;
    float *x = tu_rand(nx, -1, 1, 10), *w = tu_rand(nw, -0.5f, 0.5f, 11);
    float *b = bias ? tu_rand(s.k, -1, 1, 12) : NULL, *dy = tu_rand(ny, -1, 1, 13);
    float *dx = tu_rand(nx, -1, 1, 14), *dw = tu_rand(nw, -1, 1, 15), *db = tu_rand(s.k, -1, 1, 16);
    float *gdx = bt_up(G, dx, nx), *gdw = bt_up(G, dw, nw), *gdb = bt_up(G, db, s.k);
    float *y = tu_alloc(ny);
    float *ws = tu_alloc((int64_t)ddpc_conv2d_workspace_floats(&s));
    ddpc_conv2d_forward(prec, y, x, w, b, &s, ws);
    ddpc_conv2d_backward(prec, dx, dw, bias ? db : NULL, dy, x, w, &s, ws);

    float *gx = bt_up(G, x, nx), *gw = bt_up(G, w, nw), *gb = bias ? bt_up(G, b, s.k) : NULL;
    float *gdy = bt_up(G, dy, ny), *gy = bt_poison(G, ny);
    float *gws = bt_poison(G, (int64_t)G->conv2d_workspace_floats(&s));
    G->conv2d_forward(prec, gy, gx, gw, gb, &s, gws);
    G->conv2d_backward(prec, gdx, gdw, bias ? gdb : NULL, gdy, gx, gw, &s, gws);
    char what[80];
    snprintf(what, sizeof what, "conv %s %s y", name, ddpc_precision_name(prec));
    expect_close(what, gy, y, ny, tol);
    snprintf(what, sizeof what, "conv %s %s dx (+=)", name, ddpc_precision_name(prec));
    expect_close(what, gdx, dx, nx, tol);
    snprintf(what, sizeof what, "conv %s %s dw (+=)", name, ddpc_precision_name(prec));
    expect_close(what, gdw, dw, nw, tol);
    snprintf(what, sizeof what, "conv %s %s db (+=)", name, ddpc_precision_name(prec));
    expect_close(what, gdb, db, s.k, 1e-4); /* a reduction; untouched without bias */

    /* A warm repeat allocates nothing on the device. */
    uint64_t allocs = G->alloc_count();
    G->conv2d_forward(prec, gy, gx, gw, gb, &s, gws);
    G->conv2d_backward(prec, gdx, NULL, NULL, gdy, gx, gw, &s, gws);
    G->synchronize();
    CHECK_EQ_INT(G->alloc_count(), allocs);

    gfree(gx), gfree(gw), gfree(gb), gfree(gdy), gfree(gy), gfree(gws);
    gfree(gdx), gfree(gdw), gfree(gdb);
    ddpc_free(x), ddpc_free(w), ddpc_free(b), ddpc_free(dy), ddpc_free(dx), ddpc_free(dw);
    ddpc_free(db), ddpc_free(y), ddpc_free(ws);
}

static void test_conv(void)
{
    const ddpc_conv2d_shape small = {.n = 3, .c = 5, .h = 13, .w = 11, .k = 7, .r = 3, .s = 3,
                                     .stride = 1, .pad = 1};
    const ddpc_conv2d_shape fmnist1 = {.n = 16, .c = 1, .h = 28, .w = 28, .k = 8, .r = 3, .s = 3,
                                       .stride = 1, .pad = 1};
    const ddpc_conv2d_shape fmnist2 = {.n = 16, .c = 8, .h = 14, .w = 14, .k = 16, .r = 3, .s = 3,
                                       .stride = 1, .pad = 1};
    const ddpc_conv2d_shape strided = {.n = 2, .c = 3, .h = 9, .w = 10, .k = 4, .r = 3, .s = 2,
                                       .stride = 2, .pad = 1};
    const ddpc_conv2d_shape pointwise = {.n = 2, .c = 6, .h = 5, .w = 7, .k = 3, .r = 1, .s = 1,
                                         .stride = 1, .pad = 0};
    const ddpc_precision precs[] = {DDPC_PREC_FP32, DDPC_PREC_BF16};
    for (int p = 0; p < 2; p++) {
        check_conv("3x3 pad 1 (3,5,13,11) k 7", small, precs[p], true);
        check_conv("fmnist (16,1,28,28) k 8", fmnist1, precs[p], true);
        check_conv("fmnist (16,8,14,14) k 16", fmnist2, precs[p], true);
    }
    check_conv("3x2 stride 2 pad 1", strided, DDPC_PREC_FP32, false);
    check_conv("1x1", pointwise, DDPC_PREC_FP32, true);
}

/* ---- maxpool2d ---- */

static void check_pool(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t stride)
{
    const int64_t oh = (h - k) / stride + 1, ow = (w - k) / stride + 1;
    const int64_t nx = n * c * h * w, ny = n * c * oh * ow;
    /* four levels only: most windows hold ties */
    float *x = tu_rand(nx, 0, 4, 20), *dy = tu_rand(ny, -1, 1, 21), *dx = tu_rand(nx, -1, 1, 22);
    for (int64_t i = 0; i < nx; i++)
        x[i] = floorf(x[i]);
    float *gdx = bt_up(G, dx, nx);
    float *y = tu_alloc(ny);
    int32_t *idx = ddpc_calloc((size_t)ny, sizeof(int32_t));
    int32_t *gidx_h = ddpc_calloc((size_t)ny, sizeof(int32_t));
    ddpc_maxpool2d_forward(y, idx, x, n, c, h, w, k, stride);
    ddpc_maxpool2d_backward(dx, dy, idx, n, c, h, w, k, stride);

    float *gx = bt_up(G, x, nx), *gy = bt_poison(G, ny), *gdy = bt_up(G, dy, ny);
    int32_t *gidx = G->alloc((size_t)ny * sizeof(int32_t));
    G->fill_f32((float *)gidx, NAN, ny); /* poison: no valid index has NaN's bits */
    G->maxpool2d_forward(gy, gidx, gx, n, c, h, w, k, stride);
    G->maxpool2d_backward(gdx, gdy, gidx, n, c, h, w, k, stride);
    printf("  maxpool (%lld,%lld,%lld,%lld) k %lld stride %lld\n", (long long)n, (long long)c,
           (long long)h, (long long)w, (long long)k, (long long)stride);
    expect_same("maxpool y", gy, y, ny);
    G->to_host(gidx_h, gidx, (size_t)ny * sizeof(int32_t));
    CHECK(memcmp(gidx_h, idx, (size_t)ny * sizeof(int32_t)) == 0);
    expect_same("maxpool dx (+=)", gdx, dx, nx);
    gfree(gx), gfree(gy), gfree(gdy), gfree(gidx), gfree(gdx);
    ddpc_free(x), ddpc_free(dy), ddpc_free(dx), ddpc_free(y), ddpc_free(idx), ddpc_free(gidx_h);
}

static void test_maxpool(void)
{
    check_pool(4, 3, 28, 28, 2, 2);  /* the CNN's pool */
    check_pool(2, 3, 11, 9, 3, 2);   /* overlapping windows: the gather */
    check_pool(2, 2, 10, 11, 3, 3);  /* disjoint, with leftover rows and columns */
    check_pool(1, 2, 7, 8, 2, 1);    /* stride 1 */
}

/* ---- batchnorm ---- */

/* Device doubles d (m) against host ref, read back: a relative error of at most 1e-10. */
static void expect_sums(const char *what, const double *d, const double *ref, int64_t m)
{
    double *got = ddpc_calloc((size_t)m, sizeof(double));
    G->to_host(got, d, (size_t)m * sizeof(double));
    double e = 0.0, s = 1e-12;
    for (int64_t i = 0; i < m; i++) {
        double diff = fabs(got[i] - ref[i]);
        e = diff > e ? diff : e;
        s = fabs(ref[i]) > s ? fabs(ref[i]) : s;
    }
    e /= s;
    printf("  %-40s rel err %.3g\n", what, e);
    if (!(e <= 1e-10)) {
        fprintf(stderr, "%s: rel err %.3g\n", what, e);
        check_failures_in_test++;
    }
    ddpc_free(got);
}

/* A device copy of the host doubles h (m). */
static double *up_doubles(const double *h, int64_t m)
{
    double *d = G->alloc((size_t)m * sizeof(double));
    G->to_device(d, h, (size_t)m * sizeof(double));
    return d;
}

static void test_batchnorm(void)
{
    const int64_t n = 5, c = 6, hw = 37, total = n * c * hw;
    double *sums = ddpc_calloc((size_t)(2 * c + 1), sizeof(double));
    double *bsums = ddpc_calloc((size_t)(2 * c), sizeof(double));
    float *x = tu_rand(total, -2, 4, 30), *w = tu_rand(c, 0.5f, 1.5f, 31);
    float *b = tu_rand(c, -1, 1, 32), *dy = tu_rand(total, -1, 1, 33);
    float *rm = tu_rand(c, -1, 1, 34), *rv = tu_rand(c, 0.5f, 2, 35);
    float *dw = tu_rand(c, -1, 1, 36), *db = tu_rand(c, -1, 1, 37);
    float *gx = bt_up(G, x, total), *gw = bt_up(G, w, c), *gb = bt_up(G, b, c);
    float *gdy = bt_up(G, dy, total), *grm = bt_up(G, rm, c), *grv = bt_up(G, rv, c);
    float *gdw = bt_up(G, dw, c), *gdb = bt_up(G, db, c);
    float *mean = tu_alloc(c), *invstd = tu_alloc(c), *y = tu_alloc(total), *dx = tu_alloc(total);
    /* the sums are device memory; poisoned, so a missed element (the count too) fails */
    double *gsums = G->alloc((size_t)(2 * c + 1) * sizeof(double));
    double *gbsums = G->alloc((size_t)(2 * c) * sizeof(double));
    G->fill_f32((float *)gsums, NAN, 2 * (2 * c + 1));
    G->fill_f32((float *)gbsums, NAN, 2 * (2 * c));

    ddpc_batchnorm_sums(sums, x, n, c, hw);
    G->batchnorm_sums(gsums, gx, n, c, hw);
    expect_sums("batchnorm_sums (with the count)", gsums, sums, 2 * c + 1);

    /* every later step from the CPU's sums, so only the step under test differs */
    double *csums = up_doubles(sums, 2 * c + 1);
    ddpc_batchnorm_stats(mean, invstd, rm, rv, sums, c, 0.1f, 1e-5f);
    float *gmean = bt_poison(G, c), *ginvstd = bt_poison(G, c);
    G->batchnorm_stats(gmean, ginvstd, grm, grv, csums, c, 0.1f, 1e-5f);
    expect_close("batchnorm_stats mean", gmean, mean, c, 1e-6);
    expect_close("batchnorm_stats invstd", ginvstd, invstd, c, 1e-6);
    expect_close("batchnorm_stats running_mean", grm, rm, c, 1e-6);
    expect_close("batchnorm_stats running_var", grv, rv, c, 1e-6);

    float *emean = tu_alloc(c), *einvstd = tu_alloc(c);
    float *gemean = bt_poison(G, c), *geinvstd = bt_poison(G, c);
    ddpc_batchnorm_eval_stats(emean, einvstd, rm, rv, c, 1e-5f);
    G->batchnorm_eval_stats(gemean, geinvstd, grm, grv, c, 1e-5f);
    expect_close("batchnorm_eval_stats mean", gemean, emean, c, 1e-6);
    expect_close("batchnorm_eval_stats invstd", geinvstd, einvstd, c, 1e-6);

    float *gy = bt_poison(G, total);
    ddpc_batchnorm_apply(y, x, mean, invstd, w, b, n, c, hw);
    G->batchnorm_apply(gy, gx, gmean, ginvstd, gw, gb, n, c, hw);
    expect_close("batchnorm_apply", gy, y, total, 1e-5);
    ddpc_batchnorm_apply(y, x, mean, invstd, NULL, NULL, n, c, hw);
    float *gx2 = bt_up(G, x, total);
    G->batchnorm_apply(gx2, gx2, gmean, ginvstd, NULL, NULL, n, c, hw); /* in place, no affine */
    expect_close("batchnorm_apply in place, w b NULL", gx2, y, total, 1e-5);

    ddpc_batchnorm_backward_sums(bsums, dy, x, mean, invstd, n, c, hw);
    G->batchnorm_backward_sums(gbsums, gdy, gx, gmean, ginvstd, n, c, hw);
    expect_sums("batchnorm_backward_sums", gbsums, bsums, 2 * c);

    double *cbsums = up_doubles(bsums, 2 * c);
    ddpc_batchnorm_backward_params(dw, db, bsums, c);
    G->batchnorm_backward_params(gdw, gdb, cbsums, c);
    expect_close("batchnorm_backward_params dw (+=)", gdw, dw, c, 1e-6);
    expect_close("batchnorm_backward_params db (+=)", gdb, db, c, 1e-6);

    float *gdx = bt_poison(G, total);
    ddpc_batchnorm_backward_input(dx, dy, x, mean, invstd, w, bsums, (double)(n * hw), n, c, hw);
    G->batchnorm_backward_input(gdx, gdy, gx, gmean, ginvstd, gw, cbsums, (double)(n * hw), n, c,
                                hw);
    expect_close("batchnorm_backward_input", gdx, dx, total, 1e-5);
    G->batchnorm_backward_input(gdy, gdy, gx, gmean, ginvstd, gw, cbsums, (double)(n * hw), n, c,
                                hw); /* dx may be dy */
    expect_close("batchnorm_backward_input in place", gdy, dx, total, 1e-5);

    /* A training step's batchnorm calls neither allocate nor wait for the device (issue 19: the
     * sums stay there, SyncBatchNorm adds them up on the GPUs' group). */
    uint64_t allocs = G->alloc_count(), waits = G->host_waits();
    G->batchnorm_sums(gsums, gx, n, c, hw);
    G->batchnorm_stats(gmean, ginvstd, grm, grv, gsums, c, 0.1f, 1e-5f);
    G->batchnorm_apply(gy, gx, gmean, ginvstd, gw, gb, n, c, hw);
    G->batchnorm_backward_sums(gbsums, gdx, gx, gmean, ginvstd, n, c, hw);
    G->batchnorm_backward_params(gdw, gdb, gbsums, c);
    G->batchnorm_backward_input(gdx, gdx, gx, gmean, ginvstd, gw, gbsums, (double)(n * hw), n, c,
                                hw);
    uint64_t waited = G->host_waits() - waits;
    printf("  a step's batchnorm calls: %llu host waits, %llu allocations\n",
           (unsigned long long)waited, (unsigned long long)(G->alloc_count() - allocs));
    CHECK_EQ_INT(waited, 0);
    G->synchronize();
    CHECK_EQ_INT(G->alloc_count(), allocs);

    float *fs[] = {gx, gw, gb, gdy, grm, grv, gdw, gdb, gmean, ginvstd, gemean, geinvstd, gy,
                   gx2, gdx};
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++)
        gfree(fs[i]);
    double *ds[] = {gsums, gbsums, csums, cbsums};
    for (size_t i = 0; i < sizeof ds / sizeof ds[0]; i++)
        gfree(ds[i]);
    float *hs[] = {x, w, b, dy, rm, rv, dw, db, mean, invstd, y, dx, emean, einvstd};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++)
        ddpc_free(hs[i]);
    ddpc_free(sums), ddpc_free(bsums);
}

/* ---- dropout ---- */

static void test_dropout(void)
{
    const int64_t n = 100003;
    const float ps[] = {0.3f, 0.5f, 0.0f};
    for (int k = 0; k < 3; k++) {
        const float p = ps[k];
        const uint64_t seed = 1234 + (uint64_t)k, stream = 77;
        float *x = tu_rand(n, -1, 1, 40), *dy = tu_rand(n, -1, 1, 41), *dx = tu_rand(n, -1, 1, 42);
        float *y = tu_alloc(n);
        float *gx = bt_up(G, x, n), *gy = bt_poison(G, n), *gdy = bt_up(G, dy, n);
        float *gdx = bt_up(G, dx, n);
        ddpc_dropout_forward(y, x, n, p, seed, stream);
        ddpc_dropout_backward(dx, dy, n, p, seed, stream);
        G->dropout_forward(gy, gx, n, p, seed, stream);
        G->dropout_backward(gdx, gdy, n, p, seed, stream);
        printf("  dropout p %.1f\n", (double)p);
        expect_same("dropout_forward (the masks)", gy, y, n);
        expect_same("dropout_backward (+=)", gdx, dx, n);
        G->dropout_forward(gx, gx, n, p, seed, stream); /* in place */
        expect_same("dropout_forward in place", gx, y, n);
        gfree(gx), gfree(gy), gfree(gdy), gfree(gdx);
        ddpc_free(x), ddpc_free(dy), ddpc_free(dx), ddpc_free(y);
    }
}

/* ---- optimizer ---- */

/* AdamW's scalars for step t, as src/optim/adamw.c computes them. */
static ddpc_adamw_coef adamw_coef(const ddpc_optim_config *c, int64_t t, float lr)
{
    const double bc1 = 1.0 - pow((double)c->beta1, (double)t);
    const double bc2 = 1.0 - pow((double)c->beta2, (double)t);
    return (ddpc_adamw_coef){
        .b1 = c->beta1,
        .b2 = c->beta2,
        .a1 = (float)(1.0 - (double)c->beta1),
        .a2 = (float)(1.0 - (double)c->beta2),
        .eps = c->eps,
        .neg_step = (float)(-((double)lr / bc1)),
        .bc2_sqrt = (float)sqrt(bc2),
        .decay = (float)(1.0 - (double)lr * (double)c->weight_decay),
    };
}

/* SGD's scalars for step t, as src/optim/sgd.c computes them. */
static ddpc_sgd_coef sgd_coef(const ddpc_optim_config *c, int64_t t, float lr)
{
    return (ddpc_sgd_coef){
        .wd = c->weight_decay,
        .momentum = c->momentum,
        .keep = (float)(1.0 - (double)c->dampening),
        .neg_lr = -lr,
        .nesterov = c->nesterov,
        .first = t == 1,
    };
}

/* Three steps of cfg on the CPU (ddpc_optim_step) and on the GPU, compared after steps 1 and 3:
 * parameters and every state buffer. */
static void check_optim(const char *name, ddpc_optim_config cfg, bool with_mask)
{
    const int64_t n = 50021;
    const float lrs[] = {1e-2f, 7e-3f, 3e-3f};
    float *p = tu_rand(n, -1, 1, 50);
    uint8_t *mask = ddpc_calloc((size_t)n, 1);
    for (int64_t i = 0; i < n; i++) /* runs of decay and no decay, as tensors give */
        mask[i] = (uint8_t)((i / 1000) % 3 != 1);
    ddpc_optim *o = NULL;
    CHECK(ddpc_optim_create(&o, &cfg, (size_t)n) == DDPC_OK);
    if (!o)
        return;
    const size_t ns = ddpc_optim_num_state(o);
    float *gp = bt_up(G, p, n), *gstate[2] = {NULL, NULL};
    for (size_t s = 0; s < ns; s++) {
        gstate[s] = bt_poison(G, n);
        G->fill_f32(gstate[s], 0.0f, n); /* the CPU's state starts at zero */
    }
    uint8_t *gmask = with_mask ? bt_up_bytes(G, mask, (size_t)n) : NULL;
    for (int64_t t = 1; t <= 3; t++) {
        float *g = tu_rand(n, -1, 1, 50 + (uint64_t)t);
        float *gg = bt_up(G, g, n);
        const float lr = lrs[t - 1];
        ddpc_optim_step(o, p, g, with_mask ? mask : NULL, lr);
        if (cfg.type == DDPC_OPTIM_ADAMW) {
            ddpc_adamw_coef k = adamw_coef(&cfg, t, lr);
            G->adamw_update(gp, gg, gstate[0], gstate[1], gmask, n, &k);
        } else {
            ddpc_sgd_coef k = sgd_coef(&cfg, t, lr);
            G->sgd_update(gp, gg, gstate[0], gmask, n, &k);
        }
        if (t == 1 || t == 3) {
            char what[80];
            snprintf(what, sizeof what, "%s step %lld params", name, (long long)t);
            expect_close(what, gp, p, n, 1e-6);
            for (size_t s = 0; s < ns; s++) {
                const char *sname = NULL;
                float *ref = ddpc_optim_state(o, s, &sname);
                snprintf(what, sizeof what, "%s step %lld %s", name, (long long)t, sname);
                expect_close(what, gstate[s], ref, n, 1e-6);
            }
        }
        gfree(gg);
        ddpc_free(g);
    }
    gfree(gp), gfree(gstate[0]), gfree(gstate[1]), gfree(gmask);
    ddpc_optim_destroy(o);
    ddpc_free(p), ddpc_free(mask);
}

static void test_optim(void)
{
    ddpc_optim_config adamw = ddpc_optim_config_default();
    adamw.type = DDPC_OPTIM_ADAMW;
    adamw.weight_decay = 0.1f;
    check_optim("adamw", adamw, false);
    check_optim("adamw masked", adamw, true);

    ddpc_optim_config sgd = ddpc_optim_config_default();
    check_optim("sgd plain", sgd, false);
    sgd.momentum = 0.9f;
    sgd.dampening = 0.1f;
    sgd.weight_decay = 1e-2f;
    check_optim("sgd momentum masked", sgd, true);
    sgd.dampening = 0.0f;
    sgd.nesterov = true;
    check_optim("sgd nesterov", sgd, false);
}

/* ---- gradient arithmetic ---- */

static void test_sumsq(void)
{
    const int64_t sizes[] = {1, 5, 1000, 300007};
    for (int k = 0; k < 4; k++) {
        const int64_t n = sizes[k];
        float *g = tu_rand(n, -3, 3, 60);
        float *gg = bt_up(G, g, n);
        double ref = ddpc_grad_sumsq(g, (size_t)n), got = G->sumsq(gg, n), again = G->sumsq(gg, n);
        printf("  sumsq n %lld: %.17g vs CPU %.17g\n", (long long)n, got, ref);
        CHECK_NEAR(got, ref, 1e-12);
        CHECK(memcmp(&got, &again, sizeof got) == 0); /* a fixed order: the same bits */
        uint64_t allocs = G->alloc_count();
        (void)G->sumsq(gg, n);
        CHECK_EQ_INT(G->alloc_count(), allocs);
        gfree(gg);
        ddpc_free(g);
    }
}

static void test_unscale_scale(void)
{
    const int64_t n = 70001;
    float *g = tu_rand(n, -1000, 1000, 70);
    float *gg = bt_up(G, g, n);
    bool cpu_bad = ddpc_grad_unscale(g, (size_t)n, 1024.0f);
    bool gpu_bad = G->unscale(gg, n, 1024.0f);
    CHECK(!cpu_bad && !gpu_bad);
    expect_same("unscale by 1024", gg, g, n);
    cpu_bad = ddpc_grad_unscale(g, (size_t)n, 3.0f); /* 1/3 is inexact: the rounding must agree */
    gpu_bad = G->unscale(gg, n, 3.0f);
    CHECK(!cpu_bad && !gpu_bad);
    expect_same("unscale by 3", gg, g, n);

    const float inf = INFINITY;
    G->to_device(gg + 777, &inf, sizeof inf);
    CHECK(G->unscale(gg, n, 2.0f));
    const float nan = NAN;
    G->fill_f32(gg, 1.0f, n);
    G->to_device(gg + n - 1, &nan, sizeof nan);
    CHECK(G->unscale(gg, n, 1.0f));
    G->fill_f32(gg, 1.0f, n);
    CHECK(!G->unscale(gg, n, 1.0f));

    float *h = tu_rand(n, -1, 1, 71);
    G->to_device(gg, h, (size_t)n * sizeof(float));
    G->scale(gg, n, 0.37f);
    for (int64_t i = 0; i < n; i++)
        h[i] *= 0.37f;
    expect_same("scale by 0.37", gg, h, n);
    gfree(gg);
    ddpc_free(g), ddpc_free(h);
}

int main(void)
{
    G = bt_cuda_or_skip();
    RUN_TEST(test_relu);
    RUN_TEST(test_conv);
    RUN_TEST(test_maxpool);
    RUN_TEST(test_batchnorm);
    RUN_TEST(test_dropout);
    RUN_TEST(test_optim);
    RUN_TEST(test_sumsq);
    RUN_TEST(test_unscale_scale);
    return check_summary();
}
