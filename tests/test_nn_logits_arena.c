// SPDX-License-Identifier: MIT
/* The activation arena holds a model's outputs once: cross-entropy writes its gradient over the
 * logits (nn/loss.h), so the arena grows by one (n, classes) buffer per class, not two. For
 * GPT-2 124M's shapes at batch 16 (a shapes-only model: no parameters allocated) the arena at a
 * vocabulary of 50257 exceeds the one at 256 by exactly B*T*(50257 - 256) floats, with and
 * without checkpointing; the same for the mlp and the cnn, whose elementwise losses (mse) still
 * keep an output gradient buffer and so grow by two. */
#include <ddpc/models.h>
#include <ddpc/nn.h>

#include "check.h"

/* ddpc_model_activation_bytes of a shapes-only model of cfg at batch n. */
static size_t arena_bytes(const ddpc_model_config *cfg, int64_t n, bool ckpt)
{
    ddpc_model *m = NULL;
    ddpc_status st = ddpc_model_create_shapes(&m, cfg);
    CHECK_EQ_INT(st, DDPC_OK);
    if (st != DDPC_OK) {
        fprintf(stderr, "  %s\n", ddpc_last_error());
        return 0;
    }
    size_t bytes = ddpc_model_activation_bytes(m, n, ckpt);
    ddpc_model_destroy(m);
    return bytes;
}

static void test_gpt2_arena_holds_the_logits_once(void)
{
    enum { B = 16, T = 1024, V = 50257, SMALL = 256 };
    ddpc_gpt_config own = ddpc_gpt_config_default();
    own.n_layer = 12, own.n_head = 12, own.n_embd = 768, own.block_size = T;
    ddpc_model_config c = ddpc_model_config_default();
    snprintf(c.type, sizeof c.type, "gpt");
    c.type_config = &own;
    for (int ckpt = 0; ckpt < 2; ckpt++) {
        c.num_classes = V;
        size_t big = arena_bytes(&c, B, ckpt);
        c.num_classes = SMALL;
        size_t small = arena_bytes(&c, B, ckpt);
        const size_t logits = (size_t)B * T * (V - SMALL) * sizeof(float);
        printf(" gpt-2 124M, batch %d, checkpointing %s: %zu - %zu = %zu bytes (logits %zu)\n", B,
               ckpt ? "on" : "off", big, small, big - small, logits);
        CHECK_EQ_INT(big - small, logits);
    }
}

/* The mlp or cnn on 2x8x6 images at batch 16, with `classes` outputs and `loss`. */
static size_t image_arena(const char *type, const void *own, int64_t classes, ddpc_loss loss)
{
    ddpc_model_config c = ddpc_model_config_default();
    snprintf(c.type, sizeof c.type, "%s", type);
    c.type_config = own;
    c.in_channels = 2, c.in_height = 8, c.in_width = 6, c.num_classes = classes;
    c.loss = loss;
    return arena_bytes(&c, 16, false);
}

static void test_fc_stack_arena(void)
{
    const ddpc_mlp_config mlp = {.hidden = {9, 7}, .n_hidden = 2};
    const ddpc_cnn_config cnn = {
        .channels = {3, 4}, .n_channels = 2, .kernel_size = 3, .hidden = {64}, .n_hidden = 1};
    const char *types[2] = {"mlp", "cnn"};
    const void *owns[2] = {&mlp, &cnn};
    /* 16 more classes at batch 16: one 256-float buffer (a multiple of the arena's 16-float
     * alignment) per copy of the outputs. Both class counts stay below the widest layer. */
    const size_t per_copy = 16 * 16 * sizeof(float);
    for (int k = 0; k < 2; k++) {
        size_t ce = image_arena(types[k], owns[k], 26, DDPC_LOSS_CROSS_ENTROPY) -
                    image_arena(types[k], owns[k], 10, DDPC_LOSS_CROSS_ENTROPY);
        size_t mse = image_arena(types[k], owns[k], 26, DDPC_LOSS_MSE) -
                     image_arena(types[k], owns[k], 10, DDPC_LOSS_MSE);
        printf(" %s: 16 more classes add %zu bytes with cross_entropy, %zu with mse\n", types[k],
               ce, mse);
        CHECK_EQ_INT(ce, per_copy);
        CHECK_EQ_INT(mse, 2 * per_copy);
    }
}

int main(void)
{
    RUN_TEST(test_gpt2_arena_holds_the_logits_once);
    RUN_TEST(test_fc_stack_arena);
    return check_summary();
}
