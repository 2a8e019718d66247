// SPDX-License-Identifier: MIT
/* The CUDA elementwise losses (kernels/cuda/regression_loss.cu) against the CPU table on the same
 * inputs: MSE, L1, SmoothL1 (beta 1, 0.3, 0) and BCE-with-logits, each forward's mean within
 * 1e-6 relative, the regression errors within 1e-9, BCE's probabilities (written over its logits)
 * within 1e-6 and its label hits exactly; elementwise_loss_into's sums (the same sum, n, the hits)
 * left on the device without a host wait; every backward bit for bit onto gradients that hold
 * values; second calls with the same shapes allocate nothing. Sizes 1, 1000 and past the partial
 * grid (393221). Skips (exit 77) without a GPU; device outputs are poisoned with NaN first. */
#include "backend_testutil.h"

#include <string.h>

static const ddpc_kernel_table *gpu;
static const ddpc_kernel_table *cpu;

/* Predictions around targets, every 7th difference exactly 0 and every 11th exactly +-beta. */
static void make_inputs(int64_t n, float beta, uint64_t seed, float **pred, float **target)
{
    *pred = tu_rand(n, -3.0f, 3.0f, seed);
    *target = tu_rand(n, -2.0f, 2.0f, seed + 1);
    for (int64_t i = 0; i < n; i++) {
        if (i % 7 == 0)
            (*pred)[i] = (*target)[i];
        else if (i % 11 == 0 && beta > 0.0f)
            (*pred)[i] = (*target)[i] + (i % 2 ? beta : -beta);
    }
}

static float cpu_forward(ddpc_elementwise_loss l, const ddpc_kernel_table *k, float *probs,
                         const float *pred, const float *target, int64_t n, float beta)
{
    switch (l) {
    case DDPC_ELEMENTWISE_MSE:
        return k->mse_forward(pred, target, n);
    case DDPC_ELEMENTWISE_L1:
        return k->l1_forward(pred, target, n);
    case DDPC_ELEMENTWISE_SMOOTH_L1:
        return k->smooth_l1_forward(pred, target, n, beta);
    default:
        return k->bce_logits_forward(probs, pred, target, n);
    }
}

static void run_backward(ddpc_elementwise_loss l, const ddpc_kernel_table *k, float *d,
                         const float *pred, const float *target, int64_t n, float beta, float dloss)
{
    switch (l) {
    case DDPC_ELEMENTWISE_MSE:
        k->mse_backward(d, pred, target, n, dloss);
        break;
    case DDPC_ELEMENTWISE_L1:
        k->l1_backward(d, pred, target, n, dloss);
        break;
    case DDPC_ELEMENTWISE_SMOOTH_L1:
        k->smooth_l1_backward(d, pred, target, n, beta, dloss);
        break;
    default:
        k->bce_logits_backward(d, pred, target, n, dloss);
        break;
    }
}

