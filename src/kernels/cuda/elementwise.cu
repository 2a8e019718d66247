// SPDX-License-Identifier: MIT
/* Elementwise fp32 kernels: fill, add, axpy, and GELU in its tanh form exactly as
 * kernels/cpu/activation.c computes it (x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3)).
 * Invariant: each element is computed independently by grid-stride loops with 64-bit indices, so
 * in-place use (y aliasing an input element for element) is safe. */
#ifndef DDPC_CUDA_EMULATE /* tests/test_elementwise_emu.cpp runs the kernels on the host */
#include "kernels/cuda/cuda_impl.h"
#endif

#define GELU_K0 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_K1 0.044715f
#define THREADS 256

#define GRID_STRIDE(i, n)                                                                          \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                      \
         i += (int64_t)gridDim.x * blockDim.x)

static __global__ void fill_kernel(float *x, float value, int64_t n)
{
    GRID_STRIDE(i, n) x[i] = value;
}

static __global__ void add_kernel(float *y, const float *a, const float *b, int64_t n)
{
    GRID_STRIDE(i, n) y[i] = a[i] + b[i];
}

static __global__ void axpy_kernel(float *y, float alpha, const float *x, int64_t n)
{
    GRID_STRIDE(i, n) y[i] += alpha * x[i];
}

/* 0.5 (1 + tanh u) as the logistic sigmoid(2u): the CPU's form (no cancellation near 0); expf
 * rather than __expf, so the result stays within a few ulp of the CPU's. */
static __device__ float gelu_sigmoid(float v)
{
    float u = GELU_K0 * (v + GELU_K1 * v * v * v);
    return 1.0f / (1.0f + expf(-2.0f * u));
}

static __global__ void gelu_forward_kernel(float *y, const float *x, int64_t n)
{
    GRID_STRIDE(i, n)
    {
        float v = x[i];
        float u = GELU_K0 * (v + GELU_K1 * v * v * v);
        y[i] = v / (1.0f + expf(-2.0f * u));
    }
}

/* gelu'(v) = s + 2 v s (1 - s) u', s = sigmoid(2u); dx may be dy (each element read then written
 * by the same thread). */
static __global__ void gelu_backward_kernel(float *dx, const float *dy, const float *x, int64_t n)
{
    GRID_STRIDE(i, n)
    {
        float v = x[i];
        float du = GELU_K0 * (1.0f + 3.0f * GELU_K1 * v * v);
        float s = gelu_sigmoid(v);
        dx[i] = dy[i] * (s + 2.0f * v * s * (1.0f - s) * du);
    }
}

#ifndef DDPC_CUDA_EMULATE /* the host side: launches */
extern "C" void ddpc__cuda_fill_f32(float *x, float value, int64_t n)
{
    if (n <= 0)
        return;
    fill_kernel<<<ddpc__cuda_blocks(n, THREADS), THREADS, 0, ddpc__cuda_stream()>>>(x, value, n);
    DDPC_CUDA_LAUNCHED();
}

extern "C" void ddpc__cuda_add_f32(float *y, const float *a, const float *b, int64_t n)
{
    if (n <= 0)
        return;
    add_kernel<<<ddpc__cuda_blocks(n, THREADS), THREADS, 0, ddpc__cuda_stream()>>>(y, a, b, n);
    DDPC_CUDA_LAUNCHED();
}

extern "C" void ddpc__cuda_axpy_f32(float *y, float alpha, const float *x, int64_t n)
{
    if (n <= 0)
        return;
    axpy_kernel<<<ddpc__cuda_blocks(n, THREADS), THREADS, 0, ddpc__cuda_stream()>>>(y, alpha, x, n);
    DDPC_CUDA_LAUNCHED();
}

extern "C" void ddpc__cuda_gelu_forward(float *y, const float *x, int64_t n)
{
    if (n <= 0)
        return;
    gelu_forward_kernel<<<ddpc__cuda_blocks(n, THREADS), THREADS, 0, ddpc__cuda_stream()>>>(y, x,
                                                                                            n);
    DDPC_CUDA_LAUNCHED();
}

extern "C" void ddpc__cuda_gelu_backward(float *dx, const float *dy, const float *x, int64_t n)
{
    if (n <= 0)
        return;
    gelu_backward_kernel<<<ddpc__cuda_blocks(n, THREADS), THREADS, 0, ddpc__cuda_stream()>>>(dx, dy,
                                                                                             x, n);
    DDPC_CUDA_LAUNCHED();
}
#endif
