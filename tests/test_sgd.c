// SPDX-License-Identifier: MIT
/* Hand-computed single and double steps of SGD (src/optim/sgd.c): plain, momentum, dampening,
 * Nesterov, L2 weight decay with and without a mask, following torch.optim.SGD's formulas. */
#include <ddpc/optim.h>

#include "check.h"

#define TOL 1e-7

static ddpc_optim *make_sgd(float momentum, float dampening, bool nesterov, float wd, size_t n)
{
    ddpc_optim_config c = ddpc_optim_config_default();
    c.momentum = momentum;
    c.dampening = dampening;
    c.nesterov = nesterov;
    c.weight_decay = wd;
    ddpc_optim *o = NULL;
    CHECK_EQ_INT(ddpc_optim_create(&o, &c, n), DDPC_OK);
    return o;
}

static void test_plain(void)
{
    ddpc_optim *o = make_sgd(0, 0, false, 0, 3);
    float p[3] = {1.0f, -2.0f, 0.5f};
    const float g[3] = {0.5f, 0.25f, -4.0f};
    ddpc_optim_step(o, p, g, NULL, 0.1f);
    CHECK_NEAR(p[0], 1.0 - 0.1 * 0.5, TOL);
    CHECK_NEAR(p[1], -2.0 - 0.1 * 0.25, TOL);
    CHECK_NEAR(p[2], 0.5 + 0.1 * 4.0, TOL);
    CHECK_EQ_INT(ddpc_optim_step_count(o), 1);
    ddpc_optim_destroy(o);
}

/* Two steps with gradients g1 then g2 on one parameter starting at p0 = 1, lr 0.1. */
static const float g1 = 0.5f, g2 = -0.25f;

static void two_steps(ddpc_optim *o, float *p)
{
    *p = 1.0f;
    ddpc_optim_step(o, p, &g1, NULL, 0.1f);
    ddpc_optim_step(o, p, &g2, NULL, 0.1f);
}

static void test_momentum(void)
{
    ddpc_optim *o = make_sgd(0.9f, 0, false, 0, 1);
    float p;
    two_steps(o, &p);
    double buf = 0.9 * g1 + g2; /* the first step copies g1 into the buffer */
    CHECK_NEAR(p, 1.0 - 0.1 * g1 - 0.1 * buf, TOL);
    CHECK_NEAR(ddpc_optim_state(o, 0, NULL)[0], buf, TOL);
    ddpc_optim_destroy(o);
}

static void test_dampening(void)
{
    ddpc_optim *o = make_sgd(0.9f, 0.5f, false, 0, 1);
    float p;
    two_steps(o, &p);
    double buf = 0.9 * g1 + 0.5 * g2; /* no dampening on the first step, as torch */
    CHECK_NEAR(p, 1.0 - 0.1 * g1 - 0.1 * buf, TOL);
    CHECK_NEAR(ddpc_optim_state(o, 0, NULL)[0], buf, TOL);
    ddpc_optim_destroy(o);
}

static void test_nesterov(void)
{
    ddpc_optim *o = make_sgd(0.9f, 0, true, 0, 1);
    float p;
    two_steps(o, &p);
    double d1 = g1 + 0.9 * g1;
    double buf = 0.9 * g1 + g2;
    double d2 = g2 + 0.9 * buf;
    CHECK_NEAR(p, 1.0 - 0.1 * d1 - 0.1 * d2, TOL);
    ddpc_optim_destroy(o);
}

static void test_weight_decay_and_mask(void)
{
    ddpc_optim *o = make_sgd(0, 0, false, 0.1f, 2);
    float p[2] = {2.0f, 2.0f};
    const float g[2] = {0.5f, 0.5f};
    const uint8_t mask[2] = {1, 0};
    ddpc_optim_step(o, p, g, mask, 0.1f);
    CHECK_NEAR(p[0], 2.0 - 0.1 * (0.5 + 0.1 * 2.0), TOL);
    CHECK_NEAR(p[1], 2.0 - 0.1 * 0.5, TOL);
    ddpc_optim_step(o, p, g, NULL, 0.0f); /* lr 0 leaves params alone */
    CHECK_NEAR(p[1], 2.0 - 0.1 * 0.5, TOL);
    ddpc_optim_destroy(o);
}

static void test_weight_decay_feeds_momentum(void)
{
    ddpc_optim *o = make_sgd(0.9f, 0, false, 0.1f, 1);
    float p = 1.0f;
    ddpc_optim_step(o, &p, &g1, NULL, 0.1f);
    double d1 = g1 + 0.1 * 1.0;
    double p1 = 1.0 - 0.1 * d1;
    CHECK_NEAR(p, p1, TOL);
    ddpc_optim_step(o, &p, &g2, NULL, 0.1f);
    double buf = 0.9 * d1 + (g2 + 0.1 * p1);
    CHECK_NEAR(p, p1 - 0.1 * buf, TOL);
    ddpc_optim_destroy(o);
}

static void test_restart_reseeds_buffer(void)
{
    /* Step count 0 means "no buffer yet": the next step copies the gradient, as a fresh torch
     * optimizer does, even with dampening. */
    ddpc_optim *o = make_sgd(0.9f, 0.5f, false, 0, 1);
    float p = 1.0f;
    ddpc_optim_step(o, &p, &g1, NULL, 0.1f);
    ddpc_optim_set_step_count(o, 0);
    ddpc_optim_step(o, &p, &g2, NULL, 0.1f);
    CHECK_NEAR(ddpc_optim_state(o, 0, NULL)[0], g2, TOL);
    CHECK_EQ_INT(ddpc_optim_step_count(o), 1);
    ddpc_optim_destroy(o);
}

int main(void)
{
    RUN_TEST(test_plain);
    RUN_TEST(test_momentum);
    RUN_TEST(test_dampening);
    RUN_TEST(test_nesterov);
    RUN_TEST(test_weight_decay_and_mask);
    RUN_TEST(test_weight_decay_feeds_momentum);
    RUN_TEST(test_restart_reseeds_buffer);
    return check_summary();
}
