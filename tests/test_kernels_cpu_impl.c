// SPDX-License-Identifier: MIT
/* Tests for src/kernels/cpu/cpu_impl.h: the vectorisable expf (accuracy over its whole range,
 * clamping at the ends), the bit-mask select, and the row max / exp-sum helpers. */
#include "kernels/cpu/cpu_impl.h"

#include "kernels_testutil.h"

static void test_expf_accuracy(void)
{
    double worst = 0.0;
    for (int i = 0; i <= 200000; i++) {
        float x = -87.0f + 175.0f * (float)i / 200000.0f;
        double ref = exp((double)x), got = ddpc__expf(x);
        worst = fmax(worst, fabs(got - ref) / ref);
    }
    CHECK(worst < 4e-7); /* a few ulp */
    CHECK(ddpc__expf(0.0f) == 1.0f);
    CHECK(ddpc__expf(-1000.0f) < 1e-37f && ddpc__expf(-1000.0f) >= 0.0f);
    CHECK(ddpc__expf(-INFINITY) < 1e-37f);
    CHECK(isfinite(ddpc__expf(1000.0f)) && ddpc__expf(1000.0f) > 1e38f);
    CHECK(isfinite(ddpc__expf(INFINITY)));
}

static void test_select_and_row_helpers(void)
{
    CHECK(ddpc__select(1, 2.0f, 3.0f) == 2.0f);
    CHECK(ddpc__select(0, 2.0f, 3.0f) == 3.0f);
    CHECK(signbit(ddpc__select(1, -0.0f, 1.0f)));
    float x[37], y[37];
    for (int i = 0; i < 37; i++)
        x[i] = (float)((i * 13) % 37) - 20.0f;
    CHECK(ddpc__max_f32(x, 37) == 16.0f);
    CHECK(ddpc__max_f32(x, 1) == x[0]);
    double ref = 0.0;
    for (int i = 0; i < 37; i++)
        ref += exp((double)x[i] - 16.0);
    CHECK_NEAR(ddpc__exp_sum_f32(y, x, 37, 16.0f), ref, 1e-6);
    CHECK_NEAR(y[5], exp((double)x[5] - 16.0), 1e-7);
    CHECK_NEAR(ddpc__exp_sum_f32(x, x, 37, 16.0f), ref, 1e-6); /* in place */
    CHECK(memcmp(x, y, sizeof x) == 0);
}

int main(void)
{
    RUN_TEST(test_expf_accuracy);
    RUN_TEST(test_select_and_row_helpers);
    return check_summary();
}
