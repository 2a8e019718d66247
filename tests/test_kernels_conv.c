// SPDX-License-Identifier: MIT
/* Tests for conv2d.c (+ im2col.c) and maxpool2d.c: forward against naive loops, backward against
 * central finite differences (stride 2, padding, non-square kernels, 1x1, batch 1), equal results
 * at 1 and 2 threads, accumulation; pooling ties, odd sizes and overlapping windows. */
#include "kernels_testutil.h"

typedef struct {
    float *y, *x, *w, *b, *r, *ws;
    ddpc_conv2d_shape s;
} conv_ctx;

static int64_t out_size(const ddpc_conv2d_shape *s)
{
    return s->n * s->k * ddpc_conv2d_out_h(s) * ddpc_conv2d_out_w(s);
}

static double conv_loss(void *p)
{
    conv_ctx *c = p;
    ddpc_conv2d_forward(DDPC_PREC_FP32, c->y, c->x, c->w, c->b, &c->s, c->ws);
    return tu_dot(c->y, c->r, out_size(&c->s));
}

static double naive_conv_err(const conv_ctx *c)
{
    const ddpc_conv2d_shape *s = &c->s;
    int64_t oh = ddpc_conv2d_out_h(s), ow = ddpc_conv2d_out_w(s);
    double err = 0.0;
    for (int64_t n = 0; n < s->n; n++)
        for (int64_t k = 0; k < s->k; k++)
            for (int64_t oy = 0; oy < oh; oy++)
                for (int64_t ox = 0; ox < ow; ox++) {
                    double acc = c->b ? c->b[k] : 0.0;
                    for (int64_t ci = 0; ci < s->c; ci++)
                        for (int64_t ri = 0; ri < s->r; ri++)
                            for (int64_t si = 0; si < s->s; si++) {
                                int64_t iy = oy * s->stride - s->pad + ri;
                                int64_t ix = ox * s->stride - s->pad + si;
                                if (iy < 0 || iy >= s->h || ix < 0 || ix >= s->w)
                                    continue;
                                acc += (double)c->x[((n * s->c + ci) * s->h + iy) * s->w + ix] *
                                       c->w[((k * s->c + ci) * s->r + ri) * s->s + si];
                            }
                    float got = c->y[((n * s->k + k) * oh + oy) * ow + ox];
                    err = fmax(err, fabs(acc - got));
                }
    return err;
}

