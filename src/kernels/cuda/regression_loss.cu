// SPDX-License-Identifier: MIT
/* The elementwise losses on float targets (MSELoss, L1Loss, SmoothL1Loss, BCEWithLogitsLoss with
 * reduction='mean'), their statistics (regression errors, multi-label hits) and their backward,
 * on the GPU: kernels/cpu/regression_loss.c's formulas. Forward sums each element's term in
 * double, as the CPU does, but in a fixed tree (each thread strides the grid, then one block adds
 * the blocks' partials), so a rerun gives the same bits and the mean agrees with the CPU's to the
 * last bit or so. Backward rounds each operation once (no FMA), in the CPU's order: the CPU's
 * bits. The members that return values read them back (a host wait); loss_sums_into leaves them
 * in device memory for a later read, laid out as cross-entropy's sums. */
#ifndef DDPC_CUDA_EMULATE /* tests/test_regression_loss_emu.cpp runs the device code */
#include "kernels/cuda/cuda_impl.h"
#endif

#include <math.h>

static const int kLossThreads = 256; /* a power of two: block_sum3's tree */
static const int kLossBlocks = 512;  /* the most partials: the final block adds each run in turn */

/* What one pass over the elements sums, per element: MSE, L1 and SmoothL1 give (loss term, |d|,
 * d^2) with d = pred - target; BCE gives (loss term, label hit, 0) and writes the sigmoid; HITS
 * gives (label hit of a probability, 0, 0). */
enum loss_op { OP_MSE, OP_L1, OP_SMOOTH_L1, OP_BCE, OP_HITS };

struct sum3 {
    double a, b, c;
};

/* A probability and a target agree on a label: the CPU's (p > 0.5) == (t > 0.5). */
static __device__ double label_hit(float p, float t)
{
    return (p > 0.5f) == (t > 0.5f) ? 1.0 : 0.0;
}

/* Element i's terms; for OP_BCE also probs[i] = sigmoid(pred[i]), written after pred[i] and
 * target[i] are read (either may be probs). */
static __device__ sum3 element_terms(loss_op op, float *probs, const float *pred,
                                     const float *target, int64_t i, double beta)
{
    const double x = (double)pred[i], y = (double)target[i];
    if (op == OP_HITS)
        return sum3{label_hit(pred[i], target[i]), 0.0, 0.0};
    if (op == OP_BCE) {
        const float t = target[i];
        /* max(x, 0) - x y + log(1 + exp(-|x|)): never exponentiates a large positive number. */
        const double term = (x > 0.0 ? x : 0.0) - x * y + log1p(exp(-fabs(x)));
        const float p = (float)(1.0 / (1.0 + exp(-x)));
        probs[i] = p;
        return sum3{term, label_hit(p, t), 0.0};
    }
    const double d = x - y, ad = fabs(d);
    double term = ad; /* L1, and SmoothL1 at beta 0 */
    if (op == OP_MSE)
        term = d * d;
    else if (op == OP_SMOOTH_L1 && beta > 0.0)
        term = ad < beta ? 0.5 * ad * ad / beta : ad - 0.5 * beta;
    return sum3{term, ad, d * d};
}

/* The block's sums of v in a fixed tree; thread 0 gets them. */
static __device__ sum3 block_sum3(sum3 v)
{
    __shared__ double s[3][kLossThreads];
    const int t = threadIdx.x;
    s[0][t] = v.a, s[1][t] = v.b, s[2][t] = v.c;
    __syncthreads();
    for (int h = kLossThreads / 2; h > 0; h >>= 1) {
        if (t < h)
            for (int j = 0; j < 3; j++)
                s[j][t] += s[j][t + h];
        __syncthreads();
    }
    return sum3{s[0][0], s[1][0], s[2][0]};
}

/* part[3 * block + j] = the block's share of sum j, each thread striding over the grid. */
static __global__ void loss_partial_kernel(double *part, loss_op op, float *probs,
                                           const float *pred, const float *target, int64_t n,
                                           double beta)
{
    sum3 acc{0.0, 0.0, 0.0};
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const sum3 e = element_terms(op, probs, pred, target, i, beta);
        acc.a += e.a, acc.b += e.b, acc.c += e.c;
    }
    const sum3 s = block_sum3(acc);
    if (threadIdx.x == 0) {
        part[3 * blockIdx.x] = s.a;
        part[3 * blockIdx.x + 1] = s.b;
        part[3 * blockIdx.x + 2] = s.c;
    }
}

