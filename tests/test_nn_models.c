// SPDX-License-Identifier: MIT
/* Model tests: parameter layout, whole-model gradients against central finite differences
 * (small mlp, cnn and gpt, dropout off and on; multi-head mlp and cnn through each head),
 * determinism, and no allocation after warm-up (gpt; cnn and mlp with BatchNorm). */
#include <ddpc/alloc.h>
#include <ddpc/kernels.h>
#include <ddpc/models.h>
#include <ddpc/nn.h>
#include <ddpc/rng.h>

#include "check.h"
#include "nn_testutil.h"

static ddpc_model *make(ddpc_model_config c)
{
    ddpc_model *m = NULL;
    ddpc_status s = ddpc_model_create(&m, &c);
    if (s != DDPC_OK)
        fprintf(stderr, "create failed: %s\n", ddpc_last_error());
    return m;
}

/* test_nn_models' rule: at most a quarter of the samples may sit on kinks. */
static void check_gradients(ddpc_model *m, const ddpc_model_input *in, int samples, double tol)
{
    nn_check_gradients(m, in, samples, tol, 3);
}

static void fill_images(float *x, int32_t *y, int64_t n, int64_t d, int64_t classes)
{
    ddpc_rng r = ddpc_rng_make(5, 1);
    for (int64_t i = 0; i < n * d; i++)
        x[i] = ddpc_rng_normal(&r);
    for (int64_t i = 0; i < n; i++)
        y[i] = (int32_t)ddpc_rng_below(&r, (uint64_t)classes);
}

static void test_mlp_layout_and_gradients(void)
{
    ddpc_model_config c = ddpc_model_config_default();
    ddpc_mlp_config own = ddpc_mlp_config_default();
    c.type_config = &own;
    c.in_channels = 1, c.in_height = 3, c.in_width = 5, c.num_classes = 7;
    own.hidden[0] = 9, own.hidden[1] = 6, own.n_hidden = 2;
    ddpc_model *m = make(c);
    CHECK(m != NULL);
    if (!m)
        return;
    CHECK_EQ_INT(ddpc_model_num_tensors(m), 6);
    CHECK(strcmp(ddpc_model_tensor(m, 0)->name, "fc.0.weight") == 0);
    CHECK_EQ_INT(ddpc_model_tensor(m, 0)->shape[0], 9);
    CHECK_EQ_INT(ddpc_model_tensor(m, 0)->shape[1], 15);
    CHECK(!ddpc_model_tensor(m, 1)->decay);
    for (size_t i = 1; i < ddpc_model_num_tensors(m); i++)
        CHECK(ddpc_model_tensor(m, i)->offset >= ddpc_model_tensor(m, i - 1)->offset +
                                                     ddpc_model_tensor(m, i - 1)->numel);
    float x[3 * 15];
    int32_t y[3];
    fill_images(x, y, 3, 15, 7);
    ddpc_model_input in = {.n = 3, .x = x, .targets = y};
    check_gradients(m, &in, 6, 2e-2);
    ddpc_model_destroy(m);
}

static void test_mlp_dropout_gradients(void)
{
    ddpc_model_config c = ddpc_model_config_default();
    ddpc_mlp_config own = ddpc_mlp_config_default();
    c.type_config = &own;
    c.in_channels = 1, c.in_height = 2, c.in_width = 4, c.num_classes = 3;
    own.hidden[0] = 11, own.n_hidden = 1, c.dropout = 0.3f;
    ddpc_model *m = make(c);
    if (!m)
        return;
    float x[4 * 8];
    int32_t y[4];
    fill_images(x, y, 4, 8, 3);
    ddpc_model_input in = {.n = 4, .x = x, .targets = y, .rng_stream = 17};
    check_gradients(m, &in, 6, 2e-2);
    ddpc_model_destroy(m);
}

