// SPDX-License-Identifier: MIT
/* Dynamic loss scaling (src/optim/loss_scale.c) and its use by the step engine.
 * The scaler is driven through a scripted sequence of overflows and clean steps and must follow
 * GradScaler's documented rule (torch._amp_update_scale_) value by value; the expected values
 * below are derived by hand from that rule in the comments. The engine with scaling on: unscaled
 * gradients equal the unscaled run's (power-of-two scale: exact), so the parameters match bit for
 * bit; an overflowing step is skipped whatever on_nonfinite says, leaves the parameters alone and
 * halves the scale; the scale grows after growth_interval clean steps and restores. */
#include "check.h"

#include <ddpc/engine.h>
#include <ddpc/models.h>
#include <ddpc/rng.h>

#include <math.h>
#include <string.h>

static void test_defaults_are_gradscalers(void)
{
    ddpc_loss_scale_config c = ddpc_loss_scale_config_default();
    CHECK(c.init_scale == 65536.0f && c.growth_factor == 2.0f && c.backoff_factor == 0.5f);
    CHECK_EQ_INT(c.growth_interval, 2000);
    ddpc_loss_scale_state s = ddpc_loss_scale_start(&c);
    CHECK(s.scale == 65536.0f && s.growth_tracker == 0);
    CHECK_EQ_INT(ddpc_loss_scale_check(&c), DDPC_OK);
}

static void test_scripted_sequence(void)
{
    ddpc_loss_scale_config c = {
        .init_scale = 8.0f, .growth_factor = 2.0f, .backoff_factor = 0.5f, .growth_interval = 3};
    /* Rule: inf -> scale *= 0.5, tracker = 0; clean -> tracker + 1, and when that reaches 3 the
     * scale doubles and the tracker restarts at 0. */
    static const struct {
        bool inf;
        float scale;
        int64_t tracker;
    } script[] = {
        {false, 8.0f, 1}, {false, 8.0f, 2}, {false, 16.0f, 0}, /* third clean step: growth */
        {true, 8.0f, 0},  {true, 4.0f, 0},                     /* repeated back-offs */
        {false, 4.0f, 1}, {false, 4.0f, 2}, {true, 2.0f, 0},   /* back-off just before growth */
        {false, 2.0f, 1}, {false, 2.0f, 2}, {false, 4.0f, 0},  /* the tracker had restarted */
        {false, 4.0f, 1}, {true, 2.0f, 0},  {false, 2.0f, 1},
    };
    ddpc_loss_scale_state s = ddpc_loss_scale_start(&c);
    for (size_t i = 0; i < sizeof script / sizeof script[0]; i++) {
        ddpc_loss_scale_update(&s, &c, script[i].inf);
        if (s.scale != script[i].scale || s.growth_tracker != script[i].tracker)
            printf("     step %zu: scale %g tracker %lld, want %g %lld\n", i + 1, (double)s.scale,
                   (long long)s.growth_tracker, (double)script[i].scale,
                   (long long)script[i].tracker);
        CHECK(s.scale == script[i].scale);
        CHECK_EQ_INT(s.growth_tracker, script[i].tracker);
    }
    /* Growth that would overflow keeps the old scale (GradScaler only takes a finite new one)
     * and still restarts the tracker. */
    ddpc_loss_scale_config big = {
        .init_scale = 3e38f, .growth_factor = 2.0f, .backoff_factor = 0.5f, .growth_interval = 1};
    s = ddpc_loss_scale_start(&big);
    ddpc_loss_scale_update(&s, &big, false);
    CHECK(s.scale == 3e38f && s.growth_tracker == 0);
    /* Non-power-of-two factors round in fp32, as torch's float math does. */
    ddpc_loss_scale_config odd = {
        .init_scale = 10.0f, .growth_factor = 1.1f, .backoff_factor = 0.3f, .growth_interval = 1};
    s = ddpc_loss_scale_start(&odd);
    ddpc_loss_scale_update(&s, &odd, false);
    CHECK(s.scale == 10.0f * 1.1f);
    ddpc_loss_scale_update(&s, &odd, true);
    CHECK(s.scale == 10.0f * 1.1f * 0.3f);
}

