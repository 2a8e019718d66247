// SPDX-License-Identifier: MIT
/* Block-wide reductions for the row kernels (one block per row: softmax, cross-entropy, argmax,
 * causal attention). Invariant: the combining order depends only on blockDim.x (a butterfly in
 * each warp, then the same butterfly over the warps' results), never on timing, so a rerun gives
 * the same bits without float atomics. blockDim.x is a multiple of 32, at most 1024. */
#ifndef DDPC_KERNELS_CUDA_ROW_REDUCE_CUH
#define DDPC_KERNELS_CUDA_ROW_REDUCE_CUH

#include <math.h>
#include <stdint.h>

struct ddpc__sum_op {
    template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};
/* The CPU's max (ddpc__max_f32): `b > a ? b : a`, not fmaxf, so NaN behaves the same way. */
struct ddpc__max_op {
    __device__ __forceinline__ float operator()(float a, float b) const { return b > a ? b : a; }
};

/* Threads per block for rows of n elements: the power of two >= n, clamped to [32, cap]. */
static inline int ddpc__row_threads(int64_t n, int cap)
{
    int th = 32;
    while (th < cap && th < n)
        th *= 2;
    return th;
}

/* v combined over the block, returned to every thread; `id` is op's identity (padding for the
 * missing warps). Every thread of the block must call it (it synchronises); sh is __shared__ T[32],
 * reusable by the next call. */
template <typename T, typename Op>
__device__ __forceinline__ T ddpc__block_reduce(T v, Op op, T id, T *sh)
{
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int m = 16; m > 0; m >>= 1)
        v = op(v, __shfl_xor_sync(0xffffffffu, v, m));
    __syncthreads(); /* a previous call's readers of sh are done */
    if (lane == 0)
        sh[warp] = v;
    __syncthreads();
    /* Every warp combines the warps' results in the same order, so all threads get the result
     * without a third barrier. */
    v = lane < nw ? sh[lane] : id;
    for (int m = 16; m > 0; m >>= 1)
        v = op(v, __shfl_xor_sync(0xffffffffu, v, m));
    return v;
}

/* A softmax row's statistics, as the CPU forms them: mx = the maximum of x (len), sum = the sum
 * of expf(x[j] - mx), both block-reduced for every thread, each thread taking the elements
 * j = threadIdx.x (mod blockDim.x). With e, stores each exponential in e[j]; e may be x (a thread
 * writes only the elements it read, after the max's barriers). Every thread must call it; sh is
 * __shared__ float[32]. */
struct ddpc__row_stats {
    float mx, sum;
};
__device__ __forceinline__ ddpc__row_stats ddpc__row_max_expsum(const float *x, float *e,
                                                                int64_t len, float *sh)
{
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x)
        mx = ddpc__max_op()(mx, x[j]);
    mx = ddpc__block_reduce(mx, ddpc__max_op(), -INFINITY, sh);
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
        const float ex = expf(x[j] - mx);
        if (e)
            e[j] = ex;
        sum += ex;
    }
    return ddpc__row_stats{mx, ddpc__block_reduce(sum, ddpc__sum_op(), 0.0f, sh)};
}

/* The first maximum: (v, i) beats (bv, bi) when larger, or equal with a smaller index. */
__device__ __forceinline__ void ddpc__argmax_combine(float *bv, int *bi, float v, int i)
{
    if (v > *bv || (v == *bv && i < *bi)) {
        *bv = v;
        *bi = i;
    }
}

/* (v, i) reduced to the block's first maximum, returned to every thread; sv/si are __shared__
 * float[32] / int[32]. Every thread must call it. */
__device__ __forceinline__ void ddpc__block_argmax(float *v, int *i, float *sv, int *si)
{
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int m = 16; m > 0; m >>= 1)
        ddpc__argmax_combine(v, i, __shfl_xor_sync(0xffffffffu, *v, m),
                             __shfl_xor_sync(0xffffffffu, *i, m));
    __syncthreads();
    if (lane == 0) {
        sv[warp] = *v;
        si[warp] = *i;
    }
    __syncthreads();
    *v = lane < nw ? sv[lane] : -INFINITY;
    *i = lane < nw ? si[lane] : INT32_MAX;
    for (int m = 16; m > 0; m >>= 1)
        ddpc__argmax_combine(v, i, __shfl_xor_sync(0xffffffffu, *v, m),
                             __shfl_xor_sync(0xffffffffu, *i, m));
}

/* Whether a cross-entropy row's target counts: not ignore_index and a class in [0, v) (the CPU's
 * rule; every other row adds nothing to the loss, its count or its gradient). */
static __device__ __forceinline__ bool ddpc__valid_target(int32_t tg, int64_t v,
                                                          int32_t ignore_index)
{
    return tg != ignore_index && tg >= 0 && tg < v;
}

#endif
