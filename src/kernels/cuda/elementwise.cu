// SPDX-License-Identifier: MIT
/* Elementwise fp32 kernels: fill, add, axpy, and GELU in its tanh form exactly as
 * kernels/cpu/activation.c computes it (x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3)).
 * Invariant: each element is computed independently by grid-stride loops with 64-bit indices, so
 * in-place use (y aliasing an input element for element) is safe. GELU forward also writes its y
 * in 16 bits (act16.cu's): the fp32 value's arithmetic, then rounded to nearest even. */
#ifndef DDPC_CUDA_EMULATE /* tests/test_elementwise_emu.cpp runs the kernels on the host */
#include "kernels/cuda/cuda_impl.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

#define GELU_K0 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_K1 0.044715f
#define THREADS 256

#define GRID_STRIDE(i, n)                                                                          \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                      \
         i += (int64_t)gridDim.x * blockDim.x)

/* Elements [0, 4 n4) move as float4s (the host passes n4 > 0 only when every pointer is 16-byte
 * aligned: one 16-byte access per thread and array, about twice the bandwidth of single floats),
 * the rest one by one; each element's arithmetic is the same either way, so are the bits. */
template <typename Four, typename One>
static __device__ void each_element(int64_t n4, int64_t n, Four four, One one)
{
    GRID_STRIDE(q, n4) four(q);
    GRID_STRIDE(r, n - 4 * n4) one(4 * n4 + r);
}
static __device__ float4 ld4(const float *p, int64_t q)
{
    return reinterpret_cast<const float4 *>(p)[q];
}
static __device__ void st4(float *p, int64_t q, float4 v)
{
    reinterpret_cast<float4 *>(p)[q] = v;
}

static __global__ void fill_kernel(float *x, float value, int64_t n4, int64_t n)
{
    each_element(
        n4, n, [&](int64_t q) { st4(x, q, make_float4(value, value, value, value)); },
        [&](int64_t i) { x[i] = value; });
}

static __global__ void add_kernel(float *y, const float *a, const float *b, int64_t n4, int64_t n)
{
    each_element(
        n4, n,
        [&](int64_t q) {
            const float4 u = ld4(a, q), v = ld4(b, q);
            st4(y, q, make_float4(u.x + v.x, u.y + v.y, u.z + v.z, u.w + v.w));
        },
        [&](int64_t i) { y[i] = a[i] + b[i]; });
}

static __global__ void axpy_kernel(float *y, float alpha, const float *x, int64_t n4, int64_t n)
{
    each_element(
        n4, n,
        [&](int64_t q) {
            const float4 u = ld4(x, q);
            float4 v = ld4(y, q);
            v.x += alpha * u.x, v.y += alpha * u.y, v.z += alpha * u.z, v.w += alpha * u.w;
            st4(y, q, v);
        },
        [&](int64_t i) { y[i] += alpha * x[i]; });
}

/* 0.5 (1 + tanh u) as the logistic sigmoid(2u): the CPU's form (no cancellation near 0); expf
 * rather than __expf, so the result stays within a few ulp of the CPU's. */
static __device__ float gelu_sigmoid(float v)
{
    float u = GELU_K0 * (v + GELU_K1 * v * v * v);
    return 1.0f / (1.0f + expf(-2.0f * u));
}

static __device__ float gelu(float v)
{
    float u = GELU_K0 * (v + GELU_K1 * v * v * v);
    return v / (1.0f + expf(-2.0f * u));
}

/* gelu'(v) = s + 2 v s (1 - s) u', s = sigmoid(2u), times dy. */
static __device__ float gelu_grad(float dy, float v)
{
    float du = GELU_K0 * (1.0f + 3.0f * GELU_K1 * v * v);
    float s = gelu_sigmoid(v);
    return dy * (s + 2.0f * v * s * (1.0f - s) * du);
}

static __global__ void gelu_forward_kernel(float *y, const float *x, int64_t n4, int64_t n)
{
    each_element(
        n4, n,
        [&](int64_t q) {
            const float4 v = ld4(x, q);
            st4(y, q, make_float4(gelu(v.x), gelu(v.y), gelu(v.z), gelu(v.w)));
        },
        [&](int64_t i) { y[i] = gelu(x[i]); });
}

/* y (n) 16-bit = gelu(x) rounded to nearest even: gelu_forward_kernel's values; four at a time
 * in one 8-byte store where n4 > 0 (then y is 16-byte aligned too). */
