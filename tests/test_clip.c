// SPDX-License-Identifier: MIT
/* Gradient clipping (src/optim/clip.c): sum of squares, no-op under the max norm, exact
 * torch-style scaling over it, the split sumsq/scale path a distributed caller uses. */
#include <ddpc/optim.h>

#include "check.h"

static void test_sumsq(void)
{
    const float g[3] = {3.0f, -4.0f, 0.0f};
    CHECK(ddpc_grad_sumsq(g, 3) == 25.0);
    CHECK(ddpc_grad_sumsq(g, 0) == 0.0);
    /* Large enough for the threaded path; sums of halves add up (up to rounding). */
    enum { N = 200001 };
    float *big = malloc(N * sizeof(float));
    double ref = 0.0;
    for (int i = 0; i < N; i++) {
        big[i] = sinf(0.001f * (float)i);
        ref += (double)big[i] * big[i];
    }
    double s = ddpc_grad_sumsq(big, N);
    CHECK_NEAR(s, ref, 1e-12);
    CHECK(ddpc_grad_sumsq(big, N) == s); /* deterministic */
    CHECK_NEAR(ddpc_grad_sumsq(big, N / 2) + ddpc_grad_sumsq(big + N / 2, N - N / 2), s, 1e-12);
    free(big);
}

static void test_under_max_is_noop(void)
{
    float g[2] = {3.0f, 4.0f};
    CHECK(ddpc_grad_clip_scale(g, 2, 5.0, 10.0f) == 1.0f);
    CHECK(g[0] == 3.0f && g[1] == 4.0f);
    CHECK_NEAR(ddpc_clip_grad_norm(g, 2, 5.0f), 5.0, 1e-7); /* 5/(5+1e-6) < 1: clips, as torch */
    CHECK_NEAR(g[0], 3.0 * 5.0 / (5.0 + 1e-6), 1e-7);
}

static void test_over_max_scales_exactly(void)
{
    float g[2] = {3.0f, 4.0f};
    float norm = ddpc_clip_grad_norm(g, 2, 1.0f);
    CHECK(norm == 5.0f);
    const float coef = 1.0f / (5.0f + 1e-6f);
    CHECK(g[0] == 3.0f * coef && g[1] == 4.0f * coef);
    CHECK_NEAR(sqrt(ddpc_grad_sumsq(g, 2)), 1.0, 1e-6);

    float h[2] = {3.0f, 4.0f};
    CHECK(ddpc_grad_clip_scale(h, 2, 10.0, 2.0f) == 2.0f / (10.0f + 1e-6f));
    CHECK_NEAR(h[0], 0.6, 1e-6);
}

static void test_non_finite_norm_is_left_alone(void)
{
    float g[2] = {3.0f, 4.0f};
    CHECK(ddpc_grad_clip_scale(g, 2, INFINITY, 1.0f) == 1.0f);
    CHECK(ddpc_grad_clip_scale(g, 2, NAN, 1.0f) == 1.0f);
    CHECK(g[0] == 3.0f && g[1] == 4.0f);
}

int main(void)
{
    RUN_TEST(test_sumsq);
    RUN_TEST(test_under_max_is_noop);
    RUN_TEST(test_over_max_scales_exactly);
    RUN_TEST(test_non_finite_norm_is_left_alone);
    return check_summary();
}
