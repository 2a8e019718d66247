// SPDX-License-Identifier: MIT
/* The optimizer object (src/optim/optim.c): defaults, names, config validation, allocation
 * failure without leaks, state buffers for checkpoints, reset, and the parallel update path
 * giving the same bits as the serial one. */
#include <ddpc/alloc.h>
#include <ddpc/optim.h>
#include <ddpc/status.h>

#include "check.h"

static void test_defaults_and_names(void)
{
    ddpc_optim_config c = ddpc_optim_config_default();
    CHECK_EQ_INT(c.type, DDPC_OPTIM_SGD);
    CHECK(c.lr == 0.01f && c.momentum == 0.0f && c.dampening == 0.0f && !c.nesterov);
    CHECK(c.weight_decay == 0.0f);
    CHECK(c.beta1 == 0.9f && c.beta2 == 0.999f && c.eps == 1e-8f);
    CHECK(strcmp(ddpc_optim_type_name(DDPC_OPTIM_ADAMW), "adamw") == 0);
    CHECK(strcmp(ddpc_optim_type_name((ddpc_optim_type)42), "unknown") == 0);
    ddpc_optim_type t = DDPC_OPTIM_SGD;
    CHECK_EQ_INT(ddpc_optim_type_from_name("AdamW", &t), DDPC_OK);
    CHECK_EQ_INT(t, DDPC_OPTIM_ADAMW);
    CHECK_EQ_INT(ddpc_optim_type_from_name("sgd", &t), DDPC_OK);
    CHECK_EQ_INT(t, DDPC_OPTIM_SGD);
    CHECK_EQ_INT(ddpc_optim_type_from_name("adam", &t), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "'adam'");
}

static void expect_invalid(ddpc_optim_config c, const char *needle)
{
    ddpc_optim *o = (ddpc_optim *)&c; /* must stay untouched on failure */
    CHECK_EQ_INT(ddpc_optim_create(&o, &c, 4), DDPC_EINVAL);
    CHECK(o == (ddpc_optim *)&c);
    CHECK_STR_CONTAINS(ddpc_last_error(), needle);
}

static void test_invalid_configs(void)
{
    ddpc_optim_config c = ddpc_optim_config_default();
    c.lr = -1.0f;
    expect_invalid(c, "lr");
    c = ddpc_optim_config_default();
    c.lr = NAN;
    expect_invalid(c, "lr");
    c = ddpc_optim_config_default();
    c.weight_decay = -0.1f;
    expect_invalid(c, "weight_decay");
    c = ddpc_optim_config_default();
    c.nesterov = true;
    expect_invalid(c, "nesterov");
    c.momentum = 0.9f;
    c.dampening = 0.1f;
    expect_invalid(c, "nesterov");
    c = ddpc_optim_config_default();
    c.type = DDPC_OPTIM_ADAMW;
    c.beta2 = 1.0f;
    expect_invalid(c, "beta2");
    c.beta2 = 0.999f;
    c.eps = -1.0f;
    expect_invalid(c, "eps");
    c = ddpc_optim_config_default();
    c.type = (ddpc_optim_type)7;
    expect_invalid(c, "type");
    ddpc_optim *o = NULL;
    CHECK_EQ_INT(ddpc_optim_create(&o, NULL, 4), DDPC_EINVAL);
    CHECK_EQ_INT(ddpc_optim_create(NULL, &c, 4), DDPC_EINVAL);
    ddpc_optim_destroy(NULL);
}

static void test_alloc_failure_does_not_leak(void)
{
    ddpc_optim_config c = ddpc_optim_config_default();
    c.type = DDPC_OPTIM_ADAMW;
    int64_t live = ddpc_alloc_live();
    /* Fail the struct, then each state buffer in turn. */
    for (int64_t k = 0; k < 3; k++) {
        ddpc_optim *o = NULL;
        ddpc_alloc_fail_after(k);
        CHECK_EQ_INT(ddpc_optim_create(&o, &c, 1000), DDPC_ENOMEM);
        ddpc_alloc_fail_after(-1);
        CHECK(o == NULL);
        CHECK_EQ_INT(ddpc_alloc_live(), live);
        CHECK_STR_CONTAINS(ddpc_last_error(), "out of memory");
    }
    ddpc_optim *o = NULL;
    ddpc_alloc_fail_after(3);
    CHECK_EQ_INT(ddpc_optim_create(&o, &c, 1000), DDPC_OK);
    ddpc_alloc_fail_after(-1);
    ddpc_optim_destroy(o);
    CHECK_EQ_INT(ddpc_alloc_live(), live);
}

