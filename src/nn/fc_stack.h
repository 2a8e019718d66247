// SPDX-License-Identifier: MIT
/* A stack of fully connected layers, Linear -> ReLU [-> Dropout] ... -> Linear, ending in the
 * model's loss (softmax cross-entropy, or nn/loss.h's elementwise ones); the mlp and the cnn's
 * classifier. Hidden activations are stored
 * after ReLU and dropout (in place), which is all that backward needs: d(hidden) = dropout'(d) *
 * (a > 0). With heads, the last Linear is one of several (selected per forward): the layer at
 * n_layers - 1 always views the selected head's tensors, so forward and backward never see others. */
#ifndef DDPC_NN_FC_STACK_H
#define DDPC_NN_FC_STACK_H

#include "nn/bn_layer.h"
#include "nn/model_impl.h"

typedef struct {
    int n_layers;
    int64_t dims[DDPC_MODEL_MAX_LAYERS + 2]; /* dims[0] inputs ... dims[n_layers] outputs */
    int w_idx[DDPC_MODEL_MAX_LAYERS + 1];    /* (dims[i+1], dims[i]) */
    int b_idx[DDPC_MODEL_MAX_LAYERS + 1];    /* (dims[i+1]) */
    /* Multi-head: the last layer is head_w/head_b[task], dims[n_layers] = head_out[task]. */
    int n_heads;                              /* 0: a single last layer named like the others */
    int head_w[DDPC_MODEL_MAX_HEADS];         /* (head_out[k], dims[n_layers - 1]) */
    int head_b[DDPC_MODEL_MAX_HEADS];         /* (head_out[k]) */
    int64_t head_out[DDPC_MODEL_MAX_HEADS];
    /* batchnorm: BatchNorm1d "<prefix>_bn.<i>" after hidden Linear i, before its ReLU. */
    bool bn;
    ddpc__bn_layer bnl[DDPC_MODEL_MAX_LAYERS];
    float *pre[DDPC_MODEL_MAX_LAYERS + 2]; /* bn: pre[i] (n, dims[i]) Linear i-1's output */
    /* Set by forward, read by backward. */
    const float *acts[DDPC_MODEL_MAX_LAYERS + 2]; /* acts[i] (n, dims[i]); acts[0] is the input */
    float *dbuf[2], *dtmp;                        /* (n, max dim) each */
    float *dlogits, *losses; /* (n, out) for losses other than cross-entropy, else NULL; (n) */
    const int32_t *targets;                       /* (n) or NULL */
    const float *float_targets;                   /* (n, out): losses other than cross-entropy */
    int64_t n, n_valid;
    bool training;
    uint64_t rng_stream;
} ddpc__fc_stack;

/* Registers "<prefix>.<i>.weight/bias" for in -> hidden[0..n_hidden) -> out; with n_heads > 0,
 * the last layer is instead "heads.<k>.weight/bias" to heads[k] outputs for each k (out unused).
 * With bn (NULL: none), each hidden Linear is followed by a BatchNorm1d "<prefix>_bn.<i>". Head 0
 * is selected. Errors name the bad size. */
ddpc_status ddpc__fc_stack_build(ddpc__fc_stack *s, ddpc_model *m, const char *prefix, int64_t in,
                                 const int64_t *hidden, size_t n_hidden, int64_t out,
                                 const int64_t *heads, size_t n_heads, const ddpc__bn_opts *bn);
/* Frees what build allocated besides the model's tensors (the BatchNorm statistics). */
void ddpc__fc_stack_free(ddpc__fc_stack *s);
/* Makes head `task` the last layer (0 for a single head; the caller checks the range). */
void ddpc__fc_stack_select(ddpc__fc_stack *s, int task);
/* PyTorch's nn.Linear default: weight and bias uniform in +-1/sqrt(fan_in). */
void ddpc__fc_stack_init(const ddpc__fc_stack *s, ddpc_model *m);
size_t ddpc__fc_stack_arena_floats(const ddpc__fc_stack *s, const ddpc_model *m, int64_t n);
double ddpc__fc_stack_flops(const ddpc__fc_stack *s);
/* x (n, dims[0]) and in->targets are borrowed until backward. Runs the layers and the loss: the
 * logits become probabilities in the arena (m->probs); with targets, *out gets loss and accuracy.
 * Errors: the stat-sync hook's (batchnorm). */
ddpc_status ddpc__fc_stack_forward(ddpc__fc_stack *s, ddpc_model *m, const float *x,
                            const ddpc_model_input *in, bool training, float **arena,
                            ddpc_model_output *out);
/* Accumulates d(dloss * loss) into the stack's gradients; dx (n, dims[0]) += input gradient, or
 * NULL. A failed stat sync (batchnorm) ends it, kept in m->backward_status. */
void ddpc__fc_stack_backward(ddpc__fc_stack *s, ddpc_model *m, float dloss, float *dx);

#endif
