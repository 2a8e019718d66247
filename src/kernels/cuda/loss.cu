// SPDX-License-Identifier: MIT
/* Softmax cross-entropy (PyTorch's mean over valid targets), argmax accuracy and row softmax on
 * the GPU, one block per row (rows up to GPT-2's 50257 logits) with fixed-order block reductions.
 * Invariant: as in kernels/cpu/cross_entropy.c, a target is valid when it is not ignore_index and
 * lies in [0, v); the mean is summed in double by one block in a fixed order, so it is the same
 * bits on every rerun; the members that return a number wait for the device, their *_into forms
 * leave it in device memory (the waiting ones are the *_into ones plus a read). The fused
 * forward+backward gives the bits of forward then backward (same block shape, same products),
 * reading each logit from device memory once where its row fits in shared memory. */
#ifndef DDPC_CUDA_EMULATE /* tests/test_loss_emu.cpp runs the kernels on the host */
#include "kernels/cuda/cuda_impl.h"
#endif
#include "kernels/cuda/row_reduce.cuh"

#include <math.h>

#ifdef DDPC_CUDA_EMULATE /* the emulator's dynamic shared memory */
#define CE_ROW_SMEM(name) FLASH_SMEM(name)
#else
#define CE_ROW_SMEM(name) extern __shared__ __align__(16) unsigned char name[]
#endif

static __device__ __forceinline__ bool valid_target(int32_t tg, int64_t v, int32_t ignore_index)
{
    return tg != ignore_index && tg >= 0 && tg < v;
}

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
        const bool valid = valid_target(tg, v, ignore_index);
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
        count += valid_target(targets[i], v, ignore_index);
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
        if (count <= 0 || !valid_target(tg, v, ignore_index)) {
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

/* A fused row's gradient sweep: d (v) = 0 + g (e * inv), less g at the target, with
 * e = expf(x - mx) recomputed rather than stored, each thread the elements j = threadIdx.x
 * (mod blockDim.x). One function for both fused kernels, so both round alike. */
static __device__ __forceinline__ void ce_fused_sweep(float *d, const float *x, int64_t v,
                                                      int32_t tg, ddpc__row_stats st, float g)
{
    const float inv = 1.0f / st.sum;
    for (int64_t j = threadIdx.x; j < v; j += blockDim.x) {
        const float p = expf(x[j] - st.mx) * inv;
        const float r = 0.0f + g * p;
        d[j] = j == tg ? r - g : r;
    }
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
        if (count <= 0 || !valid_target(tg, v, ignore_index)) { /* uniform over the block */
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
        if (count <= 0 || !valid_target(tg, v, ignore_index)) { /* uniform over the block */
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
        const bool valid = valid_target(tg, v, ignore_index);
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
        if (!valid_target(tg, v, ignore_index))
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

/* The most dynamic shared memory the staged kernels may ask for on the current device: the
 * opt-in per-block limit less the kernel's static reductions scratch. Asked each call (a host-side
 * attribute read), so nothing is cached across devices. */
static size_t staged_smem_limit(void)
{
    int dev = 0, optin = 0;
    DDPC_CUDA_CHECK(cudaGetDevice(&dev));
    DDPC_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    const size_t fixed = 32 * sizeof(float); /* sh[32] */
    return (size_t)optin > fixed ? (size_t)optin - fixed : 0;
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
    if (ce_row_fits(v, staged_smem_limit())) {
        DDPC_CUDA_CHECK(cudaFuncSetAttribute(
            ce_forward_smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
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
    if (ce_row_fits(v, staged_smem_limit())) {
        DDPC_CUDA_CHECK(cudaFuncSetAttribute(
            ce_fused_smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
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
