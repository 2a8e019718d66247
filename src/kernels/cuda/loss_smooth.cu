// SPDX-License-Identifier: MIT
/* Label-smoothed softmax cross-entropy (Szegedy et al. 2016; PyTorch's CrossEntropyLoss with
 * ignore_index and label_smoothing) on the GPU, with kernels/cpu/cross_entropy_smooth.c's
 * contract: one block per row computes its softmax (probs may overwrite logits: a row reads what
 * it needs before writing) and its loss in double as the CPU does; the mean sums the row losses in
 * one block in a fixed order (no float atomics: reruns give the same bits), left in device memory
 * by the _into form. Backward is elementwise, separately rounded as the CPU's loop; the _from
 * form takes the valid count from those sums on the device. */
#ifndef DDPC_CUDA_EMULATE /* tests/test_loss_smooth_emu.cpp runs the kernels on the host */
#include "kernels/cuda/cuda_impl.h"
#endif
#include "kernels/cuda/row_reduce.cuh"

#include <math.h>

/* probs row = softmax(logits row); losses[row] = (1 - eps) nll + eps * mean_j(-log p_j) for a
 * valid target, else 0: the CPU's row_forward (the max, sum_j (x_j - mx) in double, then the
 * exponentials' float sum). */
static __global__ void ce_smooth_forward_kernel(float *probs, float *losses, const float *logits,
                                                const int32_t *targets, int64_t n, int64_t v,
                                                int32_t ignore_index, float eps)
{
    __shared__ float sh[32];
    __shared__ double shd[32];
    for (int64_t row = blockIdx.x; row < n; row += gridDim.x) {
        const float *x = logits + row * v;
        float *p = probs + row * v;
        const int32_t tg = targets[row];
        const bool valid = ddpc__valid_target(tg, v, ignore_index);
        const float target = valid ? x[tg] : 0.0f; /* read before any thread writes p */
        float mx = -INFINITY;
        for (int64_t j = threadIdx.x; j < v; j += blockDim.x)
            mx = ddpc__max_op()(mx, x[j]);
        mx = ddpc__block_reduce(mx, ddpc__max_op(), -INFINITY, sh);
        double shifted = 0.0;
        float sum = 0.0f;
        for (int64_t j = threadIdx.x; j < v; j += blockDim.x) {
            const float d = x[j] - mx;
            shifted += (double)d;
            const float e = expf(d);
            p[j] = e; /* this thread's own element, read above */
            sum += e;
        }
        shifted = ddpc__block_reduce(shifted, ddpc__sum_op(), 0.0, shd);
        sum = ddpc__block_reduce(sum, ddpc__sum_op(), 0.0f, sh);
        const float inv = 1.0f / sum;
        for (int64_t j = threadIdx.x; j < v; j += blockDim.x)
            p[j] *= inv;
        if (threadIdx.x == 0) {
            float loss = 0.0f;
            if (valid) {
                const double lse = log((double)sum);
                const double nll = lse - (double)(target - mx);
                const double uniform = lse - shifted / (double)v;
                loss = (float)((1.0 - (double)eps) * nll + (double)eps * uniform);
            }
            losses[row] = loss;
        }
    }
}

/* One block: sums = {the row losses' sum, the valid rows}, each thread taking rows
 * threadIdx.x (mod blockDim.x) in order, then the block's fixed tree. */
static __global__ void ce_smooth_sum_kernel(double *sums, const float *losses,
                                            const int32_t *targets, int64_t n, int64_t v,
                                            int32_t ignore_index)
{
    __shared__ double shd[32];
    double total = 0.0, count = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        total += (double)losses[i];
        count += ddpc__valid_target(targets[i], v, ignore_index) ? 1.0 : 0.0;
    }
    total = ddpc__block_reduce(total, ddpc__sum_op(), 0.0, shd);
    count = ddpc__block_reduce(count, ddpc__sum_op(), 0.0, shd);
    if (threadIdx.x == 0) {
        sums[0] = total;
        sums[1] = count;
    }
}

/* The backward's coefficients from the valid count, as the CPU computes them (each operation
 * rounded on its own): g = dloss / count, u = g * eps / v, gt = g * (1 - eps). */
struct smooth_coefs {
    float g, u, gt;
};
static __host__ __device__ __forceinline__ smooth_coefs smooth_coefs_of(float dloss, float count,
                                                                        float eps, int64_t v)
{
    const float g = dloss / count;
    return smooth_coefs{g, g * eps / (float)v, g * (1.0f - eps)};
}

/* dlogits (n, v) += g * probs - u on valid rows, then gt less at the target: the CPU's order, each
 * product and sum rounded on its own. The coefficients are k's, or, with sums (the forward's
 * {sum, valid rows} in device memory), computed here from sums[1] (nothing without valid rows). */
