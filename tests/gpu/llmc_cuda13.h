// SPDX-License-Identifier: MIT
/* Pre-included into llm.c's train_gpt2.cu when tests/gpu/prepare.sh builds it (nvcc -include):
 * CUDA 13 dropped cudaMemAdvise's int-device overload that llm.c still calls, so this restores it
 * on top of the cudaMemLocation form. Nothing of ddpc includes this file. */
#ifndef DDPC_LLMC_CUDA13_H
#define DDPC_LLMC_CUDA13_H
#include <cuda_runtime.h>
#if defined(CUDART_VERSION) && CUDART_VERSION >= 13000
static inline cudaError_t cudaMemAdvise(const void *ptr, size_t bytes, cudaMemoryAdvise advice,
                                        int device)
{
    cudaMemLocation where;
    where.type = device == cudaCpuDeviceId ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
    where.id = device;
    return cudaMemAdvise(ptr, bytes, advice, where);
}
#endif
#endif
