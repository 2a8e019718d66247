// SPDX-License-Identifier: MIT
/* Tests for linear.c and activation.c: forward against naive references, backward against
 * central finite differences of L = sum(y * r), accumulation (+=) and NULL-gradient skipping, the
 * fused residual forward, and GELU backward's overwrite / in-place form. */
#include "kernels_testutil.h"

typedef struct {
    float *y, *x, *w, *b, *r;
    int64_t n, in, out;
} linear_ctx;

static double linear_loss(void *p)
{
    linear_ctx *c = p;
    ddpc_linear_forward(DDPC_PREC_FP32, c->y, c->x, c->w, c->b, c->n, c->in, c->out);
    return tu_dot(c->y, c->r, c->n * c->out);
}

static void check_linear(int64_t n, int64_t in, int64_t out)
{
    linear_ctx c = {tu_alloc(n * out),
                    tu_rand(n * in, -1, 1, 1),
                    tu_rand(out * in, -1, 1, 2),
                    tu_rand(out, -1, 1, 3),
                    tu_rand(n * out, -1, 1, 4),
                    n,
                    in,
                    out};
    ddpc_linear_forward(DDPC_PREC_FP32, c.y, c.x, c.w, c.b, n, in, out);
    double ferr = 0.0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t o = 0; o < out; o++) {
            double s = c.b[o];
            for (int64_t k = 0; k < in; k++)
                s += (double)c.x[i * in + k] * c.w[o * in + k];
            ferr = fmax(ferr, fabs(s - c.y[i * out + o]));
        }
    CHECK(ferr < 1e-5 * (double)in);
    float *dx = tu_alloc(n * in), *dw = tu_alloc(out * in), *db = tu_alloc(out);
    ddpc_linear_backward(DDPC_PREC_FP32, dx, dw, db, c.r, c.x, c.w, n, in, out);
    CHECK(tu_grad_check("linear dx", c.x, dx, n * in, 1, 1e-2f, linear_loss, &c) < 1e-3);
    CHECK(tu_grad_check("linear dw", c.w, dw, out * in, 1, 1e-2f, linear_loss, &c) < 1e-3);
    CHECK(tu_grad_check("linear db", c.b, db, out, 1, 1e-2f, linear_loss, &c) < 1e-3);
    /* A second call accumulates: every gradient doubles. */
    float *dx1 = tu_alloc(n * in), *dw1 = tu_alloc(out * in), *db1 = tu_alloc(out);
    memcpy(dx1, dx, (size_t)(n * in) * 4);
    memcpy(dw1, dw, (size_t)(out * in) * 4);
    memcpy(db1, db, (size_t)out * 4);
    ddpc_linear_backward(DDPC_PREC_FP32, dx, dw, db, c.r, c.x, c.w, n, in, out);
    ddpc_axpy_f32(dx1, 1.0f, dx1, n * in);
    ddpc_axpy_f32(dw1, 1.0f, dw1, out * in);
    ddpc_axpy_f32(db1, 1.0f, db1, out);
    CHECK(tu_rel_err(dx, dx1, n * in, 1e-6) < 1e-6);
    CHECK(tu_rel_err(dw, dw1, out * in, 1e-6) < 1e-6);
    CHECK(tu_rel_err(db, db1, out, 1e-6) < 1e-6);
    /* NULL gradients are skipped; the others still accumulate. */
    ddpc_linear_backward(DDPC_PREC_FP32, NULL, NULL, db, c.r, c.x, c.w, n, in, out);
    ddpc_axpy_f32(db1, 0.5f, db1, out);
    CHECK(tu_rel_err(db, db1, out, 1e-6) < 1e-6);
    /* Without bias, forward is the bare matmul. */
    float *y2 = tu_alloc(n * out);
    linear_loss(&c);
    ddpc_linear_forward(DDPC_PREC_FP32, y2, c.x, c.w, NULL, n, in, out);
    CHECK_NEAR(y2[0] + c.b[0], c.y[0], 1e-5);
    float *bufs[] = {c.y, c.x, c.w, c.b, c.r, dx, dw, db, dx1, dw1, db1, y2};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        ddpc_free(bufs[i]);
}

static void test_linear(void)
{
    check_linear(1, 1, 1);
    check_linear(3, 7, 5);
    check_linear(13, 33, 17);
    check_linear(70, 9, 130); /* big enough for the threaded bias path */
}

typedef struct {
    float *y, *x, *r;
    int64_t n;
    int gelu;
} act_ctx;

static double act_loss(void *p)
{
    act_ctx *c = p;
    if (c->gelu)
        ddpc_gelu_forward(c->y, c->x, c->n);
    else
        ddpc_relu_forward(c->y, c->x, c->n);
    return tu_dot(c->y, c->r, c->n);
}

static void test_gelu(void)
{
    int64_t n = 40037; /* threaded, odd */
    act_ctx c = {tu_alloc(n), tu_rand(n, -6, 6, 5), tu_rand(n, -1, 1, 6), n, 1};
    c.x[0] = -100.0f;
    c.x[1] = 100.0f;
    c.x[2] = 0.0f;
    c.x[3] = 1e-6f;
    ddpc_gelu_forward(c.y, c.x, n);
    double err = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double v = c.x[i];
        double ref = 0.5 * v * (1.0 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
        err = fmax(err, fabs(ref - c.y[i]) / fmax(1.0, fabs(ref)));
    }
    CHECK(err < 1e-6);
    CHECK(fabsf(c.y[0]) < 1e-30f && c.y[1] == 100.0f);
    float *dx = tu_alloc(n);
    ddpc_fill_f32(dx, NAN, n); /* backward overwrites: stale values leave no trace */
    ddpc_gelu_backward(dx, c.r, c.x, n);
    CHECK(tu_grad_check("gelu dx", c.x, dx, n, 97, 1e-3f, act_loss, &c) < 1e-2);
    /* In place (dx == dy) gives the same bits. */
    memcpy(c.y, c.r, (size_t)n * 4);
    ddpc_gelu_backward(c.y, c.y, c.x, n);
    CHECK(memcmp(c.y, dx, (size_t)n * 4) == 0);
    ddpc_free(c.y);
    ddpc_free(c.x);
    ddpc_free(c.r);
    ddpc_free(dx);
}

