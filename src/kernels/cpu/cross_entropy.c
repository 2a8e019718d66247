// SPDX-License-Identifier: MIT
/* Softmax cross-entropy with PyTorch's defaults: mean over rows whose target is valid, where
 * ignore_index (and any target outside [0, v)) marks a row as ignored.
 * Invariant: the loss sum runs serially over the per-row losses in row order, so the mean is
 * deterministic whatever the thread count; probs may overwrite logits row by row, and the
 * gradient may overwrite probs. */
#include <ddpc/kernels.h>

#include <math.h>

#include "core/simd_dispatch.h"
#include "kernels/cpu/cpu_impl.h"

static int valid_target(int32_t tg, int64_t v, int32_t ignore_index)
{
    return tg != ignore_index && tg >= 0 && tg < v;
}

/* probs row = softmax(logits row); returns -log p[target] (0 when the target is ignored). */
static float row_forward(float *probs, const float *logits, int32_t tg, int64_t v, int valid)
{
    float mx = ddpc__max_f32(logits, v);
    float shifted_target = valid ? logits[tg] - mx : 0.0f; /* read before probs overwrites it */
    float sum = ddpc__exp_sum_f32(probs, logits, v, mx);
    float inv = 1.0f / sum;
    for (int64_t j = 0; j < v; j++)
        probs[j] *= inv;
    return valid ? logf(sum) - shifted_target : 0.0f;
}

float DDPC_SIMD(ddpc_cross_entropy_forward)(float *probs, float *losses, const float *logits,
                                            const int32_t *targets, int64_t n, int64_t v,
                                            int32_t ignore_index, int64_t *n_valid)
{
    int64_t count = 0;
    double total = 0.0;
    if (losses) {
#pragma omp parallel for schedule(static) if (n * v >= DDPC__PAR_MIN_WORK)
        for (int64_t i = 0; i < n; i++)
            losses[i] = row_forward(probs + i * v, logits + i * v, targets[i], v,
                                    valid_target(targets[i], v, ignore_index));
    }
    for (int64_t i = 0; i < n; i++) {
        int valid = valid_target(targets[i], v, ignore_index);
        float li =
            losses ? losses[i] : row_forward(probs + i * v, logits + i * v, targets[i], v, valid);
        count += valid;
        total += li;
    }
    if (n_valid)
        *n_valid = count;
    return count ? (float)(total / (double)count) : 0.0f;
}
DDPC_SIMD_DISPATCH(float, ddpc_cross_entropy_forward,
                   (float *probs, float *losses, const float *logits, const int32_t *targets,
                    int64_t n, int64_t v, int32_t ignore_index, int64_t *n_valid),
                   (probs, losses, logits, targets, n, v, ignore_index, n_valid))

void DDPC_SIMD(ddpc_cross_entropy_backward)(float *dlogits, const float *probs,
                                            const int32_t *targets, int64_t n, int64_t v,
                                            int32_t ignore_index, int64_t n_valid, float dloss)
{
    if (n_valid <= 0)
        return;
    const float g = dloss / (float)n_valid;
#pragma omp parallel for schedule(static) if (n * v >= DDPC__PAR_MIN_WORK)
    for (int64_t i = 0; i < n; i++) {
        int32_t tg = targets[i];
        if (!valid_target(tg, v, ignore_index))
            continue;
        float *restrict d = dlogits + i * v;
        const float *restrict p = probs + i * v;
        for (int64_t j = 0; j < v; j++)
            d[j] += g * p[j];
        d[tg] -= g;
    }
}
DDPC_SIMD_DISPATCH_VOID(ddpc_cross_entropy_backward,
                        (float *dlogits, const float *probs, const int32_t *targets, int64_t n,
                         int64_t v, int32_t ignore_index, int64_t n_valid, float dloss),
                        (dlogits, probs, targets, n, v, ignore_index, n_valid, dloss))

/* A valid row's probabilities p (v) become its gradient in place: 0 + g p, less g at the target,
 * the sums ddpc_cross_entropy_backward forms onto a zeroed row, so the same bits. */
