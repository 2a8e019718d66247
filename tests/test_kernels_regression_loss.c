// SPDX-License-Identifier: MIT
/* Tests for regression_loss.c and nn/loss.c: each elementwise loss against a double reference,
 * its gradient by finite differences, accumulation (+=), smooth_l1's beta = 0 being L1, the
 * numerically stable BCE at huge logits; the mlp and cnn ending in each loss (finite differences
 * through the model), and the refusals (gpt, multi-head, negative beta, a GPU) in one line. */
#include "kernels_testutil.h"
#include "nn_testutil.h"

#include <ddpc/models.h>
#include <ddpc/nn.h>

#include "nn/loss.h"

#include <string.h>

typedef struct {
    ddpc_loss loss;
    float beta;
    float *pred, *target, *probs;
    int64_t n;
} loss_ctx;

static double run_forward(void *p)
{
    loss_ctx *c = p;
    switch (c->loss) {
    case DDPC_LOSS_MSE:
        return ddpc_mse_forward(c->pred, c->target, c->n);
    case DDPC_LOSS_L1:
        return ddpc_l1_forward(c->pred, c->target, c->n);
    case DDPC_LOSS_SMOOTH_L1:
        return ddpc_smooth_l1_forward(c->pred, c->target, c->n, c->beta);
    default:
        return ddpc_bce_logits_forward(c->probs, c->pred, c->target, c->n);
    }
}

static void run_backward(loss_ctx *c, float *d, float dloss)
{
    switch (c->loss) {
    case DDPC_LOSS_MSE:
        ddpc_mse_backward(d, c->pred, c->target, c->n, dloss);
        break;
    case DDPC_LOSS_L1:
        ddpc_l1_backward(d, c->pred, c->target, c->n, dloss);
        break;
    case DDPC_LOSS_SMOOTH_L1:
        ddpc_smooth_l1_backward(d, c->pred, c->target, c->n, c->beta, dloss);
        break;
    default:
        ddpc_bce_logits_forward(c->probs, c->pred, c->target, c->n);
        ddpc_bce_logits_backward(d, c->probs, c->target, c->n, dloss);
        break;
    }
}

/* The loss of one element, in double. */
static double reference(ddpc_loss loss, double x, double y, double beta)
{
    double d = x - y;
    switch (loss) {
    case DDPC_LOSS_MSE:
        return d * d;
    case DDPC_LOSS_L1:
        return fabs(d);
    case DDPC_LOSS_SMOOTH_L1:
        return beta == 0.0 ? fabs(d) : fabs(d) < beta ? 0.5 * d * d / beta : fabs(d) - 0.5 * beta;
    default:
        return -(y * log(1.0 / (1.0 + exp(-x))) + (1.0 - y) * log(1.0 - 1.0 / (1.0 + exp(-x))));
    }
}

static void check_loss(ddpc_loss loss, float beta)
{
    enum { N = 53 };
    float *pred = tu_rand(N, -3, 3, 11), *target = tu_rand(N, -3, 3, 12), probs[N];
    if (loss == DDPC_LOSS_BCE_LOGITS)
        for (int i = 0; i < N; i++) /* multi-label 0/1 and probabilities */
            target[i] = i % 3 == 0 ? 0.0f : i % 3 == 1 ? 1.0f : (target[i] + 3.0f) / 6.0f;
    for (int i = 0; i < N; i++) { /* keep |d| off the kinks at 0 and beta by > 2 eps */
        float d = pred[i] - target[i];
        if (fabsf(d) < 0.05f || fabsf(fabsf(d) - beta) < 0.05f)
            pred[i] += 0.15f;
    }
    loss_ctx c = {
        .loss = loss, .beta = beta, .pred = pred, .target = target, .probs = probs, .n = N};
    double want = 0.0;
    for (int i = 0; i < N; i++)
        want += reference(loss, pred[i], target[i], beta);
    want /= N;
    CHECK_NEAR(run_forward(&c), want, 1e-6 * (1.0 + want));
    /* Gradient by central differences (the loss is the function itself: dloss = 1); eps 1e-2 keeps
     * the fp32 rounding of the mean (~6e-8) far below the differences. */
    float *d = tu_alloc(N);
    run_backward(&c, d, 1.0f);
    CHECK(tu_grad_check(ddpc_loss_name(loss), pred, d, N, 1, 1e-2f, run_forward, &c) < 1e-3);
    /* Backward accumulates and scales by dloss. */
    float *d2 = tu_alloc(N);
    memcpy(d2, d, N * sizeof *d);
    run_backward(&c, d2, 0.5f);
    for (int i = 0; i < N; i++)
        CHECK_NEAR(d2[i], 1.5f * d[i], 1e-6 * (1.0 + fabs(d[i])));
    CHECK(run_forward(&(loss_ctx){.loss = loss, .pred = pred, .target = target, .probs = probs,
                                  .n = 0}) == 0.0f);
    ddpc_free(pred);
    ddpc_free(target);
    ddpc_free(d);
    ddpc_free(d2);
}

