// SPDX-License-Identifier: MIT
/* Optimizer and gradient arithmetic on flat device ranges: AdamW and SGD updates with the scalars
 * of include/ddpc/device.h (ddpc_adamw_coef, ddpc_sgd_coef), the sum of squares for clipping (read
 * back, or kept on the device with the clip coefficient computed there: grad_norm_clip), and
 * loss-scale unscale/scale. Every float operation is an explicit round-to-nearest intrinsic
 * (__fmaf_rn where src/optim/adamw.c and sgd.c call fmaf, __fmul_rn/__fadd_rn/__fdiv_rn/
 * __fsqrt_rn elsewhere) so nvcc cannot contract or approximate them: a GPU update equals the
 * CPU's bit for bit. The sum of squares is a fixed two-level tree, so reruns give the same bits. */
#ifndef DDPC_CUDA_EMULATE /* tests/test_optim_emu.cpp runs the kernels on the host */
#include "kernels/cuda/cuda_impl.h"
#endif

#include <math.h>

static const int kThreads = 256;
static const int kSumThreads = 256;  /* a power of two: the trees halve it */
static const int kSumBlocks = 1024;  /* at most; fixed for a given n, so the order is fixed */

static __global__ void adamw_kernel(float *params, const float *grads, float *m, float *v,
                                    const uint8_t *mask, int64_t n, ddpc_adamw_coef k)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const float g = grads[i];
        const float decay = !mask || mask[i] ? k.decay : 1.0f;
        const float p = __fmul_rn(params[i], decay);                     /* mul_(1 - lr * wd) */
        const float mi = __fmaf_rn(g, k.a1, __fmul_rn(m[i], k.b1));     /* exp_avg */
        const float vi = __fmaf_rn(__fmul_rn(k.a2, g), g, __fmul_rn(v[i], k.b2)); /* exp_avg_sq */
        m[i] = mi;
        v[i] = vi;
        const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), k.bc2_sqrt), k.eps);
        const float upd = __fmul_rn(k.neg_step, mi);
        params[i] = __fadd_rn(p, __fdiv_rn(upd, denom));
    }
}

static __global__ void sgd_kernel(float *params, const float *grads, float *buf,
                                  const uint8_t *mask, int64_t n, ddpc_sgd_coef k)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const float p = params[i];
        float d = grads[i];
        if (k.wd != 0.0f && (!mask || mask[i]))
            d = __fmaf_rn(p, k.wd, d); /* d_p.add(param, alpha=wd) */
        if (k.momentum != 0.0f) {
            /* clone on the first step, else buf.mul_(mom).add_(d_p, alpha=1-dampening) */
            const float b = k.first ? d : __fmaf_rn(d, k.keep, __fmul_rn(buf[i], k.momentum));
            buf[i] = b;
            d = k.nesterov ? __fmaf_rn(b, k.momentum, d) : b;
        }
        params[i] = __fmaf_rn(d, k.neg_lr, p); /* param.add_(d_p, alpha=-lr) */
    }
}

/* Block-wide sum of v in a fixed tree; thread 0 gets it. */
static __device__ double block_sum(double v)
{
    __shared__ double s[kSumThreads];
    const int t = threadIdx.x;
    s[t] = v;
    __syncthreads();
    for (int h = kSumThreads / 2; h > 0; h >>= 1) {
        if (t < h)
            s[t] += s[t + h];
        __syncthreads();
    }
    return s[0];
}

/* part[block] = the block's share of sum g^2, each thread striding over the grid. */
static __global__ void sumsq_partial_kernel(double *part, const float *g, int64_t n)
{
    double acc = 0.0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const double x = g[i];
        acc += x * x;
    }
    const double s = block_sum(acc);
    if (threadIdx.x == 0)
        part[blockIdx.x] = s;
}

/* part[nparts] = sum of part[0, nparts), one block. */
static __global__ void sumsq_final_kernel(double *part, int nparts)
{
    double acc = 0.0;
    for (int i = threadIdx.x; i < nparts; i += kSumThreads)
        acc += part[i];
    const double s = block_sum(acc);
    if (threadIdx.x == 0)
        part[nparts] = s;
}

/* norm[0] = sum of part[0, nparts) (sumsq_final_kernel's tree), norm[1] += norm[0]; one block. */
static __global__ void norm_final_kernel(double *norm, const double *part, int nparts)
{
    double acc = 0.0;
    for (int i = threadIdx.x; i < nparts; i += kSumThreads)
        acc += part[i];
    const double s = block_sum(acc);
    if (threadIdx.x == 0) {
        norm[0] = s;
        norm[1] = __dadd_rn(norm[1], s);
    }
}

/* g *= ddpc_grad_clip_coef(sqrt(norm[0]), max_norm) unless that is 1: the host's arithmetic
 * (optim/coef.c) with explicit roundings, so the coefficient has the host's bits. */
static __global__ void clip_kernel(float *g, int64_t n, const double *norm, float max_norm)
{
    const double total = __dsqrt_rn(norm[0]);
    if (!isfinite(total))
        return;
    const float coef = __fdiv_rn(max_norm, __fadd_rn(__double2float_rn(total), 1e-6f));
    if (!(coef < 1.0f))
        return;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        g[i] = __fmul_rn(g[i], coef);
}

