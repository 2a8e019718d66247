// SPDX-License-Identifier: MIT
/* One BatchNorm layer inside a model (torch's BatchNorm1d/2d over (n, c, hw)): its parameters
 * "<prefix>.<i>.weight/bias" (c), its buffers "<prefix>.<i>.running_mean/running_var" (c), and
 * the statistics forward used, which backward reads. Training statistics pass through the
 * model's stat-sync hook (SyncBatchNorm), so they are those of every replica's batch together. */
#ifndef DDPC_NN_BN_LAYER_H
#define DDPC_NN_BN_LAYER_H

#include "nn/model_impl.h"

/* torch's BatchNorm momentum and eps (the type's config holds them). */
typedef struct {
    float momentum, eps;
} ddpc__bn_opts;

typedef struct {
    int w_idx, b_idx, rmean_idx, rvar_idx;
    int64_t c;
    ddpc__bn_opts opts;
    const ddpc_kernel_table *k; /* the model's table, which allocated mean and invstd */
    float *mean, *invstd;  /* (c) of the last forward, in k's memory */
    double *sums;         /* (2c + 1) in k's memory: the sums and their all-reduce */
    double count;         /* elements per channel behind the last training forward's statistics
                             (host: every rank's with SyncBatchNorm; see agree_count) */
} ddpc__bn_layer;

/* Reads `<prefix>.batchnorm` (false), `.bn_momentum` (0.1) and `.bn_eps` (1e-5), torch's
 * defaults, for the types that offer BatchNorm (mlp, cnn). Errors name file, line and key. */
ddpc_status ddpc__bn_read_config(ddpc_config *cfg, const char *prefix, bool *on, float *momentum,
                                 float *eps);
/* Registers the parameters and buffers and allocates the statistics; DDPC_ENOMEM. */
ddpc_status ddpc__bn_layer_add(ddpc__bn_layer *l, ddpc_model *m, const char *prefix, int i,
                               int64_t c, ddpc__bn_opts opts);
/* torch's reset: weight 1, bias 0, running mean 0, running variance 1. */
void ddpc__bn_layer_init(const ddpc__bn_layer *l, ddpc_model *m);
/* y (n, c, hw) = BN(x); training: batch statistics (synced) and a running-statistics update;
 * otherwise the running statistics. y may be x. Errors: the stat-sync hook's; DDPC_EINVAL naming
 * the layer when training statistics would come from a single value per channel (as torch). */
ddpc_status ddpc__bn_layer_forward(ddpc__bn_layer *l, ddpc_model *m, float *y, const float *x,
                                   int64_t n, int64_t hw, bool training);
/* d (n, c, hw): in, the output's gradient; out, the input's (x is forward's input). Adds this
 * replica's weight and bias gradients and reports them ready. A failed sync is stored in
 * m->backward_status and returned. */
ddpc_status ddpc__bn_layer_backward(ddpc__bn_layer *l, ddpc_model *m, float *d, const float *x,
                                    int64_t n, int64_t hw);
/* Frees the statistics; a zeroed layer is a no-op. */
void ddpc__bn_layer_free(ddpc__bn_layer *l);

#endif
