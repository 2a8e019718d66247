// SPDX-License-Identifier: MIT
/* Private helpers shared by the CPU kernels: a vectorisable expf and the thread-slot rule.
 * Invariant: ddpc__expf is branch-free, so loops calling it vectorise (AVX2/AVX-512), and is
 * accurate to a few ulp on [-87, 88] (inputs outside are clamped, so it never returns inf).
 * Loops that reduce (sums, maxima) carry `#pragma omp simd reduction(...)` so they vectorise
 * without -ffast-math; their rounding then depends on the build's vector width, not on threads. */
#ifndef DDPC_KERNELS_CPU_IMPL_H
#define DDPC_KERNELS_CPU_IMPL_H

#include <omp.h>
#include <stdint.h>
#include <string.h>

#include <ddpc/kernels.h>

/* OpenMP forks only when a loop has at least this many scalar operations of work, or a loop of
 * small GEMMs at least this many multiply-adds: below that a fork/join costs more than it saves
 * (and far more when another process holds a core and the barrier waits for a time slice). */
#define DDPC__PAR_MIN_WORK 32768
#define DDPC__PAR_MIN_MACS (1 << 20)

/* c ? a : b as bit masks. GCC will not if-convert a ?: that feeds trapping float math (it needs
 * -fno-trapping-math), which stops the loop from vectorising; this form always vectorises. */
static inline float ddpc__select(int c, float a, float b)
{
    uint32_t m = -(uint32_t)(c != 0), ab, bb;
    memcpy(&ab, &a, sizeof ab);
    memcpy(&bb, &b, sizeof bb);
    uint32_t r = (ab & m) | (bb & ~m);
    float f;
    memcpy(&f, &r, sizeof f);
    return f;
}

/* exp(x) by Cody-Waite range reduction and Cephes' degree-6 polynomial on [-ln2/2, ln2/2].
 * x is clamped to [-87.33, 88.3] so round(x / ln2) stays in [-126, 127]: +-inf map to the ends. */
static inline float ddpc__expf(float x)
{
    x = ddpc__select(x < -87.33f, -87.33f, x);
    x = ddpc__select(x > 88.3f, 88.3f, x);
    float n = (x * 1.44269504089f + 12582912.0f) - 12582912.0f; /* round(x / ln2) */
    float r = x - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* max of x (n), n >= 1. */
static inline float ddpc__max_f32(const float *x, int64_t n)
{
    float mx = x[0];
#pragma omp simd reduction(max : mx)
    for (int64_t j = 1; j < n; j++)
        mx = x[j] > mx ? x[j] : mx;
    return mx;
}

/* y (n) = exp(x (n) - shift); returns their sum. y may equal x (element-for-element). */
static inline float ddpc__exp_sum_f32(float *y, const float *x, int64_t n, float shift)
{
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < n; j++) {
        float e = ddpc__expf(x[j] - shift);
        y[j] = e;
        sum += e;
    }
    return sum;
}

/* Inside a parallel region: this thread's contiguous share [*j0, *j1) of n columns, in whole cache
 * lines. Column reductions split this way (each column summed over rows in order by one thread)
 * give the same bits for every thread count, and each thread streams whole row segments. */
static inline void ddpc__thread_cols(int64_t n, int64_t *j0, int64_t *j1)
{
    int64_t nt = omp_get_num_threads(), id = omp_get_thread_num();
    int64_t per = ((n + nt - 1) / nt + 15) / 16 * 16;
    *j0 = id * per < n ? id * per : n;
    *j1 = *j0 + per < n ? *j0 + per : n;
}

/* Per-thread scratch slots a workspace is sized for: the larger of the current OpenMP thread
 * count and the core count, so lowering threads after a query never overruns the workspace. */
int ddpc__kernel_slots(void);

/* col (c*r*s, oh*ow) = im2col of one image x (c, h, w) for shape s (its n is ignored); padding
 * reads as zero. col2im is its adjoint: x (c, h, w) += the columns scattered back. */
void ddpc__im2col(float *col, const float *x, const ddpc_conv2d_shape *s);
void ddpc__col2im(float *x, const float *col, const ddpc_conv2d_shape *s);

/* oneDNN (onednn.c): whether its matmul takes bf16 inputs on this CPU (probed once), the ISA it
 * dispatches to ("avx512_core_amx"), and freeing the calling thread's primitives. */
bool ddpc__onednn_has_bf16(void);
const char *ddpc__onednn_isa(void);
void ddpc__onednn_release_thread(void);
/* Counters behind ddpc_kernels_matmul_setup_counts (relaxed atomics: only totals matter). */
void ddpc__count_scratch_grow(void);
void ddpc__count_primitive(void);

#endif