/* g *= inv (unless inv is 1); *bad |= 1 when any element was not finite before. The flag is an
 * integer OR, whose result does not depend on order. */
static __global__ void unscale_kernel(float *g, int64_t n, float inv, int *bad)
{
    int mine = 0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const float x = g[i];
        mine |= !isfinite(x);
        if (inv != 1.0f)
            g[i] = __fmul_rn(x, inv);
    }
    if (__syncthreads_or(mine) && threadIdx.x == 0)
        atomicOr(bad, 1);
}

static __global__ void scale_kernel(float *g, int64_t n, float s)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        g[i] = __fmul_rn(g[i], s);
}

#ifndef DDPC_CUDA_EMULATE /* the host side: launches, scratch and read-backs */
extern "C" void ddpc__cuda_adamw_update(float *params, const float *grads, float *m, float *v,
                                        const uint8_t *mask, int64_t n, const ddpc_adamw_coef *k)
{
    if (n <= 0)
        return;
    adamw_kernel<<<ddpc__cuda_blocks(n, kThreads), kThreads, 0, ddpc__cuda_stream()>>>(
        params, grads, m, v, mask, n, *k);
    DDPC_CUDA_LAUNCHED();
}

extern "C" void ddpc__cuda_sgd_update(float *params, const float *grads, float *buf,
                                      const uint8_t *mask, int64_t n, const ddpc_sgd_coef *k)
{
    if (n <= 0)
        return;
    sgd_kernel<<<ddpc__cuda_blocks(n, kThreads), kThreads, 0, ddpc__cuda_stream()>>>(
        params, grads, buf, mask, n, *k);
    DDPC_CUDA_LAUNCHED();
}

/* The partial sums of sumsq's tree into the reduce scratch; returns it, with *blocks partials
 * followed by a free slot. */
static double *sumsq_partials(const float *g, int64_t n, int *blocks)
{
    int64_t want = (n + kSumThreads - 1) / kSumThreads;
    *blocks = (int)(want < 1 ? 1 : want < kSumBlocks ? want : kSumBlocks);
    double *part = (double *)ddpc__cuda_scratch(DDPC__CUDA_SCRATCH_REDUCE,
                                                (size_t)(*blocks + 1) * sizeof(double));
    sumsq_partial_kernel<<<*blocks, kSumThreads, 0, ddpc__cuda_stream()>>>(part, g, n);
    DDPC_CUDA_LAUNCHED();
    return part;
}

extern "C" double ddpc__cuda_sumsq(const float *g, int64_t n)
{
    if (n <= 0)
        return 0.0;
    int blocks;
    double *part = sumsq_partials(g, n, &blocks);
    cudaStream_t st = ddpc__cuda_stream();
    sumsq_final_kernel<<<1, kSumThreads, 0, st>>>(part, blocks);
    DDPC_CUDA_LAUNCHED();
    double total = 0.0;
    DDPC_CUDA_CHECK(
        cudaMemcpyAsync(&total, part + blocks, sizeof total, cudaMemcpyDeviceToHost, st));
    ddpc__cuda_wait(st);
    return total;
}

extern "C" void ddpc__cuda_grad_norm_clip(double *norm, float *g, int64_t n, float max_norm)
{
    cudaStream_t st = ddpc__cuda_stream();
    if (n <= 0) { /* an empty sum: 0, which adds nothing to the running sum */
        DDPC_CUDA_CHECK(cudaMemsetAsync(norm, 0, sizeof(double), st));
        return;
    }
    int blocks;
    double *part = sumsq_partials(g, n, &blocks);
    norm_final_kernel<<<1, kSumThreads, 0, st>>>(norm, part, blocks);
    DDPC_CUDA_LAUNCHED();
    if (max_norm > 0.0f) {
        clip_kernel<<<ddpc__cuda_blocks(n, kThreads), kThreads, 0, st>>>(g, n, norm, max_norm);
        DDPC_CUDA_LAUNCHED();
    }
}

extern "C" bool ddpc__cuda_unscale(float *g, int64_t n, float scale)
{
    if (n <= 0)
        return false;
    const float inv = (float)(1.0 / (double)scale); /* as ddpc_grad_unscale computes it */
    int *bad = (int *)ddpc__cuda_scratch(DDPC__CUDA_SCRATCH_MISC, sizeof(int));
    cudaStream_t st = ddpc__cuda_stream();
    DDPC_CUDA_CHECK(cudaMemsetAsync(bad, 0, sizeof(int), st));
    unscale_kernel<<<ddpc__cuda_blocks(n, kThreads), kThreads, 0, st>>>(g, n, inv, bad);
    DDPC_CUDA_LAUNCHED();
    int host = 0;
    DDPC_CUDA_CHECK(cudaMemcpyAsync(&host, bad, sizeof host, cudaMemcpyDeviceToHost, st));
    ddpc__cuda_wait(st);
    return host != 0;
}

extern "C" void ddpc__cuda_scale(float *g, int64_t n, float s)
{
    if (n <= 0)
        return;
    scale_kernel<<<ddpc__cuda_blocks(n, kThreads), kThreads, 0, ddpc__cuda_stream()>>>(g, n, s);
    DDPC_CUDA_LAUNCHED();
}
#endif
