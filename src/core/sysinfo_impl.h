// SPDX-License-Identifier: MIT
/* Private to src/core: the parts of ddpc_sysinfo_collect (sysinfo_host.c), one file each.
 * Each fills its fields of a ddpc_sysinfo and never fails; what it cannot find reads "unknown"
 * or "not found (why)". */
#ifndef DDPC_CORE_SYSINFO_IMPL_H
#define DDPC_CORE_SYSINFO_IMPL_H

#include <ddpc/sysinfo.h>

#include <stddef.h>

/* os, distro, hostname, cpu_*, simd_* */
void ddpc__sysinfo_host(ddpc_sysinfo *out);
/* compiler, build_flags, blas_*, openmp, omp_max_threads */
void ddpc__sysinfo_build(ddpc_sysinfo *out);
/* cuda_driver, gpu_count, gpu_names, nccl (through dlopen; absent libraries are not errors) */
void ddpc__sysinfo_gpu(ddpc_sysinfo *out);

/* Appends a printf-formatted string to dst (cap bytes), truncating; dst stays NUL-terminated. */
void ddpc__strlcatf(char *dst, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
