/* TEMPORARY: device selection until device.cu lands. */
#include "kernels/cuda/cuda_impl.h"

#pragma GCC diagnostic ignored "-Wunused-parameter"

#include <stdio.h>
#include <stdlib.h>

extern "C" bool ddpc_cuda_built(void) { return true; }
extern "C" int ddpc_cuda_devices(char *why, size_t cap)
{
    if (why && cap)
        snprintf(why, cap, "device selection is not written yet");
    return 0;
}
extern "C" ddpc_status ddpc__backend_cuda_open(int local_rank, const ddpc_kernel_table **out)
{
    (void)local_rank;
    *out = &ddpc__cuda_table;
    return DDPC_OK;
}
extern "C" const char *ddpc__backend_cuda_describe(void) { return "cuda"; }
extern "C" cudaStream_t ddpc__cuda_stream(void) { return 0; }
extern "C" cublasHandle_t ddpc__cuda_blas(void) { return nullptr; }
extern "C" void ddpc__cuda_check(cudaError_t e, const char *what, const char *file, int line)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "ddpc: %s:%d: %s: %s\n", file, line, what, cudaGetErrorString(e));
        abort();
    }
}
extern "C" void ddpc__cublas_check(cublasStatus_t s, const char *what, const char *file, int line)
{
    if (s != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "ddpc: %s:%d: %s: cuBLAS status %d\n", file, line, what, (int)s);
        abort();
    }
}
extern "C" void *ddpc__cuda_scratch(int slot, size_t bytes) { return nullptr; }
