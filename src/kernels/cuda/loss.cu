// SPDX-License-Identifier: MIT
/* Softmax cross-entropy (PyTorch's mean over valid targets), argmax accuracy and row softmax on
 * the GPU, one block per row (rows up to GPT-2's 50257 logits) with fixed-order block reductions.
 * Invariant: as in kernels/cpu/cross_entropy.c, a target is valid when it is not ignore_index and
 * lies in [0, v); the mean is summed in double by one block in a fixed order, so it is the same
 * bits on every rerun; the members that return a number wait for the device, their *_into forms
 * leave it in device memory (the waiting ones are the *_into ones plus a read). The fused
 * forward+backward gives the bits of forward then backward (same block shape, same products),
 * reading each logit from device memory once where its row fits in shared memory; its 16-bit
 * form (head16.cu's) gives its bits on the logits widened, the gradient rounded. */
#ifndef DDPC_CUDA_EMULATE /* tests/test_loss_emu.cpp runs the kernels on the host */
#include "kernels/cuda/cuda_impl.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <atomic>
#endif
#include "kernels/cuda/row_reduce.cuh"

#include <math.h>

#ifdef DDPC_CUDA_EMULATE /* the emulator's dynamic shared memory */
#define CE_ROW_SMEM(name) FLASH_SMEM(name)
#else
#define CE_ROW_SMEM(name) extern __shared__ __align__(16) unsigned char name[]
#endif

/* probs (n, v) = softmax(logits); row_loss (n) = -log probs[target], 0 where ignored. probs may
 * be logits: each element is read and then written by the same thread. */
static __global__ void __launch_bounds__(1024)
    ce_forward_kernel(float *probs, float *row_loss, const float *logits, const int32_t *targets,
                      int64_t n, int64_t v, int32_t ignore_index)
{
    __shared__ float sh[32];
    for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
        const float *x = logits + i * v;
        float *p = probs + i * v;
        const int32_t tg = targets[i];
        const bool valid = ddpc__valid_target(tg, v, ignore_index);
        /* Read before the barrier inside the max reduction: after it, threads overwrite x. */
        const float x_tg = valid ? x[tg] : 0.0f;
        const ddpc__row_stats r = ddpc__row_max_expsum(x, p, v, sh);
        const float inv = 1.0f / r.sum; /* the CPU multiplies by the inverse too */
        for (int64_t j = threadIdx.x; j < v; j += blockDim.x)
            p[j] *= inv;
        if (threadIdx.x == 0)
            row_loss[i] = valid ? logf(r.sum) - (x_tg - r.mx) : 0.0f;
    }
}

/* The valid rows of targets (n), over the one block of a one-block kernel, returned to every
 * thread; every thread must call it. An integer, so the order does not matter. */
static __device__ __forceinline__ long long valid_rows(const int32_t *targets, int64_t n,
                                                       int64_t v, int32_t ignore_index,
                                                       long long *shc)
{
    long long count = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
        count += ddpc__valid_target(targets[i], v, ignore_index);
    return ddpc__block_reduce(count, ddpc__sum_op(), 0LL, shc);
}

/* out[0] = sum of row_loss (n) in double, out[1] = number of valid rows; one block. */
static __global__ void __launch_bounds__(1024)
    ce_mean_kernel(double *out, const float *row_loss, const int32_t *targets, int64_t n, int64_t v,
                   int32_t ignore_index)
{
    __shared__ double shd[32];
    __shared__ long long shc[32];
    double total = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
        total += (double)row_loss[i];
    total = ddpc__block_reduce(total, ddpc__sum_op(), 0.0, shd);
    const long long count = valid_rows(targets, n, v, ignore_index, shc);
    if (threadIdx.x == 0) {
        out[0] = total;
        out[1] = (double)count;
    }
}

/* dlogits (n, v) += g * (probs - onehot(target)) on valid rows, in the CPU's order of operations
 * (d + g p, then - g at the target), g = dloss / count with count = sums[1] (the valid rows,
 * computed as the host computes it) when sums is not NULL, else n_valid; nothing happens without
 * valid rows. With `over`, the gradient replaces what dlogits held, rows without one get 0, and
 * dlogits may be probs: d is taken as 0 rather than read (0 + g p, the same bits as onto zeroed
 * dlogits), and a thread writes only the element it read. */
