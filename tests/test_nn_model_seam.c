// SPDX-License-Identifier: MIT
/* Tests for src/nn/model_seam.c and model_registry.c, the public model seam: a type registered by
 * name is built by ddpc_model_create from its own copied config, runs forward and backward
 * through the accessors with the DDP/ZeRO hooks seen (grad-ready for every tensor, param-use and
 * grad-use redirected), and matches the same type made by ddpc_model_create_custom; registration
 * refuses bad, taken and incomplete tables; add_param refuses bad names and shapes and calls after
 * build; optional members may be NULL (no arena). */
#include <ddpc/model_ops.h>

#include "check.h"

/* "affine": logits (n, C) = x (n, D) @ w^T + b, with `scale` from its own config multiplying w's
 * init; no arena (its logits and gradients live in impl). */
typedef struct {
    float scale;
} affine_config;

typedef struct {
    int w, b;
    int64_t d, c, n, n_valid;
    const float *x;
    const int32_t *y;
    float logits[64], losses[8], dlogits[64];
} affine;

static ddpc_status affine_build(ddpc_model *m)
{
    const ddpc_model_config *c = ddpc_model_config_of(m);
    static affine impl; /* one model at a time in this test */
    impl = (affine){.d = c->in_width, .c = c->num_classes};
    ddpc_model_set_impl(m, &impl);
    int64_t ws[2] = {impl.c, impl.d}, bs[1] = {impl.c};
    DDPC_TRY(ddpc_model_add_param(m, "lin.weight", 2, ws, true, &impl.w));
    DDPC_TRY(ddpc_model_add_param(m, "lin.bias", 1, bs, false, &impl.b));
    ddpc_model_set_outputs_per_sample(m, impl.c);
    ddpc_model_set_train_flops(m, 6.0 * (double)(impl.c * impl.d));
    return DDPC_OK;
}

static void affine_init(ddpc_model *m)
{
    affine *a = ddpc_model_impl(m);
    const affine_config *own = ddpc_model_type_config(m);
    float *w = ddpc_model_host_param(m, a->w), *b = ddpc_model_host_param(m, a->b);
    for (int64_t i = 0; i < a->c * a->d; i++)
        w[i] = own->scale * (float)((i % 5) - 2);
    for (int64_t i = 0; i < a->c; i++)
        b[i] = 0.1f * (float)i;
}

static ddpc_status affine_forward(ddpc_model *m, const ddpc_model_input *in, bool training,
                                  ddpc_model_output *out)
{
    (void)training;
    affine *a = ddpc_model_impl(m);
    const ddpc_kernel_table *k = ddpc_model_backend(m);
    k->linear_forward(DDPC_PREC_FP32, a->logits, in->x, ddpc_model_param_ptr(m, a->w),
                      ddpc_model_param_ptr(m, a->b), in->n, a->d, a->c);
    a->n = in->n, a->x = in->x, a->y = in->targets;
    ddpc_model_set_probs(m, a->logits, (size_t)(in->n * a->c));
    *out = (ddpc_model_output){0};
    out->loss = k->cross_entropy_forward(a->logits, a->losses, a->logits, in->targets, in->n, a->c,
                                         -1, &out->n_valid);
    a->n_valid = out->n_valid;
    return DDPC_OK;
}

static void affine_backward(ddpc_model *m, float dloss)
{
    affine *a = ddpc_model_impl(m);
    const ddpc_kernel_table *k = ddpc_model_backend(m);
    k->fill_f32(a->dlogits, 0.0f, a->n * a->c);
    k->cross_entropy_backward(a->dlogits, a->logits, a->y, a->n, a->c, -1, a->n_valid, dloss);
    k->linear_backward(DDPC_PREC_FP32, NULL, ddpc_model_grad_ptr(m, a->w),
                       ddpc_model_grad_ptr(m, a->b), a->dlogits, a->x,
                       ddpc_model_param_ptr(m, a->w), a->n, a->d, a->c);
    ddpc_model_grad_ready(m, a->b);
    ddpc_model_grad_ready(m, a->w);
}

static const ddpc_model_ops affine_ops = {
    .name = "affine_test",
    .config_size = sizeof(affine_config),
    .build = affine_build,
    .init = affine_init,
    .forward = affine_forward,
    .backward = affine_backward,
};

static ddpc_model_config common(void)
{
    ddpc_model_config c = ddpc_model_config_default();
    c.in_channels = 1, c.in_height = 1, c.in_width = 3, c.num_classes = 4;
    return c;
}

