// SPDX-License-Identifier: MIT
/* BatchNorm over (n, c, hw) per channel on the device, with the formulas of
 * src/kernels/cpu/batchnorm.c (PyTorch's BatchNorm/SyncBatchNorm semantics). The `sums` are
 * device doubles, which ranks add up on the GPUs' group: the per-channel sums are reduced in
 * double, one block per channel with a fixed thread-stride order and a fixed tree (no atomics, so
 * reruns give the same bits), and nothing here waits for the device. */
#include "kernels/cuda/cuda_impl.h"

static const int kThreads = 256;
static const int kReduceThreads = 256; /* a power of two: the tree halves it */

/* Block-wide sum of each thread's a and b in a fixed tree; thread 0's results are the sums. */
static __device__ void block_sum2(double *a, double *b)
{
    __shared__ double sa[kReduceThreads], sb[kReduceThreads];
    const int t = threadIdx.x;
    sa[t] = *a;
    sb[t] = *b;
    __syncthreads();
    for (int s = kReduceThreads / 2; s > 0; s >>= 1) {
        if (t < s) {
            sa[t] += sa[t + s];
            sb[t] += sb[t + s];
        }
        __syncthreads();
    }
    *a = sa[0];
    *b = sb[0];
}

/* out (2c + 1) = [sum x per channel | sum x^2 | n * hw]: block ch walks its n * hw elements. */
static __global__ void sums_kernel(double *out, const float *x, int64_t n, int64_t c, int64_t hw)
{
    const int64_t ch = blockIdx.x;
    if (ch == 0 && threadIdx.x == 0)
        out[2 * c] = (double)(n * hw);
    if (ch >= c) /* the one block of a layer without channels: the count only */
        return;
    double s = 0.0, q = 0.0;
    for (int64_t e = threadIdx.x; e < n * hw; e += kReduceThreads) {
        double v = x[((e / hw) * c + ch) * hw + e % hw];
        s += v;
        q += v * v;
    }
    block_sum2(&s, &q);
    if (threadIdx.x == 0) {
        out[ch] = s;
        out[c + ch] = q;
    }
}

/* out (2c) = [sum dy | sum dy * (x - mean) * invstd] per channel. */
static __global__ void backward_sums_kernel(double *out, const float *dy, const float *x,
                                            const float *mean, const float *invstd, int64_t n,
                                            int64_t c, int64_t hw)
{
    const int64_t ch = blockIdx.x;
    const float m = mean[ch];
    double s = 0.0, sx = 0.0;
    for (int64_t e = threadIdx.x; e < n * hw; e += kReduceThreads) {
        const int64_t at = ((e / hw) * c + ch) * hw + e % hw;
        const float g = dy[at];
        s += g;
        sx += (double)g * (double)__fsub_rn(x[at], m);
    }
    block_sum2(&s, &sx);
    if (threadIdx.x == 0) {
        out[ch] = s;
        out[c + ch] = sx * invstd[ch];
    }
}

extern "C" void ddpc__cuda_batchnorm_sums(double *sums, const float *x, int64_t n, int64_t c,
                                          int64_t hw)
{
    const unsigned blocks = c > 0 ? (unsigned)c : 1u;
    sums_kernel<<<blocks, kReduceThreads, 0, ddpc__cuda_stream()>>>(sums, x, n, c, hw);
    DDPC_CUDA_LAUNCHED();
}

static __global__ void stats_kernel(float *mean, float *invstd, float *running_mean,
                                    float *running_var, const double *sums, int64_t c,
                                    float momentum, float eps)
{
    const int64_t ch = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (ch >= c)
        return;
    const double count = sums[2 * c];
    const double m = sums[ch] / count;
    double var = sums[c + ch] / count - m * m;
    if (var < 0.0) /* rounding of E[x^2] - E[x]^2 for a constant channel */
        var = 0.0;
    mean[ch] = (float)m;
    invstd[ch] = (float)(1.0 / sqrt(var + (double)eps));
    if (running_mean && running_var) {
        const double unbiased = count > 1.0 ? var * count / (count - 1.0) : var;
        const float keep = 1.0f - momentum;
        running_mean[ch] = __fadd_rn(__fmul_rn(keep, running_mean[ch]),
                                     __fmul_rn(momentum, (float)m));
        running_var[ch] = __fadd_rn(__fmul_rn(keep, running_var[ch]),
                                    __fmul_rn(momentum, (float)unbiased));
    }
}

extern "C" void ddpc__cuda_batchnorm_stats(float *mean, float *invstd, float *running_mean,
                                           float *running_var, const double *sums, int64_t c,
                                           float momentum, float eps)
{
    if (c <= 0)
        return;
    stats_kernel<<<ddpc__cuda_blocks(c, kThreads), kThreads, 0, ddpc__cuda_stream()>>>(
        mean, invstd, running_mean, running_var, sums, c, momentum, eps);
    DDPC_CUDA_LAUNCHED();
}

