// SPDX-License-Identifier: MIT
/* The gradient-ready hook that DDP's bucketed overlap stands on: during one backward every tensor
 * is reported exactly once, and at the moment it is reported its gradient already has its final
 * value (a snapshot taken in the hook equals the buffer after backward, bit for bit). A multi-head
 * model reports the trunk and the head that ran, never the other heads (a dead branch). */
#include "check.h"

#include <ddpc/alloc.h>
#include <ddpc/models.h>
#include <ddpc/nn.h>

#include <string.h>

typedef struct {
    ddpc_model *m;
    float *snapshot; /* (num_params) grads as seen when each tensor was reported */
    int reports[64];
    size_t order[64], n_order;
} hook_log;

static void on_ready(void *ctx, size_t tensor)
{
    hook_log *h = ctx;
    const ddpc_param *p = ddpc_model_tensor(h->m, tensor);
    memcpy(h->snapshot + p->offset, ddpc_model_grads(h->m) + p->offset, p->numel * sizeof(float));
    h->reports[tensor]++;
    h->order[h->n_order++] = tensor;
}

static void check_model(ddpc_model_config c, int64_t n, int64_t in_floats)
{
    ddpc_model *m = NULL;
    CHECK_EQ_INT(ddpc_model_create(&m, &c), DDPC_OK);
    if (!m)
        return;
    size_t nt = ddpc_model_num_tensors(m), np = ddpc_model_num_params(m);
    CHECK(nt <= 64);
    float *x = ddpc_malloc(sizeof(float) * (size_t)(n * in_floats + 1));
    int32_t *tok = ddpc_malloc(sizeof(int32_t) * (size_t)(n * in_floats + 1));
    int32_t *tgt = ddpc_malloc(sizeof(int32_t) * (size_t)(n * in_floats + 1));
    for (int64_t i = 0; i < n * in_floats; i++) {
        x[i] = (float)((i * 37) % 11) / 11.0f - 0.5f;
        tok[i] = (int32_t)((i * 7) % c.num_classes);
        tgt[i] = (int32_t)((i * 5 + 1) % c.num_classes);
    }
    hook_log h = {.m = m, .snapshot = ddpc_calloc(np, sizeof(float))};
    ddpc_model_set_grad_ready_hook(m, on_ready, &h);
    ddpc_model_input in = {.n = n, .x = x, .tokens = tok, .targets = tgt};
    ddpc_model_output out;
    for (int pass = 0; pass < 2; pass++) { /* the second pass accumulates onto the first */
        memset(h.reports, 0, sizeof h.reports);
        h.n_order = 0;
        CHECK_EQ_INT(ddpc_model_forward(m, &in, true, &out), DDPC_OK);
        CHECK_EQ_INT(ddpc_model_backward(m, 1.0f), DDPC_OK);
        for (size_t t = 0; t < nt; t++)
            CHECK_EQ_INT(h.reports[t], 1);
        CHECK(memcmp(h.snapshot, ddpc_model_grads(m), np * sizeof(float)) == 0);
    }
    /* The last tensor registered (the head) is reported first: backward runs in reverse. */
    CHECK(h.n_order > 0 && h.order[0] >= nt - 2);
    ddpc_model_set_grad_ready_hook(m, NULL, NULL);
    h.n_order = 0;
    CHECK_EQ_INT(ddpc_model_forward(m, &in, true, &out), DDPC_OK);
    CHECK_EQ_INT(ddpc_model_backward(m, 1.0f), DDPC_OK);
    CHECK_EQ_INT(h.n_order, 0);
    ddpc_free(h.snapshot);
    ddpc_free(x);
    ddpc_free(tok);
    ddpc_free(tgt);
    ddpc_model_destroy(m);
}

static void test_mlp_reports_every_tensor_once(void)
{
    ddpc_model_config c = ddpc_model_config_default();
    ddpc_mlp_config own = ddpc_mlp_config_default();
    c.type_config = &own;
    strcpy(c.type, "mlp");
    c.in_channels = 1, c.in_height = 4, c.in_width = 4, c.num_classes = 3;
    own.hidden[0] = 8, own.hidden[1] = 6, own.n_hidden = 2;
    c.dropout = 0.2f;
    check_model(c, 5, 16);
}

static void test_cnn_reports_every_tensor_once(void)
{
    ddpc_model_config c = ddpc_model_config_default();
    ddpc_cnn_config own = ddpc_cnn_config_default();
    c.type_config = &own;
    strcpy(c.type, "cnn");
    c.in_channels = 1, c.in_height = 8, c.in_width = 8, c.num_classes = 4;
    own.channels[0] = 3, own.channels[1] = 4, own.n_channels = 2, own.kernel_size = 3;
    own.hidden[0] = 6, own.n_hidden = 1;
    check_model(c, 3, 64);
}

