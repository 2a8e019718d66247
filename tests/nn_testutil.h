// SPDX-License-Identifier: MIT
/* Finite-difference gradient check of a whole model, shared by the model tests: the analytic
 * gradient of a sample of every tensor's parameters against central differences of the training
 * loss. A sample where the differences at eps and eps/2 disagree sits on a kink (ReLU, max-pool)
 * and is skipped; at most one in max_skip_ratio (counted against the checked ones) may be. */
#ifndef DDPC_TESTS_NN_TESTUTIL_H
#define DDPC_TESTS_NN_TESTUTIL_H

#include <ddpc/nn.h>
#include <ddpc/rng.h>

#include <math.h>
#include <stdio.h>

#include "check.h"

static inline double nn_loss_of(ddpc_model *m, const ddpc_model_input *in)
{
    ddpc_model_output out;
    ddpc_status s = ddpc_model_forward(m, in, true, &out);
    CHECK_EQ_INT(s, DDPC_OK);
    return out.loss;
}

static inline double nn_central_difference(ddpc_model *m, const ddpc_model_input *in, float *p,
                                           float eps)
{
    float saved = *p;
    *p = saved + eps;
    double lp = nn_loss_of(m, in);
    *p = saved - eps;
    double lm = nn_loss_of(m, in);
    *p = saved;
    return (lp - lm) / (2.0 * (double)eps);
}

/* Checks `samples` parameters of every tensor within tol; returns how many tensors received a
 * non-zero gradient. */
static inline size_t nn_check_gradients(ddpc_model *m, const ddpc_model_input *in, int samples,
                                        double tol, int max_skip_ratio)
{
    ddpc_model_zero_grad(m);
    nn_loss_of(m, in);
    CHECK_EQ_INT(ddpc_model_backward(m, 1.0f), DDPC_OK);
    float *p = ddpc_model_params(m);
    const float *g = ddpc_model_grads(m);
    ddpc_rng r = ddpc_rng_make(99, 0);
    double worst = 0;
    int checked = 0, skipped = 0;
    size_t nonzero = 0;
    for (size_t t = 0; t < ddpc_model_num_tensors(m); t++) {
        const ddpc_param *prm = ddpc_model_tensor(m, t);
        double tensor_norm = 0.0;
        for (size_t i = 0; i < prm->numel; i++)
            tensor_norm += fabs(g[prm->offset + i]);
        nonzero += tensor_norm > 0.0;
        for (int k = 0; k < samples; k++) {
            size_t i = prm->offset + (size_t)ddpc_rng_below(&r, prm->numel);
            float eps = 2e-3f * (fabsf(p[i]) > 1.0f ? fabsf(p[i]) : 1.0f);
            double fd = nn_central_difference(m, in, &p[i], eps);
            double fd_half = nn_central_difference(m, in, &p[i], eps / 2);
            if (fabs(fd - fd_half) > 0.05 * (fabs(fd) + fabs(fd_half)) + 2e-3) {
                skipped++;
                continue;
            }
            checked++;
            /* Below 4e-4 the difference is fp32 rounding of the loss divided by eps. */
            double diff = fabs(fd_half - g[i]);
            double err = diff <= 4e-4 ? 0.0 : diff / (fabs(fd_half) + fabs(g[i]));
            if (err > worst)
                worst = err;
            if (err > tol)
                fprintf(stderr, "  %s[%zu]: analytic %.6g vs numeric %.6g\n", prm->name,
                        i - prm->offset, g[i], fd_half);
        }
    }
    CHECK(worst <= tol);
    CHECK(skipped * max_skip_ratio <= checked);
    return nonzero;
}

#endif
