/* Private helpers shared by the CPU kernels: a vectorisable expf and the thread-slot rule.
 * Invariant: ddpc__expf is branch-free, so loops calling it vectorise (AVX2/AVX-512), and is
 * accurate to a few ulp on [-87, 88] (inputs outside are clamped, so it never returns inf). */
#ifndef DDPC_KERNELS_CPU_IMPL_H
#define DDPC_KERNELS_CPU_IMPL_H

#include <stdint.h>
#include <string.h>

#include <ddpc/kernels.h>

/* OpenMP forks only when a loop has at least this many scalar operations of work. */
#define DDPC__PAR_MIN_WORK 32768

/* exp(x) by Cody-Waite range reduction and Cephes' degree-6 polynomial on [-ln2/2, ln2/2]. */
static inline float ddpc__expf(float x)
{
    x = x < -87.33f ? -87.33f : x;
    x = x > 88.3f ? 88.3f : x; /* keeps round(x / ln2) <= 127 */
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

/* Per-thread scratch slots a workspace is sized for: the larger of the current OpenMP thread
 * count and the core count, so lowering threads after a query never overruns the workspace. */
int ddpc__kernel_slots(void);

/* col (c*r*s, oh*ow) = im2col of one image x (c, h, w) for shape s (its n is ignored); padding
 * reads as zero. col2im is its adjoint: x (c, h, w) += the columns scattered back. */
void ddpc__im2col(float *col, const float *x, const ddpc_conv2d_shape *s);
void ddpc__col2im(float *x, const float *col, const ddpc_conv2d_shape *s);

#endif
