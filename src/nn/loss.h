// SPDX-License-Identifier: MIT
/* Model-level losses other than softmax cross-entropy (loss.c): the config check every model
 * runs, and the forward/backward on a batch's outputs, called by the fully connected stack. */
#ifndef DDPC_NN_LOSS_H
#define DDPC_NN_LOSS_H

#include "nn/model_impl.h"

/* Checks cfg's loss and loss_beta for a model type that supports elementwise losses or not
 * (elementwise_ok) and the kernel table k (which must have their kernels); DDPC_EINVAL in one
 * line naming the loss. */
ddpc_status ddpc__loss_check(const ddpc_model_config *cfg, bool elementwise_ok,
                             const ddpc_kernel_table *k);
/* outputs (count) = a batch's (n, k) outputs flattened, targets (count) their float targets:
 * *out gets the mean loss, n_valid = count and the loss's statistics (regression errors, or
 * bce_logits's label hits). bce_logits turns outputs into sigmoid probabilities in place. With a
 * loss sink and a table that has elementwise_loss_into, the loss, count and hits go to the sink
 * instead (no wait; *out's loss NaN, counts -1) and the regression errors are not computed: a
 * training pass, whose log shows none. */
void ddpc__loss_forward(ddpc_model *m, float *outputs, const float *targets, int64_t count,
                        ddpc_model_output *out);
/* doutputs (count) += dloss * d(loss)/d(outputs), from forward's outputs (probs). */
void ddpc__loss_backward(ddpc_model *m, float *doutputs, const float *probs, const float *targets,
                         int64_t count, float dloss);

/* Softmax cross-entropy with argmax accuracy on logits (n, v), turned into probabilities in place
 * (loss_ce.c), or into the loss's gradient in a forward announced by ddpc_model_expect_backward:
 * read back into *out (loss, n_valid, n_correct), or, with a loss sink on a device, left in the
 * sink (*out's loss NaN, counts -1). The backward returns probs (the forward's logits), which
 * then hold the gradient (n, v): the fused forward's, or written over the probabilities here with
 * the valid count from the sink when there is one, else n_valid (forward's); m->probs is then
 * NULL, and a second backward of the same forward finds the gradient there. */
void ddpc__ce_forward(ddpc_model *m, float *logits, float *losses, const int32_t *targets,
                      int64_t n, int64_t v, ddpc_model_output *out);
const float *ddpc__ce_backward(ddpc_model *m, float *probs, const int32_t *targets, int64_t n,
                               int64_t v, int64_t n_valid, float dloss);
/* A language model's head logits = x (n, c) @ w (v, c)^T and the same loss in one, through the
 * table's head16_forward, with *out as ddpc__ce_forward's: in an announced training forward with
 * targets where the table has the member and it accepts (m->ce_half is then set: `logits`, n * v
 * floats, hold the loss's 16-bit gradient, for head16_backward). False, having run nothing,
 * otherwise: the caller then runs its product and ddpc__ce_forward. */
bool ddpc__ce_head16_forward(ddpc_model *m, float *logits, float *losses, const float *x,
                             const float *w, const int32_t *targets, int64_t n, int64_t c,
                             int64_t v, ddpc_model_output *out);

#endif