static void row_gradient(float *p, int32_t tg, int64_t v, float g)
{
    for (int64_t j = 0; j < v; j++)
        p[j] = 0.0f + g * p[j];
    p[tg] -= g;
}

/* The backward over its own input: every element is read, then written, by one thread. */
void DDPC_SIMD(ddpc_cross_entropy_backward_inplace)(float *probs, const int32_t *targets,
                                                    int64_t n, int64_t v, int32_t ignore_index,
                                                    int64_t n_valid, float dloss)
{
    const float g = n_valid > 0 ? dloss / (float)n_valid : 0.0f;
#pragma omp parallel for schedule(static) if (n * v >= DDPC__PAR_MIN_WORK)
    for (int64_t i = 0; i < n; i++) {
        float *p = probs + i * v;
        if (n_valid > 0 && valid_target(targets[i], v, ignore_index)) {
            row_gradient(p, targets[i], v, g);
        } else {
            for (int64_t j = 0; j < v; j++)
                p[j] = 0.0f;
        }
    }
}
DDPC_SIMD_DISPATCH_VOID(ddpc_cross_entropy_backward_inplace,
                        (float *probs, const int32_t *targets, int64_t n, int64_t v,
                         int32_t ignore_index, int64_t n_valid, float dloss),
                        (probs, targets, n, v, ignore_index, n_valid, dloss))

/* Forward and backward in one sweep: each row's softmax lands in dlogits and becomes its gradient
 * while the row is still in cache. The same row_forward and the same products as forward then
 * backward onto zeroed dlogits (0 + g p, then - g at the target; g = dloss / count as backward
 * computes it), so the same bits, loss sum included; only the valid count is needed first. */
void DDPC_SIMD(ddpc_cross_entropy_fused)(double *sums, float *dlogits, float *losses,
                                         const float *logits, const int32_t *targets, int64_t n,
                                         int64_t v, int32_t ignore_index, float dloss)
{
    int64_t count = 0;
    for (int64_t i = 0; i < n; i++)
        count += valid_target(targets[i], v, ignore_index);
    const float g = count ? dloss / (float)count : 0.0f;
    double total = 0.0;
#pragma omp parallel for schedule(static) if (losses && n * v >= DDPC__PAR_MIN_WORK)
    for (int64_t i = 0; i < n; i++) {
        int32_t tg = targets[i];
        float *d = dlogits + i * v;
        float li = 0.0f;
        if (count && valid_target(tg, v, ignore_index)) {
            li = row_forward(d, logits + i * v, tg, v, 1);
            row_gradient(d, tg, v, g);
        } else {
            for (int64_t j = 0; j < v; j++)
                d[j] = 0.0f;
        }
        if (losses)
            losses[i] = li;
        else
            total += li; /* serial: the parallel loop runs only with losses */
    }
    if (losses)
        for (int64_t i = 0; i < n; i++)
            total += losses[i];
    sums[0] = total;
    sums[1] = (double)count;
}
DDPC_SIMD_DISPATCH_VOID(ddpc_cross_entropy_fused,
                        (double *sums, float *dlogits, float *losses, const float *logits,
                         const int32_t *targets, int64_t n, int64_t v, int32_t ignore_index,
                         float dloss),
                        (sums, dlogits, losses, logits, targets, n, v, ignore_index, dloss))

int64_t DDPC_SIMD(ddpc_argmax_correct)(const float *scores, const int32_t *targets, int64_t n,
                                       int64_t v, int32_t ignore_index)
{
    int64_t correct = 0;
#pragma omp parallel for schedule(static) reduction(+ : correct) if (n * v >= DDPC__PAR_MIN_WORK)
    for (int64_t i = 0; i < n; i++) {
        if (!valid_target(targets[i], v, ignore_index))
            continue;
        const float *row = scores + i * v;
        int64_t best = 0;
        for (int64_t j = 1; j < v; j++)
            best = row[j] > row[best] ? j : best;
        correct += best == targets[i];
    }
    return correct;
}
DDPC_SIMD_DISPATCH(int64_t, ddpc_argmax_correct,
                   (const float *scores, const int32_t *targets, int64_t n, int64_t v,
                    int32_t ignore_index),
                   (scores, targets, n, v, ignore_index))
