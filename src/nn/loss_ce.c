// SPDX-License-Identifier: MIT
/* The softmax cross-entropy a model ends in, with argmax accuracy: where its values go. Without a
 * loss sink (the CPU, evaluation, a caller that wants them now) the kernel table returns them,
 * which on a device waits for it; with one, the device keeps them for a later read and nothing
 * waits. A training forward announced by ddpc_model_expect_backward runs forward and backward in
 * one kernel and leaves the gradient over the logits; otherwise the backward writes it there.
 * Invariant: every way runs kernels that give the same bits (the fused one matches forward then
 * backward), read now or later. A table with head16 members may also take a language model's
 * head into the loss (16-bit logits): only in such an announced training forward with targets,
 * where the member accepts (bf16/fp16 and a shape it takes); every other forward keeps fp32
 * logits. */
#include "nn/loss.h"

#include <math.h>

void ddpc_model_set_loss_sink(ddpc_model *m, double *sink)
{
    m->loss_sink = sink;
}

void ddpc_model_expect_backward(ddpc_model *m, float dloss)
{
    m->ce_armed = true;
    m->ce_dloss = dloss;
}

/* Whether this forward leaves its values on the device. */
static bool deferred(const ddpc_model *m)
{
    return m->loss_sink && m->k->cross_entropy_forward_into && m->k->argmax_correct_into;
}

/* Where this forward's fused sums go, or NULL when it keeps forward and backward apart (no
 * announced backward, no such kernel, or no memory): the loss sink, else three doubles of the
 * table's memory (laid out as the sink) the model keeps from its first fused forward on. */
static double *fused_sums(ddpc_model *m)
{
    if (!m->ce_armed || !m->k->cross_entropy_fused)
        return NULL;
    if (deferred(m))
        return m->loss_sink;
    if (!m->ce_sums)
        m->ce_sums = m->k->alloc(3 * sizeof(double));
    return m->ce_sums;
}

/* The read-back of a fused forward's sums (a wait on a device), returned as cross_entropy_forward
 * returns them; the sink's NaN and -1 when they stay on the device. */
static void fused_out(ddpc_model *m, const double *sums, int n, ddpc_model_output *out)
{
    if (deferred(m)) {
        out->loss = NAN;
        out->n_valid = out->n_correct = -1;
        return;
    }
    double here[3];
    m->k->to_host(here, sums, (size_t)n * sizeof(double));
    out->n_valid = (int64_t)here[1];
    out->loss = out->n_valid ? (float)(here[0] / here[1]) : 0.0f;
    if (n == 3)
        out->n_correct = (int64_t)here[2];
}

bool ddpc__ce_head16_forward(ddpc_model *m, float *logits, float *losses, const float *x,
                             const float *w, const int32_t *targets, int64_t n, int64_t c,
                             int64_t v, ddpc_model_output *out)
{
    const ddpc_kernel_table *k = m->k;
    if (!m->ce_armed || !k->head16_forward || !targets)
        return false;
    double *sums = fused_sums(m);
    if (!sums || !k->head16_forward(m->cfg.precision, sums, logits, (size_t)(n * v) * sizeof(float),
                                    losses, x, w, targets, n, c, v, -1, m->ce_dloss))
        return false;
    m->ce_fused = m->ce_half = true;
    m->probs = NULL; /* the logits hold the 16-bit gradient */
    fused_out(m, sums, 3, out);
    return true;
}

void ddpc__ce_forward(ddpc_model *m, float *logits, float *losses, const int32_t *targets,
                      int64_t n, int64_t v, ddpc_model_output *out)
{
    const ddpc_kernel_table *k = m->k;
    /* argmax first: cross-entropy turns the logits into probabilities (or gradients) in place. */
    double *sums = fused_sums(m);
    if (sums) {
        if (deferred(m))
            k->argmax_correct_into(m->loss_sink + 2, logits, targets, n, v, -1);
        else
            out->n_correct = k->argmax_correct(logits, targets, n, v, -1);
        k->cross_entropy_fused(sums, logits, losses, logits, targets, n, v, -1, m->ce_dloss);
        m->ce_fused = true;
        m->probs = NULL; /* the logits hold the gradient now */
        fused_out(m, sums, 2, out);
        return;
    }
    if (deferred(m)) {
        k->argmax_correct_into(m->loss_sink + 2, logits, targets, n, v, -1);
        k->cross_entropy_forward_into(m->loss_sink, logits, losses, logits, targets, n, v, -1);
        out->loss = NAN;
        out->n_valid = out->n_correct = -1;
        return;
    }
    out->n_correct = k->argmax_correct(logits, targets, n, v, -1);
    out->loss = k->cross_entropy_forward(logits, losses, logits, targets, n, v, -1, &out->n_valid);
}

/* The gradient goes where the fused forward leaves it, over the probabilities: the backward reads
 * each probability once, in the thread that writes its gradient, so no model keeps an (n, v)
 * gradient buffer, and the kernel forms the same bits as a backward onto zeroed dlogits. */
const float *ddpc__ce_backward(ddpc_model *m, float *probs, const int32_t *targets, int64_t n,
                               int64_t v, int64_t n_valid, float dloss)
{
    if (m->ce_fused)
        return probs; /* already there, scaled by this dloss (model.c checks it) */
    m->k->cross_entropy_backward_inplace(probs, targets, n, v, -1, n_valid,
                                         deferred(m) ? m->loss_sink : NULL, dloss);
    m->ce_fused = true;
    m->ce_dloss = dloss;
    m->probs = NULL;
    return probs;
}