static void check_conv(ddpc_conv2d_shape s)
{
    int64_t nx = s.n * s.c * s.h * s.w, nw = s.k * s.c * s.r * s.s, ny = out_size(&s);
    conv_ctx c = {tu_alloc(ny),
                  tu_rand(nx, -1, 1, 1),
                  tu_rand(nw, -1, 1, 2),
                  tu_rand(s.k, -1, 1, 3),
                  tu_rand(ny, -1, 1, 4),
                  tu_alloc((int64_t)ddpc_conv2d_workspace_floats(&s)),
                  s};
    conv_loss(&c);
    CHECK(naive_conv_err(&c) < 1e-5 * (double)(s.c * s.r * s.s));
    float *dx = tu_alloc(nx), *dw = tu_alloc(nw), *db = tu_alloc(s.k);
    ddpc_conv2d_backward(DDPC_PREC_FP32, dx, dw, db, c.r, c.x, c.w, &c.s, c.ws);
    CHECK(tu_grad_check("conv dx", c.x, dx, nx, nx > 2000 ? 5 : 1, 1e-2f, conv_loss, &c) < 1e-3);
    CHECK(tu_grad_check("conv dw", c.w, dw, nw, 1, 1e-2f, conv_loss, &c) < 1e-3);
    CHECK(tu_grad_check("conv db", c.b, db, s.k, 1, 1e-2f, conv_loss, &c) < 1e-3);

    /* At one thread: same gradients (up to summation order), and accumulation doubles them. */
    int threads = ddpc_kernels_threads();
    ddpc_kernels_set_threads(1);
    float *dx1 = tu_alloc(nx), *dw1 = tu_alloc(nw), *db1 = tu_alloc(s.k);
    ddpc_conv2d_backward(DDPC_PREC_FP32, dx1, dw1, db1, c.r, c.x, c.w, &c.s, c.ws);
    ddpc_kernels_set_threads(threads);
    CHECK(tu_rel_err(dx1, dx, nx, 1e-6) < 1e-5);
    CHECK(tu_rel_err(dw1, dw, nw, 1e-6) < 1e-5);
    CHECK(tu_rel_err(db1, db, s.k, 1e-6) < 1e-5);
    ddpc_conv2d_backward(DDPC_PREC_FP32, dx, dw, NULL, c.r, c.x, c.w, &c.s, c.ws);
    ddpc_conv2d_backward(DDPC_PREC_FP32, NULL, NULL, db, c.r, c.x, c.w, &c.s, c.ws);
    ddpc_axpy_f32(dx1, 1.0f, dx1, nx);
    ddpc_axpy_f32(dw1, 1.0f, dw1, nw);
    ddpc_axpy_f32(db1, 1.0f, db1, s.k);
    CHECK(tu_rel_err(dx, dx1, nx, 1e-6) < 1e-5);
    CHECK(tu_rel_err(dw, dw1, nw, 1e-6) < 1e-5);
    CHECK(tu_rel_err(db, db1, s.k, 1e-6) < 1e-5);

    /* No bias: forward is the bare convolution. */
    float *bias = c.b;
    c.b = NULL;
    conv_loss(&c);
    CHECK(naive_conv_err(&c) < 1e-5 * (double)(s.c * s.r * s.s));
    float *bufs[] = {c.y, c.x, c.w, bias, c.r, c.ws, dx, dw, db, dx1, dw1, db1};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        ddpc_free(bufs[i]);
}

static void test_conv_stride1_pad1(void)
{
    check_conv((ddpc_conv2d_shape){
        .n = 1, .c = 1, .h = 5, .w = 5, .k = 2, .r = 3, .s = 3, .stride = 1, .pad = 1});
    check_conv((ddpc_conv2d_shape){
        .n = 4, .c = 3, .h = 9, .w = 7, .k = 5, .r = 3, .s = 3, .stride = 1, .pad = 1});
}

static void test_conv_stride2_and_padding(void)
{
    check_conv((ddpc_conv2d_shape){
        .n = 3, .c = 2, .h = 7, .w = 6, .k = 3, .r = 3, .s = 2, .stride = 2, .pad = 1});
    check_conv((ddpc_conv2d_shape){
        .n = 2, .c = 2, .h = 8, .w = 9, .k = 3, .r = 5, .s = 5, .stride = 2, .pad = 2});
    check_conv((ddpc_conv2d_shape){
        .n = 2, .c = 1, .h = 10, .w = 11, .k = 2, .r = 2, .s = 3, .stride = 3, .pad = 0});
}

static void test_conv_pointwise(void)
{
    check_conv((ddpc_conv2d_shape){
        .n = 3, .c = 4, .h = 5, .w = 3, .k = 6, .r = 1, .s = 1, .stride = 1, .pad = 0});
    check_conv((ddpc_conv2d_shape){
        .n = 1, .c = 2, .h = 3, .w = 3, .k = 3, .r = 1, .s = 1, .stride = 2, .pad = 1});
}

/* Large enough to split samples across threads: forward and dx equal the one-thread run bit for
 * bit; dw and db differ only by the order the per-thread partial sums are added. */
