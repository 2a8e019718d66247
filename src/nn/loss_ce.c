// SPDX-License-Identifier: MIT
/* The softmax cross-entropy a model ends in, with argmax accuracy: where its values go. Without a
 * loss sink (the CPU, evaluation, a caller that wants them now) the kernel table returns them,
 * which on a device waits for it; with one, the device keeps them for a later read and nothing
 * waits. Invariant: both ways run the same kernels in the same order, so the values are the same
 * bits, read now or later. */
#include "nn/loss.h"

#include <math.h>

void ddpc_model_set_loss_sink(ddpc_model *m, double *sink)
{
    m->loss_sink = sink;
}

/* Whether this forward leaves its values on the device. */
static bool deferred(const ddpc_model *m)
{
    return m->loss_sink && m->k->cross_entropy_forward_into && m->k->argmax_correct_into &&
           m->k->cross_entropy_backward_from;
}

void ddpc__ce_forward(ddpc_model *m, float *logits, float *losses, const int32_t *targets,
                      int64_t n, int64_t v, ddpc_model_output *out)
{
    const ddpc_kernel_table *k = m->k;
    /* argmax first: cross-entropy turns the logits into probabilities in place. */
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

void ddpc__ce_backward(ddpc_model *m, float *dlogits, const float *probs, const int32_t *targets,
                       int64_t n, int64_t v, int64_t n_valid, float dloss)
{
    if (deferred(m))
        m->k->cross_entropy_backward_from(dlogits, probs, targets, n, v, -1, m->loss_sink, dloss);
    else
        m->k->cross_entropy_backward(dlogits, probs, targets, n, v, -1, n_valid, dloss);
}