static __global__ void ce_backward_kernel(float *dlogits, const float *probs,
                                          const int32_t *targets, int64_t n, int64_t v,
                                          int32_t ignore_index, int64_t n_valid,
                                          const double *sums, float dloss, bool over)
{
    const int64_t count = sums ? (int64_t)sums[1] : n_valid;
    if (count <= 0 && !over)
        return;
    const float g = count > 0 ? __fdiv_rn(dloss, (float)count) : 0.0f;
    for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
        const int32_t tg = targets[i];
        float *d = dlogits + i * v;
        const float *p = probs + i * v;
        if (count <= 0 || !ddpc__valid_target(tg, v, ignore_index)) {
            for (int64_t j = threadIdx.x; over && j < v; j += blockDim.x)
                d[j] = 0.0f;
            continue; /* the whole block skips: no barrier in this kernel */
        }
        for (int64_t j = threadIdx.x; j < v; j += blockDim.x) {
            float r = (over ? 0.0f : d[j]) + g * p[j];
            d[j] = j == tg ? r - g : r;
        }
    }
}

/* sums[1] = the valid rows, before any row is written: the fused kernel's g needs it. One block,
 * the count an integer, so the order does not matter. */
static __global__ void __launch_bounds__(1024)
    ce_count_kernel(double *sums, const int32_t *targets, int64_t n, int64_t v,
                    int32_t ignore_index)
{
    __shared__ long long shc[32];
    const long long count = valid_rows(targets, n, v, ignore_index, shc);
    if (threadIdx.x == 0)
        sums[1] = (double)count;
}

/* A fused row's gradient at one logit x: 0 + g (e * inv), less g at the target, with
 * e = expf(x - mx) recomputed rather than stored. One function for every fused kernel (fp32 and
 * 16-bit logits), so all round alike. The sweep gives each thread the elements j = threadIdx.x
 * (mod blockDim.x). */
static __device__ __forceinline__ float ce_grad(float x, float mx, float inv, float g, bool at_tg)
{
    const float p = expf(x - mx) * inv;
    const float r = 0.0f + g * p;
    return at_tg ? r - g : r;
}

static __device__ __forceinline__ void ce_fused_sweep(float *d, const float *x, int64_t v,
                                                      int32_t tg, ddpc__row_stats st, float g)
{
    const float inv = 1.0f / st.sum;
    for (int64_t j = threadIdx.x; j < v; j += blockDim.x)
        d[j] = ce_grad(x[j], st.mx, inv, g, j == tg);
}

/* A row without a valid target (or a batch without one): d (v) = 0, its loss 0. */
static __device__ __forceinline__ void ce_fused_ignored(float *d, float *row_loss, int64_t v)
{
    for (int64_t j = threadIdx.x; j < v; j += blockDim.x)
        d[j] = 0.0f;
    if (threadIdx.x == 0)
        *row_loss = 0.0f;
}

/* ce_forward_kernel and ce_backward_kernel (onto zeroed dlogits) in one launch, llm.c's fused
 * classifier without its online softmax: the max and the sum are ce_forward_kernel's, in its
 * thread layout (launch it with the same block size), so they are the same bits; the last sweep
 * recomputes e = expf(x - mx) rather than storing it, and writes the gradient once:
 * d = 0 + g (e * inv), less g at the target, with g = dloss / count as the backward divides.
 * Ignored rows (every row without valid ones) get 0. dlogits may be logits: a thread writes only
 * the elements it read, after the last barrier of its row. It reads a row three times (L2 or
 * device memory): the fallback for rows too long for ce_fused_smem_kernel. */
static __global__ void __launch_bounds__(1024)
    ce_fused_kernel(float *dlogits, float *row_loss, const float *logits, const int32_t *targets,
                    int64_t n, int64_t v, int32_t ignore_index, const double *sums, float dloss)
{
    __shared__ float sh[32];
    const int64_t count = (int64_t)sums[1];
    const float g = count > 0 ? __fdiv_rn(dloss, (float)count) : 0.0f;
    for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
        const float *x = logits + i * v;
        float *d = dlogits + i * v;
        const int32_t tg = targets[i];
        if (count <= 0 || !ddpc__valid_target(tg, v, ignore_index)) { /* uniform over the block */
            ce_fused_ignored(d, row_loss + i, v);
            continue;
        }
        const float x_tg = x[tg]; /* before the barriers below, after which x is overwritten */
        const ddpc__row_stats st = ddpc__row_max_expsum(x, nullptr, v, sh);
        ce_fused_sweep(d, x, v, tg, st, g);
        if (threadIdx.x == 0)
            row_loss[i] = logf(st.sum) - (x_tg - st.mx);
    }
}

