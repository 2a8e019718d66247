// SPDX-License-Identifier: MIT
/* MaxPool2d without padding, NCHW, on the device, as src/kernels/cpu/maxpool2d.c: idx holds each
 * maximum's flat position inside its own (h, w) plane, the first one on ties (strict '>' over the
 * window in row-major order). Backward needs no atomics: with stride >= k no two windows share an
 * input, so each output scatters to its own element; otherwise each input gathers the windows
 * that chose it, in ascending output order, the order the CPU adds them in. */
#ifndef DDPC_CUDA_EMULATE /* tests/test_pool_emu.cpp runs the kernels on the host */
#include "kernels/cuda/cuda_impl.h"
#endif

static const int kThreads = 256;

/* y, idx (planes, oh, ow) from x (planes, h, w): one thread per output element. */
static __global__ void pool_forward_kernel(float *y, int32_t *idx, const float *x, int64_t planes,
                                           int64_t h, int64_t w, int64_t oh, int64_t ow, int64_t k,
                                           int64_t stride)
{
    const int64_t total = planes * oh * ow;
    for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < total;
         o += (int64_t)gridDim.x * blockDim.x) {
        const int64_t p = o / (oh * ow), oy = (o / ow) % oh, ox = o % ow;
        const float *xp = x + p * h * w;
        int64_t best = oy * stride * w + ox * stride;
        float mx = xp[best];
        for (int64_t dy = 0; dy < k; dy++) {
            const int64_t base = (oy * stride + dy) * w + ox * stride;
            for (int64_t dx = 0; dx < k; dx++)
                if (xp[base + dx] > mx) {
                    mx = xp[base + dx];
                    best = base + dx;
                }
        }
        y[o] = mx;
        idx[o] = (int32_t)best;
    }
}

/* stride >= k: windows are disjoint, so the idx of one plane are distinct and each output owns
 * the input it adds to. One thread per output element. */
static __global__ void pool_backward_scatter_kernel(float *dx, const float *dy, const int32_t *idx,
                                                    int64_t planes, int64_t hw, int64_t ohw)
{
    const int64_t total = planes * ohw;
    for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < total;
         o += (int64_t)gridDim.x * blockDim.x) {
        float *d = dx + (o / ohw) * hw + idx[o];
        *d = __fadd_rn(*d, dy[o]);
    }
}

/* Overlapping windows: one thread per input element sums, in ascending (oy, ox), the dy of every
 * window containing it whose idx names it. */
static __global__ void pool_backward_gather_kernel(float *dx, const float *dy, const int32_t *idx,
                                                   int64_t planes, int64_t h, int64_t w,
                                                   int64_t oh, int64_t ow, int64_t k,
                                                   int64_t stride)
{
    const int64_t total = planes * h * w;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t p = e / (h * w), pos = e % (h * w), iy = pos / w, ix = pos % w;
        /* windows oy with oy * stride <= iy < oy * stride + k, likewise ox */
        const int64_t oy0 = iy - k + 1 <= 0 ? 0 : (iy - k + stride) / stride;
        const int64_t ox0 = ix - k + 1 <= 0 ? 0 : (ix - k + stride) / stride;
        const int64_t oy1 = min(iy / stride, oh - 1), ox1 = min(ix / stride, ow - 1);
        const float *dyp = dy + p * oh * ow;
        const int32_t *ip = idx + p * oh * ow;
        float acc = dx[e];
        for (int64_t oy = oy0; oy <= oy1; oy++)
            for (int64_t ox = ox0; ox <= ox1; ox++)
                if (ip[oy * ow + ox] == (int32_t)pos)
                    acc = __fadd_rn(acc, dyp[oy * ow + ox]);
        dx[e] = acc;
    }
}

#ifndef DDPC_CUDA_EMULATE /* the host side: launches */
extern "C" void ddpc__cuda_maxpool2d_forward(float *y, int32_t *idx, const float *x, int64_t n,
                                             int64_t c, int64_t h, int64_t w, int64_t k,
                                             int64_t stride)
{
    const int64_t oh = (h - k) / stride + 1, ow = (w - k) / stride + 1, total = n * c * oh * ow;
    if (total <= 0)
        return;
    pool_forward_kernel<<<ddpc__cuda_blocks(total, kThreads), kThreads, 0, ddpc__cuda_stream()>>>(
        y, idx, x, n * c, h, w, oh, ow, k, stride);
    DDPC_CUDA_LAUNCHED();
}

extern "C" void ddpc__cuda_maxpool2d_backward(float *dx, const float *dy, const int32_t *idx,
                                              int64_t n, int64_t c, int64_t h, int64_t w,
                                              int64_t k, int64_t stride)
{
    const int64_t oh = (h - k) / stride + 1, ow = (w - k) / stride + 1;
    if (n * c * oh * ow <= 0)
        return;
    cudaStream_t st = ddpc__cuda_stream();
    if (stride >= k) {
        const int64_t total = n * c * oh * ow;
        pool_backward_scatter_kernel<<<ddpc__cuda_blocks(total, kThreads), kThreads, 0, st>>>(
            dx, dy, idx, n * c, h * w, oh * ow);
    } else {
        const int64_t total = n * c * h * w;
        pool_backward_gather_kernel<<<ddpc__cuda_blocks(total, kThreads), kThreads, 0, st>>>(
            dx, dy, idx, n * c, h, w, oh, ow, k, stride);
    }
    DDPC_CUDA_LAUNCHED();
}
#endif