static __global__ void ce_smooth_backward_kernel(float *dlogits, const float *probs,
                                                 const int32_t *targets, int64_t n, int64_t v,
                                                 int32_t ignore_index, smooth_coefs k,
                                                 const double *sums, float dloss, float eps)
{
    if (sums) {
        if (!(sums[1] > 0.0))
            return;
        k = smooth_coefs_of(dloss, (float)sums[1], eps, v);
    }
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n * v;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t i = e / v, j = e % v;
        const int32_t tg = targets[i];
        if (!ddpc__valid_target(tg, v, ignore_index))
            continue;
        float d = __fadd_rn(dlogits[e], __fsub_rn(__fmul_rn(k.g, probs[e]), k.u));
        if (j == tg)
            d = __fsub_rn(d, k.gt);
        dlogits[e] = d;
    }
}

#ifndef DDPC_CUDA_EMULATE /* the host side: launches */
extern "C" void ddpc__cuda_cross_entropy_smooth_forward_into(double *sums, float *probs,
                                                             float *losses, const float *logits,
                                                             const int32_t *targets, int64_t n,
                                                             int64_t v, int32_t ignore_index,
                                                             float eps)
{
    cudaStream_t st = ddpc__cuda_stream();
    if (n <= 0 || v <= 0) {
        DDPC_CUDA_CHECK(cudaMemsetAsync(sums, 0, 2 * sizeof(double), st));
        return;
    }
    /* The row losses where the caller keeps none, past the returning forward's sums. */
    float *rows = losses ? losses
                         : (float *)((char *)ddpc__cuda_scratch(DDPC__CUDA_SCRATCH_S2S,
                                                                64 + (size_t)n * sizeof(float)) +
                                     64);
    const unsigned grid = (unsigned)(n < 65535 * 16 ? n : 65535 * 16);
    ce_smooth_forward_kernel<<<grid, ddpc__row_threads(v, 1024), 0, st>>>(
        probs, rows, logits, targets, n, v, ignore_index, eps);
    DDPC_CUDA_LAUNCHED();
    ce_smooth_sum_kernel<<<1, 1024, 0, st>>>(sums, rows, targets, n, v, ignore_index);
    DDPC_CUDA_LAUNCHED();
}

extern "C" float ddpc__cuda_cross_entropy_smooth_forward(float *probs, float *losses,
                                                         const float *logits,
                                                         const int32_t *targets, int64_t n,
                                                         int64_t v, int32_t ignore_index, float eps,
                                                         int64_t *n_valid)
{
    if (n <= 0 || v <= 0) {
        if (n_valid)
            *n_valid = 0;
        return 0.0f;
    }
    double *sums = (double *)ddpc__cuda_scratch(DDPC__CUDA_SCRATCH_S2S,
                                                64 + (losses ? 0 : (size_t)n * sizeof(float)));
    ddpc__cuda_cross_entropy_smooth_forward_into(sums, probs, losses, logits, targets, n, v,
                                                 ignore_index, eps);
    cudaStream_t st = ddpc__cuda_stream();
    double host[2];
    DDPC_CUDA_CHECK(cudaMemcpyAsync(host, sums, sizeof host, cudaMemcpyDeviceToHost, st));
    ddpc__cuda_wait(st);
    const int64_t count = (int64_t)host[1];
    if (n_valid)
        *n_valid = count;
    return count ? (float)(host[0] / (double)count) : 0.0f;
}

static void backward(float *dlogits, const float *probs, const int32_t *targets, int64_t n,
                     int64_t v, int32_t ignore_index, smooth_coefs k, const double *sums,
                     float dloss, float eps)
{
    ce_smooth_backward_kernel<<<ddpc__cuda_blocks(n * v, 256), 256, 0, ddpc__cuda_stream()>>>(
        dlogits, probs, targets, n, v, ignore_index, k, sums, dloss, eps);
    DDPC_CUDA_LAUNCHED();
}

extern "C" void ddpc__cuda_cross_entropy_smooth_backward(float *dlogits, const float *probs,
                                                         const int32_t *targets, int64_t n,
                                                         int64_t v, int32_t ignore_index, float eps,
                                                         int64_t n_valid, float dloss)
{
    if (n_valid <= 0 || n <= 0 || v <= 0)
        return;
    backward(dlogits, probs, targets, n, v, ignore_index,
             smooth_coefs_of(dloss, (float)n_valid, eps, v), nullptr, dloss, eps);
}

extern "C" void ddpc__cuda_cross_entropy_smooth_backward_from(float *dlogits, const float *probs,
                                                              const int32_t *targets, int64_t n,
                                                              int64_t v, int32_t ignore_index,
                                                              float eps, const double *sums,
                                                              float dloss)
{
    if (n <= 0 || v <= 0)
        return;
    backward(dlogits, probs, targets, n, v, ignore_index, smooth_coefs{0.0f, 0.0f, 0.0f}, sums,
             dloss, eps);
}
#endif
