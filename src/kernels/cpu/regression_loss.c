// SPDX-License-Identifier: MIT
/* Elementwise losses between predictions and float targets with PyTorch's reduction='mean' (the
 * mean over every element): MSELoss, L1Loss, SmoothL1Loss(beta), BCEWithLogitsLoss.
 * Invariant: every sum runs serially in double in element order, so a value is the same whatever
 * the thread count; backward accumulates dloss / n times the elementwise derivative, which is the
 * formula torch's backward uses, so gradients agree with torch's to the last bits or so. */
#include <ddpc/kernels.h>

#include <math.h>

float ddpc_mse_forward(const float *pred, const float *target, int64_t n)
{
    double total = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)pred[i] - (double)target[i];
        total += d * d;
    }
    return n > 0 ? (float)(total / (double)n) : 0.0f;
}

void ddpc_mse_backward(float *dpred, const float *pred, const float *target, int64_t n, float dloss)
{
    if (n <= 0)
        return;
    float norm = (float)(2.0 / (double)n);
    for (int64_t i = 0; i < n; i++)
        dpred[i] += norm * (pred[i] - target[i]) * dloss;
}

float ddpc_l1_forward(const float *pred, const float *target, int64_t n)
{
    double total = 0.0;
    for (int64_t i = 0; i < n; i++)
        total += fabs((double)pred[i] - (double)target[i]);
    return n > 0 ? (float)(total / (double)n) : 0.0f;
}

/* torch's sign(): 0 where the prediction equals its target. */
static float sign_of(float d)
{
    return (float)((d > 0.0f) - (d < 0.0f));
}

void ddpc_l1_backward(float *dpred, const float *pred, const float *target, int64_t n, float dloss)
{
    if (n <= 0)
        return;
    float norm = (float)(1.0 / (double)n);
    for (int64_t i = 0; i < n; i++)
        dpred[i] += sign_of(pred[i] - target[i]) * norm * dloss;
}

float ddpc_smooth_l1_forward(const float *pred, const float *target, int64_t n, float beta)
{
    if (beta <= 0.0f) /* torch: beta == 0 is L1Loss */
        return ddpc_l1_forward(pred, target, n);
    double total = 0.0, b = (double)beta;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)pred[i] - (double)target[i]);
        total += d < b ? 0.5 * d * d / b : d - 0.5 * b;
    }
    return n > 0 ? (float)(total / (double)n) : 0.0f;
}

void ddpc_smooth_l1_backward(float *dpred, const float *pred, const float *target, int64_t n,
                             float beta, float dloss)
{
    if (beta <= 0.0f) {
        ddpc_l1_backward(dpred, pred, target, n, dloss);
        return;
    }
    if (n <= 0)
        return;
    float norm = (float)(1.0 / (double)n);
    for (int64_t i = 0; i < n; i++) {
        float d = pred[i] - target[i];
        float g = d < -beta ? -1.0f : d > beta ? 1.0f : d / beta;
        dpred[i] += g * norm * dloss;
    }
}

float ddpc_bce_logits_forward(float *probs, const float *logits, const float *target, int64_t n)
{
    double total = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double x = (double)logits[i], y = (double)target[i];
        /* max(x, 0) - x y + log(1 + exp(-|x|)): never exponentiates a large positive number. */
        total += (x > 0.0 ? x : 0.0) - x * y + log1p(exp(-fabs(x)));
        probs[i] = (float)(1.0 / (1.0 + exp(-x))); /* after reading logits[i]: may alias */
    }
    return n > 0 ? (float)(total / (double)n) : 0.0f;
}

void ddpc_bce_logits_backward(float *dlogits, const float *probs, const float *target, int64_t n,
                              float dloss)
{
    if (n <= 0)
        return;
    float norm = (float)(1.0 / (double)n);
    for (int64_t i = 0; i < n; i++)
        dlogits[i] += (probs[i] - target[i]) * norm * dloss;
}

int64_t ddpc_multilabel_correct(const float *probs, const float *target, int64_t n)
{
    int64_t hits = 0;
    for (int64_t i = 0; i < n; i++)
        hits += (probs[i] > 0.5f) == (target[i] > 0.5f);
    return hits;
}

void ddpc_regression_errors(const float *pred, const float *target, int64_t n, double *sum_abs,
                            double *sum_sq)
{
    double a = 0.0, s = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)pred[i] - (double)target[i];
        a += fabs(d);
        s += d * d;
    }
    *sum_abs = a;
    *sum_sq = s;
}
