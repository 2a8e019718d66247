// SPDX-License-Identifier: MIT
/* The CUDA libraries of this build, for `ddpc env`. Neither call needs a driver or a GPU (the
 * runtime is linked statically; cublasGetProperty reads the loaded library), and a failure is an
 * answer of 0, never an abort: the report must work on any machine. */
#include <ddpc/device.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

extern "C" int ddpc_cuda_runtime_version(void)
{
    int v = 0;
    return cudaRuntimeGetVersion(&v) == cudaSuccess ? v : 0;
}

extern "C" int ddpc_cublas_version(void)
{
    int major = 0, minor = 0, patch = 0;
    if (cublasGetProperty(MAJOR_VERSION, &major) != CUBLAS_STATUS_SUCCESS ||
        cublasGetProperty(MINOR_VERSION, &minor) != CUBLAS_STATUS_SUCCESS ||
        cublasGetProperty(PATCH_LEVEL, &patch) != CUBLAS_STATUS_SUCCESS)
        return 0;
    return major * 10000 + minor * 100 + patch;
}