static void test_state_buffers(void)
{
    ddpc_optim_config c = ddpc_optim_config_default();
    c.momentum = 0.9f;
    ddpc_optim *sgd = NULL, *adam = NULL;
    CHECK_EQ_INT(ddpc_optim_create(&sgd, &c, 5), DDPC_OK);
    c.type = DDPC_OPTIM_ADAMW;
    CHECK_EQ_INT(ddpc_optim_create(&adam, &c, 5), DDPC_OK);
    const char *name = NULL;
    CHECK_EQ_INT(ddpc_optim_num_state(sgd), 1);
    CHECK(ddpc_optim_state(sgd, 0, &name) != NULL);
    CHECK(name && strcmp(name, "momentum") == 0);
    CHECK(ddpc_optim_state(sgd, 1, &name) == NULL);
    CHECK_EQ_INT(ddpc_optim_num_state(adam), 2);
    CHECK(ddpc_optim_state(adam, 0, &name) != NULL && strcmp(name, "exp_avg") == 0);
    float *v = ddpc_optim_state(adam, 1, &name);
    CHECK(v != NULL && strcmp(name, "exp_avg_sq") == 0);
    CHECK(ddpc_optim_state(adam, 0, NULL) != v);
    for (int i = 0; i < 5; i++)
        CHECK(v[i] == 0.0f);
    CHECK_EQ_INT(ddpc_optim_numel(adam), 5);
    CHECK_EQ_INT(ddpc_optim_config_of(adam)->type, DDPC_OPTIM_ADAMW);

    float p[5] = {1, 2, 3, 4, 5};
    const float g[5] = {1, 1, 1, 1, 1};
    ddpc_optim_step(adam, p, g, NULL, 0.1f);
    CHECK(v[0] != 0.0f);
    ddpc_optim_reset(adam);
    CHECK(v[0] == 0.0f);
    CHECK_EQ_INT(ddpc_optim_step_count(adam), 0);
    ddpc_optim_destroy(sgd);
    ddpc_optim_destroy(adam);
}

static void test_empty(void)
{
    ddpc_optim_config c = ddpc_optim_config_default();
    ddpc_optim *o = NULL;
    CHECK_EQ_INT(ddpc_optim_create(&o, &c, 0), DDPC_OK);
    ddpc_optim_step(o, NULL, NULL, NULL, 0.1f);
    CHECK_EQ_INT(ddpc_optim_step_count(o), 1);
    ddpc_optim_destroy(o);
}

/* Elements are independent, so a large (threaded) update must equal a small (serial) one on the
 * same prefix, bit for bit. */
static void check_parallel_matches_serial(ddpc_optim_type type)
{
    enum { BIG = 100000, SMALL = 1000 };
    ddpc_optim_config c = ddpc_optim_config_default();
    c.type = type;
    c.momentum = 0.9f;
    c.nesterov = true;
    c.weight_decay = 0.05f;
    ddpc_optim *big = NULL, *small = NULL;
    CHECK_EQ_INT(ddpc_optim_create(&big, &c, BIG), DDPC_OK);
    CHECK_EQ_INT(ddpc_optim_create(&small, &c, SMALL), DDPC_OK);
    float *pb = malloc(BIG * sizeof(float)), *ps = malloc(SMALL * sizeof(float));
    float *g = malloc(BIG * sizeof(float));
    uint8_t *mask = malloc(BIG);
    for (int i = 0; i < BIG; i++) {
        pb[i] = sinf((float)i);
        g[i] = cosf(0.37f * (float)i);
        mask[i] = (uint8_t)(i % 3 != 0);
    }
    memcpy(ps, pb, SMALL * sizeof(float));
    for (int s = 0; s < 3; s++) {
        ddpc_optim_step(big, pb, g, mask, 0.01f);
        ddpc_optim_step(small, ps, g, mask, 0.01f);
    }
    CHECK(memcmp(pb, ps, SMALL * sizeof(float)) == 0);
    CHECK(memcmp(ddpc_optim_state(big, 0, NULL), ddpc_optim_state(small, 0, NULL),
                 SMALL * sizeof(float)) == 0);
    free(pb);
    free(ps);
    free(g);
    free(mask);
    ddpc_optim_destroy(big);
    ddpc_optim_destroy(small);
}

static void test_parallel_matches_serial(void)
{
    check_parallel_matches_serial(DDPC_OPTIM_SGD);
    check_parallel_matches_serial(DDPC_OPTIM_ADAMW);
}

int main(void)
{
    RUN_TEST(test_defaults_and_names);
    RUN_TEST(test_invalid_configs);
    RUN_TEST(test_alloc_failure_does_not_leak);
    RUN_TEST(test_state_buffers);
    RUN_TEST(test_empty);
    RUN_TEST(test_parallel_matches_serial);
    return check_summary();
}