static void test_bad_configs_name_the_field(void)
{
    ddpc_loss_scale_config c = ddpc_loss_scale_config_default();
    c.growth_factor = 1.0f;
    CHECK_EQ_INT(ddpc_loss_scale_check(&c), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "loss_scale.growth_factor");
    c = ddpc_loss_scale_config_default();
    c.backoff_factor = 1.0f;
    CHECK_EQ_INT(ddpc_loss_scale_check(&c), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "loss_scale.backoff_factor");
    c = ddpc_loss_scale_config_default();
    c.init_scale = INFINITY;
    CHECK_EQ_INT(ddpc_loss_scale_check(&c), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "loss_scale.init_scale");
    c = ddpc_loss_scale_config_default();
    c.growth_interval = 0;
    CHECK_EQ_INT(ddpc_loss_scale_check(&c), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "loss_scale.growth_interval");
}

static void test_unscale(void)
{
    float g[5] = {2.0f, 4.0f, -8.0f, 0.0f, 3.0f};
    CHECK(!ddpc_grad_unscale(g, 5, 4.0f));
    CHECK(g[0] == 0.5f && g[1] == 1.0f && g[2] == -2.0f && g[3] == 0.0f && g[4] == 0.75f);
    float h[3] = {3.0f, 7.0f, 1.0f}, inv = (float)(1.0 / 3.0); /* PyTorch: double reciprocal */
    CHECK(!ddpc_grad_unscale(h, 3, 3.0f));
    CHECK(h[0] == 3.0f * inv && h[1] == 7.0f * inv && h[2] == inv);
    float bad[4] = {1.0f, INFINITY, 2.0f, NAN};
    CHECK(ddpc_grad_unscale(bad, 4, 2.0f));
    CHECK(bad[0] == 0.5f && bad[2] == 1.0f);
}

/* ---- the engine ------------------------------------------------------------------------ */

enum { N = 8, PIX = 16, CLASSES = 3 };
static float x[N * PIX];
static int32_t y[N];

static ddpc_model *make_model(void)
{
    ddpc_model_config c = ddpc_model_config_default();
    ddpc_mlp_config own = ddpc_mlp_config_default();
    c.type_config = &own;
    strcpy(c.type, "mlp");
    c.in_channels = 1, c.in_height = 4, c.in_width = 4, c.num_classes = CLASSES;
    own.hidden[0] = 8, own.n_hidden = 1;
    c.seed = 5;
    ddpc_model *m = NULL;
    CHECK_EQ_INT(ddpc_model_create(&m, &c), DDPC_OK);
    return m;
}

static ddpc_engine *make_engine(ddpc_model *m, bool scaling, float init, int64_t interval)
{
    ddpc_engine_config c = ddpc_engine_config_default();
    c.optim.type = DDPC_OPTIM_ADAMW;
    c.optim.lr = 0.01f;
    c.grad_clip = 0.5f;
    c.loss_scaling = scaling;
    c.loss_scale.init_scale = init;
    c.loss_scale.growth_interval = interval;
    ddpc_engine *e = NULL;
    CHECK_EQ_INT(ddpc_engine_create(m, NULL, 0, 1, &c, &e), DDPC_OK);
    return e;
}

static ddpc_engine_step_info step_on(ddpc_engine *e, const float *input)
{
    ddpc_engine_step_info info;
    ddpc_engine_zero_grad(e);
    ddpc_model_input in = {.n = N, .x = input, .targets = y};
    ddpc_model_output out;
    CHECK_EQ_INT(ddpc_engine_pass(e, &in, 0, 1.0f, true, &out), DDPC_OK);
    CHECK_EQ_INT(ddpc_engine_update(e, &info), DDPC_OK);
    return info;
}

static ddpc_engine_step_info step(ddpc_engine *e)
{
    return step_on(e, x);
}

