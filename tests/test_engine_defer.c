// SPDX-License-Identifier: MIT
/* The deferred engine's logic on the CPU, through a stand-in device: the CPU kernel table with
 * kind cuda, whose read-backs count as host waits and whose no-wait members (the *_into losses,
 * grad_norm_clip) are written here from the CPU kernels the way kernels/cuda computes them (a sum
 * in double, then the mean as a float). engine_defer_check.h's checks then run on it; on the GPU
 * test_cuda_defer runs them on the CUDA table. Also: the CPU table never defers. */
#include "engine_defer_check.h"

#include <ddpc/kernels.h>
#include <ddpc/optim.h>

static const ddpc_kernel_table *cpu;
static ddpc_kernel_table standin;
static uint64_t waits;

static void si_to_host(void *dst, const void *src, size_t bytes)
{
    waits++;
    cpu->to_host(dst, src, bytes);
}

static uint64_t si_waits(void) { return waits; }

static void si_ce_into(double *sums, float *probs, float *losses, const float *logits,
                       const int32_t *targets, int64_t n, int64_t v, int32_t ignore_index)
{
    float *rows = ddpc_calloc((size_t)n, sizeof(float));
    int64_t valid = 0;
    cpu->cross_entropy_forward(probs, rows, logits, targets, n, v, ignore_index, &valid);
    double s = 0.0;
    for (int64_t i = 0; i < n; i++)
        s += rows[i];
    if (losses)
        memcpy(losses, rows, (size_t)n * sizeof(float));
    ddpc_free(rows);
    sums[0] = s;
    sums[1] = (double)valid;
}

static float si_ce(float *probs, float *losses, const float *logits, const int32_t *targets,
                   int64_t n, int64_t v, int32_t ignore_index, int64_t *n_valid)
{
    double sums[2];
    si_ce_into(sums, probs, losses, logits, targets, n, v, ignore_index);
    waits++;
    int64_t valid = (int64_t)sums[1];
    if (n_valid)
        *n_valid = valid;
    return valid ? (float)(sums[0] / (double)valid) : 0.0f;
}

static void si_ce_backward_from(float *dlogits, const float *probs, const int32_t *targets,
                                int64_t n, int64_t v, int32_t ignore_index, const double *sums,
                                float dloss)
{
    cpu->cross_entropy_backward(dlogits, probs, targets, n, v, ignore_index, (int64_t)sums[1],
                                dloss);
}

static int64_t si_argmax(const float *scores, const int32_t *targets, int64_t n, int64_t v,
                         int32_t ignore_index)
{
    waits++;
    return cpu->argmax_correct(scores, targets, n, v, ignore_index);
}

static void si_argmax_into(double *correct, const float *scores, const int32_t *targets,
                           int64_t n, int64_t v, int32_t ignore_index)
{
    *correct = (double)cpu->argmax_correct(scores, targets, n, v, ignore_index);
}

static double si_sumsq(const float *g, int64_t n)
{
    waits++;
    return ddpc_grad_sumsq(g, (size_t)n);
}

static bool si_unscale(float *g, int64_t n, float scale)
{
    waits++;
    return ddpc_grad_unscale(g, (size_t)n, scale);
}

static void si_scale(float *g, int64_t n, float s)
{
    for (int64_t i = 0; i < n; i++)
        g[i] *= s;
}

static void si_grad_norm_clip(double *norm, float *g, int64_t n, float max_norm)
{
    norm[0] = ddpc_grad_sumsq(g, (size_t)n);
    norm[1] += norm[0];
    float coef = max_norm > 0.0f ? ddpc_grad_clip_coef(sqrt(norm[0]), max_norm) : 1.0f;
    if (coef != 1.0f)
        si_scale(g, n, coef);
}

/* device.h's SGD rule, as kernels/cuda/optim.cu applies it. */
static void si_sgd(float *params, const float *grads, float *buf, const uint8_t *mask, int64_t n,
                   const ddpc_sgd_coef *k)
{
    for (int64_t i = 0; i < n; i++) {
        float p = params[i], d = grads[i];
        if (k->wd != 0.0f && (!mask || mask[i]))
            d = fmaf(p, k->wd, d);
        if (k->momentum != 0.0f) {
            float b = k->first ? d : fmaf(d, k->keep, buf[i] * k->momentum);
            buf[i] = b;
            d = k->nesterov ? fmaf(b, k->momentum, d) : b;
        }
        params[i] = fmaf(d, k->neg_lr, p);
    }
}

static void test_standin(void)
{
    dc_check_same_as_undeferred(&standin);
    dc_check_stop_at_read(&standin);
    dc_check_full(&standin);
}

/* On the CPU defer_passes changes nothing: the values are at hand. */
static void test_cpu_never_defers(void)
{
    dc_data(0.0f);
    ddpc_model *m = dc_model(cpu);
    ddpc_engine *e = dc_engine(m, 8);
    CHECK(!ddpc_engine_deferred(e));
    ddpc_model_output outs[DC_ACCUM];
    ddpc_engine_step_info info;
    CHECK_EQ_INT(dc_step(e, outs, &info), DDPC_OK);
    CHECK(isfinite(outs[0].loss) && outs[0].n_valid == DC_N / DC_ACCUM);
    size_t n = 5;
    double norm = 0.0;
    CHECK_EQ_INT(ddpc_engine_read(e, outs, &n, &norm), DDPC_OK);
    CHECK_EQ_INT(n, 0);
    CHECK(memcmp(&norm, &info.grad_norm, sizeof norm) == 0);
    ddpc_engine_destroy(e);
    ddpc_model_destroy(m);
}

/* on_nonfinite skip needs each step's norm before updating: no deferral. */
static void test_skip_reads_now(void)
{
    dc_data(0.0f);
    ddpc_model *m = dc_model(&standin);
    ddpc_engine_config c = ddpc_engine_config_default();
    c.on_nonfinite = DDPC_NONFINITE_SKIP;
    c.defer_passes = 8;
    ddpc_engine *e = NULL;
    CHECK_EQ_INT(ddpc_engine_create(m, NULL, 0, 1, &c, &e), DDPC_OK);
    CHECK(!ddpc_engine_deferred(e));
    ddpc_engine_destroy(e);
    ddpc_model_destroy(m);
}

int main(void)
{
    cpu = ddpc_kernel_table_cpu();
    standin = *cpu;
    standin.name = "standin";
    standin.kind = DDPC_DEVICE_CUDA;
    standin.to_host = si_to_host;
    standin.host_waits = si_waits;
    standin.cross_entropy_forward = si_ce;
    standin.argmax_correct = si_argmax;
    standin.cross_entropy_forward_into = si_ce_into;
    standin.cross_entropy_backward_from = si_ce_backward_from;
    standin.argmax_correct_into = si_argmax_into;
    standin.sgd_update = si_sgd;
    standin.sumsq = si_sumsq;
    standin.unscale = si_unscale;
    standin.scale = si_scale;
    standin.grad_norm_clip = si_grad_norm_clip;
    RUN_TEST(test_standin);
    RUN_TEST(test_cpu_never_defers);
    RUN_TEST(test_skip_reads_now);
    return check_summary();
}
