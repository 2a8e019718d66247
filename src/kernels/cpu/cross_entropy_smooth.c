// SPDX-License-Identifier: MIT
/* Label-smoothed softmax cross-entropy (Szegedy et al. 2016) with PyTorch's semantics:
 * CrossEntropyLoss(ignore_index, label_smoothing=eps) = mean over valid rows of
 * (1 - eps) * nll + eps/v * sum_j -log p_j. Invariant: as in cross_entropy.c, the mean sums the
 * per-row losses serially in row order (deterministic for any thread count), and probs may
 * overwrite logits row by row: each row reads what it needs before writing. */
#include <ddpc/kernels.h>

#include <math.h>

#include "kernels/cpu/cpu_impl.h"

static int valid_target(int32_t tg, int64_t v, int32_t ignore_index)
{
    return tg != ignore_index && tg >= 0 && tg < v;
}

/* probs row = softmax(logits row); returns the row's smoothed loss (0 when ignored). */
static float row_forward(float *probs, const float *logits, int32_t tg, int64_t v, int valid,
                         float eps)
{
    float mx = ddpc__max_f32(logits, v);
    float shifted_target = valid ? logits[tg] - mx : 0.0f;
    double shifted_sum = 0.0; /* sum_j (x_j - mx), read before probs overwrites the logits */
    for (int64_t j = 0; j < v; j++)
        shifted_sum += (double)(logits[j] - mx);
    float sum = ddpc__exp_sum_f32(probs, logits, v, mx);
    float inv = 1.0f / sum;
    for (int64_t j = 0; j < v; j++)
        probs[j] *= inv;
    if (!valid)
        return 0.0f;
    double lse = log((double)sum);
    double nll = lse - (double)shifted_target, uniform = lse - shifted_sum / (double)v;
    return (float)((1.0 - (double)eps) * nll + (double)eps * uniform);
}

float ddpc_cross_entropy_smooth_forward(float *probs, float *losses, const float *logits,
                                        const int32_t *targets, int64_t n, int64_t v,
                                        int32_t ignore_index, float eps, int64_t *n_valid)
{
    if (losses) {
#pragma omp parallel for schedule(static) if (n * v >= DDPC__PAR_MIN_WORK)
        for (int64_t i = 0; i < n; i++)
            losses[i] = row_forward(probs + i * v, logits + i * v, targets[i], v,
                                    valid_target(targets[i], v, ignore_index), eps);
    }
    int64_t count = 0;
    double total = 0.0;
    for (int64_t i = 0; i < n; i++) {
        int valid = valid_target(targets[i], v, ignore_index);
        float li = losses ? losses[i]
                          : row_forward(probs + i * v, logits + i * v, targets[i], v, valid, eps);
        count += valid;
        total += li;
    }
    if (n_valid)
        *n_valid = count;
    return count ? (float)(total / (double)count) : 0.0f;
}

void ddpc_cross_entropy_smooth_backward(float *dlogits, const float *probs, const int32_t *targets,
                                        int64_t n, int64_t v, int32_t ignore_index, float eps,
                                        int64_t n_valid, float dloss)
{
    if (n_valid <= 0)
        return;
    const float g = dloss / (float)n_valid, u = g * eps / (float)v;
#pragma omp parallel for schedule(static) if (n * v >= DDPC__PAR_MIN_WORK)
    for (int64_t i = 0; i < n; i++) {
        int32_t tg = targets[i];
        if (!valid_target(tg, v, ignore_index))
            continue;
        float *restrict d = dlogits + i * v;
        const float *restrict p = probs + i * v;
        for (int64_t j = 0; j < v; j++)
            d[j] += g * p[j] - u;
        d[tg] -= g * (1.0f - eps);
    }
}
