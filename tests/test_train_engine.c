// SPDX-License-Identifier: MIT
/* The step engine on a small MLP with dropout: a step equals the same model driven by hand
 * (forward, backward, clip, torch-rule optimizer) bit for bit; two micro-batches of b train like
 * one batch of 2b; a replayed step (counters and optimizer state restored) draws the same dropout
 * masks and gives the same parameters; non-finite gradients stop (parameters untouched) or are
 * skipped and counted; bad configs are refused. */
#include "check.h"

#include <ddpc/alloc.h>
#include <ddpc/engine.h>
#include <ddpc/models.h>
#include <ddpc/rng.h>

#include <math.h>
#include <string.h>

enum { N = 8, PIX = 16, CLASSES = 3 };

static ddpc_model *make_model(float dropout)
{
    ddpc_model_config c = ddpc_model_config_default();
    ddpc_mlp_config own = ddpc_mlp_config_default();
    c.type_config = &own;
    strcpy(c.type, "mlp");
    c.in_channels = 1, c.in_height = 4, c.in_width = 4, c.num_classes = CLASSES;
    own.hidden[0] = 8, own.n_hidden = 1;
    c.dropout = dropout;
    c.seed = 5;
    ddpc_model *m = NULL;
    CHECK_EQ_INT(ddpc_model_create(&m, &c), DDPC_OK);
    return m;
}

static float x[N * PIX];
static int32_t y[N];

static void make_data(void)
{
    ddpc_rng r = ddpc_rng_make(9, 0);
    for (int i = 0; i < N * PIX; i++)
        x[i] = ddpc_rng_uniform(&r) - 0.5f;
    for (int i = 0; i < N; i++)
        y[i] = i % CLASSES;
}

static ddpc_engine_config adamw_config(int64_t accum)
{
    ddpc_engine_config c = ddpc_engine_config_default();
    c.optim.type = DDPC_OPTIM_ADAMW;
    c.optim.lr = 0.01f;
    c.optim.weight_decay = 0.1f;
    c.grad_clip = 0.05f;
    c.accum_steps = accum;
    return c;
}

static ddpc_status one_step(ddpc_engine *e, int64_t accum, ddpc_engine_step_info *info)
{
    int64_t b = N / accum;
    ddpc_engine_zero_grad(e);
    for (int64_t k = 0; k < accum; k++) {
        ddpc_model_input in = {.n = b, .x = x + k * b * PIX, .targets = y + k * b};
        ddpc_model_output out;
        DDPC_TRY(ddpc_engine_pass(e, &in, k, 1.0f, k == accum - 1, &out));
    }
    return ddpc_engine_update(e, info);
}

static void test_step_matches_manual(void)
{
    ddpc_model *a = make_model(0.0f), *b = make_model(0.0f);
    ddpc_engine_config c = adamw_config(1);
    ddpc_engine *e = NULL;
    ddpc_optim *o = NULL;
    CHECK_EQ_INT(ddpc_engine_create(a, NULL, 0, 1, &c, &e), DDPC_OK);
    CHECK_EQ_INT(ddpc_optim_create(&o, &c.optim, ddpc_model_num_params(b)), DDPC_OK);
    size_t n = ddpc_model_num_params(a);
    for (int s = 0; s < 3; s++) {
        ddpc_engine_step_info info;
        CHECK_EQ_INT(one_step(e, 1, &info), DDPC_OK);
        CHECK_EQ_INT(info.step, s);
        ddpc_model_zero_grad(b);
        ddpc_model_input in = {.n = N, .x = x, .targets = y, .rng_stream = (uint64_t)s};
        ddpc_model_output out;
        CHECK_EQ_INT(ddpc_model_forward(b, &in, true, &out), DDPC_OK);
        CHECK_EQ_INT(ddpc_model_backward(b, 1.0f), DDPC_OK);
        float norm = ddpc_clip_grad_norm(ddpc_model_grads(b), n, c.grad_clip);
        CHECK_NEAR(info.grad_norm, norm, 1e-6);
        ddpc_optim_step(o, ddpc_model_params(b), ddpc_model_grads(b), ddpc_model_decay_mask(b),
                        ddpc_lr_at(&c.schedule, c.optim.lr, s));
    }
    CHECK(memcmp(ddpc_model_params(a), ddpc_model_params(b), n * sizeof(float)) == 0);
    CHECK_EQ_INT(ddpc_engine_step(e), 3);
    ddpc_optim_destroy(o);
    ddpc_engine_destroy(e);
    ddpc_model_destroy(a);
    ddpc_model_destroy(b);
}

static void test_accumulation_matches_big_batch(void)
{
    ddpc_model *a = make_model(0.0f), *b = make_model(0.0f);
    ddpc_engine_config ca = adamw_config(1), cb = adamw_config(2);
    ddpc_engine *ea = NULL, *eb = NULL;
    CHECK_EQ_INT(ddpc_engine_create(a, NULL, 0, 1, &ca, &ea), DDPC_OK);
    CHECK_EQ_INT(ddpc_engine_create(b, NULL, 0, 1, &cb, &eb), DDPC_OK);
    for (int s = 0; s < 3; s++) {
        ddpc_engine_step_info ia, ib;
        CHECK_EQ_INT(one_step(ea, 1, &ia), DDPC_OK);
        CHECK_EQ_INT(one_step(eb, 2, &ib), DDPC_OK);
        CHECK_NEAR(ia.grad_norm, ib.grad_norm, 1e-5);
    }
    const float *pa = ddpc_model_params(a), *pb = ddpc_model_params(b);
    for (size_t i = 0; i < ddpc_model_num_params(a); i++)
        CHECK_NEAR(pa[i], pb[i], 1e-5);
    ddpc_engine_destroy(ea);
    ddpc_engine_destroy(eb);
    ddpc_model_destroy(a);
    ddpc_model_destroy(b);
}