/* out[0..2] = the sums of part's nparts triples (one block). With `as_sums`, out takes
 * cross-entropy's layout instead: {loss sum, n, hits (OP_BCE) or 0}. */
static __global__ void loss_final_kernel(double *out, const double *part, int nparts, int64_t n,
                                         bool as_sums, bool hits)
{
    sum3 acc{0.0, 0.0, 0.0};
    for (int i = threadIdx.x; i < nparts; i += kLossThreads)
        acc.a += part[3 * i], acc.b += part[3 * i + 1], acc.c += part[3 * i + 2];
    const sum3 s = block_sum3(acc);
    if (threadIdx.x != 0)
        return;
    out[0] = s.a;
    out[1] = as_sums ? (double)n : s.b;
    out[2] = as_sums ? (hits ? s.b : 0.0) : s.c;
}

/* torch's sign(): 0 where the prediction equals its target. */
static __device__ float sign_of(float d)
{
    return (float)((d > 0.0f) - (d < 0.0f));
}

/* dpred[i] += the loss's elementwise derivative * norm * dloss, in the CPU's order: norm
 * (p - t) dloss for MSE, (g norm) dloss for the others, g = sign, SmoothL1's clamp of d / beta,
 * or BCE's p - t (pred holding the probabilities). */
static __global__ void loss_backward_kernel(float *dpred, loss_op op, const float *pred,
                                            const float *target, int64_t n, float beta, float norm,
                                            float dloss)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const float d = __fsub_rn(pred[i], target[i]);
        float g;
        if (op == OP_MSE) {
            g = __fmul_rn(__fmul_rn(norm, d), dloss);
        } else {
            float e = d; /* OP_BCE: probability - target */
            if (op == OP_L1 || (op == OP_SMOOTH_L1 && !(beta > 0.0f)))
                e = sign_of(d);
            else if (op == OP_SMOOTH_L1)
                e = d < -beta ? -1.0f : d > beta ? 1.0f : __fdiv_rn(d, beta);
            g = __fmul_rn(__fmul_rn(e, norm), dloss);
        }
        dpred[i] = __fadd_rn(dpred[i], g);
    }
}

#ifndef DDPC_CUDA_EMULATE /* the host side: launches, scratch and read-backs */
/* Blocks of the partial pass for n elements: the same for every n-sized call, at most
 * kLossBlocks. */
static int loss_blocks(int64_t n)
{
    const int64_t want = (n + kLossThreads - 1) / kLossThreads;
    return (int)(want < 1 ? 1 : want < kLossBlocks ? want : kLossBlocks);
}

/* op's sums over n > 0 elements (loss_final_kernel's meaning) into out (3 doubles, device), or
 * where out is NULL into the reduce scratch; returns where they are. */
static double *loss_sums(double *out, loss_op op, float *probs, const float *pred,
                         const float *target, int64_t n, float beta, bool as_sums)
{
    const int blocks = loss_blocks(n);
    double *part = (double *)ddpc__cuda_scratch(DDPC__CUDA_SCRATCH_REDUCE,
                                                (size_t)(3 * kLossBlocks + 3) * sizeof(double));
    double *dst = out ? out : part + 3 * kLossBlocks;
    cudaStream_t st = ddpc__cuda_stream();
    loss_partial_kernel<<<blocks, kLossThreads, 0, st>>>(part, op, probs, pred, target, n,
                                                         (double)beta);
    DDPC_CUDA_LAUNCHED();
    loss_final_kernel<<<1, kLossThreads, 0, st>>>(dst, part, blocks, n, as_sums, op == OP_BCE);
    DDPC_CUDA_LAUNCHED();
    return dst;
}

/* op's three sums over n elements, read back to the host (the one wait); zeros for n <= 0. */
static sum3 loss_sums_now(loss_op op, float *probs, const float *pred, const float *target,
                          int64_t n, float beta)
{
    double host[3] = {0.0, 0.0, 0.0};
    if (n > 0) {
        const double *at = loss_sums(nullptr, op, probs, pred, target, n, beta, false);
        cudaStream_t st = ddpc__cuda_stream();
        DDPC_CUDA_CHECK(cudaMemcpyAsync(host, at, sizeof host, cudaMemcpyDeviceToHost, st));
        ddpc__cuda_wait(st);
    }
    return sum3{host[0], host[1], host[2]};
}

