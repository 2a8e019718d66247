// SPDX-License-Identifier: MIT
/* Activation checkpointing: a gpt (dropout on, 3 blocks) and a cnn (3 stages; one head and two)
 * built with and without it from one seed give the same bits over two training steps — losses,
 * probabilities, gradients and the order of the grad-ready reports — at fp32, bf16 and fp16 and
 * on 1 and 2 threads; the activation arena shrinks (at least 2x for configs/gpt_fortunes.yaml's
 * shape); mlp rejects the setting. */
#include <ddpc/alloc.h>
#include <ddpc/kernels.h>
#include <ddpc/models.h>
#include <ddpc/nn.h>
#include <ddpc/rng.h>

#include "check.h"

#define MAX_REPORTS 256

typedef struct {
    size_t order[MAX_REPORTS];
    size_t n;
} hook_log;

static void on_ready(void *ctx, size_t tensor)
{
    hook_log *h = ctx;
    if (h->n < MAX_REPORTS)
        h->order[h->n++] = tensor;
}

static ddpc_model *make(ddpc_model_config c, bool ckpt)
{
    c.activation_checkpointing = ckpt;
    ddpc_model *m = NULL;
    if (ddpc_model_create(&m, &c) != DDPC_OK)
        fprintf(stderr, "create failed: %s\n", ddpc_last_error());
    return m;
}

/* One training step on both models, then the same plain SGD update on each, so the second step
 * starts from new (still equal) weights. */
static void step_both(ddpc_model *m[2], hook_log h[2], const ddpc_model_input *in, int64_t outputs)
{
    ddpc_model_output out[2];
    for (int k = 0; k < 2; k++) {
        h[k].n = 0;
        ddpc_model_zero_grad(m[k]);
        CHECK_EQ_INT(ddpc_model_forward(m[k], in, true, &out[k]), DDPC_OK);
    }
    /* Before backward, which writes the loss's gradient over the probabilities. */
    CHECK(memcmp(ddpc_model_probs(m[0]), ddpc_model_probs(m[1]),
                 (size_t)(in->n * outputs) * sizeof(float)) == 0);
    for (int k = 0; k < 2; k++)
        CHECK_EQ_INT(ddpc_model_backward(m[k], 1.0f), DDPC_OK);
    CHECK(memcmp(&out[0].loss, &out[1].loss, sizeof(float)) == 0);
    CHECK(out[0].loss > 0.0f);
    CHECK_EQ_INT(out[0].n_valid, out[1].n_valid);
    CHECK_EQ_INT(out[0].n_correct, out[1].n_correct);
    size_t np = ddpc_model_num_params(m[0]);
    CHECK(memcmp(ddpc_model_grads(m[0]), ddpc_model_grads(m[1]), np * sizeof(float)) == 0);
    /* Every tensor the pass reached is reported once, in the same order, as blocks finish. */
    CHECK(h[0].n > 0);
    CHECK_EQ_INT(h[0].n, h[1].n);
    CHECK(memcmp(h[0].order, h[1].order, h[0].n * sizeof(size_t)) == 0);
    double gnorm = 0;
    for (size_t i = 0; i < np; i++)
        gnorm += fabs((double)ddpc_model_grads(m[0])[i]);
    CHECK(gnorm > 0.0);
    for (int k = 0; k < 2; k++) {
        float *p = ddpc_model_params(m[k]);
        const float *g = ddpc_model_grads(m[k]);
        for (size_t i = 0; i < np; i++)
            p[i] -= 0.5f * g[i];
    }
}