static void test_relu(void)
{
    int64_t n = 1001;
    act_ctx c = {tu_alloc(n), tu_rand(n, -1, 1, 7), tu_rand(n, -1, 1, 8), n, 0};
    ddpc_relu_forward(c.y, c.x, n);
    int bad = 0;
    for (int64_t i = 0; i < n; i++)
        bad += c.y[i] != (c.x[i] > 0 ? c.x[i] : 0.0f);
    CHECK_EQ_INT(bad, 0);
    float *dx = tu_alloc(n);
    ddpc_relu_backward(dx, c.r, c.y, n);
    ddpc_relu_backward(dx, c.r, c.y, n);
    for (int64_t i = 0; i < n; i++)
        bad += dx[i] != (c.x[i] > 0 ? 2.0f * c.r[i] : 0.0f);
    CHECK_EQ_INT(bad, 0);
    ddpc_relu_forward(c.x, c.x, n); /* in place */
    CHECK(memcmp(c.x, c.y, (size_t)n * 4) == 0);
    ddpc_free(c.y);
    ddpc_free(c.x);
    ddpc_free(c.r);
    ddpc_free(dx);
}

/* y = r + x @ w^T + b against the plain linear plus an add, for r separate, r aliasing y, and b
 * or r absent. */
static void test_linear_residual(void)
{
    int64_t n = 37, in = 19, out = 300; /* n * out above the threaded seeding threshold */
    float *x = tu_rand(n * in, -1, 1, 11), *w = tu_rand(out * in, -1, 1, 12);
    float *b = tu_rand(out, -1, 1, 13), *r = tu_rand(n * out, -1, 1, 14);
    float *y = tu_alloc(n * out), *ref = tu_alloc(n * out), *plain = tu_alloc(n * out);
    ddpc_linear_forward(DDPC_PREC_FP32, plain, x, w, b, n, in, out);
    ddpc_add_f32(ref, plain, r, n * out);
    ddpc_fill_f32(y, NAN, n * out);
    ddpc_linear_residual_forward(DDPC_PREC_FP32, y, x, w, b, r, n, in, out);
    CHECK(tu_rel_err(y, ref, n * out, 1.0) < 1e-6);
    memcpy(y, r, (size_t)(n * out) * 4);
    ddpc_linear_residual_forward(DDPC_PREC_FP32, y, x, w, b, y, n, in,
                                 out); /* in place: y += linear(x) */
    CHECK(tu_rel_err(y, ref, n * out, 1.0) < 1e-6);
    ddpc_linear_residual_forward(DDPC_PREC_FP32, y, x, w, b, NULL, n, in,
                                 out); /* no residual: plain linear */
    CHECK(memcmp(y, plain, (size_t)(n * out) * 4) == 0);
    ddpc_linear_forward(DDPC_PREC_FP32, plain, x, w, NULL, n, in, out);
    ddpc_add_f32(ref, plain, r, n * out);
    ddpc_linear_residual_forward(DDPC_PREC_FP32, y, x, w, NULL, r, n, in, out); /* no bias */
    CHECK(tu_rel_err(y, ref, n * out, 1.0) < 1e-6);
    float *bufs[] = {x, w, b, r, y, ref, plain};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        ddpc_free(bufs[i]);
}

/* The bias gradient adds rows in order per column: every thread count, and widths that cross the
 * 1024-column strip and split unevenly between threads, give the serial double-checked sums. */
static void test_bias_grad_threads(void)
{
    int64_t n = 130, out = 1100; /* n * out above the threaded threshold */
    float *dy = tu_rand(n * out, -1, 1, 15), *x = tu_rand(n, -1, 1, 16), *w = tu_alloc(out);
    float *db1 = tu_alloc(out), *db = tu_alloc(out);
    for (int64_t j = 0; j < out; j++) {
        float s = 0.0f;
        for (int64_t i = 0; i < n; i++)
            s += dy[i * out + j];
        db1[j] = 1.0f + s; /* starts at 1: the kernel accumulates */
    }
    int threads = ddpc_kernels_threads();
    for (int t = 1; t <= 3; t++) {
        ddpc_kernels_set_threads(t);
        ddpc_fill_f32(db, 1.0f, out);
        ddpc_linear_backward(DDPC_PREC_FP32, NULL, NULL, db, dy, x, w, n, 1, out);
        CHECK(memcmp(db, db1, (size_t)out * 4) == 0);
    }
    ddpc_kernels_set_threads(threads);
    float *bufs[] = {dy, x, w, db1, db};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        ddpc_free(bufs[i]);
}

int main(void)
{
    RUN_TEST(test_linear_residual);
    RUN_TEST(test_bias_grad_threads);
    RUN_TEST(test_linear);
    RUN_TEST(test_gelu);
    RUN_TEST(test_relu);
    return check_summary();
}