/* Copies the row x (v) into shared memory with 16-byte loads and returns the copy s, s[j] = x[j]:
 * x is only 4-byte aligned (rows of 50257 floats), so the first `head` < 4 elements and the tail
 * go one by one, and s starts `pad` floats into buf so that s + head is 16-byte aligned like
 * x + head; buf holds v + 3 floats. Four loads per thread are in flight before their stores.
 * Every thread must call it: it waits for the block's readers of the previous row first, and
 * returns after the whole copy is written. */
static __device__ __forceinline__ float *ce_stage_row(float *buf, const float *x, int64_t v)
{
    const int64_t mis = (int64_t)(((uintptr_t)x & 15u) / 4u); /* x's floats past 16 bytes */
    const int64_t head = mis == 0 ? 0 : (4 - mis < v ? 4 - mis : v);
    float *s = buf + (4 - head) % 4;
    const int64_t n4 = (v - head) / 4, bd = blockDim.x;
    const float4 *x4 = (const float4 *)(x + head);
    float4 *s4 = (float4 *)(s + head);
    __syncthreads(); /* the previous row's readers of buf are done */
    if ((int64_t)threadIdx.x < head)
        s[threadIdx.x] = x[threadIdx.x];
    for (int64_t k = threadIdx.x; k < n4; k += 4 * bd) {
        float4 a[4] = {};
        for (int u = 0; u < 4; u++)
            if (k + u * bd < n4)
                a[u] = x4[k + u * bd];
        for (int u = 0; u < 4; u++)
            if (k + u * bd < n4)
                s4[k + u * bd] = a[u];
    }
    for (int64_t j = head + 4 * n4 + threadIdx.x; j < v; j += bd)
        s[j] = x[j];
    __syncthreads();
    return s;
}

/* ce_fused_kernel with the row read from device memory once: staged in (v + 3) floats of dynamic
 * shared memory (GPT-2's 50257 take 196 KiB of sm_90's 227), the max, the sum and the sweep then
 * read the copy in ce_fused_kernel's thread layout and order, so every result has its bits.
 * dlogits may be logits: a row is written only after its copy is complete. */
static __global__ void __launch_bounds__(1024)
    ce_fused_smem_kernel(float *dlogits, float *row_loss, const float *logits,
                         const int32_t *targets, int64_t n, int64_t v, int32_t ignore_index,
                         const double *sums, float dloss)
{
    CE_ROW_SMEM(smem);
    __shared__ float sh[32];
    const int64_t count = (int64_t)sums[1];
    const float g = count > 0 ? __fdiv_rn(dloss, (float)count) : 0.0f;
    for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
        float *d = dlogits + i * v;
        const int32_t tg = targets[i];
        if (count <= 0 || !ddpc__valid_target(tg, v, ignore_index)) { /* uniform over the block */
            ce_fused_ignored(d, row_loss + i, v);
            continue;
        }
        const float *s = ce_stage_row((float *)smem, logits + i * v, v);
        const float x_tg = s[tg];
        const ddpc__row_stats st = ddpc__row_max_expsum(s, nullptr, v, sh);
        ce_fused_sweep(d, s, v, tg, st, g);
        if (threadIdx.x == 0)
            row_loss[i] = logf(st.sum) - (x_tg - st.mx);
    }
}

/* ce_forward_kernel with the row read from device memory once, staged as ce_fused_smem_kernel
 * stages it: the exponentials go over the copy (as ce_forward_kernel stores them in probs) and
 * probs = e * inv is written once, in ce_forward_kernel's thread layout and order, so with its
 * bits. probs may be logits: a row is written only after its copy is complete. */
static __global__ void __launch_bounds__(1024)
    ce_forward_smem_kernel(float *probs, float *row_loss, const float *logits,
                           const int32_t *targets, int64_t n, int64_t v, int32_t ignore_index)
{
    CE_ROW_SMEM(smem);
    __shared__ float sh[32];
    for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
        float *p = probs + i * v;
        const int32_t tg = targets[i];
        const bool valid = ddpc__valid_target(tg, v, ignore_index);
        float *s = ce_stage_row((float *)smem, logits + i * v, v);
        const float x_tg = valid ? s[tg] : 0.0f; /* before the exponentials overwrite s */
        const ddpc__row_stats r = ddpc__row_max_expsum(s, s, v, sh);
        const float inv = 1.0f / r.sum;
        for (int64_t j = threadIdx.x; j < v; j += blockDim.x)
            p[j] = s[j] * inv;
        if (threadIdx.x == 0)
            row_loss[i] = valid ? logf(r.sum) - (x_tg - r.mx) : 0.0f;
    }
}