static void test_register(void)
{
    ddpc_model_ops bad = affine_ops;
    bad.name = "Affine";
    CHECK_EQ_INT(ddpc_model_register(&bad), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "[a-z0-9_]");
    bad = affine_ops, bad.name = "a_name_of_16_chr";
    CHECK_EQ_INT(ddpc_model_register(&bad), DDPC_EINVAL);
    bad = affine_ops, bad.backward = NULL;
    CHECK_EQ_INT(ddpc_model_register(&bad), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "no backward member");
    bad = affine_ops, bad.data_kind = (ddpc_dataset_kind)7;
    CHECK_EQ_INT(ddpc_model_register(&bad), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "data_kind 7");
    bad = affine_ops, bad.name = "mlp";
    CHECK_EQ_INT(ddpc_model_register(&bad), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "'mlp' is already registered");
    CHECK(ddpc_model_lookup("affine_test") == NULL);
    CHECK_EQ_INT(ddpc_model_register(&affine_ops), DDPC_OK);
    CHECK(ddpc_model_lookup("affine_test") == &affine_ops);
    CHECK(ddpc_model_lookup("mlp") != NULL);
    CHECK_STR_CONTAINS(ddpc_model_types(), "mlp, cnn, gpt, seq2seq, affine_test");
    const char *names[8];
    CHECK_EQ_INT(ddpc_model_type_names(names, 8), 5);
    CHECK(strcmp(names[4], "affine_test") == 0);
    ddpc_model_config c = common();
    snprintf(c.type, sizeof c.type, "afine_test");
    ddpc_model *m = NULL;
    CHECK_EQ_INT(ddpc_model_create(&m, &c), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "affine_test");
}

static size_t ready[8], n_ready;
static void on_ready(void *ctx, size_t tensor)
{
    (void)ctx;
    ready[n_ready++ % 8] = tensor;
}
static float other_grad[16];
static float *grad_use(void *ctx, size_t tensor)
{
    (void)ctx;
    return tensor == 1 ? other_grad : NULL; /* the bias's gradient elsewhere, as ZeRO-2 pools */
}
static float other_params[16];
static float *param_use(void *ctx, size_t tensor)
{
    (void)ctx;
    return tensor == 1 ? other_params : NULL;
}

static void test_create_and_run(void)
{
    affine_config own = {.scale = 0.5f};
    ddpc_model_config c = common();
    snprintf(c.type, sizeof c.type, "affine_test");
    c.type_config = &own;
    ddpc_model *m = NULL;
    CHECK_EQ_INT(ddpc_model_create(&m, &c), DDPC_OK);
    if (!m)
        return;
    own.scale = 9.0f; /* the model keeps its own copy */
    CHECK_NEAR(((const affine_config *)ddpc_model_type_config(m))->scale, 0.5, 0);
    CHECK(ddpc_model_config_of(m)->type_config == ddpc_model_type_config(m));
    CHECK_EQ_INT(ddpc_model_num_tensors(m), 2);
    CHECK(strcmp(ddpc_model_tensor(m, 0)->name, "lin.weight") == 0);
    CHECK_EQ_INT(ddpc_model_num_params(m), 16 + 16); /* each view 16-float aligned */
    CHECK_EQ_INT(ddpc_model_decay_mask(m)[0], 1);
    CHECK_EQ_INT(ddpc_model_decay_mask(m)[16], 0);
    CHECK_NEAR(ddpc_model_params(m)[0], -1.0, 0); /* init saw scale 0.5: (0 - 2) * 0.5 */
    CHECK_EQ_INT(ddpc_model_activation_bytes(m, 100, false), 0); /* no arena_floats: none */
    CHECK_NEAR(ddpc_model_train_flops_per_sample(m), 72, 0);
    CHECK(!ddpc_model_can_checkpoint(m));

    float x[6] = {1, 2, 3, -1, 0, 1};
    int32_t y[2] = {3, 0};
    ddpc_model_input in = {.n = 2, .x = x, .targets = y};
    ddpc_model_output o;
    ddpc_model_zero_grad(m);
    CHECK_EQ_INT(ddpc_model_forward(m, &in, true, &o), DDPC_OK);
    CHECK_EQ_INT(o.n_valid, 2);
    CHECK(ddpc_model_probs(m) != NULL);
    float gw_plain[16], gb_plain[4];
    n_ready = 0;
    ddpc_model_set_grad_ready_hook(m, on_ready, NULL);
    CHECK_EQ_INT(ddpc_model_backward(m, 1.0f), DDPC_OK);
    CHECK_EQ_INT(n_ready, 2);
    CHECK_EQ_INT(ready[0], 1); /* reverse registration order */
    CHECK_EQ_INT(ready[1], 0);
    memcpy(gw_plain, ddpc_model_grads(m), sizeof gw_plain);
    memcpy(gb_plain, ddpc_model_grads(m) + 16, sizeof gb_plain);
    CHECK(gb_plain[0] != 0.0f);

    /* The hooks redirect the bias's gradient and parameters; the weight's stay in place. */
    ddpc_model_zero_grad(m);
    memset(other_grad, 0, sizeof other_grad);
    memcpy(other_params, ddpc_model_params(m) + 16, 4 * sizeof(float));
    ddpc_model_set_grad_use_hook(m, grad_use, NULL);
    ddpc_model_set_param_use_hook(m, param_use, NULL);
    CHECK_EQ_INT(ddpc_model_forward(m, &in, true, &o), DDPC_OK);
    CHECK_EQ_INT(ddpc_model_backward(m, 1.0f), DDPC_OK);
    CHECK(memcmp(other_grad, gb_plain, sizeof gb_plain) == 0);
    CHECK_NEAR(ddpc_model_grads(m)[16], 0, 0);
    CHECK(memcmp(ddpc_model_grads(m), gw_plain, sizeof gw_plain) == 0);
    other_params[0] += 100.0f; /* the forward reads the hook's copy */
    ddpc_model_output o2;
    CHECK_EQ_INT(ddpc_model_forward(m, &in, true, &o2), DDPC_OK);
    CHECK(o2.loss != o.loss);
    ddpc_model_destroy(m);

    /* create_custom: the same model without registering by name. */
    own.scale = 0.5f;
    ddpc_model_config plain = common();
    CHECK_EQ_INT(ddpc_model_create_custom(&m, &affine_ops, &own, &plain), DDPC_OK);
    if (m) {
        CHECK(strcmp(ddpc_model_config_of(m)->type, "affine_test") == 0);
        CHECK_NEAR(ddpc_model_params(m)[0], -1.0, 0);
    }
    ddpc_model_destroy(m);
    CHECK_EQ_INT(ddpc_model_create_custom(&m, &affine_ops, NULL, &plain), DDPC_OK);
    if (m) /* no own config given: zeros, so scale 0 */
        CHECK_NEAR(ddpc_model_params(m)[0], 0.0, 0);
    ddpc_model_destroy(m);
    plain.activation_checkpointing = true;
    CHECK_EQ_INT(ddpc_model_create_custom(&m, &affine_ops, &own, &plain), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "'affine_test' has no activation checkpointing");
}