static __global__ void eval_stats_kernel(float *mean, float *invstd, const float *running_mean,
                                         const float *running_var, int64_t c, float eps)
{
    const int64_t ch = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (ch >= c)
        return;
    mean[ch] = running_mean[ch];
    invstd[ch] = (float)(1.0 / sqrt((double)running_var[ch] + (double)eps));
}

extern "C" void ddpc__cuda_batchnorm_eval_stats(float *mean, float *invstd,
                                                const float *running_mean,
                                                const float *running_var, int64_t c, float eps)
{
    if (c <= 0)
        return;
    eval_stats_kernel<<<ddpc__cuda_blocks(c, kThreads), kThreads, 0, ddpc__cuda_stream()>>>(
        mean, invstd, running_mean, running_var, c, eps);
    DDPC_CUDA_LAUNCHED();
}

/* y may be x: each thread reads its element before writing it. Multiply and add stay apart, as
 * in the CPU's default build (no FMA in the baseline x86-64 instruction set). */
static __global__ void apply_kernel(float *y, const float *x, const float *mean,
                                    const float *invstd, const float *w, const float *b,
                                    int64_t total, int64_t c, int64_t hw)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t ch = (e / hw) % c;
        const float scale = __fmul_rn(invstd[ch], w ? w[ch] : 1.0f);
        const float shift = b ? b[ch] : 0.0f;
        y[e] = __fadd_rn(__fmul_rn(__fsub_rn(x[e], mean[ch]), scale), shift);
    }
}

extern "C" void ddpc__cuda_batchnorm_apply(float *y, const float *x, const float *mean,
                                           const float *invstd, const float *w, const float *b,
                                           int64_t n, int64_t c, int64_t hw)
{
    const int64_t total = n * c * hw;
    if (total <= 0)
        return;
    apply_kernel<<<ddpc__cuda_blocks(total, kThreads), kThreads, 0, ddpc__cuda_stream()>>>(
        y, x, mean, invstd, w, b, total, c, hw);
    DDPC_CUDA_LAUNCHED();
}

extern "C" void ddpc__cuda_batchnorm_backward_sums(double *sums, const float *dy, const float *x,
                                                   const float *mean, const float *invstd,
                                                   int64_t n, int64_t c, int64_t hw)
{
    if (c <= 0)
        return;
    backward_sums_kernel<<<(unsigned)c, kReduceThreads, 0, ddpc__cuda_stream()>>>(
        sums, dy, x, mean, invstd, n, c, hw);
    DDPC_CUDA_LAUNCHED();
}

static __global__ void backward_params_kernel(float *dw, float *db, const double *sums, int64_t c)
{
    const int64_t ch = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (ch >= c)
        return;
    if (dw)
        dw[ch] = __fadd_rn(dw[ch], (float)sums[c + ch]);
    if (db)
        db[ch] = __fadd_rn(db[ch], (float)sums[ch]);
}

extern "C" void ddpc__cuda_batchnorm_backward_params(float *dw, float *db, const double *sums,
                                                     int64_t c)
{
    if (c <= 0 || (!dw && !db))
        return;
    backward_params_kernel<<<ddpc__cuda_blocks(c, kThreads), kThreads, 0, ddpc__cuda_stream()>>>(
        dw, db, sums, c);
    DDPC_CUDA_LAUNCHED();
}

/* dx may be dy: each thread reads its element before writing it. */
static __global__ void backward_input_kernel(float *dx, const float *dy, const float *x,
                                             const float *mean, const float *invstd,
                                             const float *w, const double *sums, double count,
                                             int64_t total, int64_t c, int64_t hw)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t ch = (e / hw) % c;
        const float r = invstd[ch], m = mean[ch];
        const float k = __fmul_rn(r, w ? w[ch] : 1.0f);
        const float mean_dy = (float)(sums[ch] / count);
        const float mean_dy_xhat = (float)(sums[c + ch] / count);
        const float xhat = __fmul_rn(__fsub_rn(x[e], m), r);
        dx[e] = __fmul_rn(k, __fsub_rn(__fsub_rn(dy[e], mean_dy), __fmul_rn(xhat, mean_dy_xhat)));
    }
}

extern "C" void ddpc__cuda_batchnorm_backward_input(float *dx, const float *dy, const float *x,
                                                    const float *mean, const float *invstd,
                                                    const float *w, const double *sums,
                                                    double count, int64_t n, int64_t c,
                                                    int64_t hw)
{
    const int64_t total = n * c * hw;
    if (total <= 0)
        return;
    backward_input_kernel<<<ddpc__cuda_blocks(total, kThreads), kThreads, 0, ddpc__cuda_stream()>>>(
        dx, dy, x, mean, invstd, w, sums, count, total, c, hw);
    DDPC_CUDA_LAUNCHED();
}
