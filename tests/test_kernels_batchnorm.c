// SPDX-License-Identifier: MIT
/* Tests for batchnorm.c: forward against a double reference (batch statistics, running statistics
 * with torch's unbiased update, evaluation mode), backward against central finite differences of
 * the whole training-mode BatchNorm, and SyncBatchNorm's identity: statistics summed over two
 * halves of a batch give the same output and input gradient as the whole batch. */
#include "kernels_testutil.h"

#include <string.h>

typedef struct {
    float *y, *x, *w, *b, *r, *mean, *invstd;
    double *sums;
    int64_t n, c, hw;
} bn_ctx;

/* Training-mode BatchNorm forward; L = sum(y * r). */
static double bn_loss(void *p)
{
    bn_ctx *k = p;
    ddpc_batchnorm_sums(k->sums, k->x, k->n, k->c, k->hw);
    ddpc_batchnorm_stats(k->mean, k->invstd, NULL, NULL, k->sums, k->c, 0.1f, 1e-5f);
    ddpc_batchnorm_apply(k->y, k->x, k->mean, k->invstd, k->w, k->b, k->n, k->c, k->hw);
    return tu_dot(k->y, k->r, k->n * k->c * k->hw);
}

static void check_batchnorm(int64_t n, int64_t c, int64_t hw, float offset)
{
    int64_t total = n * c * hw;
    bn_ctx k = {tu_alloc(total), tu_rand(total, -2, 2, 1), tu_rand(c, 0.5f, 1.5f, 2),
                tu_rand(c, -1, 1, 3), tu_rand(total, -1, 1, 4), tu_alloc(c), tu_alloc(c),
                ddpc_calloc((size_t)(2 * c + 1), sizeof(double)), n, c, hw};
    for (int64_t i = 0; i < total; i++)
        k.x[i] += offset;
    float *rm = tu_rand(c, -1, 1, 5), *rv = tu_rand(c, 0.5f, 2, 6);
    float *rm0 = tu_alloc(c), *rv0 = tu_alloc(c);
    memcpy(rm0, rm, (size_t)c * sizeof(float));
    memcpy(rv0, rv, (size_t)c * sizeof(float));
    bn_loss(&k);
    ddpc_batchnorm_stats(k.mean, k.invstd, rm, rv, k.sums, c, 0.1f, 1e-5f);
    double err = 0.0;
    for (int64_t ch = 0; ch < c; ch++) {
        double m = 0.0, v = 0.0, cnt = (double)(n * hw);
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < hw; j++)
                m += k.x[(i * c + ch) * hw + j];
        m /= cnt;
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < hw; j++) {
                double d = k.x[(i * c + ch) * hw + j] - m;
                v += d * d;
            }
        double rs = 1.0 / sqrt(v / cnt + 1e-5);
        CHECK_NEAR(k.mean[ch], m, 1e-5 * (1 + fabs(m)));
        CHECK_NEAR(k.invstd[ch], rs, 1e-5 * rs);
        CHECK_NEAR(rm[ch], 0.9 * rm0[ch] + 0.1 * m, 1e-5 * (1 + fabs(m)));
        double unbiased = cnt > 1 ? v / (cnt - 1) : v / cnt;
        CHECK_NEAR(rv[ch], 0.9 * rv0[ch] + 0.1 * unbiased, 1e-5 * (1 + unbiased));
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < hw; j++) {
                int64_t at = (i * c + ch) * hw + j;
                double ref = (k.x[at] - m) * rs * k.w[ch] + k.b[ch];
                err = fmax(err, fabs(ref - k.y[at]));
            }
    }
    CHECK(err < 1e-4);

    /* Backward: the parameter gradients from this batch's sums, the input's from all of them. */
    bn_loss(&k);
    double *gs = ddpc_calloc((size_t)(2 * c), sizeof(double));
    float *dx = tu_alloc(total), *dw = tu_alloc(c), *db = tu_alloc(c);
    ddpc_batchnorm_backward_sums(gs, k.r, k.x, k.mean, k.invstd, n, c, hw);
    ddpc_batchnorm_backward_params(dw, db, gs, c);
    ddpc_batchnorm_backward_input(dx, k.r, k.x, k.mean, k.invstd, k.w, gs, (double)(n * hw), n,
                                  c, hw);
    int64_t step = total > 2000 ? 37 : 1;
    CHECK(tu_grad_check("bn dx", k.x, dx, total, step, 1e-2f, bn_loss, &k) < 1e-2);
    CHECK(tu_grad_check("bn dw", k.w, dw, c, 1, 1e-2f, bn_loss, &k) < 1e-2);
    CHECK(tu_grad_check("bn db", k.b, db, c, 1, 1e-2f, bn_loss, &k) < 1e-2);

    /* Evaluation mode normalises with the running statistics. */
    float *ey = tu_alloc(total);
    ddpc_batchnorm_eval_stats(k.mean, k.invstd, rm, rv, c, 1e-5f);
    ddpc_batchnorm_apply(ey, k.x, k.mean, k.invstd, k.w, k.b, n, c, hw);
    double eerr = 0.0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t ch = 0; ch < c; ch++)
            for (int64_t j = 0; j < hw; j++) {
                int64_t at = (i * c + ch) * hw + j;
                double ref = (k.x[at] - rm[ch]) / sqrt((double)rv[ch] + 1e-5) * k.w[ch] + k.b[ch];
                eerr = fmax(eerr, fabs(ref - ey[at]));
            }
    CHECK(eerr < 1e-4);
    float *bufs[] = {k.y, k.x, k.w, k.b, k.r, k.mean, k.invstd, rm, rv, rm0, rv0, dx, dw, db, ey};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        ddpc_free(bufs[i]);
    ddpc_free(k.sums);
    ddpc_free(gs);
}