/* Two steps of the config with and without checkpointing; in[1] may run another head. */
static void check_same_bits(ddpc_model_config c, const ddpc_model_input in[2])
{
    ddpc_model *m[2] = {make(c, false), make(c, true)};
    CHECK(m[0] && m[1]);
    if (m[0] && m[1]) {
        size_t np = ddpc_model_num_params(m[0]);
        CHECK(memcmp(ddpc_model_params(m[0]), ddpc_model_params(m[1]), np * sizeof(float)) == 0);
        hook_log h[2];
        for (int k = 0; k < 2; k++)
            ddpc_model_set_grad_ready_hook(m[k], on_ready, &h[k]);
        int64_t outputs = ddpc_model_outputs_per_sample(m[0]);
        for (int s = 0; s < 2; s++) {
            if (in[s].task > 0)
                outputs = c.head_classes[in[s].task];
            step_both(m, h, &in[s], outputs);
        }
        int64_t n = in[0].n;
        size_t plain = ddpc_model_activation_bytes(m[0], n, false);
        size_t ckpt = ddpc_model_activation_bytes(m[0], n, true);
        CHECK(ckpt < plain);
        /* The query does not depend on the model's own setting. */
        CHECK_EQ_INT(ddpc_model_activation_bytes(m[1], n, true), ckpt);
        CHECK_EQ_INT(ddpc_model_activation_bytes(m[1], n, false), plain);
    }
    ddpc_model_destroy(m[0]);
    ddpc_model_destroy(m[1]);
}

static const ddpc_gpt_config small_gpt = {.n_layer = 3, .n_head = 2, .n_embd = 16, .block_size = 8};

static ddpc_model_config gpt_config(ddpc_precision prec)
{
    ddpc_model_config c = ddpc_model_config_default();
    strcpy(c.type, "gpt");
    c.num_classes = 13, c.type_config = &small_gpt;
    c.dropout = 0.2f;
    c.precision = prec;
    return c;
}

static void test_gpt_same_bits(void)
{
    enum { B = 3, T = 8 };
    int32_t tok[2][B * T], tgt[2][B * T];
    ddpc_rng r = ddpc_rng_make(3, 3);
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < B * T; i++) {
            tok[s][i] = (int32_t)ddpc_rng_below(&r, 13);
            tgt[s][i] = (int32_t)ddpc_rng_below(&r, 13);
        }
    tgt[0][5] = -1; /* an ignored target */
    ddpc_model_input in[2] = {
        {.n = B, .tokens = tok[0], .targets = tgt[0], .rng_stream = 7},
        {.n = B, .tokens = tok[1], .targets = tgt[1], .rng_stream = 8},
    };
    for (int threads = 1; threads <= 2; threads++) {
        ddpc_kernels_set_threads(threads);
        for (int prec = 0; prec < DDPC_PREC_COUNT; prec++)
            check_same_bits(gpt_config((ddpc_precision)prec), in);
    }
    ddpc_kernels_set_threads(1);
}

static void fill_images(float *x, int32_t *y, int64_t n, int64_t d, int64_t classes, uint64_t seed)
{
    ddpc_rng r = ddpc_rng_make(seed, 1);
    for (int64_t i = 0; i < n * d; i++)
        x[i] = ddpc_rng_normal(&r);
    for (int64_t i = 0; i < n; i++)
        y[i] = (int32_t)ddpc_rng_below(&r, (uint64_t)classes);
}

static const ddpc_cnn_config small_cnn = {.channels = {3, 4, 6}, .n_channels = 3, .kernel_size = 3,
                                          .hidden = {7}, .n_hidden = 1};

static ddpc_model_config cnn_config(ddpc_precision prec)
{
    ddpc_model_config c = ddpc_model_config_default();
    strcpy(c.type, "cnn");
    c.in_channels = 2, c.in_height = 16, c.in_width = 12, c.num_classes = 5;
    c.type_config = &small_cnn;
    c.dropout = 0.1f;
    c.precision = prec;
    return c;
}

