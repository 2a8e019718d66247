// SPDX-License-Identifier: MIT
/* BatchNorm over (n, c, hw) per channel (Ioffe & Szegedy 2015), PyTorch's BatchNorm1d/2d/
 * SyncBatchNorm semantics: biased variance to normalise, unbiased variance into running_var.
 * Invariant: statistics go through double sums that the caller may add up across ranks before
 * turning them into mean/invstd, so one rank with N samples and N ranks with one each agree to
 * rounding. Every loop runs per channel in a fixed order, so results do not depend on threads. */
#include <ddpc/kernels.h>

#include <math.h>

#include "kernels/cpu/cpu_impl.h"

void ddpc_batchnorm_sums(double *sums, const float *x, int64_t n, int64_t c, int64_t hw)
{
#pragma omp parallel for schedule(static) if (n * c * hw >= DDPC__PAR_MIN_WORK)
    for (int64_t ch = 0; ch < c; ch++) {
        double s = 0.0, q = 0.0;
        for (int64_t i = 0; i < n; i++) {
            const float *xi = x + (i * c + ch) * hw;
            for (int64_t j = 0; j < hw; j++) {
                double v = xi[j];
                s += v;
                q += v * v;
            }
        }
        sums[ch] = s;
        sums[c + ch] = q;
    }
    sums[2 * c] = (double)(n * hw);
}

void ddpc_batchnorm_stats(float *mean, float *invstd, float *running_mean, float *running_var,
                          const double *sums, int64_t c, float momentum, float eps)
{
    double count = sums[2 * c];
    for (int64_t ch = 0; ch < c; ch++) {
        double m = sums[ch] / count;
        double var = sums[c + ch] / count - m * m;
        if (var < 0.0) /* rounding of E[x^2] - E[x]^2 for a constant channel */
            var = 0.0;
        mean[ch] = (float)m;
        invstd[ch] = (float)(1.0 / sqrt(var + (double)eps));
        if (running_mean && running_var) {
            double unbiased = count > 1.0 ? var * count / (count - 1.0) : var;
            running_mean[ch] = (1.0f - momentum) * running_mean[ch] + momentum * (float)m;
            running_var[ch] = (1.0f - momentum) * running_var[ch] + momentum * (float)unbiased;
        }
    }
}

void ddpc_batchnorm_eval_stats(float *mean, float *invstd, const float *running_mean,
                               const float *running_var, int64_t c, float eps)
{
    for (int64_t ch = 0; ch < c; ch++) {
        mean[ch] = running_mean[ch];
        invstd[ch] = (float)(1.0 / sqrt((double)running_var[ch] + (double)eps));
    }
}

void ddpc_batchnorm_apply(float *y, const float *x, const float *mean, const float *invstd,
                          const float *w, const float *b, int64_t n, int64_t c, int64_t hw)
{
#pragma omp parallel for collapse(2) schedule(static) if (n * c * hw >= DDPC__PAR_MIN_WORK)
    for (int64_t i = 0; i < n; i++)
        for (int64_t ch = 0; ch < c; ch++) {
            const float *xi = x + (i * c + ch) * hw;
            float *yi = y + (i * c + ch) * hw;
            float scale = invstd[ch] * (w ? w[ch] : 1.0f), m = mean[ch];
            float shift = b ? b[ch] : 0.0f;
            for (int64_t j = 0; j < hw; j++)
                yi[j] = (xi[j] - m) * scale + shift;
        }
}

void ddpc_batchnorm_backward_sums(double *sums, const float *dy, const float *x,
                                  const float *mean, const float *invstd, int64_t n, int64_t c,
                                  int64_t hw)
{
#pragma omp parallel for schedule(static) if (n * c * hw >= DDPC__PAR_MIN_WORK)
    for (int64_t ch = 0; ch < c; ch++) {
        double s = 0.0, sx = 0.0;
        float m = mean[ch];
        for (int64_t i = 0; i < n; i++) {
            const float *xi = x + (i * c + ch) * hw, *gi = dy + (i * c + ch) * hw;
            for (int64_t j = 0; j < hw; j++) {
                s += gi[j];
                sx += (double)gi[j] * (double)(xi[j] - m);
            }
        }
        sums[ch] = s;
        sums[c + ch] = sx * invstd[ch];
    }
}

void ddpc_batchnorm_backward_params(float *dw, float *db, const double *sums, int64_t c)
{
    for (int64_t ch = 0; ch < c; ch++) {
        if (dw)
            dw[ch] += (float)sums[c + ch];
        if (db)
            db[ch] += (float)sums[ch];
    }
}

void ddpc_batchnorm_backward_input(float *dx, const float *dy, const float *x, const float *mean,
                                   const float *invstd, const float *w, const double *sums,
                                   double count, int64_t n, int64_t c, int64_t hw)
{
#pragma omp parallel for collapse(2) schedule(static) if (n * c * hw >= DDPC__PAR_MIN_WORK)
    for (int64_t i = 0; i < n; i++)
        for (int64_t ch = 0; ch < c; ch++) {
            const float *xi = x + (i * c + ch) * hw, *gi = dy + (i * c + ch) * hw;
            float *di = dx + (i * c + ch) * hw;
            float r = invstd[ch], m = mean[ch];
            float k = r * (w ? w[ch] : 1.0f);
            float mean_dy = (float)(sums[ch] / count);
            float mean_dy_xhat = (float)(sums[c + ch] / count);
            for (int64_t j = 0; j < hw; j++) {
                float xhat = (xi[j] - m) * r;
                di[j] = k * (gi[j] - mean_dy - xhat * mean_dy_xhat);
            }
        }
}