/* The dynamic shared memory the staged kernels need for rows of v. */
static inline size_t ce_stage_bytes(int64_t v)
{
    return (size_t)(v + 3) * sizeof(float);
}

/* Whether rows of v take the staged kernels on a device allowing `limit` bytes of dynamic shared
 * memory per block; ce_fused_kernel and ce_forward_kernel take the rest. */
static inline bool ce_row_fits(int64_t v, size_t limit)
{
    return ce_stage_bytes(v) <= limit;
}

/* *correct += rows whose first maximum is their (valid) target. An integer atomic: the count is
 * exact whatever the order. */
static __global__ void __launch_bounds__(1024)
    argmax_kernel(unsigned long long *correct, const float *scores, const int32_t *targets,
                  int64_t n, int64_t v, int32_t ignore_index)
{
    __shared__ float sv[32];
    __shared__ int si[32];
    for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
        const int32_t tg = targets[i];
        if (!ddpc__valid_target(tg, v, ignore_index))
            continue; /* uniform over the block, so the barriers below stay matched */
        const float *row = scores + i * v;
        /* Each thread's first element is taken as is (as the CPU takes row[0]), later ones only
         * when strictly larger: ties keep the first. */
        float best = -INFINITY;
        int at = INT32_MAX;
        if (threadIdx.x < v) {
            best = row[threadIdx.x];
            at = (int)threadIdx.x;
        }
        for (int64_t j = threadIdx.x + blockDim.x; j < v; j += blockDim.x)
            if (row[j] > best) {
                best = row[j];
                at = (int)j;
            }
        ddpc__block_argmax(&best, &at, sv, si);
        if (threadIdx.x == 0 && at == tg)
            atomicAdd(correct, 1ULL);
    }
}

/* The 16-bit logits' formats, as stored bits: widen is exact, narrow rounds to nearest even (as
 * round.cu's kernel and cuBLAS's 16-bit output round). */
struct ce16_bf16 {
    static __device__ __forceinline__ float widen(uint16_t b)
    {
        return __uint_as_float((uint32_t)b << 16);
    }
    static __device__ __forceinline__ uint16_t narrow(float x)
    {
        return __bfloat16_as_ushort(__float2bfloat16_rn(x));
    }
};
struct ce16_f16 {
    static __device__ __forceinline__ float widen(uint16_t b)
    {
        return __half2float(__ushort_as_half(b));
    }
    static __device__ __forceinline__ uint16_t narrow(float x)
    {
        return __half_as_ushort(__float2half_rn(x));
    }
};

/* The 16-byte chunks (8 logits) of a 16-bit row of ld (a multiple of 8, so every row of a
 * 16-byte aligned buffer is too). */
static __device__ __forceinline__ int64_t ce16_chunks(int64_t ld)
{
    return ld / 8;
}

/* Copies the 16-bit row x (ld) into shared memory (ld * 2 bytes at buf) with 16-byte loads, four
 * per thread in flight before their stores; returns the copy. Every thread must call it: it waits
 * for the block's readers of the previous row first, and returns after the copy is written. */
static __device__ __forceinline__ const uint16_t *ce16_stage_row(unsigned char *buf,
                                                                 const uint16_t *x, int64_t ld)
{
    const int64_t n8 = ce16_chunks(ld), bd = blockDim.x;
    const uint4 *x8 = (const uint4 *)x;
    uint4 *s8 = (uint4 *)buf;
    __syncthreads(); /* the previous row's readers of buf are done */
    for (int64_t k = threadIdx.x; k < n8; k += 4 * bd) {
        uint4 a[4] = {};
        for (int u = 0; u < 4; u++)
            if (k + u * bd < n8)
                a[u] = x8[k + u * bd];
        for (int u = 0; u < 4; u++)
            if (k + u * bd < n8)
                s8[k + u * bd] = a[u];
    }
    __syncthreads();
    return (const uint16_t *)buf;
}

/* Eight 16-bit values from one 16-byte load, element 0 at the lowest address. */
static __device__ __forceinline__ void ce16_unpack(uint4 q, uint16_t *h)
{
    const uint32_t w[4] = {q.x, q.y, q.z, q.w};
    for (int u = 0; u < 4; u++) {
        h[2 * u] = (uint16_t)(w[u] & 0xffffu);
        h[2 * u + 1] = (uint16_t)(w[u] >> 16);
    }
}

/* Eight 16-bit values as one 16-byte store, element 0 at the lowest address. */
static __device__ __forceinline__ uint4 ce16_pack(const uint16_t *h)
{
    uint4 q;
    q.x = (uint32_t)h[0] | (uint32_t)h[1] << 16;
    q.y = (uint32_t)h[2] | (uint32_t)h[3] << 16;
    q.z = (uint32_t)h[4] | (uint32_t)h[5] << 16;
    q.w = (uint32_t)h[6] | (uint32_t)h[7] << 16;
    return q;
}