static __device__ __nv_bfloat16 to16(__nv_bfloat16 *, float v)
{
    return __float2bfloat16_rn(v);
}
static __device__ __half to16(__half *, float v)
{
    return __float2half_rn(v);
}
static __device__ unsigned bits16(__nv_bfloat16 h)
{
    return __bfloat16_as_ushort(h);
}
static __device__ unsigned bits16(__half h)
{
    return __half_as_ushort(h);
}
template <typename T>
static __global__ void gelu_forward16_kernel(T *y, const float *x, int64_t n4, int64_t n)
{
    /* Element 4q in the low half of the first word: little-endian, as the 16-bit array is. */
    const auto two = [&](float a, float b) {
        return bits16(to16(y, a)) | bits16(to16(y, b)) << 16;
    };
    each_element(
        n4, n,
        [&](int64_t q) {
            const float4 v = ld4(x, q);
            reinterpret_cast<uint2 *>(y)[q] =
                make_uint2(two(gelu(v.x), gelu(v.y)), two(gelu(v.z), gelu(v.w)));
        },
        [&](int64_t i) { y[i] = to16(y, gelu(x[i])); });
}

/* dx may be dy (each element read then written by the same thread). */
static __global__ void gelu_backward_kernel(float *dx, const float *dy, const float *x, int64_t n4,
                                            int64_t n)
{
    each_element(
        n4, n,
        [&](int64_t q) {
            const float4 g = ld4(dy, q), v = ld4(x, q);
            st4(dx, q,
                make_float4(gelu_grad(g.x, v.x), gelu_grad(g.y, v.y), gelu_grad(g.z, v.z),
                            gelu_grad(g.w, v.w)));
        },
        [&](int64_t i) { dx[i] = gelu_grad(dy[i], x[i]); });
}

#ifndef DDPC_CUDA_EMULATE /* the host side: launches */
#include <string.h>

/* n / 4 when every pointer is 16-byte aligned, else 0 (all single floats). */
static int64_t vec4(int64_t n, const void *a, const void *b = nullptr, const void *c = nullptr)
{
    uintptr_t bits = (uintptr_t)a | (uintptr_t)b | (uintptr_t)c;
    return bits % 16 == 0 ? n / 4 : 0;
}

/* Blocks for a kernel that moves n4 float4s and n - 4 n4 single floats. */
static unsigned blocks4(int64_t n4, int64_t n)
{
    return ddpc__cuda_blocks(n4 > n - 4 * n4 ? n4 : n - 4 * n4, THREADS);
}

extern "C" void ddpc__cuda_fill_f32(float *x, float value, int64_t n)
{
    if (n <= 0)
        return;
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    if (bits == 0) { /* +0.0f: the copy engine's memset, the same bytes at full write speed */
        DDPC_CUDA_CHECK(cudaMemsetAsync(x, 0, (size_t)n * sizeof(float), ddpc__cuda_stream()));
        return;
    }
    const int64_t n4 = vec4(n, x);
    fill_kernel<<<blocks4(n4, n), THREADS, 0, ddpc__cuda_stream()>>>(x, value, n4, n);
    DDPC_CUDA_LAUNCHED();
}

extern "C" void ddpc__cuda_add_f32(float *y, const float *a, const float *b, int64_t n)
{
    if (n <= 0)
        return;
    const int64_t n4 = vec4(n, y, a, b);
    add_kernel<<<blocks4(n4, n), THREADS, 0, ddpc__cuda_stream()>>>(y, a, b, n4, n);
    DDPC_CUDA_LAUNCHED();
}

extern "C" void ddpc__cuda_axpy_f32(float *y, float alpha, const float *x, int64_t n)
{
    if (n <= 0)
        return;
    const int64_t n4 = vec4(n, y, x);
    axpy_kernel<<<blocks4(n4, n), THREADS, 0, ddpc__cuda_stream()>>>(y, alpha, x, n4, n);
    DDPC_CUDA_LAUNCHED();
}

extern "C" void ddpc__cuda_gelu_forward(float *y, const float *x, int64_t n)
{
    if (n <= 0)
        return;
    const int64_t n4 = vec4(n, y, x);
    gelu_forward_kernel<<<blocks4(n4, n), THREADS, 0, ddpc__cuda_stream()>>>(y, x, n4, n);
    DDPC_CUDA_LAUNCHED();
}

extern "C" void ddpc__cuda_gelu_forward_16(ddpc_precision prec, void *y, const float *x, int64_t n)
{
    if (n <= 0)
        return;
    const int64_t n4 = vec4(n, y, x);
    const unsigned blocks = blocks4(n4, n);
    if (prec == DDPC_PREC_BF16)
        gelu_forward16_kernel<<<blocks, THREADS, 0, ddpc__cuda_stream()>>>((__nv_bfloat16 *)y, x,
                                                                           n4, n);
    else
        gelu_forward16_kernel<<<blocks, THREADS, 0, ddpc__cuda_stream()>>>((__half *)y, x, n4, n);
    DDPC_CUDA_LAUNCHED();
}

extern "C" void ddpc__cuda_gelu_backward(float *dx, const float *dy, const float *x, int64_t n)
{
    if (n <= 0)
        return;
    const int64_t n4 = vec4(n, dx, dy, x);
    gelu_backward_kernel<<<blocks4(n4, n), THREADS, 0, ddpc__cuda_stream()>>>(dx, dy, x, n4, n);
    DDPC_CUDA_LAUNCHED();
}
#endif
