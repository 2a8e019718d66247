// SPDX-License-Identifier: MIT
/* What `ddpc env` reports from the core layer: the host (OS, CPU, SIMD), the build (compiler,
 * flags, BLAS, OpenMP) and the GPU libraries (CUDA driver and GPUs, NCCL); MPI and the launch
 * variables are the comm layer's half (ddpc_comm_report, comm.h). Every field is filled; what
 * cannot be found reads "unknown" or "not found (why)", never an error: collecting is a
 * diagnostic that must not fail. */
#ifndef DDPC_SYSINFO_H
#define DDPC_SYSINFO_H

#include <ddpc/status.h>

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DDPC_SYSINFO_MAX_GPUS 16

typedef struct {
    /* host */
    char os[192];     /* uname: "Linux 6.1.0-18-amd64 x86_64" */
    char distro[128]; /* PRETTY_NAME of /etc/os-release, or "unknown" */
    char hostname[256];
    char cpu_model[128]; /* "model name" of /proc/cpuinfo, or "unknown" */
    int cpu_cores;       /* physical cores (distinct package/core pairs); 0 when unknown */
    int cpu_threads;     /* logical CPUs online */
    int cpu_allowed;     /* logical CPUs this process may run on (affinity mask) */
    char simd_host[256]; /* SIMD extensions of this CPU, from a fixed list: "sse4_2 avx avx2 fma" */
    char simd_build[256];   /* those the library was compiled to use (-march) */
    char simd_missing[256]; /* used by the build but absent on this CPU: "" when none */
    /* build */
    char compiler[128]; /* "gcc 12.2.0" */
    char
        build_flags[256]; /* release flags and how this library was compiled: "-O3 -DNDEBUG; ..." */
    char blas_library[256]; /* the BLAS linked at build time (path) */
    char blas_config[256];  /* openblas_get_config() */
    int blas_threads;       /* openblas_get_num_threads() */
    char openmp[64];        /* "OpenMP 4.5 (201511)" */
    int omp_max_threads;    /* omp_get_max_threads() */
    /* GPU libraries */
    char cuda_driver[192]; /* "CUDA driver 12.4 (libcuda.so.1)" or "not found (...)" */
    int cuda_driver_version; /* cuDriverGetVersion's code (12040 is 12.4); 0 without a driver */
    int gpu_count;         /* GPUs the driver reports (names of the first DDPC_SYSINFO_MAX_GPUS) */
    char gpu_names[DDPC_SYSINFO_MAX_GPUS][128]; /* "NVIDIA H100 80GB HBM3, 79.1 GiB, sm_90" */
    int gpu_sm[DDPC_SYSINFO_MAX_GPUS]; /* compute capability as major * 10 + minor; 0 unknown */
    char nccl[192]; /* "NCCL 2.21.5 (libnccl.so.2)" or "not found (...)" */
} ddpc_sysinfo;

/* Fills *out. Never fails; takes about as long as loading libcuda and libnccl (when present). */
void ddpc_sysinfo_collect(ddpc_sysinfo *out);

/* CPUs this process may run on (its affinity mask: taskset, cgroup cpusets, srun's binding), else
 * the online CPUs; at least 1. Thread safe. */
int ddpc_sysinfo_cpus_usable(void);
/* Compute threads for each of `ranks` processes sharing `cpus` CPUs: max(1, cpus / ranks), the
 * split `ddpc run` gives its workers (OMP_NUM_THREADS) and a rank started without it takes. */
static inline int ddpc_sysinfo_threads_per_rank(int cpus, int ranks)
{
    return ranks > 0 && cpus / ranks > 1 ? cpus / ranks : 1;
}

/* The machine's available memory now (MemAvailable of /proc/meminfo), in bytes. DDPC_EIO naming
 * the file when it cannot be read (not Linux). Thread safe. */
ddpc_status ddpc_sysinfo_mem_available(uint64_t *bytes);
/* This process's resident set now and its peak so far (VmRSS, VmHWM of /proc/self/status), in
 * bytes. DDPC_EIO naming the file or key it could not read. Thread safe. */
ddpc_status ddpc_sysinfo_process_memory(uint64_t *rss, uint64_t *rss_peak);

#ifdef __cplusplus
}
#endif
#endif
