// SPDX-License-Identifier: MIT
/* A training forward announced by ddpc_model_expect_backward (cross-entropy's forward and backward
 * in one kernel, the gradient left over the logits) against the same model without the
 * announcement (whose backward writes the gradient over the probabilities): the same loss, counts,
 * gradients and grad-ready order, bit for bit, over two steps, for a gpt (dropout, an ignored
 * target), an mlp and a cnn with two heads, at fp32, bf16 and fp16, on 1 and 2 threads, dloss 1
 * and a loss scale. ddpc_model_probs is NULL after a fused forward and after any backward; a
 * second backward of one forward adds the same gradient again, and one with another dloss is
 * refused; an evaluation forward never fuses and consumes the announcement. */
#include <ddpc/alloc.h>
#include <ddpc/kernels.h>
#include <ddpc/models.h>
#include <ddpc/nn.h>
#include <ddpc/rng.h>

#include <math.h>

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

/* One training step on both models (m[1] announced), then the same SGD update on each. */
static void step_both(ddpc_model *m[2], hook_log h[2], const ddpc_model_input *in, float dloss)
{
    ddpc_model_output out[2];
    for (int k = 0; k < 2; k++) {
        h[k].n = 0;
        ddpc_model_zero_grad(m[k]);
        if (k == 1)
            ddpc_model_expect_backward(m[k], dloss);
        CHECK_EQ_INT(ddpc_model_forward(m[k], in, true, &out[k]), DDPC_OK);
        CHECK((ddpc_model_probs(m[k]) != NULL) == (k == 0)); /* fused: the logits hold dlogits */
        CHECK_EQ_INT(ddpc_model_backward(m[k], dloss), DDPC_OK);
        CHECK(ddpc_model_probs(m[k]) == NULL); /* either way, after backward */
    }
    if (memcmp(&out[0].loss, &out[1].loss, sizeof(float)) != 0)
        printf("  loss %.9g, fused %.9g\n", (double)out[0].loss, (double)out[1].loss);
    CHECK(memcmp(&out[0].loss, &out[1].loss, sizeof(float)) == 0);
    CHECK(out[0].loss > 0.0f);
    CHECK_EQ_INT(out[0].n_valid, out[1].n_valid);
    CHECK_EQ_INT(out[0].n_correct, out[1].n_correct);
    size_t np = ddpc_model_num_params(m[0]);
    const float *g0 = ddpc_model_grads(m[0]), *g1 = ddpc_model_grads(m[1]);
    size_t bad = 0;
    for (size_t i = 0; i < np; i++)
        bad += memcmp(&g0[i], &g1[i], sizeof(float)) != 0;
    if (bad)
        printf("  %zu of %zu gradients differ\n", bad, np);
    CHECK_EQ_INT(bad, 0);
    CHECK(h[0].n > 0);
    CHECK_EQ_INT(h[0].n, h[1].n);
    CHECK(memcmp(h[0].order, h[1].order, h[0].n * sizeof(size_t)) == 0);
    for (int k = 0; k < 2; k++) {
        float *p = ddpc_model_params(m[k]);
        const float *g = ddpc_model_grads(m[k]);
        for (size_t i = 0; i < np; i++)
            p[i] -= 0.5f * g[i] / dloss;
    }
}

/* Two steps of the config, announced and not; in[1] may run another head. */
static void check_same_bits(ddpc_model_config c, const ddpc_model_input in[2], float dloss)
{
    ddpc_model *m[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++)
        if (ddpc_model_create(&m[k], &c) != DDPC_OK)
            fprintf(stderr, "create failed: %s\n", ddpc_last_error());
    CHECK(m[0] && m[1]);
    if (m[0] && m[1]) {
        hook_log h[2];
        for (int k = 0; k < 2; k++)
            ddpc_model_set_grad_ready_hook(m[k], on_ready, &h[k]);
        for (int s = 0; s < 2; s++)
            step_both(m, h, &in[s], dloss);
        size_t np = ddpc_model_num_params(m[0]);
        CHECK(memcmp(ddpc_model_params(m[0]), ddpc_model_params(m[1]), np * sizeof(float)) == 0);
    }
    ddpc_model_destroy(m[0]);
    ddpc_model_destroy(m[1]);
}

/* Every precision on 1 and 2 threads, at dloss 1 and at an fp16 loss scale over 3 micro-batches. */
static void check_all(ddpc_model_config c, const ddpc_model_input in[2])
{
    for (int threads = 1; threads <= 2; threads++) {
        ddpc_kernels_set_threads(threads);
        for (int prec = 0; prec < DDPC_PREC_COUNT; prec++) {
            c.precision = (ddpc_precision)prec;
            printf(" %s %s, %d thread%s\n", c.type, ddpc_precision_name(c.precision), threads,
                   threads > 1 ? "s" : "");
            check_same_bits(c, in, 1.0f);
            check_same_bits(c, in, 65536.0f / 3.0f);
        }
    }
    ddpc_kernels_set_threads(1);
}

static const ddpc_gpt_config small_gpt = {.n_layer = 2, .n_head = 2, .n_embd = 16, .block_size = 8};

static ddpc_model_config gpt_config(void)
{
    ddpc_model_config c = ddpc_model_config_default();
    strcpy(c.type, "gpt");
    c.num_classes = 13, c.type_config = &small_gpt;
    c.dropout = 0.2f;
    return c;
}

enum { B = 3, T = 8 };
static int32_t tok[2][B * T], tgt[2][B * T];

