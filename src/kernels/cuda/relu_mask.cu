// SPDX-License-Identifier: MIT
/* ReLU's backward in place (ddpc_relu_mask): x = y > 0 ? x : 0, elementwise. */
#include "kernels/cuda/cuda_impl.h"

static __global__ void relu_mask_kernel(float *x, const float *y, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        x[i] = y[i] > 0.0f ? x[i] : 0.0f;
}

extern "C" void ddpc__cuda_relu_mask(float *x, const float *y, int64_t n)
{
    if (n <= 0)
        return;
    relu_mask_kernel<<<ddpc__cuda_blocks(n, 256), 256, 0, ddpc__cuda_stream()>>>(x, y, n);
    DDPC_CUDA_LAUNCHED();
}
