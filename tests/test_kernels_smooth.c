// SPDX-License-Identifier: MIT
/* Tests for cross_entropy_smooth.c and positional.c: the label-smoothed loss against a double
 * reference (ignored rows, eps 0 equal to the plain kernel), its gradient by central finite
 * differences and accumulation; sinusoidal positions against the formula; the scaled embedding's
 * forward and its gradient by finite differences. */
#include "kernels_testutil.h"

typedef struct {
    float *probs, *logits;
    int32_t *targets;
    int64_t n, v;
    float eps;
} ce_ctx;

static double ce_loss(void *p)
{
    ce_ctx *c = p;
    int64_t nv;
    return ddpc_cross_entropy_smooth_forward(c->probs, NULL, c->logits, c->targets, c->n, c->v, 0,
                                             c->eps, &nv);
}

static void test_smooth_forward(void)
{
    enum { N = 6, V = 7 };
    int32_t targets[N] = {3, 0, 6, 2, 9, 1}; /* 0 ignored (ignore_index 0), 9 out of range */
    float *logits = tu_rand(N * V, -3, 3, 1), probs[N * V], losses[N];
    logits[5 * V + 2] = 500.0f; /* a huge logit must not overflow */
    const float eps = 0.1f;
    int64_t nv = -1;
    float mean =
        ddpc_cross_entropy_smooth_forward(probs, losses, logits, targets, N, V, 0, eps, &nv);
    CHECK_EQ_INT(nv, 4);
    double total = 0.0;
    for (int i = 0; i < N; i++) {
        double mx = -1e300, sum = 0.0, sum_logp = 0.0;
        for (int j = 0; j < V; j++)
            mx = fmax(mx, logits[i * V + j]);
        for (int j = 0; j < V; j++)
            sum += exp(logits[i * V + j] - mx);
        for (int j = 0; j < V; j++) {
            double logp = logits[i * V + j] - mx - log(sum);
            CHECK_NEAR(probs[i * V + j], exp(logp), 1e-6);
            sum_logp += logp;
        }
        int valid = targets[i] > 0 && targets[i] < V;
        double li =
            valid ? -(1.0 - eps) * (logits[i * V + targets[i]] - mx - log(sum)) - eps / V * sum_logp
                  : 0.0;
        CHECK_NEAR(losses[i], li, 1e-5);
        total += li;
    }
    CHECK_NEAR(mean, total / 4.0, 1e-5);
    /* eps = 0 is the plain cross-entropy; probs may alias logits. */
    float plain = ddpc_cross_entropy_forward(probs, NULL, logits, targets, N, V, 0, &nv);
    float smooth0 =
        ddpc_cross_entropy_smooth_forward(logits, NULL, logits, targets, N, V, 0, 0.0f, &nv);
    CHECK_NEAR(smooth0, plain, 1e-6);
    for (int i = 0; i < N * V; i++)
        CHECK_NEAR(logits[i], probs[i], 1e-6);
    ddpc_free(logits);
}

static void test_smooth_backward(void)
{
    int64_t n = 23, v = 17;
    int32_t *targets = ddpc_malloc((size_t)n * sizeof(int32_t));
    for (int64_t i = 0; i < n; i++)
        targets[i] = (int32_t)((i * 5) % v); /* rows 0 and 17 ignored */
    ce_ctx c = {tu_alloc(n * v), tu_rand(n * v, -2, 2, 2), targets, n, v, 0.2f};
    int64_t nv;
    ddpc_cross_entropy_smooth_forward(c.probs, NULL, c.logits, targets, n, v, 0, c.eps, &nv);
    CHECK_EQ_INT(nv, n - 2);
    float *d = tu_alloc(n * v);
    ddpc_cross_entropy_smooth_backward(d, c.probs, targets, n, v, 0, c.eps, nv, 1.0f);
    CHECK(tu_grad_check("smoothed ce", c.logits, d, n * v, 1, 1e-2f, ce_loss, &c) < 2e-3);
    /* Ignored rows get no gradient; backward accumulates (a second call doubles). */
    CHECK(tu_max_abs(d, v) == 0.0);
    float *d2 = tu_alloc(n * v);
    memcpy(d2, d, (size_t)(n * v) * 4);
    ddpc_cross_entropy_smooth_forward(c.probs, NULL, c.logits, targets, n, v, 0, c.eps, &nv);
    ddpc_cross_entropy_smooth_backward(d2, c.probs, targets, n, v, 0, c.eps, nv, 1.0f);
    for (int64_t i = 0; i < n * v; i++)
        CHECK_NEAR(d2[i], 2.0 * d[i], 1e-6);
    ddpc_free(d2);
    ddpc_free(d);
    ddpc_free(c.probs);
    ddpc_free(c.logits);
    ddpc_free(targets);
}

