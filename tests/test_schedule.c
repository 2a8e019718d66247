// SPDX-License-Identifier: MIT
/* LR schedules (src/optim/schedule.c): warm-up, then constant, cosine and linear decay, at the
 * start, middle, end and past the end; names, parsing and validation. */
#include <ddpc/optim.h>

#include "check.h"

#define TOL 1e-7
#define BASE 1.0f /* the optimizer's LR the schedules scale */

static ddpc_lr_schedule sched(ddpc_lr_kind kind, int64_t warmup, int64_t total)
{
    return (ddpc_lr_schedule){.kind = kind, .warmup_steps = warmup,
                              .total_steps = total, .min_lr = 0.1f};
}

static void check_warmup(const ddpc_lr_schedule *s)
{
    CHECK_NEAR(ddpc_lr_at(s, BASE, 0), 0.1, TOL); /* base * (0 + 1) / 10 */
    CHECK_NEAR(ddpc_lr_at(s, BASE, 4), 0.5, TOL);
    CHECK_NEAR(ddpc_lr_at(s, BASE, 9), 1.0, TOL);
    CHECK_NEAR(ddpc_lr_at(s, BASE, -5), 0.1, TOL); /* negative steps count as 0 */
}

static void test_constant(void)
{
    ddpc_lr_schedule s = sched(DDPC_LR_CONSTANT, 10, 110);
    check_warmup(&s);
    CHECK_NEAR(ddpc_lr_at(&s, BASE, 10), 1.0, TOL);
    CHECK_NEAR(ddpc_lr_at(&s, BASE, 60), 1.0, TOL);
    CHECK_NEAR(ddpc_lr_at(&s, BASE, 110), 1.0, TOL);
    CHECK_NEAR(ddpc_lr_at(&s, BASE, 100000), 1.0, TOL);
    ddpc_lr_schedule d = ddpc_lr_schedule_default();
    CHECK_NEAR(ddpc_lr_at(&d, 0.01f, 0), 0.01, TOL);
    CHECK_NEAR(ddpc_lr_at(&d, 0.01f, 1000), 0.01, TOL);
}

static void test_cosine(void)
{
    ddpc_lr_schedule s = sched(DDPC_LR_COSINE, 10, 110);
    check_warmup(&s);
    CHECK_NEAR(ddpc_lr_at(&s, BASE, 10), 1.0, TOL);
    CHECK_NEAR(ddpc_lr_at(&s, BASE, 35), 0.1 + 0.9 * 0.5 * (1.0 + cos(acos(-1.0) * 0.25)), TOL);
    CHECK_NEAR(ddpc_lr_at(&s, BASE, 60), 0.55, TOL);
    CHECK_NEAR(ddpc_lr_at(&s, BASE, 110), 0.1, TOL);
    CHECK_NEAR(ddpc_lr_at(&s, BASE, 5000), 0.1, TOL);
}

static void test_linear(void)
{
    ddpc_lr_schedule s = sched(DDPC_LR_LINEAR, 10, 110);
    check_warmup(&s);
    CHECK_NEAR(ddpc_lr_at(&s, BASE, 10), 1.0, TOL);
    CHECK_NEAR(ddpc_lr_at(&s, BASE, 35), 0.775, TOL);
    CHECK_NEAR(ddpc_lr_at(&s, BASE, 60), 0.55, TOL);
    CHECK_NEAR(ddpc_lr_at(&s, BASE, 110), 0.1, TOL);
    CHECK_NEAR(ddpc_lr_at(&s, BASE, 111), 0.1, TOL);
}

static void test_no_warmup_and_degenerate_spans(void)
{
    ddpc_lr_schedule s = sched(DDPC_LR_COSINE, 0, 100);
    CHECK_NEAR(ddpc_lr_at(&s, BASE, 0), 1.0, TOL);
    CHECK_NEAR(ddpc_lr_at(&s, BASE, 50), 0.55, TOL);
    s = sched(DDPC_LR_LINEAR, 10, 10); /* decay span 0: straight to min_lr after warm-up */
    CHECK_NEAR(ddpc_lr_at(&s, BASE, 9), 1.0, TOL);
    CHECK_NEAR(ddpc_lr_at(&s, BASE, 10), 0.1, TOL);
}

static void test_names_and_check(void)
{
    ddpc_lr_kind k = DDPC_LR_CONSTANT;
    CHECK_EQ_INT(ddpc_lr_kind_from_name("Cosine", &k), DDPC_OK);
    CHECK_EQ_INT(k, DDPC_LR_COSINE);
    CHECK_EQ_INT(ddpc_lr_kind_from_name("linear", &k), DDPC_OK);
    CHECK_EQ_INT(k, DDPC_LR_LINEAR);
    CHECK_EQ_INT(ddpc_lr_kind_from_name("step", &k), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "'step'");
    CHECK(strcmp(ddpc_lr_kind_name(DDPC_LR_CONSTANT), "constant") == 0);

    ddpc_lr_schedule s = sched(DDPC_LR_COSINE, 10, 110);
    CHECK_EQ_INT(ddpc_lr_schedule_check(&s), DDPC_OK);
    s.total_steps = 5;
    CHECK_EQ_INT(ddpc_lr_schedule_check(&s), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "total_steps");
    s = sched(DDPC_LR_CONSTANT, -1, 0);
    CHECK_EQ_INT(ddpc_lr_schedule_check(&s), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "warmup_steps");
    s = sched(DDPC_LR_CONSTANT, 0, 0);
    s.min_lr = -1.0f;
    CHECK_EQ_INT(ddpc_lr_schedule_check(&s), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "min_lr");
    CHECK_EQ_INT(ddpc_lr_schedule_check(NULL), DDPC_EINVAL);
}

int main(void)
{
    RUN_TEST(test_constant);
    RUN_TEST(test_cosine);
    RUN_TEST(test_linear);
    RUN_TEST(test_no_warmup_and_degenerate_spans);
    RUN_TEST(test_names_and_check);
    return check_summary();
}