/* ce_fused_smem_kernel and argmax_kernel in one, over 16-bit logits (rows, ld) of F's format
 * (v of each row's ld columns real), the gradient written back over them in 16 bits: the row
 * is staged as 16 bits (half ce_fused_smem_kernel's shared memory), and the max, the sum and the
 * first maximum are taken in their thread layout and order on the widened values, so each is the
 * bits those kernels give on the logits widened to fp32; each gradient is ce_grad's, rounded once
 * (as linear_backward rounds dlogits). Columns v..ld, rows past n and ignored rows get 0 (the
 * backward's products then add nothing from them). The host launches it as the fp32 one, with
 * sums[1] counted first; correct (a device counter) gains the rows whose first maximum is their
 * target, an integer atomic, exact in any order. A row is written only after its copy is
 * complete, 16 bytes per thread. */
template <typename F>
static __global__ void __launch_bounds__(1024)
    ce16_fused_kernel(uint16_t *logits, float *row_loss, unsigned long long *correct,
                      const int32_t *targets, int64_t n, int64_t rows, int64_t v, int64_t ld,
                      int32_t ignore_index, const double *sums, float dloss)
{
    CE_ROW_SMEM(smem);
    __shared__ float sh[32];
    __shared__ float sv[32];
    __shared__ int si[32];
    const int64_t count = (int64_t)sums[1], n8 = ce16_chunks(ld);
    const float g = count > 0 ? __fdiv_rn(dloss, (float)count) : 0.0f;
    for (int64_t i = blockIdx.x; i < rows; i += gridDim.x) {
        uint16_t *x = logits + i * ld;
        uint4 *x8 = (uint4 *)x;
        const int32_t tg = i < n ? targets[i] : ignore_index;
        if (i >= n || count <= 0 || !ddpc__valid_target(tg, v, ignore_index)) { /* uniform */
            for (int64_t k = threadIdx.x; k < n8; k += blockDim.x)
                x8[k] = make_uint4(0u, 0u, 0u, 0u);
            if (i < n && threadIdx.x == 0)
                row_loss[i] = 0.0f;
            continue;
        }
        const uint16_t *s = ce16_stage_row(smem, x, ld);
        /* ddpc__row_max_expsum's max and argmax_kernel's first maximum, in one pass. */
        float mx = -INFINITY, best = -INFINITY;
        int at = INT32_MAX;
        for (int64_t j = threadIdx.x; j < v; j += blockDim.x) {
            const float xj = F::widen(s[j]);
            mx = ddpc__max_op()(mx, xj);
            if (j == (int64_t)threadIdx.x || xj > best) { /* a thread's first is taken as is */
                best = xj;
                at = (int)j;
            }
        }
        mx = ddpc__block_reduce(mx, ddpc__max_op(), -INFINITY, sh);
        ddpc__block_argmax(&best, &at, sv, si);
        float sum = 0.0f;
        for (int64_t j = threadIdx.x; j < v; j += blockDim.x)
            sum += expf(F::widen(s[j]) - mx);
        sum = ddpc__block_reduce(sum, ddpc__sum_op(), 0.0f, sh);
        const float inv = 1.0f / sum;
        for (int64_t k = threadIdx.x; k < n8; k += blockDim.x) {
            uint16_t h[8];
            ce16_unpack(((const uint4 *)s)[k], h); /* one 16-byte read of shared memory */
            for (int u = 0; u < 8; u++) {
                const int64_t j = 8 * k + u;
                h[u] = F::narrow(j < v ? ce_grad(F::widen(h[u]), mx, inv, g, j == tg) : 0.0f);
            }
            x8[k] = ce16_pack(h);
        }
        if (threadIdx.x == 0) {
            row_loss[i] = logf(sum) - (F::widen(s[tg]) - mx);
            if (at == tg)
                atomicAdd(correct, 1ULL);
        }
    }
}

/* *out = *count as a double (exact below 2^53). */
static __global__ void count_to_double_kernel(double *out, const unsigned long long *count)
{
    *out = (double)*count;
}

/* x (n, classes) = softmax of each row, in place; divides by the sum as the CPU table does. */
static __global__ void __launch_bounds__(1024)
    softmax_rows_kernel(float *x, int64_t n, int64_t classes)
{
    __shared__ float sh[32];
    for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
        float *row = x + i * classes;
        const float sum = ddpc__row_max_expsum(row, row, classes, sh).sum;
        for (int64_t j = threadIdx.x; j < classes; j += blockDim.x)
            row[j] /= sum;
    }
}

