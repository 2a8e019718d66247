// SPDX-License-Identifier: MIT
/* src/kernels/cuda/regression_loss.cu's device code on the host (tests/cuda_emu.h) against the
 * CPU's kernels (kernels/cpu/regression_loss.c): MSE, L1, SmoothL1 (beta 1, 0.3 and 0) and
 * BCE-with-logits. The mean loss within 1e-6 relative (the same terms in double, summed in another
 * fixed order), the regression errors within 1e-12; the label hits, the element count and BCE's
 * probabilities (written over its logits) exactly; every backward bit for bit (each operation
 * rounded once, in the CPU's order), onto gradients that already hold values. Sizes from 1 to past
 * the partial pass's grid (so its stride loops go round), grids of the host side's size and of 2
 * blocks, differences of exactly 0 and exactly +-beta. */
#include "cuda_emu.h"

#include "../src/kernels/cuda/regression_loss.cu"

#include <ddpc/kernels.h>

#include "emu_testutil.h"

#include "check.h"

#include <vector>

/* The host side's partial grid for n (regression_loss.cu's loss_blocks). */
static int host_blocks(int64_t n)
{
    const int64_t want = (n + kLossThreads - 1) / kLossThreads;
    return (int)(want < 1 ? 1 : want < kLossBlocks ? want : kLossBlocks);
}

/* op's three sums over n elements, as the host side runs them with `blocks` partials. */
static std::vector<double> emu_sums(loss_op op, float *probs, const float *pred,
                                    const float *target, int64_t n, float beta, bool as_sums,
                                    int blocks)
{
    std::vector<double> part(3 * (size_t)blocks), out(3, -1.0);
    emu_launch((unsigned)blocks, kLossThreads, 0,
               [&] { loss_partial_kernel(part.data(), op, probs, pred, target, n, (double)beta); });
    emu_launch(1, kLossThreads, 0, [&] {
        loss_final_kernel(out.data(), part.data(), blocks, n, as_sums, op == OP_BCE);
    });
    return out;
}

static bool close_rel(const char *what, double a, double ref, double tol)
{
    const double err = fabs(a - ref) / fmax(fabs(ref), 1e-30);
    if (err <= tol)
        return true;
    fprintf(stderr, "  %s: %.17g against the CPU's %.17g (rel err %.3g > %.3g)\n", what, a, ref,
            err, tol);
    return false;
}

/* Predictions and targets of n elements: random, with every 7th difference exactly 0 and every
 * 11th exactly +-beta (SmoothL1's edges), and logits up to +-30 for BCE. */
static void make_inputs(int64_t n, float beta, uint64_t seed, std::vector<float> *pred,
                        std::vector<float> *target)
{
    *pred = emu_rand(n, 3.0f, seed);
    *target = emu_rand(n, 2.0f, seed + 1);
    for (int64_t i = 0; i < n; i++) {
        float &p = (*pred)[(size_t)i], &t = (*target)[(size_t)i];
        if (i % 7 == 0)
            p = t;
        else if (i % 11 == 0 && beta > 0.0f)
            p = t + (i % 2 ? beta : -beta);
        if (i % 13 == 0)
            p *= 10.0f;
    }
}

/* Targets of a multi-label problem: 0/1 labels with probabilities in between at every 5th. */
static std::vector<float> labels(int64_t n, uint64_t seed)
{
    std::vector<float> t = emu_rand(n, 1.0f, seed);
    for (int64_t i = 0; i < n; i++) {
        float &v = t[(size_t)i];
        v = i % 5 == 0 ? 0.5f * (v + 1.0f) : v > 0.0f ? 1.0f : 0.0f;
    }
    return t;
}

static float cpu_forward(loss_op op, float *probs, const float *pred, const float *target,
                         int64_t n, float beta)
{
    switch (op) {
    case OP_MSE:
        return ddpc_mse_forward(pred, target, n);
    case OP_L1:
        return ddpc_l1_forward(pred, target, n);
    case OP_SMOOTH_L1:
        return ddpc_smooth_l1_forward(pred, target, n, beta);
    default:
        return ddpc_bce_logits_forward(probs, pred, target, n);
    }
}

static void cpu_backward(loss_op op, float *d, const float *pred, const float *target, int64_t n,
                         float beta, float dloss)
{
    switch (op) {
    case OP_MSE:
        ddpc_mse_backward(d, pred, target, n, dloss);
        break;
    case OP_L1:
        ddpc_l1_backward(d, pred, target, n, dloss);
        break;
    case OP_SMOOTH_L1:
        ddpc_smooth_l1_backward(d, pred, target, n, beta, dloss);
        break;
    default:
        ddpc_bce_logits_backward(d, pred, target, n, dloss);
        break;
    }
}

/* The forward of op at n: the device's sums (as elementwise_loss_into lays them out) against the
 * CPU's mean, count and hits; BCE's probabilities written over its logits, as models call it. */