static void test_cnn_gradients(void)
{
    ddpc_model_config c = ddpc_model_config_default();
    ddpc_cnn_config own = ddpc_cnn_config_default();
    c.type_config = &own;
    strcpy(c.type, "cnn");
    c.in_channels = 2, c.in_height = 9, c.in_width = 7, c.num_classes = 4;
    own.channels[0] = 3, own.channels[1] = 5, own.n_channels = 2, own.kernel_size = 3;
    own.hidden[0] = 6, own.n_hidden = 1;
    ddpc_model *m = make(c);
    CHECK(m != NULL);
    if (!m)
        return;
    CHECK(strcmp(ddpc_model_tensor(m, 0)->name, "conv.0.weight") == 0);
    CHECK_EQ_INT(ddpc_model_tensor(m, 0)->ndim, 4);
    CHECK(strcmp(ddpc_model_tensor(m, 4)->name, "fc.0.weight") == 0);
    CHECK_EQ_INT(ddpc_model_tensor(m, 4)->shape[1], 5 * 2 * 1);
    float x[2 * 2 * 9 * 7];
    int32_t y[2];
    fill_images(x, y, 2, 2 * 9 * 7, 4);
    ddpc_model_input in = {.n = 2, .x = x, .targets = y};
    check_gradients(m, &in, 5, 3e-2);
    ddpc_model_destroy(m);
}

/* cnn with BatchNorm2d: conv without bias, bn.<i> parameters and running-statistics buffers;
 * gradients through the batch statistics match finite differences; evaluation mode uses the
 * running statistics (updated by each training forward with torch's momentum). */
static void test_cnn_batchnorm_gradients(void)
{
    ddpc_model_config c = ddpc_model_config_default();
    ddpc_cnn_config own = ddpc_cnn_config_default();
    c.type_config = &own;
    strcpy(c.type, "cnn");
    c.in_channels = 2, c.in_height = 9, c.in_width = 7, c.num_classes = 4;
    own.channels[0] = 3, own.channels[1] = 5, own.n_channels = 2, own.kernel_size = 3;
    own.hidden[0] = 6, own.n_hidden = 1, own.batchnorm = true;
    ddpc_model *m = make(c);
    CHECK(m != NULL);
    if (!m)
        return;
    const char *names[] = {"conv.0.weight", "bn.0.weight", "bn.0.bias", "conv.1.weight"};
    for (int i = 0; i < 4; i++)
        CHECK(strcmp(ddpc_model_tensor(m, (size_t)i)->name, names[i]) == 0);
    CHECK_EQ_INT(ddpc_model_num_buffers(m), 4);
    CHECK(strcmp(ddpc_model_buffer(m, 0)->name, "bn.0.running_mean") == 0);
    CHECK(strcmp(ddpc_model_buffer(m, 3)->name, "bn.1.running_var") == 0);
    const float *buf = ddpc_model_buffer_data(m);
    CHECK_NEAR(buf[ddpc_model_buffer(m, 1)->offset], 1.0, 0.0); /* running_var starts at 1 */
    float x[3 * 2 * 9 * 7];
    int32_t y[3];
    fill_images(x, y, 3, 2 * 9 * 7, 4);
    ddpc_model_input in = {.n = 3, .x = x, .targets = y};
    check_gradients(m, &in, 5, 3e-2);
    /* The running mean moved away from 0; evaluation differs from training mode. */
    CHECK(fabsf(buf[ddpc_model_buffer(m, 0)->offset]) > 0.0f);
    ddpc_model_output train_out, eval_out;
    CHECK_EQ_INT(ddpc_model_forward(m, &in, true, &train_out), DDPC_OK);
    CHECK_EQ_INT(ddpc_model_forward(m, &in, false, &eval_out), DDPC_OK);
    CHECK(train_out.loss != eval_out.loss);
    ddpc_model_destroy(m);
    c.activation_checkpointing = true; /* refused: a recompute would update the statistics twice */
    ddpc_model *bad = NULL;
    CHECK_EQ_INT(ddpc_model_create(&bad, &c), DDPC_EINVAL);
    CHECK(bad == NULL);
}

/* mlp with BatchNorm1d after each hidden Linear ("fc_bn.<i>"): finite differences through the
 * batch statistics, buffers registered, evaluation mode differs from training. */