/* The mean of the loss terms, as the CPU returns it. */
static float mean_of(sum3 s, int64_t n)
{
    return n > 0 ? (float)(s.a / (double)n) : 0.0f;
}

extern "C" float ddpc__cuda_mse_forward(const float *pred, const float *target, int64_t n)
{
    return mean_of(loss_sums_now(OP_MSE, nullptr, pred, target, n, 0.0f), n);
}

extern "C" float ddpc__cuda_l1_forward(const float *pred, const float *target, int64_t n)
{
    return mean_of(loss_sums_now(OP_L1, nullptr, pred, target, n, 0.0f), n);
}

extern "C" float ddpc__cuda_smooth_l1_forward(const float *pred, const float *target, int64_t n,
                                              float beta)
{
    return mean_of(loss_sums_now(OP_SMOOTH_L1, nullptr, pred, target, n, beta), n);
}

extern "C" float ddpc__cuda_bce_logits_forward(float *probs, const float *logits,
                                               const float *target, int64_t n)
{
    return mean_of(loss_sums_now(OP_BCE, probs, logits, target, n, 0.0f), n);
}

extern "C" int64_t ddpc__cuda_multilabel_correct(const float *probs, const float *target, int64_t n)
{
    return (int64_t)loss_sums_now(OP_HITS, nullptr, probs, target, n, 0.0f).a;
}

extern "C" void ddpc__cuda_regression_errors(const float *pred, const float *target, int64_t n,
                                             double *sum_abs, double *sum_sq)
{
    const sum3 s = loss_sums_now(OP_MSE, nullptr, pred, target, n, 0.0f);
    *sum_abs = s.b;
    *sum_sq = s.c;
}

static bool loss_op_of(ddpc_elementwise_loss loss, loss_op *op)
{
    switch (loss) {
    case DDPC_ELEMENTWISE_MSE:
        *op = OP_MSE;
        return true;
    case DDPC_ELEMENTWISE_L1:
        *op = OP_L1;
        return true;
    case DDPC_ELEMENTWISE_SMOOTH_L1:
        *op = OP_SMOOTH_L1;
        return true;
    case DDPC_ELEMENTWISE_BCE_LOGITS:
        *op = OP_BCE;
        return true;
    }
    return false;
}

extern "C" void ddpc__cuda_elementwise_loss_into(double *sums, ddpc_elementwise_loss loss,
                                                 float beta, float *probs, const float *pred,
                                                 const float *target, int64_t n)
{
    loss_op op;
    if (!loss_op_of(loss, &op))
        return;
    if (n <= 0) {
        DDPC_CUDA_CHECK(cudaMemsetAsync(sums, 0, 3 * sizeof(double), ddpc__cuda_stream()));
        return;
    }
    loss_sums(sums, op, probs, pred, target, n, beta, true);
}

/* The backward members: norm = 1 / n (2 / n for MSE) rounded once, as the CPU forms it. */
static void loss_backward(float *dpred, loss_op op, const float *pred, const float *target,
                          int64_t n, float beta, float dloss)
{
    if (n <= 0)
        return;
    const float norm = (float)((op == OP_MSE ? 2.0 : 1.0) / (double)n);
    loss_backward_kernel<<<ddpc__cuda_blocks(n, kLossThreads), kLossThreads, 0,
                           ddpc__cuda_stream()>>>(dpred, op, pred, target, n, beta, norm, dloss);
    DDPC_CUDA_LAUNCHED();
}

extern "C" void ddpc__cuda_mse_backward(float *dpred, const float *pred, const float *target,
                                        int64_t n, float dloss)
{
    loss_backward(dpred, OP_MSE, pred, target, n, 0.0f, dloss);
}

extern "C" void ddpc__cuda_l1_backward(float *dpred, const float *pred, const float *target,
                                       int64_t n, float dloss)
{
    loss_backward(dpred, OP_L1, pred, target, n, 0.0f, dloss);
}

extern "C" void ddpc__cuda_smooth_l1_backward(float *dpred, const float *pred, const float *target,
                                              int64_t n, float beta, float dloss)
{
    loss_backward(dpred, OP_SMOOTH_L1, pred, target, n, beta, dloss);
}

extern "C" void ddpc__cuda_bce_logits_backward(float *dlogits, const float *probs,
                                               const float *target, int64_t n, float dloss)
{
    loss_backward(dlogits, OP_BCE, probs, target, n, 0.0f, dloss);
}
#endif
