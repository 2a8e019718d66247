// SPDX-License-Identifier: MIT
/* The ddpc half of the loss parity test (tests/parity/parity_loss.py): for each case (a loss and
 * its beta or kind of target) writes <case>.safetensors under OUT_DIR with the inputs, the value
 * and the gradient w.r.t. the predictions that the CPU kernel table computes, and the same loss at
 * the end of an mlp (one hidden layer of 6, outputs 3): its initial weights, the batch, the loss
 * and every parameter's gradient.
 * usage: parity_loss_run OUT_DIR */
#include <ddpc/alloc.h>
#include <ddpc/device.h>
#include <ddpc/models.h>
#include <ddpc/nn.h>
#include <ddpc/rng.h>
#include <ddpc/safetensors.h>
#include <ddpc/weights.h>

#include <stdio.h>
#include <string.h>

enum { N = 40, K = 3, IN = 5, HID = 6 };

typedef struct {
    const char *name;
    ddpc_loss loss;
    float beta;
    bool probabilities; /* bce_logits: targets in (0, 1) rather than {0, 1} */
} loss_case;

static const loss_case cases[] = {
    {"mse", DDPC_LOSS_MSE, 1.0f, false},
    {"l1", DDPC_LOSS_L1, 1.0f, false},
    {"smooth_l1", DDPC_LOSS_SMOOTH_L1, 1.0f, false},
    {"smooth_l1_beta0.3", DDPC_LOSS_SMOOTH_L1, 0.3f, false},
    {"smooth_l1_beta0", DDPC_LOSS_SMOOTH_L1, 0.0f, false},
    {"bce_logits", DDPC_LOSS_BCE_LOGITS, 1.0f, false},
    {"bce_logits_probs", DDPC_LOSS_BCE_LOGITS, 1.0f, true},
};

static void fill(float *x, int64_t n, float lo, float hi, uint64_t stream)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = lo + (hi - lo) * ddpc_rng_uniform_at(5, stream, (uint64_t)i);
}

static void targets_for(const loss_case *c, float *y, int64_t n, uint64_t stream)
{
    fill(y, n, -2.0f, 2.0f, stream);
    if (c->loss == DDPC_LOSS_BCE_LOGITS)
        for (int64_t i = 0; i < n; i++)
            y[i] = c->probabilities ? (y[i] + 2.0f) / 4.0f : (float)(y[i] > 0.0f);
}

/* The kernel table's value and gradient (dloss = 1) for predictions p against targets y. */
static float kernel_pass(const ddpc_kernel_table *k, const loss_case *c, const float *p,
                         const float *y, float *grad)
{
    float probs[N * K], v;
    memset(grad, 0, N * K * sizeof *grad);
    switch (c->loss) {
    case DDPC_LOSS_MSE:
        v = k->mse_forward(p, y, N * K);
        k->mse_backward(grad, p, y, N * K, 1.0f);
        break;
    case DDPC_LOSS_L1:
        v = k->l1_forward(p, y, N * K);
        k->l1_backward(grad, p, y, N * K, 1.0f);
        break;
    case DDPC_LOSS_SMOOTH_L1:
        v = k->smooth_l1_forward(p, y, N * K, c->beta);
        k->smooth_l1_backward(grad, p, y, N * K, c->beta, 1.0f);
        break;
    default:
        v = k->bce_logits_forward(probs, p, y, N * K);
        k->bce_logits_backward(grad, probs, y, N * K, 1.0f);
        break;
    }
    return v;
}

static ddpc_status run_case(const loss_case *c, const char *dir)
{
    float p[N * K], y[N * K], grad[N * K], x[N * IN];
    fill(p, N * K, -3.0f, 3.0f, 1);
    targets_for(c, y, N * K, 2);
    float value = kernel_pass(ddpc_kernel_table_cpu(), c, p, y, grad);
    /* The same loss ending an mlp. */
    ddpc_model_config mc = ddpc_model_config_default();
    ddpc_mlp_config own = ddpc_mlp_config_default();
    mc.type_config = &own;
    mc.loss = c->loss;
    mc.loss_beta = c->beta;
    mc.in_channels = IN, mc.in_height = 1, mc.in_width = 1, mc.num_classes = K;
    own.hidden[0] = HID, own.n_hidden = 1;
    mc.seed = 3;
    ddpc_model *m;
    DDPC_TRY(ddpc_model_create(&m, &mc));
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.init.safetensors", dir, c->name);
    ddpc_status s = ddpc_weights_save_model(m, path);
    fill(x, N * IN, -1.0f, 1.0f, 3);
    ddpc_model_input in = {.n = N, .x = x, .float_targets = y};
    ddpc_model_output out = {0};
    if (s == DDPC_OK)
        s = ddpc_model_forward(m, &in, true, &out);
    if (s == DDPC_OK) {
        ddpc_model_zero_grad(m);
        s = ddpc_model_backward(m, 1.0f);
    }
    if (s == DDPC_OK) {
        float model_loss = out.loss, beta = c->beta;
        enum { FIXED = 7 };
        ddpc_st_tensor ts[FIXED + 8] = {
            {"pred", 2, {N, K}, p},       {"target", 2, {N, K}, y},
            {"value", 0, {0}, &value},    {"grad", 2, {N, K}, grad},
            {"x", 2, {N, IN}, x},         {"model_loss", 0, {0}, &model_loss},
            {"beta", 0, {0}, &beta},
        };
        char names[8][80];
        size_t n = FIXED;
        for (size_t i = 0; i < ddpc_model_num_tensors(m) && n < FIXED + 8; i++, n++) {
            const ddpc_param *prm = ddpc_model_tensor(m, i);
            snprintf(names[n - FIXED], sizeof names[0], "grad.%s", prm->name);
            ts[n] = (ddpc_st_tensor){.name = names[n - FIXED], .ndim = prm->ndim,
                                     .data = ddpc_model_grads(m) + prm->offset};
            memcpy(ts[n].shape, prm->shape, sizeof prm->shape);
        }
        snprintf(path, sizeof path, "%s/%s.safetensors", dir, c->name);
        s = ddpc_safetensors_write(path, ts, n, NULL, NULL, 0);
    }
    ddpc_model_destroy(m);
    return s;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: parity_loss_run OUT_DIR\n");
        return 2;
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (run_case(&cases[i], argv[1]) != DDPC_OK) {
            fprintf(stderr, "parity_loss_run: %s: %s\n", cases[i].name, ddpc_last_error());
            return 1;
        }
    return 0;
}