static void check_forward(loss_op op, const char *name, int64_t n, float beta, int blocks)
{
    std::vector<float> pred, target;
    make_inputs(n, beta, 40 + (uint64_t)n, &pred, &target);
    if (op == OP_BCE) {
        pred = emu_rand(n, 30.0f, 50 + (uint64_t)n);
        target = labels(n, 60 + (uint64_t)n);
    }
    std::vector<float> cpu_probs = pred, dev_probs = pred;
    const float mean = cpu_forward(op, cpu_probs.data(), pred.data(), target.data(), n, beta);
    const std::vector<double> s =
        emu_sums(op, dev_probs.data(), dev_probs.data(), target.data(), n, beta, true, blocks);
    char what[96];
    snprintf(what, sizeof what, "%s n %lld beta %g, %d blocks: mean", name, (long long)n,
             (double)beta, blocks);
    CHECK(close_rel(what, (double)(float)(s[0] / (double)n), (double)mean, 1e-6));
    CHECK(s[1] == (double)n);
    if (op == OP_BCE) {
        CHECK(emu_same_bits("bce probabilities", dev_probs.data(), cpu_probs.data(), n, 4));
        CHECK(s[2] == (double)ddpc_multilabel_correct(cpu_probs.data(), target.data(), n));
        /* multilabel_correct alone (OP_HITS), on the probabilities. */
        const std::vector<double> h =
            emu_sums(OP_HITS, nullptr, cpu_probs.data(), target.data(), n, 0.0f, false, blocks);
        CHECK(h[0] == s[2]);
    } else {
        CHECK(s[2] == 0.0);
        /* regression_errors: OP_MSE's second and third sums, in the CPU's layout. */
        double sum_abs = 0.0, sum_sq = 0.0;
        ddpc_regression_errors(pred.data(), target.data(), n, &sum_abs, &sum_sq);
        const std::vector<double> e =
            emu_sums(OP_MSE, nullptr, pred.data(), target.data(), n, 0.0f, false, blocks);
        CHECK(close_rel("sum |d|", e[1], sum_abs, 1e-12));
        CHECK(close_rel("sum d^2", e[2], sum_sq, 1e-12));
    }
}

/* The backward of op at n, onto gradients holding values already, bit for bit. */
static void check_backward(loss_op op, const char *name, int64_t n, float beta, int blocks)
{
    std::vector<float> pred, target;
    make_inputs(n, beta, 70 + (uint64_t)n, &pred, &target);
    if (op == OP_BCE) { /* probabilities against labels */
        pred = emu_rand(n, 0.5f, 80 + (uint64_t)n);
        for (float &p : pred)
            p += 0.5f;
        target = labels(n, 90 + (uint64_t)n);
    }
    std::vector<float> cpu = emu_rand(n, 0.1f, 100 + (uint64_t)n), dev = cpu;
    const float dloss = 0.37f;
    cpu_backward(op, cpu.data(), pred.data(), target.data(), n, beta, dloss);
    const float norm = (float)((op == OP_MSE ? 2.0 : 1.0) / (double)n);
    emu_launch((unsigned)blocks, kLossThreads, 0, [&] {
        loss_backward_kernel(dev.data(), op, pred.data(), target.data(), n, beta, norm, dloss);
    });
    char what[96];
    snprintf(what, sizeof what, "%s backward n %lld beta %g", name, (long long)n, (double)beta);
    CHECK(emu_same_bits(what, dev.data(), cpu.data(), n, 4));
}

static void test_losses(void)
{
    struct {
        loss_op op;
        const char *name;
        float beta;
    } cases[] = {{OP_MSE, "mse", 0.0f},
                 {OP_L1, "l1", 0.0f},
                 {OP_SMOOTH_L1, "smooth_l1", 1.0f},
                 {OP_SMOOTH_L1, "smooth_l1", 0.3f},
                 {OP_SMOOTH_L1, "smooth_l1", 0.0f},
                 {OP_BCE, "bce_logits", 0.0f}};
    const int64_t sizes[] = {1, 7, 1000, 3 * (int64_t)kLossBlocks * kLossThreads + 5};
    for (const auto &c : cases)
        for (int64_t n : sizes) {
            check_forward(c.op, c.name, n, c.beta, host_blocks(n));
            check_forward(c.op, c.name, n, c.beta, 2);
            check_backward(c.op, c.name, n, c.beta, (int)emu_grid(n, kLossThreads));
            check_backward(c.op, c.name, n, c.beta, 2);
        }
}

/* A logit of +-1000 gives a finite loss and probabilities 0 and 1, as on the CPU. */
static void test_bce_extremes(void)
{
    std::vector<float> x = {1000.0f, -1000.0f, 0.0f, 88.0f}, t = {1.0f, 0.0f, 0.5f, 0.0f};
    std::vector<float> cpu = x, dev = x;
    const float mean = ddpc_bce_logits_forward(cpu.data(), x.data(), t.data(), 4);
    const std::vector<double> s =
        emu_sums(OP_BCE, dev.data(), dev.data(), t.data(), 4, 0.0f, true, 1);
    CHECK(isfinite(s[0]));
    CHECK(close_rel("bce at +-1000", (double)(float)(s[0] / 4.0), (double)mean, 1e-6));
    CHECK(emu_same_bits("bce probabilities at +-1000", dev.data(), cpu.data(), 4, 4));
}

int main(void)
{
    RUN_TEST(test_losses);
    RUN_TEST(test_bce_extremes);
    return check_summary();
}