static void test_conv_threads_agree(void)
{
    ddpc_conv2d_shape s = {
        .n = 5, .c = 8, .h = 16, .w = 15, .k = 16, .r = 3, .s = 3, .stride = 1, .pad = 1};
    int64_t nx = s.n * s.c * s.h * s.w, nw = s.k * s.c * 9, ny = out_size(&s);
    float *x = tu_rand(nx, -1, 1, 1), *w = tu_rand(nw, -1, 1, 2), *b = tu_rand(s.k, -1, 1, 3);
    float *dy = tu_rand(ny, -1, 1, 4), *ws = tu_alloc((int64_t)ddpc_conv2d_workspace_floats(&s));
    float *y[2], *dx[2], *dw[2], *db[2];
    int threads = ddpc_kernels_threads();
    for (int i = 0; i < 2; i++) {
        y[i] = tu_alloc(ny);
        dx[i] = tu_alloc(nx);
        dw[i] = tu_alloc(nw);
        db[i] = tu_alloc(s.k);
        ddpc_kernels_set_threads(i + 1);
        ddpc_conv2d_forward(DDPC_PREC_FP32, y[i], x, w, b, &s, ws);
        ddpc_conv2d_backward(DDPC_PREC_FP32, dx[i], dw[i], db[i], dy, x, w, &s, ws);
    }
    ddpc_kernels_set_threads(threads);
    CHECK(memcmp(y[0], y[1], (size_t)ny * 4) == 0);
    CHECK(memcmp(dx[0], dx[1], (size_t)nx * 4) == 0);
    CHECK(tu_rel_err(dw[1], dw[0], nw, 1e-6) < 1e-5);
    CHECK(tu_rel_err(db[1], db[0], s.k, 1e-6) < 1e-5);
    float *bufs[] = {x, w, b, dy, ws, y[0], y[1], dx[0], dx[1], dw[0], dw[1], db[0], db[1]};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        ddpc_free(bufs[i]);
}

static void test_maxpool_forward_ties_and_odd_sizes(void)
{
    /* 1 x 2 x 5 x 5, k 2, stride 2: oh = ow = 2 (the odd last row/column is dropped). */
    int64_t n = 1, c = 2, h = 5, w = 5;
    float x[50];
    for (int i = 0; i < 25; i++)
        x[i] = 1.0f; /* plane 0: all ties -> first position of each window */
    for (int i = 0; i < 25; i++)
        x[25 + i] = (float)((i * 7) % 11);
    float y[8];
    int32_t idx[8];
    ddpc_maxpool2d_forward(y, idx, x, n, c, h, w, 2, 2);
    CHECK_EQ_INT(idx[0], 0);
    CHECK_EQ_INT(idx[1], 2);
    CHECK_EQ_INT(idx[2], 10);
    CHECK_EQ_INT(idx[3], 12);
    for (int o = 0; o < 4; o++) {
        int oy = o / 2, ox = o % 2, best = -1;
        float mx = -1.0f;
        for (int dy = 0; dy < 2; dy++)
            for (int dx = 0; dx < 2; dx++) {
                int p = (oy * 2 + dy) * 5 + ox * 2 + dx;
                if (x[25 + p] > mx) {
                    mx = x[25 + p];
                    best = p;
                }
            }
        CHECK(y[4 + o] == mx);
        CHECK_EQ_INT(idx[4 + o], best);
    }
    float dy[8] = {1, 2, 3, 4, 5, 6, 7, 8}, dxv[50] = {0};
    ddpc_maxpool2d_backward(dxv, dy, idx, n, c, h, w, 2, 2);
    ddpc_maxpool2d_backward(dxv, dy, idx, n, c, h, w, 2, 2);
    CHECK(dxv[0] == 2.0f && dxv[2] == 4.0f && dxv[10] == 6.0f && dxv[12] == 8.0f);
    double total = 0.0;
    for (int i = 0; i < 50; i++)
        total += dxv[i];
    CHECK_NEAR(total, 72.0, 0);
}

/* Naive pooling with first-maximum ties; returns the number of outputs that differ. */
static int naive_pool_mismatches(const float *y, const int32_t *idx, const float *x, int64_t planes,
                                 int64_t h, int64_t w, int64_t k, int64_t st)
{
    int64_t oh = (h - k) / st + 1, ow = (w - k) / st + 1;
    int bad = 0;
    for (int64_t p = 0; p < planes; p++)
        for (int64_t oy = 0; oy < oh; oy++)
            for (int64_t ox = 0; ox < ow; ox++) {
                int64_t best = -1;
                for (int64_t dy = 0; dy < k; dy++)
                    for (int64_t dx = 0; dx < k; dx++) {
                        int64_t q = (oy * st + dy) * w + ox * st + dx;
                        if (best < 0 || x[p * h * w + q] > x[p * h * w + best])
                            best = q;
                    }
                int64_t o = (p * oh + oy) * ow + ox;
                bad += idx[o] != best || y[o] != x[p * h * w + best];
            }
    return bad;
}

