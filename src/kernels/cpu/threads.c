// SPDX-License-Identifier: MIT
/* Thread control for the CPU kernels and a description of the BLAS behind ddpc_gemm_f32.
 * Invariant: our OpenMP loops and OpenBLAS (its OpenMP build) share one pool, so setting the
 * OpenMP thread count and OpenBLAS's count together keeps them from oversubscribing cores. */
#include <ddpc/kernels.h>

#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "kernels/cpu/cpu_impl.h"

void ddpc_kernels_set_threads(int n)
{
    /* OpenMP's default is OMP_NUM_THREADS when set (ddpc run sets it per worker), else every core. */
    if (n <= 0)
        n = omp_get_max_threads();
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
}

int ddpc_kernels_threads(void)
{
    return omp_get_max_threads();
}

int ddpc__kernel_slots(void)
{
    int t = omp_get_max_threads(), p = omp_get_num_procs();
    return t > p ? t : p;
}

static const char *parallel_name(int mode)
{
    switch (mode) {
    case 0: return "sequential";
    case 1: return "pthreads";
    case 2: return "openmp";
    default: return "unknown threading";
    }
}

const char *ddpc_kernels_blas_info(void)
{
    static _Thread_local char info[160];
    /* openblas_get_config() starts "OpenBLAS 0.3.21 DYNAMIC_ARCH ..."; keep name and version. */
    char name[32] = "OpenBLAS", version[32] = "?";
    const char *config = openblas_get_config();
    if (config)
        sscanf(config, "%31s %31s", name, version);
    snprintf(info, sizeof info, "%s %s (%s, %s)", name, version,
             parallel_name(openblas_get_parallel()), openblas_get_corename());
    return info;
}