static void test_losses_against_reference(void)
{
    check_loss(DDPC_LOSS_MSE, 0.0f);
    check_loss(DDPC_LOSS_L1, 0.0f);
    check_loss(DDPC_LOSS_SMOOTH_L1, 1.0f);
    check_loss(DDPC_LOSS_SMOOTH_L1, 0.25f);
    check_loss(DDPC_LOSS_SMOOTH_L1, 0.0f); /* torch: beta 0 is L1 */
    check_loss(DDPC_LOSS_BCE_LOGITS, 0.0f);
}

static void test_bce_stable_and_counts(void)
{
    float x[4] = {1000.0f, -1000.0f, 0.0f, 30.0f}, y[4] = {1.0f, 0.0f, 1.0f, 0.0f}, p[4];
    float v = ddpc_bce_logits_forward(p, x, y, 4);
    CHECK(isfinite(v));
    CHECK_NEAR(v, (0.0 + 0.0 + log(2.0) + 30.0) / 4.0, 1e-5);
    CHECK(p[0] == 1.0f && p[1] == 0.0f && p[2] == 0.5f);
    CHECK_EQ_INT(ddpc_multilabel_correct(p, y, 4), 2); /* 0.5 is not > 0.5; 30 says 1, not 0 */
    double a, s;
    float pr[3] = {1.0f, 2.0f, -1.0f}, t[3] = {0.0f, 2.0f, 1.0f};
    ddpc_regression_errors(pr, t, 3, &a, &s);
    CHECK_NEAR(a, 3.0, 1e-12);
    CHECK_NEAR(s, 5.0, 1e-12);
    /* L1's gradient is 0 at a tie, as torch's sign(). */
    float d[3] = {0};
    ddpc_l1_backward(d, pr, t, 3, 1.0f);
    CHECK(d[1] == 0.0f);
}

static void test_names(void)
{
    for (int i = 0; i < DDPC_LOSS_COUNT; i++) {
        ddpc_loss l;
        CHECK(ddpc_loss_from_name(ddpc_loss_name((ddpc_loss)i), &l) && l == (ddpc_loss)i);
    }
    ddpc_loss l;
    CHECK(!ddpc_loss_from_name("huber", &l));
    CHECK(strcmp(ddpc_loss_name(DDPC_LOSS_COUNT), "unknown") == 0);
    CHECK(ddpc_loss_is_regression(DDPC_LOSS_SMOOTH_L1));
    CHECK(!ddpc_loss_is_regression(DDPC_LOSS_BCE_LOGITS));
}

