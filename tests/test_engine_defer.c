// SPDX-License-Identifier: MIT
/* The deferred engine's logic on the CPU, through a stand-in device: the CPU kernel table with
 * kind cuda, whose read-backs count as host waits and whose no-wait members (the *_into losses,
 * grad_norm_clip, elementwise_loss_into) are written here from the CPU kernels the way
 * kernels/cuda computes them (a sum in double, then the mean as a float), and whose memory is told
 * from the host's (float targets must be staged). engine_defer_check.h's checks then run on it; on
 * the GPU test_cuda_defer runs them on the CUDA table. Also: the CPU table never defers; a CNN
 * with BatchNorm on the stand-in keeps its batch sums in the stand-in's memory (sums handed over
 * from anywhere else would be a read-back, counted as a wait), so its steps never wait and train
 * the CPU table's bits. */
#include "engine_defer_check.h"
#include "standin_memory_testutil.h"

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

/* The elementwise losses: the values the CPU returns, read back (a wait) or left in sums the way
 * kernels/cuda lays them out, whose sum over n elements gives the CPU's mean again (mean * n is
 * exact in double for these sizes). The targets must have been staged into the stand-in's
 * memory, as a device's kernels need them. */
static void si_elementwise_into(double *sums, ddpc_elementwise_loss loss, float beta, float *probs,
                                const float *pred, const float *target, int64_t n)
{
    CHECK(standin_holds(target, (size_t)n * sizeof(float)));
    float mean;
    double hits = 0.0;
    switch (loss) {
    case DDPC_ELEMENTWISE_MSE:
        mean = cpu->mse_forward(pred, target, n);
        break;
    case DDPC_ELEMENTWISE_L1:
        mean = cpu->l1_forward(pred, target, n);
        break;
    case DDPC_ELEMENTWISE_SMOOTH_L1:
        mean = cpu->smooth_l1_forward(pred, target, n, beta);
        break;
    default:
        mean = cpu->bce_logits_forward(probs, pred, target, n);
        hits = (double)cpu->multilabel_correct(probs, target, n);
        break;
    }
    sums[0] = (double)mean * (double)n;
    sums[1] = (double)n;
    sums[2] = hits;
}

static float si_mse(const float *pred, const float *target, int64_t n)
{
    waits++;
    return cpu->mse_forward(pred, target, n);
}

static float si_l1(const float *pred, const float *target, int64_t n)
{
    waits++;
    return cpu->l1_forward(pred, target, n);
}

static float si_smooth_l1(const float *pred, const float *target, int64_t n, float beta)
{
    waits++;
    return cpu->smooth_l1_forward(pred, target, n, beta);
}

static float si_bce(float *probs, const float *logits, const float *target, int64_t n)
{
    waits++;
    return cpu->bce_logits_forward(probs, logits, target, n);
}

static int64_t si_multilabel(const float *probs, const float *target, int64_t n)
{
    waits++;
    return cpu->multilabel_correct(probs, target, n);
}