static void test_gpt_reports_every_tensor_once(void)
{
    ddpc_model_config c = ddpc_model_config_default();
    ddpc_gpt_config own = ddpc_gpt_config_default();
    c.type_config = &own;
    strcpy(c.type, "gpt");
    c.num_classes = 13, own.n_layer = 2, own.n_head = 2, own.n_embd = 8, own.block_size = 6;
    check_model(c, 2, 6);
}

/* Multi-head: backward of task k reports the trunk and heads.k once each, other heads never, and
 * snapshots still equal the final gradients. */
static void check_heads(ddpc_model_config c, int64_t n, int64_t in_floats, size_t first_head)
{
    ddpc_model *m = NULL;
    CHECK_EQ_INT(ddpc_model_create(&m, &c), DDPC_OK);
    if (!m)
        return;
    size_t nt = ddpc_model_num_tensors(m), np = ddpc_model_num_params(m);
    CHECK(nt <= 64 && nt == first_head + 2 * c.n_heads);
    float *x = ddpc_malloc(sizeof(float) * (size_t)(n * in_floats));
    int32_t tgt[16];
    for (int64_t i = 0; i < n * in_floats; i++)
        x[i] = (float)((i * 37) % 11) / 11.0f - 0.5f;
    for (int64_t i = 0; i < n; i++)
        tgt[i] = (int32_t)(i % 2);
    hook_log h = {.m = m, .snapshot = ddpc_calloc(np, sizeof(float))};
    ddpc_model_set_grad_ready_hook(m, on_ready, &h);
    for (int task = 0; task < (int)c.n_heads; task++) {
        memset(h.reports, 0, sizeof h.reports);
        h.n_order = 0;
        ddpc_model_input in = {.n = n, .x = x, .targets = tgt, .task = task};
        ddpc_model_output out;
        CHECK_EQ_INT(ddpc_model_forward(m, &in, true, &out), DDPC_OK);
        CHECK_EQ_INT(ddpc_model_backward(m, 1.0f), DDPC_OK);
        for (size_t t = 0; t < nt; t++) {
            bool head = t >= first_head;
            bool used = !head || (t - first_head) / 2 == (size_t)task;
            CHECK_EQ_INT(h.reports[t], used ? 1 : 0);
            CHECK((strncmp(ddpc_model_tensor(m, t)->name, "heads.", 6) == 0) == head);
        }
        CHECK_EQ_INT(h.n_order, first_head + 2);
        /* The running head comes first. */
        CHECK_EQ_INT(h.order[0] / 2 * 2, first_head + 2 * (size_t)task);
        for (size_t t = 0; t < nt; t++) {
            const ddpc_param *p = ddpc_model_tensor(m, t);
            if (h.reports[t])
                CHECK(memcmp(h.snapshot + p->offset, ddpc_model_grads(m) + p->offset,
                             p->numel * sizeof(float)) == 0);
        }
    }
    ddpc_free(h.snapshot);
    ddpc_free(x);
    ddpc_model_destroy(m);
}

static void test_multi_head_mlp_reports_trunk_and_one_head(void)
{
    ddpc_model_config c = ddpc_model_config_default();
    ddpc_mlp_config own = ddpc_mlp_config_default();
    c.type_config = &own;
    c.in_channels = 1, c.in_height = 4, c.in_width = 4;
    own.hidden[0] = 8, own.hidden[1] = 6, own.n_hidden = 2;
    c.head_classes[0] = 3, c.head_classes[1] = 2, c.head_classes[2] = 4, c.n_heads = 3;
    check_heads(c, 5, 16, 4);
}

static void test_multi_head_cnn_reports_trunk_and_one_head(void)
{
    ddpc_model_config c = ddpc_model_config_default();
    ddpc_cnn_config own = ddpc_cnn_config_default();
    c.type_config = &own;
    strcpy(c.type, "cnn");
    c.in_channels = 1, c.in_height = 8, c.in_width = 8;
    own.channels[0] = 3, own.n_channels = 1, own.kernel_size = 3;
    own.hidden[0] = 6, own.n_hidden = 1;
    c.head_classes[0] = 10, c.head_classes[1] = 4, c.n_heads = 2;
    check_heads(c, 3, 64, 4);
}

int main(void)
{
    RUN_TEST(test_mlp_reports_every_tensor_once);
    RUN_TEST(test_cnn_reports_every_tensor_once);
    RUN_TEST(test_gpt_reports_every_tensor_once);
    RUN_TEST(test_multi_head_mlp_reports_trunk_and_one_head);
    RUN_TEST(test_multi_head_cnn_reports_trunk_and_one_head);
    return check_summary();
}