static void test_cnn_same_bits(void)
{
    enum { N = 4, D = 2 * 16 * 12 };
    float x[2][N * D];
    int32_t y[2][N];
    fill_images(x[0], y[0], N, D, 3, 5);
    fill_images(x[1], y[1], N, D, 3, 6);
    ddpc_model_input in[2] = {
        {.n = N, .x = x[0], .targets = y[0], .rng_stream = 1},
        {.n = N, .x = x[1], .targets = y[1], .rng_stream = 2},
    };
    for (int threads = 1; threads <= 2; threads++) {
        ddpc_kernels_set_threads(threads);
        for (int prec = 0; prec < DDPC_PREC_COUNT; prec++)
            check_same_bits(cnn_config((ddpc_precision)prec), in);
    }
    ddpc_kernels_set_threads(1);
    /* Two heads over the checkpointed trunk: the second step runs the other head. */
    ddpc_model_config c = cnn_config(DDPC_PREC_BF16);
    c.head_classes[0] = 4, c.head_classes[1] = 3, c.n_heads = 2;
    in[1].task = 1;
    check_same_bits(c, in);
    c.precision = DDPC_PREC_FP32;
    check_same_bits(c, in);
}

/* configs/gpt_fortunes.yaml's model (bytes, 4 blocks of 256, context 128) at its batch of 16. */
static void test_gpt_fortunes_shape_halves_activations(void)
{
    ddpc_model_config c = ddpc_model_config_default();
    ddpc_gpt_config own = ddpc_gpt_config_default();
    c.type_config = &own;
    strcpy(c.type, "gpt");
    c.num_classes = 256, own.n_layer = 4, own.n_head = 4, own.n_embd = 256, own.block_size = 128;
    ddpc_model *m = make(c, true);
    if (!m)
        return;
    size_t plain = ddpc_model_activation_bytes(m, 16, false);
    size_t ckpt = ddpc_model_activation_bytes(m, 16, true);
    printf("gpt_fortunes at batch 16: %.1f MiB of activations, %.1f MiB with checkpointing "
           "(%.2fx)\n",
           (double)plain / 1048576.0, (double)ckpt / 1048576.0, (double)plain / (double)ckpt);
    CHECK(2 * ckpt <= plain);
    /* Linear in the batch, so the ratio holds for any batch. */
    CHECK(ddpc_model_activation_bytes(m, 32, true) > ckpt);
    ddpc_model_destroy(m);
}

static void test_mlp_rejects_checkpointing(void)
{
    ddpc_model_config c = ddpc_model_config_default();
    c.activation_checkpointing = true;
    ddpc_model *m = NULL;
    CHECK_EQ_INT(ddpc_model_create(&m, &c), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "'mlp' has no activation checkpointing");
    CHECK(m == NULL);
    c.activation_checkpointing = false;
    CHECK_EQ_INT(ddpc_model_create(&m, &c), DDPC_OK);
    if (m)
        CHECK_EQ_INT(ddpc_model_activation_bytes(m, 8, true),
                     ddpc_model_activation_bytes(m, 8, false));
    ddpc_model_destroy(m);
}

/* A checkpointed step, recomputation included, allocates nothing after warm-up. */
static void test_step_allocates_nothing_after_warmup(void)
{
    ddpc_model *m = make(gpt_config(DDPC_PREC_FP32), true);
    if (!m)
        return;
    int32_t tok[2 * 8] = {0};
    ddpc_model_input in = {.n = 2, .tokens = tok, .targets = tok};
    CHECK_EQ_INT(ddpc_model_forward(m, &in, true, NULL), DDPC_OK);
    CHECK_EQ_INT(ddpc_model_backward(m, 1.0f), DDPC_OK);
    int64_t before = ddpc_alloc_total();
    for (int i = 0; i < 2; i++) {
        CHECK_EQ_INT(ddpc_model_forward(m, &in, true, NULL), DDPC_OK);
        CHECK_EQ_INT(ddpc_model_backward(m, 1.0f), DDPC_OK);
    }
    CHECK_EQ_INT(ddpc_alloc_total(), before);
    ddpc_model_destroy(m);
}

int main(void)
{
    ddpc_kernels_set_threads(1);
    RUN_TEST(test_gpt_same_bits);
    RUN_TEST(test_cnn_same_bits);
    RUN_TEST(test_gpt_fortunes_shape_halves_activations);
    RUN_TEST(test_mlp_rejects_checkpointing);
    RUN_TEST(test_step_allocates_nothing_after_warmup);
    return check_summary();
}
