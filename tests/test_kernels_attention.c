// SPDX-License-Identifier: MIT
/* Tests for attention.c: forward against a naive double causal MHA, causality (outputs at t ignore
 * inputs after t), saved probabilities, backward against central finite differences (T = 1, 5 and
 * T = 70, which crosses a causal row block), and that backward overwrites dqkv. */
#include "kernels_testutil.h"

typedef struct {
    float *out, *att, *qkv, *r, *ws;
    int64_t b, t, c, nh;
} att_ctx;

static double att_loss(void *p)
{
    att_ctx *a = p;
    ddpc_attention_forward(DDPC_PREC_FP32, a->out, a->att, a->qkv, a->b, a->t, a->c, a->nh, a->ws);
    return tu_dot(a->out, a->r, a->b * a->t * a->c);
}

/* out (b, t, c) in double precision, straight from the definition. */
static double naive_max_err(const att_ctx *a)
{
    int64_t hs = a->c / a->nh, C3 = 3 * a->c;
    double err = 0.0;
    double *p = malloc((size_t)a->t * sizeof(double));
    for (int64_t bi = 0; bi < a->b; bi++)
        for (int64_t h = 0; h < a->nh; h++)
            for (int64_t i = 0; i < a->t; i++) {
                const float *q = a->qkv + (bi * a->t + i) * C3 + h * hs;
                double mx = -1e300, sum = 0.0;
                for (int64_t j = 0; j <= i; j++) {
                    const float *k = a->qkv + (bi * a->t + j) * C3 + a->c + h * hs;
                    double s = 0.0;
                    for (int64_t d = 0; d < hs; d++)
                        s += (double)q[d] * k[d];
                    p[j] = s / sqrt((double)hs);
                    mx = fmax(mx, p[j]);
                }
                for (int64_t j = 0; j <= i; j++)
                    sum += (p[j] = exp(p[j] - mx));
                const float *att_row = a->att + ((bi * a->nh + h) * a->t + i) * a->t;
                for (int64_t j = 0; j < a->t; j++)
                    err = fmax(err, fabs((j <= i ? p[j] / sum : 0.0) - att_row[j]));
                for (int64_t d = 0; d < hs; d++) {
                    double o = 0.0;
                    for (int64_t j = 0; j <= i; j++)
                        o += p[j] / sum * a->qkv[(bi * a->t + j) * C3 + 2 * a->c + h * hs + d];
                    err = fmax(err, fabs(o - a->out[(bi * a->t + i) * a->c + h * hs + d]));
                }
            }
    free(p);
    return err;
}

static void check_attention(int64_t b, int64_t t, int64_t c, int64_t nh)
{
    int64_t nqkv = b * t * 3 * c, nout = b * t * c;
    att_ctx a = {tu_alloc(nout),
                 tu_alloc(b * nh * t * t),
                 tu_rand(nqkv, -1.5f, 1.5f, 1),
                 tu_rand(nout, -1, 1, 2),
                 tu_alloc((int64_t)ddpc_attention_workspace_floats(b, t, c, nh)),
                 b,
                 t,
                 c,
                 nh};
    /* Stale garbage in att above the diagonal must be overwritten with zeros. */
    ddpc_fill_f32(a.att, 7.0f, b * nh * t * t);
    att_loss(&a);
    CHECK(naive_max_err(&a) < 1e-5);

    /* Causality: changing q, k, v at the last position leaves every earlier output unchanged. */
    float *before = tu_alloc(nout);
    memcpy(before, a.out, (size_t)nout * 4);
    for (int64_t bi = 0; bi < b; bi++)
        for (int64_t j = 0; j < 3 * c; j++)
            a.qkv[(bi * t + t - 1) * 3 * c + j] += 0.5f;
    att_loss(&a);
    int changed = 0;
    for (int64_t bi = 0; bi < b; bi++)
        changed += memcmp(before + bi * t * c, a.out + bi * t * c, (size_t)((t - 1) * c) * 4) != 0;
    CHECK_EQ_INT(changed, 0);

    float *dqkv = tu_alloc(nqkv);
    att_loss(&a);
    ddpc_attention_backward(DDPC_PREC_FP32, dqkv, a.r, a.qkv, a.att, b, t, c, nh, a.ws);
    int64_t step = nqkv > 3000 ? 7 : 1;
    CHECK(tu_grad_check("attention dqkv", a.qkv, dqkv, nqkv, step, 1e-2f, att_loss, &a) < 1e-2);

    /* Backward overwrites: stale values (even NaN) in dqkv leave no trace, bit for bit. */
    float *again = tu_alloc(nqkv);
    ddpc_fill_f32(again, NAN, nqkv);
    att_loss(&a);
    ddpc_attention_backward(DDPC_PREC_FP32, again, a.r, a.qkv, a.att, b, t, c, nh, a.ws);
    CHECK(memcmp(again, dqkv, (size_t)nqkv * 4) == 0);
    float *bufs[] = {a.out, a.att, a.qkv, a.r, a.ws, before, dqkv, again};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        ddpc_free(bufs[i]);
}

