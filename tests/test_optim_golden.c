// SPDX-License-Identifier: MIT
/* ddpc optimizers and clipping against PyTorch 1.13 reference values (tests/golden/optim_golden.h,
 * made by tests/golden/make_optim_golden.py): 5 steps of SGD (momentum, nesterov, weight decay)
 * and AdamW (decoupled decay on a mask, as torch's two param groups), within 1e-6 relative. */
#include <ddpc/alloc.h>
#include <ddpc/optim.h>

#include "check.h"
#include "golden/optim_golden.h"

#define GOLDEN_TOL 1e-6

static int bit_exact_count;
static int compared_count;

/* Checks got (n) against want (n) within GOLDEN_TOL and counts the bit-identical values. */
static void check_close(const char *what, const float *got, const float *want, int n)
{
    for (int i = 0; i < n; i++) {
        CHECK_NEAR(got[i], want[i], GOLDEN_TOL);
        if (!(fabs((double)got[i] - (double)want[i]) <=
              GOLDEN_TOL * fmax(1.0, fabs((double)want[i]))))
            fprintf(stderr, "  %s[%d]\n", what, i);
        bit_exact_count += memcmp(&got[i], &want[i], sizeof(float)) == 0;
        compared_count++;
    }
}

static void test_sgd_matches_torch(void)
{
    ddpc_optim_config c = ddpc_optim_config_default();
    c.type = DDPC_OPTIM_SGD;
    c.momentum = golden_sgd_momentum;
    c.nesterov = true;
    c.weight_decay = golden_sgd_weight_decay;
    ddpc_optim *o = NULL;
    CHECK_EQ_INT(ddpc_optim_create(&o, &c, GOLDEN_SGD_N), DDPC_OK);
    float p[GOLDEN_SGD_N];
    memcpy(p, golden_sgd_params0, sizeof p);
    for (int s = 0; s < GOLDEN_STEPS; s++)
        ddpc_optim_step(o, p, golden_sgd_grads[s], NULL, golden_sgd_lrs[s]);
    check_close("sgd params", p, golden_sgd_params, GOLDEN_SGD_N);
    check_close("sgd momentum", ddpc_optim_state(o, 0, NULL), golden_sgd_momentum_buffer,
                GOLDEN_SGD_N);
    ddpc_optim_destroy(o);
}

static void test_adamw_matches_torch(void)
{
    ddpc_optim_config c = ddpc_optim_config_default();
    c.type = DDPC_OPTIM_ADAMW;
    c.beta1 = golden_adamw_beta1;
    c.beta2 = golden_adamw_beta2;
    c.eps = golden_adamw_eps;
    c.weight_decay = golden_adamw_weight_decay;
    ddpc_optim *o = NULL;
    CHECK_EQ_INT(ddpc_optim_create(&o, &c, GOLDEN_ADAMW_N), DDPC_OK);
    float p[GOLDEN_ADAMW_N];
    memcpy(p, golden_adamw_params0, sizeof p);
    for (int s = 0; s < GOLDEN_STEPS; s++)
        ddpc_optim_step(o, p, golden_adamw_grads[s], golden_adamw_decay_mask, golden_adamw_lrs[s]);
    CHECK_EQ_INT(ddpc_optim_step_count(o), GOLDEN_STEPS);
    check_close("adamw params", p, golden_adamw_params, GOLDEN_ADAMW_N);
    check_close("adamw exp_avg", ddpc_optim_state(o, 0, NULL), golden_adamw_exp_avg,
                GOLDEN_ADAMW_N);
    check_close("adamw exp_avg_sq", ddpc_optim_state(o, 1, NULL), golden_adamw_exp_avg_sq,
                GOLDEN_ADAMW_N);
    ddpc_optim_destroy(o);
}

static void test_clip_matches_torch(void)
{
    float g[GOLDEN_SGD_N];
    memcpy(g, golden_clip_grads0, sizeof g);
    float norm = ddpc_clip_grad_norm(g, GOLDEN_SGD_N, golden_clip_over_max_norm);
    CHECK_NEAR(norm, golden_clip_over_norm, GOLDEN_TOL);
    check_close("clip over", g, golden_clip_over_grads, GOLDEN_SGD_N);

    memcpy(g, golden_clip_grads0, sizeof g);
    norm = ddpc_clip_grad_norm(g, GOLDEN_SGD_N, golden_clip_under_max_norm);
    CHECK_NEAR(norm, golden_clip_under_norm, GOLDEN_TOL);
    CHECK(memcmp(g, golden_clip_under_grads, sizeof g) == 0);
}

int main(void)
{
    RUN_TEST(test_sgd_matches_torch);
    RUN_TEST(test_adamw_matches_torch);
    RUN_TEST(test_clip_matches_torch);
    printf("%d of %d compared values bit-identical to torch\n", bit_exact_count, compared_count);
    return check_summary();
}