#ifndef DDPC_CUDA_EMULATE /* the host side: launches and the table's entry points */
/* The grid for `rows` row blocks; the kernels loop, so a capped grid still covers every row. */
static unsigned row_grid(int64_t rows)
{
    return (unsigned)(rows < 65535 * 16 ? rows : 65535 * 16);
}

/* Where a forward's row losses (n) go: the caller's `losses`, else the reduce scratch past the two
 * results of cross_entropy_forward (sized by n alone, so a repeated shape never grows it). NULL
 * for an empty batch, whose sums are zeroed here. */
static float *row_losses(double *sums, float *losses, int64_t n, int64_t v)
{
    if (n <= 0 || v <= 0) {
        DDPC_CUDA_CHECK(cudaMemsetAsync(sums, 0, 2 * sizeof(double), ddpc__cuda_stream()));
        return nullptr;
    }
    char *scratch = (char *)ddpc__cuda_scratch(DDPC__CUDA_SCRATCH_REDUCE,
                                               2 * sizeof(double) + (size_t)n * sizeof(float));
    return losses ? losses : (float *)(scratch + 2 * sizeof(double));
}

/* What a staged kernel may take on one device: 1 + the dynamic shared memory it is allowed (the
 * opt-in per-block limit less its static shared memory), 0 until asked. */
enum { CE_MAX_DEVICES = 64 };
struct smem_cap {
    std::atomic<size_t> plus1[CE_MAX_DEVICES];
};
static smem_cap forward_cap, fused_cap, fused16_cap[2];

/* The most dynamic shared memory `kernel` may take on the current device, allowed to it: asked
 * of CUDA (the device's limit, the kernel's static use, then cudaFuncSetAttribute) on the first
 * call per device and kernel and remembered, so a training step makes none of these host calls.
 * Two threads asking at once both set the same value. */
static size_t staged_smem_cap(smem_cap *c, const void *kernel)
{
    int dev = ddpc__cuda_device();
    const bool keep = dev >= 0 && dev < CE_MAX_DEVICES;
    const size_t known = keep ? c->plus1[dev].load(std::memory_order_acquire) : 0;
    if (known)
        return known - 1;
    if (dev < 0) /* no device opened through the table: ask which is current */
        DDPC_CUDA_CHECK(cudaGetDevice(&dev));
    int optin = 0;
    DDPC_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    cudaFuncAttributes fa;
    DDPC_CUDA_CHECK(cudaFuncGetAttributes(&fa, kernel));
    const size_t cap = (size_t)optin > fa.sharedSizeBytes ? (size_t)optin - fa.sharedSizeBytes : 0;
    DDPC_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)cap));
    if (keep)
        c->plus1[dev].store(cap + 1, std::memory_order_release);
    return cap;
}

extern "C" void ddpc__cuda_cross_entropy_forward_into(double *sums, float *probs, float *losses,
                                                      const float *logits,
                                                      const int32_t *targets, int64_t n,
                                                      int64_t v, int32_t ignore_index)
{
    cudaStream_t st = ddpc__cuda_stream();
    float *row_loss = row_losses(sums, losses, n, v);
    if (!row_loss)
        return;
    const unsigned grid = row_grid(n), threads = (unsigned)ddpc__row_threads(v, 1024);
    const size_t bytes = ce_stage_bytes(v);
    if (ce_row_fits(v, staged_smem_cap(&forward_cap, (const void *)ce_forward_smem_kernel))) {
        ce_forward_smem_kernel<<<grid, threads, bytes, st>>>(probs, row_loss, logits, targets, n,
                                                              v, ignore_index);
    } else {
        ce_forward_kernel<<<grid, threads, 0, st>>>(probs, row_loss, logits, targets, n, v,
                                                    ignore_index);
    }
    DDPC_CUDA_LAUNCHED();
    ce_mean_kernel<<<1, 1024, 0, st>>>(sums, row_loss, targets, n, v, ignore_index);
    DDPC_CUDA_LAUNCHED();
}

