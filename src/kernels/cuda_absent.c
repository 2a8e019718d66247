// SPDX-License-Identifier: MIT
/* A build without CUDA: no GPU table, and one reason why. */
#ifndef DDPC_HAVE_CUDA
#include <ddpc/device.h>

#include <stdio.h>

#include "kernels/backend_impl.h"

bool ddpc_cuda_built(void)
{
    return false;
}

int ddpc_cuda_devices(char *why, size_t cap)
{
    if (why && cap)
        snprintf(why, cap, "this build of ddpc has no CUDA (rebuild with nvcc installed, "
                            "or -DDDPC_CUDA=ON)");
    return 0;
}

int ddpc_cuda_runtime_version(void)
{
    return 0;
}

int ddpc_cublas_version(void)
{
    return 0;
}

ddpc_status ddpc__backend_cuda_open(int local_rank, const ddpc_kernel_table **out)
{
    (void)local_rank;
    *out = ddpc_kernel_table_cpu();
    return ddpc_errorf(DDPC_EINVAL, "this build of ddpc has no CUDA");
}

const char *ddpc__backend_cuda_describe(void)
{
    return "cpu";
}

ddpc_status ddpc_cuda_copy_bandwidth(size_t bytes, int reps, double *h2d_gbps, double *d2h_gbps)
{
    (void)bytes, (void)reps;
    *h2d_gbps = *d2h_gbps = 0.0;
    return ddpc_errorf(DDPC_EUNSUPPORTED, "this build of ddpc has no CUDA");
}
#else
typedef int ddpc__cuda_absent_unused; /* ISO C forbids an empty translation unit */
#endif
