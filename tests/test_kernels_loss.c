// SPDX-License-Identifier: MIT
/* Tests for cross_entropy.c and dropout.c: softmax/loss against double references with
 * ignore_index and out-of-range targets, n_valid, gradient by finite differences, accumulation,
 * the backward over the probabilities bit for bit;
 * dropout masks equal to ddpc_rng_uniform_at, reproducible, keep fraction ~ 1 - p. */
#include "kernels_testutil.h"

typedef struct {
    float *probs, *logits;
    int32_t *targets;
    int64_t n, v;
} ce_ctx;

static double ce_loss(void *p)
{
    ce_ctx *c = p;
    int64_t nv;
    return ddpc_cross_entropy_forward(c->probs, NULL, c->logits, c->targets, c->n, c->v, -100, &nv);
}

static void test_cross_entropy_forward(void)
{
    enum { N = 6, V = 5 };
    int32_t targets[N] = {0, 4, -100, 2, 7, 1}; /* row 2 ignored, row 4 out of range */
    float *logits = tu_rand(N * V, -3, 3, 1), probs[N * V], losses[N];
    logits[5 * V + 1] = 1000.0f; /* a huge logit must not overflow */
    int64_t nv = -1;
    float mean = ddpc_cross_entropy_forward(probs, losses, logits, targets, N, V, -100, &nv);
    CHECK_EQ_INT(nv, 4);
    double total = 0.0;
    for (int i = 0; i < N; i++) {
        double mx = -1e300, sum = 0.0;
        for (int j = 0; j < V; j++)
            mx = fmax(mx, logits[i * V + j]);
        for (int j = 0; j < V; j++)
            sum += exp(logits[i * V + j] - mx);
        for (int j = 0; j < V; j++)
            CHECK_NEAR(probs[i * V + j], exp(logits[i * V + j] - mx) / sum, 1e-6);
        int valid = targets[i] >= 0 && targets[i] < V;
        double li = valid ? log(sum) - (logits[i * V + targets[i]] - mx) : 0.0;
        CHECK_NEAR(losses[i], li, 1e-5);
        total += li;
    }
    CHECK_NEAR(mean, total / 4.0, 1e-5);
    /* probs may alias logits; the same numbers come out. */
    float mean2 = ddpc_cross_entropy_forward(logits, NULL, logits, targets, N, V, -100, &nv);
    CHECK_NEAR(mean2, mean, 1e-6);
    CHECK(memcmp(logits, probs, sizeof probs) == 0);
    /* Every row ignored: loss 0, n_valid 0, and backward is a no-op. */
    int32_t none[N] = {-100, -100, -100, -100, -100, -100};
    CHECK(ddpc_cross_entropy_forward(probs, losses, logits, none, N, V, -100, &nv) == 0.0f);
    CHECK_EQ_INT(nv, 0);
    float d[N * V] = {0};
    ddpc_cross_entropy_backward(d, probs, none, N, V, -100, nv, 1.0f);
    CHECK(tu_max_abs(d, N * V) == 0.0);
    ddpc_free(logits);
}

static void test_cross_entropy_backward(void)
{
    int64_t n = 37, v = 29;
    int32_t *targets = ddpc_malloc((size_t)n * sizeof(int32_t));
    for (int64_t i = 0; i < n; i++)
        targets[i] = i % 5 == 3 ? -1 : (int32_t)((i * 11) % v);
    ce_ctx c = {tu_alloc(n * v), tu_rand(n * v, -2, 2, 2), targets, n, v};
    int64_t nv;
    ddpc_cross_entropy_forward(c.probs, NULL, c.logits, targets, n, v, -1, &nv);
    CHECK_EQ_INT(nv, n - 7);
    float *d = tu_alloc(n * v), *twice = tu_alloc(n * v);
    ddpc_cross_entropy_backward(d, c.probs, targets, n, v, -1, nv, 1.0f);
    /* ce_loss uses ignore_index -100, so make the ignored rows' targets -100 too: same rows. */
    for (int64_t i = 0; i < n; i++)
        targets[i] = targets[i] == -1 ? -100 : targets[i];
    CHECK(tu_grad_check("ce dlogits", c.logits, d, n * v, 1, 1e-2f, ce_loss, &c) < 1e-2);
    memcpy(twice, d, (size_t)(n * v) * 4);
    ce_loss(&c);
    ddpc_cross_entropy_backward(d, c.probs, targets, n, v, -100, nv, 3.0f);
    ddpc_axpy_f32(d, -4.0f, twice, n * v); /* accumulated: d = g + 3g */
    CHECK(tu_max_abs(d, n * v) < 1e-6);
    /* argmax accuracy: make rows 0 and 1 predict their targets, row 3 is ignored. */
    float scores[4 * 3] = {5, 1, 1, 1, 1, 5, 5, 1, 1, 9, 0, 0};
    int32_t tg[4] = {0, 2, 1, -100};
    CHECK_EQ_INT(ddpc_argmax_correct(scores, tg, 4, 3, -100), 2);
    ddpc_free(targets);
    ddpc_free(c.probs);
    ddpc_free(c.logits);
    ddpc_free(d);
    ddpc_free(twice);
}