static void si_regression_errors(const float *pred, const float *target, int64_t n,
                                 double *sum_abs, double *sum_sq)
{
    waits++;
    cpu->regression_errors(pred, target, n, sum_abs, sum_sq);
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

static uint64_t host_sums; /* batchnorm calls given sums outside the stand-in's memory */

/* Whether sums (count doubles) lie in the stand-in's memory; counts the call when not. */
static bool si_owned(const double *sums, int64_t count)
{
    if (standin_holds(sums, (size_t)count * sizeof(double)))
        return true;
    host_sums++;
    return false;
}

/* The two members that produce sums: host sums would have to be read back (the CUDA table did:
 * a wait per layer in forward and in backward). */
static void si_bn_sums(double *sums, const float *x, int64_t n, int64_t c, int64_t hw)
{
    if (!si_owned(sums, 2 * c + 1))
        waits++;
    cpu->batchnorm_sums(sums, x, n, c, hw);
}

static void si_bn_backward_sums(double *sums, const float *dy, const float *x, const float *mean,
                                const float *invstd, int64_t n, int64_t c, int64_t hw)
{
    if (!si_owned(sums, 2 * c))
        waits++;
    cpu->batchnorm_backward_sums(sums, dy, x, mean, invstd, n, c, hw);
}

static void si_bn_stats(float *mean, float *invstd, float *running_mean, float *running_var,
                        const double *sums, int64_t c, float momentum, float eps)
{
    si_owned(sums, 2 * c + 1);
    cpu->batchnorm_stats(mean, invstd, running_mean, running_var, sums, c, momentum, eps);
}

static void si_bn_backward_params(float *dw, float *db, const double *sums, int64_t c)
{
    si_owned(sums, 2 * c);
    cpu->batchnorm_backward_params(dw, db, sums, c);
}

static void si_bn_backward_input(float *dx, const float *dy, const float *x, const float *mean,
                                 const float *invstd, const float *w, const double *sums,
                                 double count, int64_t n, int64_t c, int64_t hw)
{
    si_owned(sums, 2 * c);
    cpu->batchnorm_backward_input(dx, dy, x, mean, invstd, w, sums, count, n, c, hw);
}

/* dc_model's input as a CNN with BatchNorm2d after both convolutions (4x4 -> 2x2 -> 1x1). */
static ddpc_model *cnn_bn_model(const ddpc_kernel_table *k)
{
    ddpc_model_config c = ddpc_model_config_default();
    ddpc_cnn_config own = ddpc_cnn_config_default();
    c.type_config = &own;
    strcpy(c.type, "cnn");
    c.in_channels = 1, c.in_height = 4, c.in_width = 4, c.num_classes = DC_CLASSES;
    own.channels[0] = 3, own.channels[1] = 4, own.n_channels = 2;
    own.hidden[0] = 8, own.n_hidden = 1;
    own.batchnorm = true;
    c.seed = 5;
    c.backend = k;
    ddpc_model *m = NULL;
    CHECK_EQ_INT(ddpc_model_create(&m, &c), DDPC_OK);
    return m;
}

/* The CNN with BatchNorm: the stand-in's deferred steps wait for nothing and give the CPU
 * table's losses, counts, norms, parameters and running statistics, bit for bit. */
static void test_cnn_batchnorm_never_waits(void)
{
    dc_data(0.0f);
    ddpc_model *ma = cnn_bn_model(cpu), *mb = cnn_bn_model(&standin);
    ddpc_engine *now = dc_engine(ma, 0), *later = dc_engine(mb, 2 * DC_ACCUM);
    CHECK(ddpc_engine_deferred(later));
    ddpc_model_output want[DC_STEPS * DC_ACCUM], got[DC_STEPS * DC_ACCUM], tmp[DC_ACCUM];
    double norms[DC_STEPS];
    size_t have = 0;
    host_sums = 0;
    for (int s = 0; s < DC_STEPS; s++) {
        ddpc_engine_step_info info;
        CHECK_EQ_INT(dc_step(now, want + s * DC_ACCUM, &info), DDPC_OK);
        norms[s] = info.grad_norm;
        uint64_t w0 = standin.host_waits();
        CHECK_EQ_INT(dc_step(later, tmp, &info), DDPC_OK);
        printf("  step %d: %llu host waits, %llu batchnorm calls on host sums\n", s + 1,
               (unsigned long long)(standin.host_waits() - w0), (unsigned long long)host_sums);
        CHECK_EQ_INT(standin.host_waits() - w0, 0);
        if (s % 2 == 0 && s + 1 < DC_STEPS)
            continue;
        size_t n = 0;
        double norm = 0.0;
        CHECK_EQ_INT(ddpc_engine_read(later, got + have, &n, &norm), DDPC_OK);
        have += n;
        CHECK(memcmp(&norm, &norms[s], sizeof norm) == 0);
    }
    CHECK_EQ_INT(host_sums, 0);
    CHECK_EQ_INT(have, (size_t)DC_STEPS * DC_ACCUM);
    for (size_t i = 0; i < have; i++) {
        if (!dc_same_out(&got[i], &want[i]))
            printf("  pass %zu: loss %.9g n_valid %lld correct %lld, CPU %.9g %lld %lld\n", i,
                   got[i].loss, (long long)got[i].n_valid, (long long)got[i].n_correct,
                   want[i].loss, (long long)want[i].n_valid, (long long)want[i].n_correct);
        CHECK(dc_same_out(&got[i], &want[i]));
    }
    ddpc_model_to_host(mb);
    CHECK(memcmp(ddpc_model_params(ma), ddpc_model_params(mb),
                 ddpc_model_num_params(ma) * sizeof(float)) == 0);
    CHECK(ddpc_model_num_buffer_floats(ma) >= 4 * 4); /* 2 layers x mean, var (padded) */
    CHECK(memcmp(ddpc_model_buffer_data(ma), ddpc_model_buffer_data(mb),
                 ddpc_model_num_buffer_floats(ma) * sizeof(float)) == 0);
    ddpc_engine_destroy(now);
    ddpc_engine_destroy(later);
    ddpc_model_destroy(ma);
    ddpc_model_destroy(mb);
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
    standin.mse_forward = si_mse;
    standin.l1_forward = si_l1;
    standin.smooth_l1_forward = si_smooth_l1;
    standin.bce_logits_forward = si_bce;
    standin.multilabel_correct = si_multilabel;
    standin.regression_errors = si_regression_errors;
    standin.elementwise_loss_into = si_elementwise_into;
    standin.sgd_update = si_sgd;
    standin.sumsq = si_sumsq;
    standin.unscale = si_unscale;
    standin.scale = si_scale;
    standin.grad_norm_clip = si_grad_norm_clip;
    standin.alloc = standin_alloc;
    standin.free = standin_free;
    standin.batchnorm_sums = si_bn_sums;
    standin.batchnorm_stats = si_bn_stats;
    standin.batchnorm_backward_sums = si_bn_backward_sums;
    standin.batchnorm_backward_params = si_bn_backward_params;
    standin.batchnorm_backward_input = si_bn_backward_input;
    RUN_TEST(test_standin);
    RUN_TEST(test_cnn_batchnorm_never_waits);
    RUN_TEST(test_cpu_never_defers);
    RUN_TEST(test_skip_reads_now);
    return check_summary();
}