static void test_mlp_batchnorm_gradients(void)
{
    ddpc_model_config c = ddpc_model_config_default();
    ddpc_mlp_config own = ddpc_mlp_config_default();
    c.type_config = &own;
    c.in_channels = 1, c.in_height = 3, c.in_width = 5, c.num_classes = 4;
    own.hidden[0] = 7, own.hidden[1] = 6, own.n_hidden = 2, own.batchnorm = true;
    ddpc_model *m = make(c);
    CHECK(m != NULL);
    if (!m)
        return;
    const char *names[] = {"fc.0.weight", "fc.0.bias", "fc_bn.0.weight", "fc_bn.0.bias",
                           "fc.1.weight", "fc.1.bias", "fc_bn.1.weight", "fc_bn.1.bias"};
    for (int i = 0; i < 8; i++)
        CHECK(strcmp(ddpc_model_tensor(m, (size_t)i)->name, names[i]) == 0);
    CHECK_EQ_INT(ddpc_model_num_buffers(m), 4);
    CHECK(strcmp(ddpc_model_buffer(m, 2)->name, "fc_bn.1.running_mean") == 0);
    float x[5 * 15];
    int32_t y[5];
    fill_images(x, y, 5, 15, 4);
    ddpc_model_input in = {.n = 5, .x = x, .targets = y};
    check_gradients(m, &in, 6, 3e-2);
    ddpc_model_output train_out, eval_out;
    CHECK_EQ_INT(ddpc_model_forward(m, &in, true, &train_out), DDPC_OK);
    CHECK_EQ_INT(ddpc_model_forward(m, &in, false, &eval_out), DDPC_OK);
    CHECK(train_out.loss != eval_out.loss);
    /* One sample: one value per channel, refused in training as torch does; evaluation works. */
    in.n = 1;
    CHECK_EQ_INT(ddpc_model_forward(m, &in, true, &train_out), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "BatchNorm fc_bn.0: expected more than 1 value per "
                                          "channel when training, got 1 (a batch of 1 with 1 "
                                          "position per channel)");
    CHECK_EQ_INT(ddpc_model_forward(m, &in, false, &eval_out), DDPC_OK);
    ddpc_model_destroy(m);
}

/* A multi-head model: tensors of the trunk, then heads.<k>; each head's gradients match finite
 * differences of its own loss, and the other heads' gradients stay exactly zero. */
static void check_heads(ddpc_model_config c, int64_t n, int64_t in_floats, size_t first_head)
{
    ddpc_model *m = make(c);
    CHECK(m != NULL);
    if (!m)
        return;
    CHECK_EQ_INT(ddpc_model_num_tensors(m), first_head + 2 * c.n_heads);
    for (size_t k = 0; k < c.n_heads; k++) {
        const ddpc_param *w = ddpc_model_tensor(m, first_head + 2 * k);
        char name[64];
        snprintf(name, sizeof name, "heads.%zu.weight", k);
        CHECK(strcmp(w->name, name) == 0);
        CHECK_EQ_INT(w->shape[0], c.head_classes[k]);
        snprintf(name, sizeof name, "heads.%zu.bias", k);
        CHECK(strcmp(ddpc_model_tensor(m, first_head + 2 * k + 1)->name, name) == 0);
    }
    CHECK_EQ_INT(ddpc_model_outputs_per_sample(m), c.head_classes[0]);
    float *x = ddpc_malloc(sizeof(float) * (size_t)(n * in_floats));
    int32_t y[8];
    for (int task = 0; task < (int)c.n_heads; task++) {
        fill_images(x, y, n, in_floats, c.head_classes[task]);
        ddpc_model_input in = {.n = n, .x = x, .targets = y, .task = task, .rng_stream = 3};
        check_gradients(m, &in, 5, 3e-2);
        const float *g = ddpc_model_grads(m);
        for (size_t k = 0; k < c.n_heads; k++) {
            const ddpc_param *w = ddpc_model_tensor(m, first_head + 2 * k);
            const ddpc_param *b = ddpc_model_tensor(m, first_head + 2 * k + 1);
            double norm = 0;
            for (size_t i = w->offset; i < b->offset + b->numel; i++)
                norm += fabs((double)g[i]);
            CHECK((norm == 0.0) == ((int)k != task));
        }
        /* The probabilities have the running head's width. */
        const float *p = ddpc_model_probs(m);
        double row = 0;
        for (int64_t j = 0; j < c.head_classes[task]; j++)
            row += p[j];
        CHECK_NEAR(row, 1.0, 1e-5);
    }
    ddpc_model_input bad = {.n = n, .x = x, .targets = y, .task = (int)c.n_heads};
    CHECK_EQ_INT(ddpc_model_forward(m, &bad, false, NULL), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "task");
    ddpc_free(x);
    ddpc_model_destroy(m);
}

static void test_multi_head_mlp_gradients(void)
{
    ddpc_model_config c = ddpc_model_config_default();
    ddpc_mlp_config own = ddpc_mlp_config_default();
    c.type_config = &own;
    c.in_channels = 1, c.in_height = 3, c.in_width = 4, c.num_classes = 99;
    own.hidden[0] = 9, own.hidden[1] = 7, own.n_hidden = 2, c.dropout = 0.2f;
    c.head_classes[0] = 5, c.head_classes[1] = 3, c.head_classes[2] = 2, c.n_heads = 3;
    check_heads(c, 4, 12, 4);
}