static void make_tokens(ddpc_model_input in[2])
{
    ddpc_rng r = ddpc_rng_make(3, 3);
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < B * T; i++) {
            tok[s][i] = (int32_t)ddpc_rng_below(&r, 13);
            tgt[s][i] = (int32_t)ddpc_rng_below(&r, 13);
        }
    tgt[0][5] = -1; /* ignored targets */
    tgt[1][0] = -1;
    in[0] = (ddpc_model_input){.n = B, .tokens = tok[0], .targets = tgt[0], .rng_stream = 7};
    in[1] = (ddpc_model_input){.n = B, .tokens = tok[1], .targets = tgt[1], .rng_stream = 8};
}

static void test_gpt_same_bits(void)
{
    ddpc_model_input in[2];
    make_tokens(in);
    check_all(gpt_config(), in);
}

static void fill_images(float *x, int32_t *y, int64_t n, int64_t d, int64_t classes, uint64_t seed)
{
    ddpc_rng r = ddpc_rng_make(seed, 1);
    for (int64_t i = 0; i < n * d; i++)
        x[i] = ddpc_rng_normal(&r);
    for (int64_t i = 0; i < n; i++)
        y[i] = (int32_t)ddpc_rng_below(&r, (uint64_t)classes);
}

enum { N = 5, D = 2 * 8 * 6 };
static float img[2][N * D];
static int32_t lab[2][N];

static void make_images(ddpc_model_input in[2])
{
    fill_images(img[0], lab[0], N, D, 3, 5);
    fill_images(img[1], lab[1], N, D, 3, 6);
    in[0] = (ddpc_model_input){.n = N, .x = img[0], .targets = lab[0], .rng_stream = 1};
    in[1] = (ddpc_model_input){.n = N, .x = img[1], .targets = lab[1], .rng_stream = 2};
}

static const ddpc_mlp_config small_mlp = {.hidden = {9, 7}, .n_hidden = 2};
static const ddpc_cnn_config small_cnn = {
    .channels = {3, 4}, .n_channels = 2, .kernel_size = 3, .hidden = {7}, .n_hidden = 1};

static ddpc_model_config image_config(const char *type, const void *own)
{
    ddpc_model_config c = ddpc_model_config_default();
    strcpy(c.type, type);
    c.in_channels = 2, c.in_height = 8, c.in_width = 6, c.num_classes = 5;
    c.type_config = own;
    c.dropout = 0.1f;
    return c;
}

static void test_mlp_same_bits(void)
{
    ddpc_model_input in[2];
    make_images(in);
    check_all(image_config("mlp", &small_mlp), in);
}

static void test_cnn_two_heads_same_bits(void)
{
    ddpc_model_input in[2];
    make_images(in);
    check_all(image_config("cnn", &small_cnn), in);
    ddpc_model_config c = image_config("cnn", &small_cnn);
    c.head_classes[0] = 4, c.head_classes[1] = 3, c.n_heads = 2;
    in[1].task = 1;
    check_all(c, in);
}

/* Misuse: another dloss in backward; an evaluation forward consumes the announcement. */
static void test_announcement_rules(void)
{
    ddpc_model_input in[2];
    make_tokens(in);
    ddpc_model_config c = gpt_config();
    ddpc_model *m = NULL;
    CHECK_EQ_INT(ddpc_model_create(&m, &c), DDPC_OK);
    if (!m)
        return;
    ddpc_model_output out;
    ddpc_model_expect_backward(m, 2.0f);
    CHECK_EQ_INT(ddpc_model_forward(m, &in[0], true, &out), DDPC_OK);
    CHECK(ddpc_model_probs(m) == NULL);
    CHECK_EQ_INT(ddpc_model_backward(m, 1.0f), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "ddpc_model_expect_backward");
    CHECK_EQ_INT(ddpc_model_backward(m, 2.0f), DDPC_OK);
    /* Evaluation does not fuse, and takes the announcement with it. */
    ddpc_model_expect_backward(m, 2.0f);
    CHECK_EQ_INT(ddpc_model_forward(m, &in[0], false, &out), DDPC_OK);
    CHECK(ddpc_model_probs(m) != NULL);
    CHECK_EQ_INT(ddpc_model_forward(m, &in[0], true, &out), DDPC_OK);
    CHECK(ddpc_model_probs(m) != NULL);
    ddpc_model_zero_grad(m);
    CHECK_EQ_INT(ddpc_model_backward(m, 1.0f), DDPC_OK);
    CHECK(ddpc_model_probs(m) == NULL);
    /* Without an announcement too, the first backward fixes the dloss of the logits' gradient:
     * a second one with it adds the same gradient again (twice the first, but for the rounding of
     * the sums), another is refused. */
    size_t np = ddpc_model_num_params(m);
    float *once = ddpc_malloc(np * sizeof(float));
    if (once) {
        memcpy(once, ddpc_model_grads(m), np * sizeof(float));
        CHECK_EQ_INT(ddpc_model_backward(m, 1.0f), DDPC_OK);
        size_t bad = 0;
        for (size_t i = 0; i < np; i++) {
            double want = 2.0 * once[i], got = ddpc_model_grads(m)[i];
            bad += fabs(got - want) > 1e-5 * fabs(want) + 1e-8;
        }
        CHECK_EQ_INT(bad, 0);
        ddpc_free(once);
    }
    CHECK_EQ_INT(ddpc_model_backward(m, 2.0f), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "first backward");
    ddpc_model_destroy(m);
}

int main(void)
{
    RUN_TEST(test_gpt_same_bits);
    RUN_TEST(test_mlp_same_bits);
    RUN_TEST(test_cnn_two_heads_same_bits);
    RUN_TEST(test_announcement_rules);
    return check_summary();
}
