// SPDX-License-Identifier: MIT
/* The losses a model can end in besides softmax cross-entropy: names, the model-level checks, and
 * the forward/backward of the elementwise losses on a model's outputs (n, k) and float targets.
 * Invariant: m->probs is what ddpc_model_probs shows: the raw outputs for a regression loss (the
 * predictions), sigmoid(logits) for bce_logits, which is also what its backward reads. */
#include "nn/loss.h"

#include <math.h>
#include <string.h>

static const char *const names[DDPC_LOSS_COUNT + 1] = {"cross_entropy", "mse", "l1",
                                                       "smooth_l1", "bce_logits", NULL};

const char *const *ddpc_loss_names(void) { return names; }

const char *ddpc_loss_name(ddpc_loss l)
{
    return (unsigned)l < DDPC_LOSS_COUNT ? names[l] : "unknown";
}

bool ddpc_loss_from_name(const char *s, ddpc_loss *out)
{
    for (int i = 0; s && i < DDPC_LOSS_COUNT; i++)
        if (strcmp(s, names[i]) == 0) {
            *out = (ddpc_loss)i;
            return true;
        }
    return false;
}

ddpc_status ddpc__loss_check(const ddpc_model_config *cfg, bool elementwise_ok,
                             const ddpc_kernel_table *k)
{
    if ((unsigned)cfg->loss >= DDPC_LOSS_COUNT)
        return ddpc_errorf(DDPC_EINVAL, "model loss %d is not one of cross_entropy, mse, l1, "
                                        "smooth_l1, bce_logits", (int)cfg->loss);
    if (!(cfg->loss_beta >= 0.0f))
        return ddpc_errorf(DDPC_EINVAL, "smooth_l1's beta must be >= 0, got %g", cfg->loss_beta);
    if (cfg->loss == DDPC_LOSS_CROSS_ENTROPY)
        return DDPC_OK;
    const char *name = ddpc_loss_name(cfg->loss);
    if (!elementwise_ok)
        return ddpc_errorf(DDPC_EINVAL, "loss '%s' needs model type mlp or cnn; '%s' trains with "
                           "cross_entropy only", name, cfg->type);
    if (cfg->n_heads > 0)
        return ddpc_errorf(DDPC_EINVAL, "loss '%s' needs a model with one head, not %zu "
                           "(multi-task models train with cross_entropy)", name, cfg->n_heads);
    if (!k->mse_forward || !k->l1_forward || !k->smooth_l1_forward || !k->bce_logits_forward)
        return ddpc_errorf(DDPC_EINVAL, "loss '%s' has no kernels on %s; use device: cpu", name,
                           k->name);
    if (cfg->num_classes < 1)
        return ddpc_errorf(DDPC_EINVAL, "loss '%s' needs at least 1 output, got %lld", name,
                           (long long)cfg->num_classes);
    return DDPC_OK;
}

/* The table's name for an elementwise loss. */
static ddpc_elementwise_loss elementwise_of(ddpc_loss l)
{
    switch (l) {
    case DDPC_LOSS_MSE:
        return DDPC_ELEMENTWISE_MSE;
    case DDPC_LOSS_L1:
        return DDPC_ELEMENTWISE_L1;
    case DDPC_LOSS_SMOOTH_L1:
        return DDPC_ELEMENTWISE_SMOOTH_L1;
    default: /* bce_logits; cross-entropy never comes here */
        return DDPC_ELEMENTWISE_BCE_LOGITS;
    }
}

void ddpc__loss_forward(ddpc_model *m, float *outputs, const float *targets, int64_t count,
                        ddpc_model_output *out)
{
    const ddpc_kernel_table *k = m->k;
    float beta = m->cfg.loss_beta;
    if (m->loss_sink && k->elementwise_loss_into) { /* left on the device for a later read */
        k->elementwise_loss_into(m->loss_sink, elementwise_of(m->cfg.loss), beta, outputs,
                                 outputs, targets, count);
        out->loss = NAN;
        out->n_valid = out->n_correct = -1;
        return;
    }
    out->n_valid = count;
    switch (m->cfg.loss) {
    case DDPC_LOSS_MSE:
        out->loss = k->mse_forward(outputs, targets, count);
        break;
    case DDPC_LOSS_L1:
        out->loss = k->l1_forward(outputs, targets, count);
        break;
    case DDPC_LOSS_SMOOTH_L1:
        out->loss = k->smooth_l1_forward(outputs, targets, count, beta);
        break;
    default: /* bce_logits; cross-entropy never comes here */
        out->loss = k->bce_logits_forward(outputs, outputs, targets, count);
        out->n_correct = k->multilabel_correct(outputs, targets, count);
        return;
    }
    k->regression_errors(outputs, targets, count, &out->sum_abs_err, &out->sum_sq_err);
}

void ddpc__loss_backward(ddpc_model *m, float *doutputs, const float *probs, const float *targets,
                         int64_t count, float dloss)
{
    const ddpc_kernel_table *k = m->k;
    switch (m->cfg.loss) {
    case DDPC_LOSS_MSE:
        k->mse_backward(doutputs, probs, targets, count, dloss);
        break;
    case DDPC_LOSS_L1:
        k->l1_backward(doutputs, probs, targets, count, dloss);
        break;
    case DDPC_LOSS_SMOOTH_L1:
        k->smooth_l1_backward(doutputs, probs, targets, count, m->cfg.loss_beta, dloss);
        break;
    default:
        k->bce_logits_backward(doutputs, probs, targets, count, dloss);
        break;
    }
}