/* build members that register badly. */
static int bad_case;
static ddpc_status bad_build(ddpc_model *m)
{
    int64_t ok[2] = {2, 3}, zero[1] = {0};
    DDPC_TRY(ddpc_model_add_param(m, "a", 2, ok, true, NULL));
    switch (bad_case) {
    case 0: return ddpc_model_add_param(m, "a", 2, ok, true, NULL);
    case 1: return ddpc_model_add_buffer(m, "a", 2, ok, NULL);
    case 2: return ddpc_model_add_param(m, "z", 1, zero, true, NULL);
    case 3: return ddpc_model_add_param(m, "n", 5, ok, true, NULL);
    default: return ddpc_model_add_param(m, "", 1, ok, true, NULL);
    }
}

static void test_bad_registration(void)
{
    ddpc_model_ops ops = affine_ops;
    ops.name = "bad";
    ops.build = bad_build;
    const char *want[] = {"'a' is registered twice", "'a' is registered twice",
                          "size 0 in dimension 0", "5 dimensions", "name must be 1 to"};
    for (bad_case = 0; bad_case < 5; bad_case++) {
        ddpc_model *m = NULL;
        ddpc_model_config c = common();
        CHECK_EQ_INT(ddpc_model_create_custom(&m, &ops, NULL, &c), DDPC_EINVAL);
        CHECK_STR_CONTAINS(ddpc_last_error(), want[bad_case]);
        CHECK(m == NULL);
    }
    /* After build the buffers exist: registering then is refused. */
    affine_config own = {.scale = 1.0f};
    ddpc_model_config c = common();
    ddpc_model *m = NULL;
    CHECK_EQ_INT(ddpc_model_create_custom(&m, &affine_ops, &own, &c), DDPC_OK);
    int64_t s[1] = {4};
    if (m)
        CHECK_EQ_INT(ddpc_model_add_param(m, "late", 1, s, false, NULL), DDPC_EINVAL);
    ddpc_model_destroy(m);
}

int main(void)
{
    RUN_TEST(test_register);
    RUN_TEST(test_create_and_run);
    RUN_TEST(test_bad_registration);
    return check_summary();
}