static void test_batchnorm(void)
{
    check_batchnorm(2, 1, 1, 0.0f);   /* BatchNorm1d, two samples */
    check_batchnorm(7, 5, 1, 0.0f);   /* BatchNorm1d */
    check_batchnorm(3, 4, 6, 0.0f);   /* BatchNorm2d */
    check_batchnorm(4, 3, 25, 20.0f); /* a large mean */
    check_batchnorm(16, 8, 81, 0.0f); /* threaded paths */
}

/* SyncBatchNorm: two "ranks" holding halves of a batch add their sums and normalise together; the
 * outputs and input gradients equal one rank's on the whole batch. */
static void test_split_batch_equals_whole(void)
{
    int64_t n = 6, c = 3, hw = 10, half = n / 2, part = half * c * hw, total = n * c * hw;
    float *x = tu_rand(total, -3, 3, 11), *dy = tu_rand(total, -1, 1, 12);
    float *w = tu_rand(c, 0.5f, 1.5f, 13), *b = tu_rand(c, -1, 1, 14);
    float *mean = tu_alloc(c), *invstd = tu_alloc(c), *y = tu_alloc(total), *dx = tu_alloc(total);
    float *ys = tu_alloc(total), *dxs = tu_alloc(total);
    double whole[7], a[7], bsum[7], g[6], ga[6], gb[6];
    ddpc_batchnorm_sums(whole, x, n, c, hw);
    ddpc_batchnorm_stats(mean, invstd, NULL, NULL, whole, c, 0.1f, 1e-5f);
    ddpc_batchnorm_apply(y, x, mean, invstd, w, b, n, c, hw);
    ddpc_batchnorm_backward_sums(g, dy, x, mean, invstd, n, c, hw);
    ddpc_batchnorm_backward_input(dx, dy, x, mean, invstd, w, g, whole[2 * c], n, c, hw);

    ddpc_batchnorm_sums(a, x, half, c, hw);
    ddpc_batchnorm_sums(bsum, x + part, half, c, hw);
    for (int i = 0; i < 7; i++)
        a[i] += bsum[i]; /* the all-reduce */
    CHECK_NEAR(a[2 * c], (double)(n * hw), 0.0);
    ddpc_batchnorm_stats(mean, invstd, NULL, NULL, a, c, 0.1f, 1e-5f);
    ddpc_batchnorm_apply(ys, x, mean, invstd, w, b, half, c, hw);
    ddpc_batchnorm_apply(ys + part, x + part, mean, invstd, w, b, half, c, hw);
    ddpc_batchnorm_backward_sums(ga, dy, x, mean, invstd, half, c, hw);
    ddpc_batchnorm_backward_sums(gb, dy + part, x + part, mean, invstd, half, c, hw);
    for (int i = 0; i < 6; i++)
        ga[i] += gb[i];
    ddpc_batchnorm_backward_input(dxs, dy, x, mean, invstd, w, ga, a[2 * c], half, c, hw);
    ddpc_batchnorm_backward_input(dxs + part, dy + part, x + part, mean, invstd, w, ga, a[2 * c],
                                  half, c, hw);
    CHECK(tu_rel_err(ys, y, total, 1e-6) < 1e-5);
    CHECK(tu_rel_err(dxs, dx, total, 1e-6) < 1e-5);
    /* In place (dx = dy) gives the same bits. */
    float *inplace = tu_alloc(total);
    memcpy(inplace, dy, (size_t)total * sizeof(float));
    ddpc_batchnorm_backward_input(inplace, inplace, x, mean, invstd, w, ga, a[2 * c], n, c, hw);
    CHECK(memcmp(inplace, dxs, (size_t)total * sizeof(float)) == 0);
    float *bufs[] = {x, dy, w, b, mean, invstd, y, dx, ys, dxs, inplace};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        ddpc_free(bufs[i]);
}

int main(void)
{
    RUN_TEST(test_batchnorm);
    RUN_TEST(test_split_batch_equals_whole);
    return check_summary();
}