static void test_attention_t1(void)
{
    check_attention(1, 1, 4, 1);
    check_attention(3, 1, 6, 2);
}

static void test_attention_t5(void)
{
    check_attention(1, 5, 6, 3); /* one job per head, fewer jobs than threads at nh = 1 below */
    check_attention(1, 5, 5, 1);
    check_attention(2, 5, 8, 2);
}

static void test_attention_crosses_row_block(void)
{
    check_attention(2, 70, 12, 2);
    check_attention(1, 129, 8, 1);
}

/* Large enough to split (batch, head) jobs across threads: results equal the one-thread run
 * bit for bit, since each job is computed by one thread in a fixed order. */
static void test_attention_threads_agree(void)
{
    int64_t b = 4, t = 64, c = 64, nh = 4, nqkv = b * t * 3 * c, nout = b * t * c,
            na = b * nh * t * t;
    float *qkv = tu_rand(nqkv, -1, 1, 3), *dout = tu_rand(nout, -1, 1, 4);
    float *ws = tu_alloc((int64_t)ddpc_attention_workspace_floats(b, t, c, nh));
    float *o1 = tu_alloc(nout), *o2 = tu_alloc(nout), *a1 = tu_alloc(na), *a2 = tu_alloc(na);
    float *d1 = tu_alloc(nqkv), *d2 = tu_alloc(nqkv);
    int threads = ddpc_kernels_threads();
    ddpc_kernels_set_threads(1);
    ddpc_attention_forward(DDPC_PREC_FP32, o1, a1, qkv, b, t, c, nh, ws);
    ddpc_attention_backward(DDPC_PREC_FP32, d1, dout, qkv, a1, b, t, c, nh, ws);
    ddpc_kernels_set_threads(2);
    ddpc_attention_forward(DDPC_PREC_FP32, o2, a2, qkv, b, t, c, nh, ws);
    ddpc_attention_backward(DDPC_PREC_FP32, d2, dout, qkv, a2, b, t, c, nh, ws);
    ddpc_kernels_set_threads(threads);
    CHECK(memcmp(o1, o2, (size_t)nout * 4) == 0);
    CHECK(memcmp(a1, a2, (size_t)na * 4) == 0);
    CHECK(memcmp(d1, d2, (size_t)nqkv * 4) == 0);
    float *bufs[] = {qkv, dout, ws, o1, o2, a1, a2, d1, d2};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        ddpc_free(bufs[i]);
}

int main(void)
{
    RUN_TEST(test_attention_t1);
    RUN_TEST(test_attention_t5);
    RUN_TEST(test_attention_crosses_row_block);
    RUN_TEST(test_attention_threads_agree);
    return check_summary();
}
