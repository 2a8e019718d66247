// SPDX-License-Identifier: MIT
/* Hand-computed AdamW steps (src/optim/adamw.c): bias correction at steps 1 and 2 and after a
 * restored step count, decoupled weight decay and the decay mask, following torch.optim.AdamW. */
#include <ddpc/kernels.h>
#include <ddpc/optim.h>

#include <math.h>
#include <string.h>

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

/* The update element by element, as torch computes it (the loop the run splitting must match). */
static void reference_step(float *p, float *m, float *v, const float *g, const uint8_t *mask,
                           size_t n, float lr, float wd, int t)
{
    const double bc1 = 1.0 - pow((double)0.9f, t), bc2 = 1.0 - pow((double)0.999f, t);
    const float decay = (float)(1.0 - (double)lr * (double)wd), neg_step = (float)(-(lr / bc1));
    const float a1 = (float)(1.0 - (double)0.9f), a2 = (float)(1.0 - (double)0.999f);
    const float bc2_sqrt = (float)sqrt(bc2);
    for (size_t i = 0; i < n; i++) {
        float pi = p[i] * (mask[i] ? decay : 1.0f);
        m[i] = fmaf(g[i], a1, m[i] * 0.9f);
        v[i] = fmaf(a2 * g[i], g[i], v[i] * 0.999f);
        p[i] = pi + neg_step * m[i] / (sqrtf(v[i]) / bc2_sqrt + 1e-8f);
    }
}

/* Masks with runs of every length (1 to 40, so words straddle run ends), values other than 1 for
 * "decay", and 1 or 3 threads give the element-wise reference bit for bit. */
static void test_mask_runs_match_elementwise(void)
{
    enum { N = 40009 }; /* above DDPC_OPTIM_PARALLEL_MIN, so 3 threads split it */
    static float p[N], p_ref[N], g[N], m_ref[N], v_ref[N];
    static uint8_t mask[N];
    size_t i = 0;
    for (int run = 0; i < N; run++)
        for (int len = 1 + (run * 7) % 40; len > 0 && i < N; len--, i++)
            mask[i] = run % 2 ? 0 : (uint8_t)(1 + run % 3 * 127); /* 1, 128, 255 */
    for (int threads = 1; threads <= 3; threads += 2) {
        ddpc_kernels_set_threads(threads);
        ddpc_optim *o = make_adamw(0.1f, N);
        for (i = 0; i < N; i++) {
            p[i] = p_ref[i] = sinf((float)i);
            m_ref[i] = v_ref[i] = 0.0f;
        }
        for (int t = 1; t <= 3; t++) {
            for (i = 0; i < N; i++)
                g[i] = cosf((float)(i * t)) * 0.1f;
            ddpc_optim_step(o, p, g, mask, 0.01f);
            reference_step(p_ref, m_ref, v_ref, g, mask, N, 0.01f, 0.1f, t);
        }
        CHECK(memcmp(p, p_ref, sizeof p) == 0);
        CHECK(memcmp(ddpc_optim_state(o, 0, NULL), m_ref, sizeof m_ref) == 0);
        CHECK(memcmp(ddpc_optim_state(o, 1, NULL), v_ref, sizeof v_ref) == 0);
        ddpc_optim_destroy(o);
    }
    ddpc_kernels_set_threads(1);
}

int main(void)
{
    RUN_TEST(test_first_step_is_sign_sized);
    RUN_TEST(test_second_step_bias_correction);
    RUN_TEST(test_restored_step_count);
    RUN_TEST(test_decoupled_decay_and_mask);
    RUN_TEST(test_decay_then_adam);
    RUN_TEST(test_mask_runs_match_elementwise);
    return check_summary();
}