static void test_multi_head_cnn_gradients(void)
{
    ddpc_model_config c = ddpc_model_config_default();
    ddpc_cnn_config own = ddpc_cnn_config_default();
    c.type_config = &own;
    strcpy(c.type, "cnn");
    c.in_channels = 1, c.in_height = 6, c.in_width = 6, c.num_classes = 99;
    own.channels[0] = 3, own.n_channels = 1, own.kernel_size = 3;
    own.hidden[0] = 6, own.n_hidden = 1;
    c.head_classes[0] = 4, c.head_classes[1] = 3, c.n_heads = 2;
    check_heads(c, 3, 36, 4);
}

/* One head is the single-head model under other names: same initial values, same loss bits. */
static void test_one_head_equals_single_head(void)
{
    ddpc_model_config c = ddpc_model_config_default();
    ddpc_mlp_config own = ddpc_mlp_config_default();
    c.type_config = &own;
    c.in_channels = 1, c.in_height = 2, c.in_width = 5, c.num_classes = 4;
    own.hidden[0] = 6, own.n_hidden = 1;
    ddpc_model *single = make(c);
    c.head_classes[0] = 4, c.n_heads = 1;
    ddpc_model *headed = make(c);
    if (!single || !headed)
        return;
    CHECK(strcmp(ddpc_model_tensor(single, 2)->name, "fc.1.weight") == 0);
    CHECK(strcmp(ddpc_model_tensor(headed, 2)->name, "heads.0.weight") == 0);
    CHECK_EQ_INT(ddpc_model_num_params(single), ddpc_model_num_params(headed));
    size_t np = ddpc_model_num_params(single);
    CHECK(memcmp(ddpc_model_params(single), ddpc_model_params(headed), np * sizeof(float)) == 0);
    float x[3 * 10];
    int32_t y[3];
    fill_images(x, y, 3, 10, 4);
    ddpc_model_input in = {.n = 3, .x = x, .targets = y};
    ddpc_model_output a, b;
    CHECK_EQ_INT(ddpc_model_forward(single, &in, true, &a), DDPC_OK);
    CHECK_EQ_INT(ddpc_model_forward(headed, &in, true, &b), DDPC_OK);
    CHECK(a.loss == b.loss);
    ddpc_model_destroy(single);
    ddpc_model_destroy(headed);
}

static void test_bad_heads_are_rejected(void)
{
    ddpc_model_config c = ddpc_model_config_default(); /* mlp: its defaults (type_config NULL) */
    ddpc_gpt_config own = ddpc_gpt_config_default();
    c.head_classes[0] = 4, c.head_classes[1] = 1, c.n_heads = 2;
    ddpc_model *m = NULL;
    CHECK_EQ_INT(ddpc_model_create(&m, &c), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "head 1 needs at least 2 classes");
    c.n_heads = DDPC_MODEL_MAX_HEADS + 1;
    CHECK_EQ_INT(ddpc_model_create(&m, &c), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "heads");
    strcpy(c.type, "gpt");
    c.type_config = &own; /* the type's own struct, never another type's */
    c.num_classes = 11, own.n_layer = 1, own.n_head = 2, own.n_embd = 8, own.block_size = 5;
    c.n_heads = 2, c.head_classes[1] = 3;
    CHECK_EQ_INT(ddpc_model_create(&m, &c), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "gpt has one output head");
    CHECK(m == NULL);
}

static ddpc_model *small_gpt(float dropout)
{
    ddpc_model_config c = ddpc_model_config_default();
    ddpc_gpt_config own = ddpc_gpt_config_default();
    c.type_config = &own;
    strcpy(c.type, "gpt");
    c.type_config = &own; /* the type's own struct, never another type's */
    c.num_classes = 11, own.n_layer = 2, own.n_head = 2, own.n_embd = 8, own.block_size = 5;
    c.dropout = dropout;
    return make(c);
}