static void check_loss(ddpc_elementwise_loss l, const char *name, int64_t n, float beta)
{
    printf(" %s n %lld beta %g\n", name, (long long)n, (double)beta);
    const bool bce = l == DDPC_ELEMENTWISE_BCE_LOGITS;
    float *pred, *target;
    make_inputs(n, beta, 30 + (uint64_t)n, &pred, &target);
    if (bce) /* logits against 0/1 labels */
        for (int64_t i = 0; i < n; i++) {
            pred[i] *= 10.0f;
            target[i] = target[i] > 0.0f ? 1.0f : 0.0f;
        }
    float *probs = tu_alloc(n);
    const float mean = cpu_forward(l, cpu, probs, pred, target, n, beta);
    float *d_pred = bt_up(gpu, pred, n), *d_target = bt_up(gpu, target, n);
    float *d_probs = bt_poison(gpu, n);
    const float gmean = cpu_forward(l, gpu, d_probs, d_pred, d_target, n, beta);
    CHECK_NEAR(gmean, mean, 1e-6);
    if (bce) {
        BT_CHECK_ERR(bt_err(gpu, "bce probabilities", d_probs, probs, n), 1e-6);
        /* Hits on the device's own probabilities, against the CPU's count of them. */
        float *hp = bt_down(gpu, d_probs, n);
        CHECK_EQ_INT(gpu->multilabel_correct(d_probs, d_target, n),
                     cpu->multilabel_correct(hp, target, n));
        ddpc_free(hp);
    } else {
        double ca = 0, cs = 0, ga = -1, gs = -1;
        cpu->regression_errors(pred, target, n, &ca, &cs);
        gpu->regression_errors(d_pred, d_target, n, &ga, &gs);
        CHECK_NEAR(ga, ca, 1e-9);
        CHECK_NEAR(gs, cs, 1e-9);
    }

    /* Left on the device: no wait, the same sum as the mean's, n, the hits; BCE in place over
     * its logits as models call it. A second call allocates nothing. */
    double *d_sums = gpu->alloc(3 * sizeof(double));
    float *d_in = bt_up(gpu, pred, n);
    const uint64_t w0 = gpu->host_waits();
    gpu->elementwise_loss_into(d_sums, l, beta, d_in, d_in, d_target, n);
    CHECK_EQ_INT(gpu->host_waits() - w0, 0);
    BT_CHECK_WARM(gpu, gpu->elementwise_loss_into(d_sums, l, beta, d_in, d_pred, d_target, n));
    double sums[3];
    gpu->to_host(sums, d_sums, sizeof sums);
    CHECK((float)(sums[0] / (double)n) == gmean);
    CHECK(sums[1] == (double)n);
    if (bce) {
        BT_CHECK_ERR(bt_err(gpu, "bce probabilities in place", d_in, probs, n), 1e-6);
        CHECK(sums[2] == (double)gpu->multilabel_correct(d_probs, d_target, n));
    } else {
        CHECK(sums[2] == 0.0);
    }

    /* Backward onto gradients that hold values: the CPU's bits (on the CPU's probabilities for
     * BCE, so both read the same inputs). */
    const float *bin = bce ? probs : pred;
    float *grad = tu_rand(n, -0.1f, 0.1f, 40 + (uint64_t)n);
    float *d_grad = bt_up(gpu, grad, n), *d_bin = bt_up(gpu, bin, n);
    run_backward(l, cpu, grad, bin, target, n, beta, 0.37f);
    BT_CHECK_WARM(gpu, run_backward(l, gpu, d_grad, d_bin, d_target, n, beta, 0.37f));
    float *hg = bt_down(gpu, d_grad, n);
    CHECK(memcmp(hg, grad, (size_t)n * sizeof(float)) == 0);
    ddpc_free(hg);
    gpu->free(d_grad);
    gpu->free(d_bin);
    gpu->free(d_in);
    gpu->free(d_sums);
    gpu->free(d_pred);
    gpu->free(d_target);
    gpu->free(d_probs);
    ddpc_free(grad);
    ddpc_free(probs);
    ddpc_free(pred);
    ddpc_free(target);
}

static void test_losses(void)
{
    const int64_t sizes[] = {1, 1000, 393221};
    for (int s = 0; s < 3; s++) {
        check_loss(DDPC_ELEMENTWISE_MSE, "mse", sizes[s], 0.0f);
        check_loss(DDPC_ELEMENTWISE_L1, "l1", sizes[s], 0.0f);
        check_loss(DDPC_ELEMENTWISE_SMOOTH_L1, "smooth_l1", sizes[s], 1.0f);
        check_loss(DDPC_ELEMENTWISE_SMOOTH_L1, "smooth_l1", sizes[s], 0.3f);
        check_loss(DDPC_ELEMENTWISE_SMOOTH_L1, "smooth_l1", sizes[s], 0.0f);
        check_loss(DDPC_ELEMENTWISE_BCE_LOGITS, "bce_logits", sizes[s], 0.0f);
    }
}

int main(void)
{
    cpu = ddpc_kernel_table_cpu();
    gpu = bt_cuda_or_skip();
    RUN_TEST(test_losses);
    return check_summary();
}
