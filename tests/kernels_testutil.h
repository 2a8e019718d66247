// SPDX-License-Identifier: MIT
/* Helpers for the kernel tests: seeded random arrays and a central finite-difference gradient
 * checker. Invariant: the scalar loss is L = sum(y * r) for a fixed random r, accumulated in
 * double, so the analytic gradient of an input is exactly what backward computes from dy = r. */
#ifndef DDPC_TESTS_KERNELS_TESTUTIL_H
#define DDPC_TESTS_KERNELS_TESTUTIL_H

#include <ddpc/alloc.h>
#include <ddpc/kernels.h>
#include <ddpc/rng.h>

#include "check.h"

static inline float *tu_alloc(int64_t n)
{
    float *p = ddpc_calloc((size_t)(n > 0 ? n : 1), sizeof(float));
    if (!p)
        abort();
    return p;
}

/* x (n) ~ uniform(lo, hi) from stream (seed, stream). */
static inline float *tu_rand(int64_t n, float lo, float hi, uint64_t seed)
{
    float *p = tu_alloc(n);
    for (int64_t i = 0; i < n; i++)
        p[i] = lo + (hi - lo) * ddpc_rng_uniform_at(seed, 99, (uint64_t)i);
    return p;
}

static inline double tu_dot(const float *a, const float *b, int64_t n)
{
    double s = 0.0;
    for (int64_t i = 0; i < n; i++)
        s += (double)a[i] * (double)b[i];
    return s;
}

static inline double tu_max_abs(const float *a, int64_t n)
{
    double m = 0.0;
    for (int64_t i = 0; i < n; i++)
        m = fabs(a[i]) > m ? fabs(a[i]) : m;
    return m;
}

/* Max |a - b| over n elements, relative to max(|b|max, floor). */
static inline double tu_rel_err(const float *a, const float *b, int64_t n, double floor_)
{
    double m = 0.0, s = tu_max_abs(b, n);
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        m = d > m ? d : m;
    }
    return m / (s > floor_ ? s : floor_);
}

/* Runs the forward under test and returns L = sum(y * r). */
typedef double (*tu_loss_fn)(void *ctx);

/* Compares grad (n) with central differences of loss over param (n), checking every `step`-th
 * element. Returns max |numeric - analytic| / max(max |analytic|, 1e-3); prints the worst.
 * The forwards run on one thread; grad is whatever the caller computed (at the default threads). */
static inline double tu_grad_check(const char *what, float *param, const float *grad, int64_t n,
                                   int64_t step, float eps, tu_loss_fn loss, void *ctx)
{
    double worst = 0.0, scale = tu_max_abs(grad, n);
    int64_t worst_i = -1;
    /* Thousands of forwards: run them on one thread so a busy machine cannot stall every fork. */
    int threads = ddpc_kernels_threads();
    ddpc_kernels_set_threads(1);
    double worst_num = 0.0;
    scale = scale > 1e-3 ? scale : 1e-3;
    for (int64_t i = 0; i < n; i += step) {
        float saved = param[i];
        param[i] = saved + eps;
        double lp = loss(ctx);
        param[i] = saved - eps;
        double lm = loss(ctx);
        param[i] = saved;
        double num = (lp - lm) / (2.0 * (double)eps);
        double err = fabs(num - (double)grad[i]) / scale;
        if (err > worst) {
            worst = err;
            worst_i = i;
            worst_num = num;
        }
    }
    ddpc_kernels_set_threads(threads);
    if (worst > 1e-3)
        fprintf(stderr, "  %s: worst rel err %.3g at %lld (numeric %.6g analytic %.6g)\n", what,
                worst, (long long)worst_i, worst_num, worst_i >= 0 ? grad[worst_i] : 0.0f);
    return worst;
}

#endif