/* An mlp or cnn with `loss` and `k` outputs: finite differences of the whole model's loss. */
static void check_model(const char *type, ddpc_loss loss, int64_t k)
{
    ddpc_model_config c = ddpc_model_config_default();
    snprintf(c.type, sizeof c.type, "%s", type);
    c.loss = loss;
    c.loss_beta = 0.5f;
    c.num_classes = k;
    ddpc_mlp_config mlp = ddpc_mlp_config_default();
    ddpc_cnn_config cnn = ddpc_cnn_config_default();
    mlp.hidden[0] = cnn.hidden[0] = 8, mlp.n_hidden = cnn.n_hidden = 1;
    cnn.channels[0] = 3, cnn.n_channels = 1;
    c.type_config = strcmp(type, "cnn") == 0 ? (const void *)&cnn : (const void *)&mlp;
    c.in_height = c.in_width = strcmp(type, "cnn") == 0 ? 6 : 1;
    c.in_channels = strcmp(type, "cnn") == 0 ? 1 : 5;
    ddpc_model *m;
    CHECK_EQ_INT(ddpc_model_create(&m, &c), DDPC_OK);
    if (!m)
        return;
    enum { N = 4 };
    int64_t in = c.in_channels * c.in_height * c.in_width;
    float *x = tu_rand(N * in, -1, 1, 3), *y = tu_rand(N * k, -1, 1, 4);
    if (loss == DDPC_LOSS_BCE_LOGITS)
        for (int64_t i = 0; i < N * k; i++)
            y[i] = y[i] > 0.0f;
    ddpc_model_input mi = {.n = N, .x = x, .float_targets = y};
    ddpc_model_output out;
    CHECK_EQ_INT(ddpc_model_forward(m, &mi, true, &out), DDPC_OK);
    CHECK_EQ_INT(out.n_valid, N * k);
    CHECK(ddpc_model_outputs_per_sample(m) == k);
    if (ddpc_loss_is_regression(loss)) { /* the probabilities are the predictions */
        double a, s;
        ddpc_regression_errors(ddpc_model_probs(m), y, N * k, &a, &s);
        CHECK_NEAR(out.sum_abs_err, a, 1e-9);
        CHECK_NEAR(out.sum_sq_err, s, 1e-9);
        if (loss == DDPC_LOSS_MSE)
            CHECK_NEAR(out.loss, s / (double)(N * k), 1e-6);
    }
    CHECK(nn_check_gradients(m, &mi, 4, 2e-2, 3) > 0);
    /* Without float targets (class labels are not this loss's): no loss, and backward refuses. */
    int32_t labels[N] = {0};
    mi.float_targets = NULL;
    mi.targets = labels;
    CHECK_EQ_INT(ddpc_model_forward(m, &mi, false, &out), DDPC_OK);
    CHECK(ddpc_model_backward(m, 1.0f) != DDPC_OK);
    ddpc_model_destroy(m);
    ddpc_free(x);
    ddpc_free(y);
}

static void test_models(void)
{
    for (int l = DDPC_LOSS_MSE; l < DDPC_LOSS_COUNT; l++) {
        check_model("mlp", (ddpc_loss)l, 3);
        check_model("cnn", (ddpc_loss)l, 2);
    }
    check_model("mlp", DDPC_LOSS_MSE, 1); /* one output: plain regression */
}

static void test_refusals(void)
{
    ddpc_model_config c = ddpc_model_config_default();
    ddpc_model *m = NULL;
    snprintf(c.type, sizeof c.type, "gpt");
    ddpc_gpt_config gpt = {.n_layer = 1, .n_head = 2, .n_embd = 16, .block_size = 8};
    c.num_classes = 256, c.type_config = &gpt;
    c.loss = DDPC_LOSS_MSE;
    CHECK_EQ_INT(ddpc_model_create(&m, &c), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "loss 'mse' needs model type mlp or cnn");
    c = ddpc_model_config_default();
    c.loss = DDPC_LOSS_L1;
    c.n_heads = 2, c.head_classes[0] = 2, c.head_classes[1] = 3;
    CHECK_EQ_INT(ddpc_model_create(&m, &c), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "one head");
    c = ddpc_model_config_default();
    c.loss = DDPC_LOSS_SMOOTH_L1;
    c.loss_beta = -1.0f;
    CHECK_EQ_INT(ddpc_model_create(&m, &c), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "beta must be >= 0");
    CHECK(m == NULL);
    /* A table without these losses' kernels (a device's that lacks them): refused by name at
     * model creation; cross-entropy still passes. The CPU table has them all. */
    ddpc_kernel_table bare = *ddpc_kernel_table_cpu();
    bare.name = "bare";
    bare.bce_logits_forward = NULL;
    c = ddpc_model_config_default();
    c.loss = DDPC_LOSS_BCE_LOGITS;
    CHECK_EQ_INT(ddpc__loss_check(&c, true, &bare), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(),
                       "loss 'bce_logits' has no kernels on bare; use device: cpu");
    CHECK_EQ_INT(ddpc__loss_check(&c, true, ddpc_kernel_table_cpu()), DDPC_OK);
    c.loss = DDPC_LOSS_CROSS_ENTROPY;
    CHECK_EQ_INT(ddpc__loss_check(&c, false, &bare), DDPC_OK);
}

int main(void)
{
    RUN_TEST(test_losses_against_reference);
    RUN_TEST(test_bce_stable_and_counts);
    RUN_TEST(test_names);
    RUN_TEST(test_models);
    RUN_TEST(test_refusals);
    return check_summary();
}