extern "C" float ddpc__cuda_cross_entropy_forward(float *probs, float *losses, const float *logits,
                                                  const int32_t *targets, int64_t n, int64_t v,
                                                  int32_t ignore_index, int64_t *n_valid)
{
    if (n <= 0 || v <= 0) {
        if (n_valid)
            *n_valid = 0;
        return 0.0f;
    }
    double *sums = (double *)ddpc__cuda_scratch(DDPC__CUDA_SCRATCH_REDUCE,
                                                2 * sizeof(double) + (size_t)n * sizeof(float));
    ddpc__cuda_cross_entropy_forward_into(sums, probs, losses, logits, targets, n, v,
                                          ignore_index);
    double host[2];
    DDPC_CUDA_CHECK(cudaMemcpyAsync(host, sums, sizeof host, cudaMemcpyDeviceToHost,
                                    ddpc__cuda_stream()));
    ddpc__cuda_wait(ddpc__cuda_stream());
    int64_t count = (int64_t)host[1];
    if (n_valid)
        *n_valid = count;
    return count ? (float)(host[0] / (double)count) : 0.0f;
}

/* The three backward members: one kernel launch. */
static void launch_backward(float *dlogits, const float *probs, const int32_t *targets, int64_t n,
                            int64_t v, int32_t ignore_index, int64_t n_valid, const double *sums,
                            float dloss, bool over)
{
    if (n <= 0 || v <= 0)
        return;
    ce_backward_kernel<<<row_grid(n), ddpc__row_threads(v, 256), 0, ddpc__cuda_stream()>>>(
        dlogits, probs, targets, n, v, ignore_index, n_valid, sums, dloss, over);
    DDPC_CUDA_LAUNCHED();
}

extern "C" void ddpc__cuda_cross_entropy_backward(float *dlogits, const float *probs,
                                                  const int32_t *targets, int64_t n, int64_t v,
                                                  int32_t ignore_index, int64_t n_valid,
                                                  float dloss)
{
    if (n_valid > 0) /* nothing to add: no launch */
        launch_backward(dlogits, probs, targets, n, v, ignore_index, n_valid, nullptr, dloss,
                        false);
}

extern "C" void ddpc__cuda_cross_entropy_backward_from(float *dlogits, const float *probs,
                                                       const int32_t *targets, int64_t n,
                                                       int64_t v, int32_t ignore_index,
                                                       const double *sums, float dloss)
{
    launch_backward(dlogits, probs, targets, n, v, ignore_index, 0, sums, dloss, false);
}

extern "C" void ddpc__cuda_cross_entropy_backward_inplace(float *probs, const int32_t *targets,
                                                          int64_t n, int64_t v,
                                                          int32_t ignore_index, int64_t n_valid,
                                                          const double *sums, float dloss)
{
    launch_backward(probs, probs, targets, n, v, ignore_index, n_valid, sums, dloss, true);
}

extern "C" void ddpc__cuda_cross_entropy_fused(double *sums, float *dlogits, float *losses,
                                               const float *logits, const int32_t *targets,
                                               int64_t n, int64_t v, int32_t ignore_index,
                                               float dloss)
{
    cudaStream_t st = ddpc__cuda_stream();
    float *row_loss = row_losses(sums, losses, n, v);
    if (!row_loss)
        return;
    ce_count_kernel<<<1, 1024, 0, st>>>(sums, targets, n, v, ignore_index);
    DDPC_CUDA_LAUNCHED();
    const unsigned grid = row_grid(n), threads = (unsigned)ddpc__row_threads(v, 1024);
    const size_t bytes = ce_stage_bytes(v);
    if (ce_row_fits(v, staged_smem_cap(&fused_cap, (const void *)ce_fused_smem_kernel))) {
        ce_fused_smem_kernel<<<grid, threads, bytes, st>>>(dlogits, row_loss, logits, targets, n,
                                                            v, ignore_index, sums, dloss);
    } else {
        ce_fused_kernel<<<grid, threads, 0, st>>>(dlogits, row_loss, logits, targets, n, v,
                                                  ignore_index, sums, dloss);
    }
    DDPC_CUDA_LAUNCHED();
    ce_mean_kernel<<<1, 1024, 0, st>>>(sums, row_loss, targets, n, v, ignore_index);
    DDPC_CUDA_LAUNCHED();
}

/* The 16-bit row kernel for prec. */
static const void *ce16_kernel(ddpc_precision prec)
{
    return prec == DDPC_PREC_BF16 ? (const void *)ce16_fused_kernel<ce16_bf16>
                                  : (const void *)ce16_fused_kernel<ce16_f16>;
}

extern "C" bool ddpc__cuda_ce16_applies(ddpc_precision prec, int64_t v, int64_t ld)
{
    if ((prec != DDPC_PREC_BF16 && prec != DDPC_PREC_FP16) || v <= 0 || ld < v || ld % 8 != 0)
        return false;
    const size_t cap = staged_smem_cap(&fused16_cap[prec == DDPC_PREC_BF16], ce16_kernel(prec));
    return (size_t)ld * sizeof(uint16_t) <= cap;
}