static void test_engine_scaled_equals_unscaled(void)
{
    ddpc_model *a = make_model(), *b = make_model();
    ddpc_engine *plain = make_engine(a, false, 1.0f, 2000),
                *scaled = make_engine(b, true, 1024.0f, 2);
    size_t n = ddpc_model_num_params(a);
    for (int s = 0; s < 5; s++) {
        ddpc_engine_step_info pi = step(plain), si = step(scaled);
        CHECK(pi.loss_scale == 1.0f);
        CHECK(si.loss_scale == 1024.0f * (float)(1 << ((s) / 2))); /* doubles every 2 steps */
        CHECK(!si.skipped);
        CHECK(pi.grad_norm == si.grad_norm); /* the norm is of the unscaled gradients */
    }
    CHECK(memcmp(ddpc_model_params(a), ddpc_model_params(b), n * sizeof(float)) == 0);
    ddpc_loss_scale_state st = ddpc_engine_loss_scale(scaled);
    CHECK(st.scale == 4096.0f && st.growth_tracker == 1);
    ddpc_engine_restore_loss_scale(scaled,
                                   (ddpc_loss_scale_state){.scale = 64.0f, .growth_tracker = 1});
    CHECK(ddpc_engine_loss_scale(scaled).scale == 64.0f);
    ddpc_engine_restore_loss_scale(plain, (ddpc_loss_scale_state){.scale = 64.0f});
    CHECK(ddpc_engine_loss_scale(plain).scale == 1.0f); /* ignored without scaling */
    ddpc_engine_destroy(plain);
    ddpc_engine_destroy(scaled);
    ddpc_model_destroy(a);
    ddpc_model_destroy(b);
}

static void test_engine_overflow_skips_and_backs_off(void)
{
    ddpc_model *m = make_model();
    /* Inputs of ~1e3 make first-layer gradients > 1, so a scale of 3e38 overflows them to inf in
     * fp32: the step is skipped (not stopped: on_nonfinite is `stop` here) and the scale halves
     * until the gradients fit. */
    static float big[N * PIX];
    for (int i = 0; i < N * PIX; i++)
        big[i] = 1000.0f * x[i];
    ddpc_engine *e = make_engine(m, true, 3e38f, 2000);
    size_t n = ddpc_model_num_params(m);
    float *before = malloc(n * sizeof(float));
    memcpy(before, ddpc_model_params(m), n * sizeof(float));
    ddpc_engine_step_info info = step_on(e, big);
    CHECK(info.skipped && info.loss_scale == 3e38f && isnan(info.grad_norm));
    CHECK(memcmp(before, ddpc_model_params(m), n * sizeof(float)) == 0);
    CHECK(ddpc_engine_loss_scale(e).scale == 1.5e38f);
    CHECK_EQ_INT(ddpc_engine_skipped(e), 1);
    CHECK_EQ_INT(ddpc_engine_step(e), 1);
    int steps = 1;
    while (steps < 200 && step_on(e, big).skipped)
        steps++;
    CHECK_EQ_INT(ddpc_engine_skipped(e), steps); /* every step before the last was skipped */
    CHECK(ddpc_engine_skipped(e) < ddpc_engine_step(e)); /* a step finally went through */
    CHECK(memcmp(before, ddpc_model_params(m), n * sizeof(float)) != 0);
    CHECK(ddpc_engine_loss_scale(e).scale < 3e38f);
    free(before);
    ddpc_engine_destroy(e);
    ddpc_model_destroy(m);
}

static void test_engine_refuses_bad_scaler(void)
{
    ddpc_model *m = make_model();
    ddpc_engine_config c = ddpc_engine_config_default();
    c.loss_scaling = true;
    c.loss_scale.backoff_factor = 2.0f;
    ddpc_engine *e = NULL;
    CHECK_EQ_INT(ddpc_engine_create(m, NULL, 0, 1, &c, &e), DDPC_EINVAL);
    CHECK(e == NULL);
    c.loss_scaling = false; /* unused settings are not checked */
    CHECK_EQ_INT(ddpc_engine_create(m, NULL, 0, 1, &c, &e), DDPC_OK);
    ddpc_engine_destroy(e);
    ddpc_model_destroy(m);
}

int main(void)
{
    ddpc_rng r = ddpc_rng_make(9, 0);
    for (int i = 0; i < N * PIX; i++)
        x[i] = ddpc_rng_uniform(&r) - 0.5f;
    for (int i = 0; i < N; i++)
        y[i] = i % CLASSES;
    RUN_TEST(test_defaults_are_gradscalers);
    RUN_TEST(test_scripted_sequence);
    RUN_TEST(test_bad_configs_name_the_field);
    RUN_TEST(test_unscale);
    RUN_TEST(test_engine_scaled_equals_unscaled);
    RUN_TEST(test_engine_overflow_skips_and_backs_off);
    RUN_TEST(test_engine_refuses_bad_scaler);
    return check_summary();
}