static void test_sinusoidal_positions(void)
{
    int64_t t = 9, c = 6;
    float *pe = tu_alloc(t * c);
    ddpc_sinusoidal_positions(pe, t, c);
    for (int64_t p = 0; p < t; p++)
        for (int64_t i = 0; i < c; i += 2) {
            double a = (double)p / pow(10000.0, (double)i / (double)c);
            CHECK_NEAR(pe[p * c + i], sin(a), 1e-6);
            CHECK_NEAR(pe[p * c + i + 1], cos(a), 1e-6);
        }
    float odd[3 * 5];
    ddpc_sinusoidal_positions(odd, 3, 5); /* an odd width ends on a sine */
    CHECK_NEAR(odd[2 * 5 + 4], sin(2.0 / pow(10000.0, 4.0 / 5.0)), 1e-6);
    ddpc_free(pe);
}

typedef struct {
    float *y, *w, *pe, *r;
    int32_t *tok;
    int64_t b, t, c;
    float scale;
} emb_ctx;

static double emb_loss(void *p)
{
    emb_ctx *e = p;
    ddpc_embedding_scaled_forward(e->y, e->tok, e->w, e->scale, e->pe, e->b, e->t, e->c);
    return tu_dot(e->y, e->r, e->b * e->t * e->c);
}

static void check_scaled_embedding(int64_t b, int64_t t, int64_t c, int64_t v)
{
    int32_t *tok = ddpc_malloc((size_t)(b * t) * sizeof(int32_t));
    for (int64_t i = 0; i < b * t; i++)
        tok[i] = (int32_t)((i * 3 + 1) % v);
    emb_ctx e = {tu_alloc(b * t * c),
                 tu_rand(v * c, -1, 1, 3),
                 tu_alloc(t * c),
                 tu_rand(b * t * c, -1, 1, 4),
                 tok,
                 b,
                 t,
                 c,
                 sqrtf((float)c)};
    ddpc_sinusoidal_positions(e.pe, t, c);
    emb_loss(&e);
    for (int64_t i = 0; i < b * t * c; i++) {
        int64_t row = i / c, j = i % c;
        CHECK_NEAR(e.y[i], e.scale * e.w[tok[row] * c + j] + e.pe[(row % t) * c + j], 1e-6);
    }
    float *dw = tu_alloc(v * c);
    ddpc_embedding_scaled_backward(dw, e.r, tok, e.scale, b, t, c);
    CHECK(tu_grad_check("scaled embedding", e.w, dw, v * c, 1, 1e-2f, emb_loss, &e) < 1e-3);
    float *bufs[] = {e.y, e.w, e.pe, e.r, dw};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        ddpc_free(bufs[i]);
    ddpc_free(tok);
}

static void test_scaled_embedding(void)
{
    check_scaled_embedding(1, 1, 2, 1);
    check_scaled_embedding(2, 5, 8, 4);
    check_scaled_embedding(4, 33, 70, 11); /* threaded, channel blocks with a tail */
}

int main(void)
{
    RUN_TEST(test_smooth_forward);
    RUN_TEST(test_smooth_backward);
    RUN_TEST(test_sinusoidal_positions);
    RUN_TEST(test_scaled_embedding);
    return check_summary();
}