static void test_gpt_gradients(void)
{
    for (int d = 0; d < 2; d++) {
        ddpc_model *m = small_gpt(d ? 0.2f : 0.0f);
        CHECK(m != NULL);
        if (!m)
            return;
        /* GPT-2's init (std 0.02) leaves gradients near fp32's finite-difference noise floor;
         * larger random parameters give gradients the check can resolve. */
        ddpc_rng pr = ddpc_rng_make(8, 8);
        float *prm = ddpc_model_params(m);
        for (size_t i = 0; i < ddpc_model_num_params(m); i++)
            prm[i] += 0.3f * ddpc_rng_normal(&pr);
        CHECK(strcmp(ddpc_model_tensor(m, 0)->name, "wte.weight") == 0);
        CHECK(strcmp(ddpc_model_tensor(m, 4)->name, "blocks.0.attn.qkv.weight") == 0);
        int32_t tok[2 * 5], tgt[2 * 5];
        ddpc_rng r = ddpc_rng_make(3, 3);
        for (int i = 0; i < 10; i++) {
            tok[i] = (int32_t)ddpc_rng_below(&r, 11);
            tgt[i] = (int32_t)ddpc_rng_below(&r, 11);
        }
        tgt[3] = -1; /* ignored target */
        ddpc_model_input in = {.n = 2, .tokens = tok, .targets = tgt, .rng_stream = 4};
        check_gradients(m, &in, 4, 3e-2);
        ddpc_model_destroy(m);
    }
}

static void test_gpt_rejects_bad_tokens_and_config(void)
{
    ddpc_model *m = small_gpt(0);
    if (!m)
        return;
    int32_t tok[5] = {1, 2, 11, 0, 0};
    ddpc_model_input in = {.n = 1, .tokens = tok, .targets = tok};
    CHECK_EQ_INT(ddpc_model_forward(m, &in, false, NULL), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "outside the vocabulary");
    ddpc_model_destroy(m);
    ddpc_model_config c = ddpc_model_config_default();
    ddpc_gpt_config own = ddpc_gpt_config_default();
    c.type_config = &own;
    strcpy(c.type, "gpt");
    own.n_embd = 10, own.n_head = 4;
    ddpc_model *bad = NULL;
    CHECK_EQ_INT(ddpc_model_create(&bad, &c), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "n_head");
    strcpy(c.type, "transformer");
    CHECK_EQ_INT(ddpc_model_create(&bad, &c), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "unknown model type 'transformer'");
}

/* Three warm training steps and an evaluation forward of m on in allocate nothing. */
static void check_warm_steps_allocate_nothing(ddpc_model *m, const ddpc_model_input *in)
{
    ddpc_model_output out;
    CHECK_EQ_INT(ddpc_model_forward(m, in, true, &out), DDPC_OK);
    CHECK_EQ_INT(ddpc_model_backward(m, 1.0f), DDPC_OK);
    CHECK_EQ_INT(ddpc_model_forward(m, in, false, &out), DDPC_OK);
    int64_t before = ddpc_alloc_total();
    for (int i = 0; i < 3; i++) {
        ddpc_model_zero_grad(m);
        CHECK_EQ_INT(ddpc_model_forward(m, in, true, &out), DDPC_OK);
        CHECK_EQ_INT(ddpc_model_backward(m, 1.0f), DDPC_OK);
    }
    CHECK_EQ_INT(ddpc_model_forward(m, in, false, &out), DDPC_OK);
    CHECK_EQ_INT(ddpc_alloc_total(), before);
}

/* gpt with dropout, and the cnn and mlp with BatchNorm (batch statistics and running-statistics
 * updates in training, running statistics in evaluation). */
static void test_step_allocates_nothing_after_warmup(void)
{
    ddpc_model *m = small_gpt(0.1f);
    CHECK(m != NULL);
    if (m) {
        int32_t tok[3 * 5] = {0};
        ddpc_model_input in = {.n = 3, .tokens = tok, .targets = tok};
        check_warm_steps_allocate_nothing(m, &in);
        ddpc_model_destroy(m);
    }
    float x[4 * 2 * 9 * 7];
    int32_t y[4];
    fill_images(x, y, 4, 2 * 9 * 7, 4);
    ddpc_model_input in = {.n = 4, .x = x, .targets = y};
    for (int cnn = 0; cnn < 2; cnn++) {
        ddpc_model_config c = ddpc_model_config_default();
        ddpc_cnn_config conv = ddpc_cnn_config_default();
        ddpc_mlp_config fc = ddpc_mlp_config_default();
        c.type_config = cnn ? (const void *)&conv : (const void *)&fc;
        strcpy(c.type, cnn ? "cnn" : "mlp");
        c.in_channels = 2, c.in_height = 9, c.in_width = 7, c.num_classes = 4;
        conv.channels[0] = 3, conv.channels[1] = 5, conv.n_channels = 2, conv.kernel_size = 3;
        conv.hidden[0] = fc.hidden[0] = 6, conv.n_hidden = fc.n_hidden = 1;
        conv.batchnorm = fc.batchnorm = true;
        m = make(c);
        CHECK(m != NULL);
        if (!m)
            continue;
        CHECK_EQ_INT(ddpc_model_num_buffers(m), cnn ? 4 : 2);
        check_warm_steps_allocate_nothing(m, &in);
        ddpc_model_destroy(m);
    }
}

