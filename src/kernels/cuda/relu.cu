// SPDX-License-Identifier: MIT
/* ReLU on the device (kernels.h: y = max(x, 0), dx += dy * (y > 0)). Elementwise, one thread per
 * element in grid-stride loops; y may alias x, so forward reads each element before writing it. */
#ifndef DDPC_CUDA_EMULATE /* tests/test_relu_emu.cpp runs the kernels on the host */
#include "kernels/cuda/cuda_impl.h"
#endif

static const int kThreads = 256;

static __global__ void relu_forward_kernel(float *y, const float *x, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float v = x[i];
        y[i] = v > 0.0f ? v : 0.0f;
    }
}

static __global__ void relu_backward_kernel(float *dx, const float *dy, const float *y, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        dx[i] = __fadd_rn(dx[i], y[i] > 0.0f ? dy[i] : 0.0f);
}

#ifndef DDPC_CUDA_EMULATE /* the host side: launches */
extern "C" void ddpc__cuda_relu_forward(float *y, const float *x, int64_t n)
{
    if (n <= 0)
        return;
    relu_forward_kernel<<<ddpc__cuda_blocks(n, kThreads), kThreads, 0, ddpc__cuda_stream()>>>(y, x,
                                                                                              n);
    DDPC_CUDA_LAUNCHED();
}

extern "C" void ddpc__cuda_relu_backward(float *dx, const float *dy, const float *y, int64_t n)
{
    if (n <= 0)
        return;
    relu_backward_kernel<<<ddpc__cuda_blocks(n, kThreads), kThreads, 0, ddpc__cuda_stream()>>>(
        dx, dy, y, n);
    DDPC_CUDA_LAUNCHED();
}
#endif
