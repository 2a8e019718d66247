// SPDX-License-Identifier: MIT
/* What `ddpc env` asks the kernels layer about CUDA: the runtime and cuBLAS this build carries and
 * the device `device: auto` picks for a rank. Nothing here fails: a machine without a driver, or a
 * build without CUDA, gets lines saying so. */
#include "cli/cli.h"

#include <ddpc/device.h>

#include <stdio.h>

void ddpc_cli_env_cuda(ddpc_cli_cuda_report *out, int local_rank)
{
    int rt = ddpc_cuda_runtime_version(), blas = ddpc_cublas_version();
    out->runtime_version = ddpc_cuda_built() ? rt : 0;
    if (!ddpc_cuda_built())
        snprintf(out->runtime, sizeof out->runtime,
                 "none: this build has no CUDA (configure where nvcc is installed, or with "
                 "-DDDPC_CUDA=ON)");
    else if (rt > 0)
        snprintf(out->runtime, sizeof out->runtime, "CUDA %d.%d (in this build, linked statically)",
                 rt / 1000, rt % 1000 / 10);
    else
        snprintf(out->runtime, sizeof out->runtime, "in this build, version unknown");
    if (!ddpc_cuda_built())
        snprintf(out->cublas, sizeof out->cublas, "none: this build has no CUDA");
    else if (blas > 0)
        snprintf(out->cublas, sizeof out->cublas, "cuBLAS %d.%d.%d", blas / 10000,
                 blas % 10000 / 100, blas % 100);
    else
        snprintf(out->cublas, sizeof out->cublas, "version unknown");
    /* As ddpc_backend_select takes it for device: auto or cuda. */
    char why[192] = "";
    int n = ddpc_cuda_devices(why, sizeof why);
    if (n > 0)
        snprintf(out->device, sizeof out->device,
                 "cuda: visible GPU %d of %d (LOCAL_RANK %d mod %d)", local_rank % n, n, local_rank,
                 n);
    else
        snprintf(out->device, sizeof out->device, "cpu (no GPU: %s)", why);
}
