/* Hand-computed AdamW steps (src/optim/adamw.c): bias correction at steps 1 and 2 and after a
 * restored step count, decoupled weight decay and the decay mask, following torch.optim.AdamW. */
#include <ddpc/optim.h>

#include "check.h"

#define TOL 1e-6

static ddpc_optim *make_adamw(float wd, size_t n)
{
    ddpc_optim_config c = ddpc_optim_config_default();
    c.type = DDPC_OPTIM_ADAMW;
    c.weight_decay = wd;
    ddpc_optim *o = NULL;
    CHECK_EQ_INT(ddpc_optim_create(&o, &c, n), DDPC_OK);
    return o;
}

/* p - lr * (m / bc1) / (sqrt(v / bc2) + eps) with torch's bias corrections at step t. */
static double adam_update(double p, double m, double v, double lr, int t)
{
    double bc1 = 1.0 - pow(0.9, t), bc2 = 1.0 - pow(0.999, t);
    return p - lr * (m / bc1) / (sqrt(v / bc2) + 1e-8);
}

static void test_first_step_is_sign_sized(void)
{
    ddpc_optim *o = make_adamw(0, 3);
    float p[3] = {1.0f, 1.0f, 1.0f};
    const float g[3] = {0.5f, -3.0f, 0.0f};
    ddpc_optim_step(o, p, g, NULL, 0.1f);
    /* Step 1: m/bc1 = g and v/bc2 = g^2, so the update is lr * g / (|g| + eps). */
    CHECK_NEAR(p[0], 1.0 - 0.1 * 0.5 / (0.5 + 1e-8), TOL);
    CHECK_NEAR(p[1], 1.0 + 0.1 * 3.0 / (3.0 + 1e-8), TOL);
    CHECK_NEAR(p[2], 1.0, 0.0);
    CHECK_NEAR(ddpc_optim_state(o, 0, NULL)[0], 0.1 * 0.5, TOL);
    CHECK_NEAR(ddpc_optim_state(o, 1, NULL)[1], 0.001 * 9.0, TOL);
    ddpc_optim_destroy(o);
}

static void test_second_step_bias_correction(void)
{
    ddpc_optim *o = make_adamw(0, 1);
    const float g1 = 0.5f, g2 = -0.25f;
    float p = 1.0f;
    ddpc_optim_step(o, &p, &g1, NULL, 0.1f);
    double p1 = adam_update(1.0, 0.1 * g1, 0.001 * g1 * g1, 0.1, 1);
    CHECK_NEAR(p, p1, TOL);
    ddpc_optim_step(o, &p, &g2, NULL, 0.05f);
    double m = 0.9 * 0.1 * g1 + 0.1 * g2;
    double v = 0.999 * 0.001 * g1 * g1 + 0.001 * g2 * g2;
    CHECK_NEAR(p, adam_update(p1, m, v, 0.05, 2), TOL);
    CHECK_NEAR(ddpc_optim_state(o, 0, NULL)[0], m, TOL);
    CHECK_NEAR(ddpc_optim_state(o, 1, NULL)[0], v, TOL);
    CHECK_EQ_INT(ddpc_optim_step_count(o), 2);
    ddpc_optim_destroy(o);
}

static void test_restored_step_count(void)
{
    ddpc_optim *o = make_adamw(0, 1);
    ddpc_optim_set_step_count(o, 10);
    float p = 1.0f;
    const float g = 0.5f;
    ddpc_optim_step(o, &p, &g, NULL, 0.1f);
    CHECK_EQ_INT(ddpc_optim_step_count(o), 11);
    CHECK_NEAR(p, adam_update(1.0, 0.1 * g, 0.001 * g * g, 0.1, 11), TOL);
    ddpc_optim_destroy(o);
}

static void test_decoupled_decay_and_mask(void)
{
    ddpc_optim *o = make_adamw(0.1f, 2);
    float p[2] = {2.0f, 2.0f};
    const float g[2] = {0.0f, 0.0f}; /* no gradient: only the decay moves p */
    const uint8_t mask[2] = {1, 0};
    ddpc_optim_step(o, p, g, mask, 0.5f);
    CHECK_NEAR(p[0], 2.0 * (1.0 - 0.5 * 0.1), TOL);
    CHECK_NEAR(p[1], 2.0, 0.0);
    ddpc_optim_step(o, p, g, NULL, 0.5f);
    CHECK_NEAR(p[0], 2.0 * 0.95 * 0.95, TOL);
    CHECK_NEAR(p[1], 2.0 * 0.95, TOL);
    ddpc_optim_destroy(o);
}

static void test_decay_then_adam(void)
{
    /* torch decays p before the Adam update, and the update does not depend on p. */
    ddpc_optim *o = make_adamw(0.01f, 1);
    float p = 3.0f;
    const float g = -1.0f;
    ddpc_optim_step(o, &p, &g, NULL, 0.1f);
    CHECK_NEAR(p, 3.0 * (1.0 - 0.1 * 0.01) + 0.1 * 1.0 / (1.0 + 1e-8), TOL);
    ddpc_optim_destroy(o);
}

int main(void)
{
    RUN_TEST(test_first_step_is_sign_sized);
    RUN_TEST(test_second_step_bias_correction);
    RUN_TEST(test_restored_step_count);
    RUN_TEST(test_decoupled_decay_and_mask);
    RUN_TEST(test_decay_then_adam);
    return check_summary();
}