/* Run 4 steps; separately run 2, copy out the state, run 2 more in a fresh engine+model restored
 * from it: identical parameters (dropout masks depend on the step number only). */
static void test_replay_after_restore(void)
{
    ddpc_engine_config c = adamw_config(2);
    c.optim.type = DDPC_OPTIM_SGD;
    c.optim.momentum = 0.9f;
    ddpc_model *a = make_model(0.3f), *b = make_model(0.3f);
    ddpc_engine *ea = NULL, *eb = NULL;
    CHECK_EQ_INT(ddpc_engine_create(a, NULL, 0, 1, &c, &ea), DDPC_OK);
    ddpc_engine_step_info info;
    for (int s = 0; s < 4; s++)
        CHECK_EQ_INT(one_step(ea, 2, &info), DDPC_OK);
    ddpc_model *half = make_model(0.3f);
    ddpc_engine *eh = NULL;
    CHECK_EQ_INT(ddpc_engine_create(half, NULL, 0, 1, &c, &eh), DDPC_OK);
    for (int s = 0; s < 2; s++)
        CHECK_EQ_INT(one_step(eh, 2, &info), DDPC_OK);
    size_t n = ddpc_model_num_params(a);
    CHECK_EQ_INT(ddpc_engine_create(b, NULL, 0, 1, &c, &eb), DDPC_OK);
    memcpy(ddpc_model_params(b), ddpc_model_params(half), n * sizeof(float));
    ddpc_optim *src = ddpc_engine_optim(eh), *dst = ddpc_engine_optim(eb);
    for (size_t i = 0; i < ddpc_optim_num_state(src); i++)
        memcpy(ddpc_optim_state(dst, i, NULL), ddpc_optim_state(src, i, NULL), n * sizeof(float));
    ddpc_optim_set_step_count(dst, ddpc_optim_step_count(src));
    ddpc_engine_restore(eb, ddpc_engine_step(eh), ddpc_engine_skipped(eh));
    for (int s = 0; s < 2; s++)
        CHECK_EQ_INT(one_step(eb, 2, &info), DDPC_OK);
    CHECK(memcmp(ddpc_model_params(a), ddpc_model_params(b), n * sizeof(float)) == 0);
    CHECK_EQ_INT(ddpc_engine_step(eb), 4);
    ddpc_engine_destroy(ea);
    ddpc_engine_destroy(eb);
    ddpc_engine_destroy(eh);
    ddpc_model_destroy(a);
    ddpc_model_destroy(b);
    ddpc_model_destroy(half);
}

static void test_nonfinite(void)
{
    for (int policy = 0; policy < 2; policy++) {
        ddpc_model *m = make_model(0.0f);
        ddpc_engine_config c = adamw_config(1);
        c.on_nonfinite = policy ? DDPC_NONFINITE_SKIP : DDPC_NONFINITE_STOP;
        ddpc_engine *e = NULL;
        CHECK_EQ_INT(ddpc_engine_create(m, NULL, 0, 1, &c, &e), DDPC_OK);
        size_t n = ddpc_model_num_params(m);
        float *before = ddpc_malloc(n * sizeof(float));
        memcpy(before, ddpc_model_params(m), n * sizeof(float));
        x[3] = NAN;
        ddpc_engine_step_info info;
        ddpc_status st = one_step(e, 1, &info);
        x[3] = 0.25f;
        CHECK(memcmp(before, ddpc_model_params(m), n * sizeof(float)) == 0);
        if (policy == 0) {
            CHECK_EQ_INT(st, DDPC_EINVAL);
            CHECK_STR_CONTAINS(ddpc_last_error(), "step 1:");
            CHECK_STR_CONTAINS(ddpc_last_error(), "on_nonfinite");
            CHECK_EQ_INT(ddpc_engine_step(e), 0);
        } else {
            CHECK_EQ_INT(st, DDPC_OK);
            CHECK(info.skipped);
            CHECK(!isfinite(info.grad_norm));
            CHECK_EQ_INT(ddpc_engine_step(e), 1);
            CHECK_EQ_INT(ddpc_engine_skipped(e), 1);
            CHECK_EQ_INT(ddpc_optim_step_count(ddpc_engine_optim(e)), 0);
            CHECK_EQ_INT(one_step(e, 1, &info), DDPC_OK); /* finite again: trains on */
            CHECK(!info.skipped);
            CHECK(memcmp(before, ddpc_model_params(m), n * sizeof(float)) != 0);
        }
        ddpc_free(before);
        ddpc_engine_destroy(e);
        ddpc_model_destroy(m);
    }
}

static void test_bad_config(void)
{
    ddpc_model *m = make_model(0.0f);
    ddpc_engine *e = NULL;
    ddpc_engine_config c = ddpc_engine_config_default();
    c.accum_steps = 0;
    CHECK_EQ_INT(ddpc_engine_create(m, NULL, 0, 1, &c, &e), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "accum_steps");
    c = ddpc_engine_config_default();
    CHECK_EQ_INT(ddpc_engine_create(m, NULL, 2, 2, &c, &e), DDPC_EINVAL);
    CHECK(e == NULL);
    CHECK(strcmp(ddpc_nonfinite_policy_name(DDPC_NONFINITE_SKIP), "skip") == 0);
    ddpc_engine_destroy(NULL);
    ddpc_model_destroy(m);
}

int main(void)
{
    make_data();
    RUN_TEST(test_step_matches_manual);
    RUN_TEST(test_accumulation_matches_big_batch);
    RUN_TEST(test_replay_after_restore);
    RUN_TEST(test_nonfinite);
    RUN_TEST(test_bad_config);
    return check_summary();
}