static void test_maxpool_many_ties(void)
{
    /* Values from {0, 1, 2}: most windows tie. 2x2/2 takes the fast path, 3x3/2 and 2x2/1 not. */
    const int64_t cfg[][4] = {{7, 9, 2, 2}, {8, 8, 2, 2}, {7, 9, 3, 2}, {6, 5, 2, 1}};
    for (size_t t = 0; t < sizeof cfg / sizeof cfg[0]; t++) {
        int64_t h = cfg[t][0], w = cfg[t][1], k = cfg[t][2], st = cfg[t][3], planes = 2 * 3;
        int64_t ny = planes * ((h - k) / st + 1) * ((w - k) / st + 1);
        float *x = tu_alloc(planes * h * w), *y = tu_alloc(ny);
        int32_t *idx = ddpc_malloc((size_t)ny * sizeof(int32_t));
        for (int64_t i = 0; i < planes * h * w; i++)
            x[i] = (float)(ddpc_rng_at(7, (uint64_t)t, (uint64_t)i) % 3);
        ddpc_maxpool2d_forward(y, idx, x, 2, 3, h, w, k, st);
        CHECK_EQ_INT(naive_pool_mismatches(y, idx, x, planes, h, w, k, st), 0);
        ddpc_free(x);
        ddpc_free(y);
        ddpc_free(idx);
    }
}

typedef struct {
    float *y, *x, *r;
    int32_t *idx;
    int64_t n, c, h, w, k, st;
} pool_ctx;

static double pool_loss(void *p)
{
    pool_ctx *q = p;
    ddpc_maxpool2d_forward(q->y, q->idx, q->x, q->n, q->c, q->h, q->w, q->k, q->st);
    int64_t ny = q->n * q->c * ((q->h - q->k) / q->st + 1) * ((q->w - q->k) / q->st + 1);
    return tu_dot(q->y, q->r, ny);
}

static void test_maxpool_backward_overlapping(void)
{
    /* Overlapping 3x3 windows with stride 2 on 7x9 planes; distinct values spaced 1e-2 apart. */
    int64_t n = 2, c = 3, h = 7, w = 9, k = 3, st = 2, oh = 3, ow = 4;
    int64_t nx = n * c * h * w, ny = n * c * oh * ow;
    pool_ctx q = {tu_alloc(ny),
                  tu_alloc(nx),
                  tu_rand(ny, -1, 1, 5),
                  ddpc_malloc((size_t)ny * sizeof(int32_t)),
                  n,
                  c,
                  h,
                  w,
                  k,
                  st};
    for (int64_t i = 0; i < nx; i++)
        q.x[i] = 0.01f * (float)((i * 37) % nx);
    pool_loss(&q);
    float *dx = tu_alloc(nx);
    ddpc_maxpool2d_backward(dx, q.r, q.idx, n, c, h, w, k, st);
    CHECK(tu_grad_check("maxpool dx", q.x, dx, nx, 1, 1e-3f, pool_loss, &q) < 1e-3);
    ddpc_free(q.y);
    ddpc_free(q.x);
    ddpc_free(q.r);
    ddpc_free(q.idx);
    ddpc_free(dx);
}

int main(void)
{
    RUN_TEST(test_conv_stride1_pad1);
    RUN_TEST(test_conv_stride2_and_padding);
    RUN_TEST(test_conv_pointwise);
    RUN_TEST(test_conv_threads_agree);
    RUN_TEST(test_maxpool_forward_ties_and_odd_sizes);
    RUN_TEST(test_maxpool_backward_overlapping);
    RUN_TEST(test_maxpool_many_ties);
    return check_summary();
}