extern "C" void ddpc__cuda_ce16_fused(ddpc_precision prec, double *sums, void *logits,
                                      float *losses, const int32_t *targets, int64_t n,
                                      int64_t rows, int64_t v, int64_t ld, int32_t ignore_index,
                                      float dloss)
{
    const bool bf = prec == DDPC_PREC_BF16;
    const size_t bytes = (size_t)ld * sizeof(uint16_t);
    cudaStream_t st = ddpc__cuda_stream();
    /* The scratch: the argmax counter, then the row losses when the caller keeps none. */
    const size_t head = 64;
    char *scratch = (char *)ddpc__cuda_scratch(DDPC__CUDA_SCRATCH_REDUCE,
                                               head + (losses ? 0 : (size_t)n * sizeof(float)));
    unsigned long long *correct = (unsigned long long *)scratch;
    float *row_loss = losses ? losses : (float *)(scratch + head);
    DDPC_CUDA_CHECK(cudaMemsetAsync(correct, 0, sizeof *correct, st));
    ce_count_kernel<<<1, 1024, 0, st>>>(sums, targets, n, v, ignore_index);
    DDPC_CUDA_LAUNCHED();
    const unsigned grid = row_grid(rows), threads = (unsigned)ddpc__row_threads(v, 1024);
    if (bf)
        ce16_fused_kernel<ce16_bf16><<<grid, threads, bytes, st>>>((uint16_t *)logits, row_loss,
                                                                   correct, targets, n, rows, v, ld,
                                                                   ignore_index, sums, dloss);
    else
        ce16_fused_kernel<ce16_f16><<<grid, threads, bytes, st>>>((uint16_t *)logits, row_loss,
                                                                  correct, targets, n, rows, v, ld,
                                                                  ignore_index, sums, dloss);
    DDPC_CUDA_LAUNCHED();
    ce_mean_kernel<<<1, 1024, 0, st>>>(sums, row_loss, targets, n, v, ignore_index);
    DDPC_CUDA_LAUNCHED();
    count_to_double_kernel<<<1, 1, 0, st>>>(sums + 2, correct);
    DDPC_CUDA_LAUNCHED();
}

/* Counts into the scratch's first word; returns it. */
static unsigned long long *argmax_count(const float *scores, const int32_t *targets, int64_t n,
                                        int64_t v, int32_t ignore_index)
{
    cudaStream_t st = ddpc__cuda_stream();
    unsigned long long *correct = (unsigned long long *)ddpc__cuda_scratch(
        DDPC__CUDA_SCRATCH_REDUCE, sizeof(unsigned long long));
    DDPC_CUDA_CHECK(cudaMemsetAsync(correct, 0, sizeof *correct, st));
    if (n > 0 && v > 0) {
        argmax_kernel<<<row_grid(n), ddpc__row_threads(v, 1024), 0, st>>>(correct, scores,
                                                                          targets, n, v,
                                                                          ignore_index);
        DDPC_CUDA_LAUNCHED();
    }
    return correct;
}

extern "C" int64_t ddpc__cuda_argmax_correct(const float *scores, const int32_t *targets, int64_t n,
                                             int64_t v, int32_t ignore_index)
{
    if (n <= 0 || v <= 0)
        return 0;
    unsigned long long *correct = argmax_count(scores, targets, n, v, ignore_index), host = 0;
    cudaStream_t st = ddpc__cuda_stream();
    DDPC_CUDA_CHECK(cudaMemcpyAsync(&host, correct, sizeof host, cudaMemcpyDeviceToHost, st));
    ddpc__cuda_wait(st);
    return (int64_t)host;
}

extern "C" void ddpc__cuda_argmax_correct_into(double *out, const float *scores,
                                               const int32_t *targets, int64_t n, int64_t v,
                                               int32_t ignore_index)
{
    unsigned long long *correct = argmax_count(scores, targets, n, v, ignore_index);
    count_to_double_kernel<<<1, 1, 0, ddpc__cuda_stream()>>>(out, correct);
    DDPC_CUDA_LAUNCHED();
}

extern "C" void ddpc__cuda_softmax_rows(float *x, int64_t n, int64_t classes)
{
    if (n <= 0 || classes <= 0)
        return;
    softmax_rows_kernel<<<row_grid(n), ddpc__row_threads(classes, 1024), 0, ddpc__cuda_stream()>>>(
        x, n, classes);
    DDPC_CUDA_LAUNCHED();
}
#endif