static void test_create_fails_cleanly_without_memory(void)
{
    int64_t live = ddpc_alloc_live();
    for (int k = 0; k < 8; k++) {
        ddpc_alloc_fail_after(k);
        ddpc_model *m = small_gpt(0);
        ddpc_alloc_fail_after(-1);
        ddpc_model_destroy(m);
        CHECK_EQ_INT(ddpc_alloc_live(), live);
    }
}

/* A shapes-only model has the full model's tensor table and activation figures and no buffers
 * until ddpc_model_allocate, which then initialises exactly as ddpc_model_create does. */
static void test_shapes_only_then_allocate(void)
{
    ddpc_model_config c = ddpc_model_config_default();
    ddpc_gpt_config own = ddpc_gpt_config_default();
    c.type_config = &own;
    snprintf(c.type, sizeof c.type, "gpt");
    own.n_layer = 2, own.n_embd = 32, own.n_head = 4, own.block_size = 16, c.num_classes = 50;
    ddpc_model *full = make(c), *lazy = NULL;
    int64_t live_bytes = ddpc_alloc_live_bytes();
    CHECK_EQ_INT(ddpc_model_create_shapes(&lazy, &c), DDPC_OK);
    CHECK(full && lazy);
    CHECK(ddpc_model_params(lazy) == NULL && ddpc_model_grads(lazy) == NULL);
    CHECK(ddpc_alloc_live_bytes() - live_bytes < 16384); /* the tables, not 4 bytes/parameter */
    CHECK_EQ_INT(ddpc_model_num_params(lazy), ddpc_model_num_params(full));
    CHECK_EQ_INT(ddpc_model_num_tensors(lazy), ddpc_model_num_tensors(full));
    /* Only seq2seq's FLOPs depend on a pair's widths. */
    CHECK(ddpc_model_train_flops_pair(full, 3, 4) == ddpc_model_train_flops_per_sample(full));
    for (size_t i = 0; i < ddpc_model_num_tensors(full); i++) {
        CHECK(strcmp(ddpc_model_tensor(lazy, i)->name, ddpc_model_tensor(full, i)->name) == 0);
        CHECK_EQ_INT(ddpc_model_tensor(lazy, i)->offset, ddpc_model_tensor(full, i)->offset);
    }
    for (int ck = 0; ck < 2; ck++)
        CHECK_EQ_INT(ddpc_model_activation_bytes(lazy, 8, ck), ddpc_model_activation_bytes(full, 8, ck));
    CHECK_EQ_INT(ddpc_model_allocate(lazy), DDPC_OK);
    CHECK_EQ_INT(ddpc_model_allocate(lazy), DDPC_OK); /* a no-op the second time */
    CHECK(memcmp(ddpc_model_params(lazy), ddpc_model_params(full),
                 ddpc_model_num_params(full) * sizeof(float)) == 0);
    ddpc_model_destroy(lazy);
    ddpc_model_destroy(full);
}

int main(void)
{
    ddpc_kernels_set_threads(1);
    RUN_TEST(test_mlp_layout_and_gradients);
    RUN_TEST(test_mlp_dropout_gradients);
    RUN_TEST(test_cnn_gradients);
    RUN_TEST(test_cnn_batchnorm_gradients);
    RUN_TEST(test_mlp_batchnorm_gradients);
    RUN_TEST(test_multi_head_mlp_gradients);
    RUN_TEST(test_multi_head_cnn_gradients);
    RUN_TEST(test_one_head_equals_single_head);
    RUN_TEST(test_bad_heads_are_rejected);
    RUN_TEST(test_gpt_gradients);
    RUN_TEST(test_gpt_rejects_bad_tokens_and_config);
    RUN_TEST(test_step_allocates_nothing_after_warmup);
    RUN_TEST(test_create_fails_cleanly_without_memory);
    RUN_TEST(test_shapes_only_then_allocate);
    return check_summary();
}