static void test_cross_entropy_threaded_matches_serial(void)
{
    /* n * v large enough to fork: threaded (losses given) and serial (losses NULL) paths agree. */
    int64_t n = 300, v = 257;
    int32_t *targets = ddpc_malloc((size_t)n * sizeof(int32_t));
    for (int64_t i = 0; i < n; i++)
        targets[i] = i % 7 == 0 ? -100 : (int32_t)((i * 31) % v);
    float *logits = tu_rand(n * v, -4, 4, 11), *p1 = tu_alloc(n * v), *p2 = tu_alloc(n * v);
    float *losses = tu_alloc(n);
    int64_t nv1, nv2;
    float a = ddpc_cross_entropy_forward(p1, losses, logits, targets, n, v, -100, &nv1);
    float b = ddpc_cross_entropy_forward(p2, NULL, logits, targets, n, v, -100, &nv2);
    CHECK_EQ_INT(nv1, nv2);
    CHECK_EQ_INT(nv1, n - 43);
    CHECK(a == b);
    CHECK(memcmp(p1, p2, (size_t)(n * v) * 4) == 0);
    ddpc_free(targets);
    ddpc_free(logits);
    ddpc_free(p1);
    ddpc_free(p2);
    ddpc_free(losses);
}

/* The backward over the probabilities against the backward onto zeroed dlogits: the same bits at
 * 1 and 2 threads (n * v large enough to fork), at dloss 1 and an fp16 loss scale; ignored rows
 * (their probabilities NaN here: never read) and a batch without valid rows come out 0. */
static void test_cross_entropy_backward_inplace(void)
{
    int64_t n = 300, v = 257, nv;
    int32_t *targets = ddpc_malloc((size_t)n * sizeof(int32_t));
    for (int64_t i = 0; i < n; i++)
        targets[i] = i % 7 == 0 ? -100 : i % 11 == 5 ? (int32_t)v : (int32_t)((i * 31) % v);
    float *probs = tu_rand(n * v, -4, 4, 12), *ref = tu_alloc(n * v), *over = tu_alloc(n * v);
    ddpc_cross_entropy_forward(probs, NULL, probs, targets, n, v, -100, &nv);
    const float dlosses[2] = {1.0f, 65536.0f / 3.0f};
    for (int threads = 1; threads <= 2; threads++) {
        ddpc_kernels_set_threads(threads);
        for (int k = 0; k < 2; k++) {
            memset(ref, 0, (size_t)(n * v) * 4);
            ddpc_cross_entropy_backward(ref, probs, targets, n, v, -100, nv, dlosses[k]);
            memcpy(over, probs, (size_t)(n * v) * 4);
            for (int64_t i = 0; i < n; i += 7) /* the ignored rows */
                for (int64_t j = 0; j < v; j++)
                    over[i * v + j] = NAN;
            ddpc_cross_entropy_backward_inplace(over, targets, n, v, -100, nv, dlosses[k]);
            CHECK(memcmp(over, ref, (size_t)(n * v) * 4) == 0);
        }
    }
    ddpc_kernels_set_threads(1);
    ddpc_cross_entropy_backward_inplace(over, targets, n, v, -100, 0, 1.0f);
    CHECK(tu_max_abs(over, n * v) == 0.0);
    ddpc_free(targets);
    ddpc_free(probs);
    ddpc_free(ref);
    ddpc_free(over);
}

static void test_dropout_mask(void)
{
    int64_t n = 1 << 20;
    float p = 0.3f;
    float *x = tu_rand(n, 0.5f, 1.5f, 3), *y = tu_alloc(n), *y2 = tu_alloc(n);
    ddpc_dropout_forward(y, x, n, p, 1234, 5);
    ddpc_dropout_forward(y2, x, n, p, 1234, 5);
    CHECK(memcmp(y, y2, (size_t)n * 4) == 0);
    int64_t kept = 0, mismatched = 0;
    for (int64_t i = 0; i < n; i++) {
        int keep = ddpc_rng_uniform_at(1234, 5, (uint64_t)i) >= p;
        kept += keep;
        mismatched += y[i] != (keep ? x[i] * (1.0f / (1.0f - p)) : 0.0f);
    }
    CHECK_EQ_INT(mismatched, 0);
    CHECK_NEAR((double)kept / (double)n, 1.0 - p, 2e-3);
    ddpc_dropout_forward(y2, x, n, p, 1234, 6); /* another stream, another mask */
    CHECK(memcmp(y, y2, (size_t)n * 4) != 0);
    /* Backward routes through the same mask and accumulates. */
    float *dx = tu_alloc(n);
    ddpc_dropout_backward(dx, x, n, p, 1234, 5);
    ddpc_dropout_backward(dx, x, n, p, 1234, 5);
    for (int64_t i = 0; i < n; i++)
        mismatched += dx[i] != 2.0f * y[i];
    CHECK_EQ_INT(mismatched, 0);
    /* In place, and p = 0 is the identity. */
    ddpc_dropout_forward(x, x, n, p, 1234, 5);
    CHECK(memcmp(x, y, (size_t)n * 4) == 0);
    ddpc_dropout_forward(y2, x, n, 0.0f, 1, 1);
    CHECK(memcmp(x, y2, (size_t)n * 4) == 0);
    ddpc_free(x);
    ddpc_free(y);
    ddpc_free(y2);
    ddpc_free(dx);
}

int main(void)
{
    RUN_TEST(test_cross_entropy_forward);
    RUN_TEST(test_cross_entropy_backward);
    RUN_TEST(test_cross_entropy_threaded_matches_serial);
    RUN_TEST(test_cross_entropy_backward_inplace);
    RUN_TEST(test_dropout_mask);
    return check_summary();
}
