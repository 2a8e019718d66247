// SPDX-License-Identifier: MIT
/* Build facts for `ddpc env`: compiler, flags and how this library was compiled, the BLAS linked
 * (OpenBLAS's config string and thread count, asked of the library itself), and OpenMP. The BLAS
 * entry points are declared here rather than through cblas.h, which public code never includes. */
#include "core/sysinfo_impl.h"

#include <omp.h>
#include <stdio.h>
#include <string.h>

/* Exported by OpenBLAS (all versions since 0.2). */
char *openblas_get_config(void);
int openblas_get_num_threads(void);

#ifndef DDPC_C_FLAGS
#define DDPC_C_FLAGS "unknown"
#endif
#ifndef DDPC_BLAS_PATH
#define DDPC_BLAS_PATH "unknown"
#endif

/* gcc says __SANITIZE_*__, clang says __has_feature. */
#if defined(__SANITIZE_ADDRESS__)
#define SYSINFO_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SYSINFO_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define SYSINFO_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SYSINFO_TSAN 1
#endif
#endif

static void compiler(ddpc_sysinfo *out)
{
#if defined(__clang__)
    snprintf(out->compiler, sizeof out->compiler, "clang %d.%d.%d", __clang_major__,
             __clang_minor__, __clang_patchlevel__);
#elif defined(__GNUC__)
    snprintf(out->compiler, sizeof out->compiler, "gcc %s", __VERSION__);
#else
    snprintf(out->compiler, sizeof out->compiler, "unknown C compiler");
#endif
    ddpc__strlcatf(out->compiler, sizeof out->compiler, ", C %ld", (long)__STDC_VERSION__);
}

/* What the macros say about how this very file (and so the library) was compiled. */
static void build_flags(ddpc_sysinfo *out)
{
    char *b = out->build_flags;
    size_t cap = sizeof out->build_flags;
    snprintf(b, cap, "release flags \"%s\"; this build:", DDPC_C_FLAGS);
#ifdef __OPTIMIZE__
    ddpc__strlcatf(b, cap, " optimized");
#else
    ddpc__strlcatf(b, cap, " not optimized");
#endif
#ifdef NDEBUG
    ddpc__strlcatf(b, cap, ", NDEBUG");
#endif
#ifdef SYSINFO_ASAN
    ddpc__strlcatf(b, cap, ", AddressSanitizer");
#endif
#ifdef SYSINFO_TSAN
    ddpc__strlcatf(b, cap, ", ThreadSanitizer");
#endif
#ifdef DDPC_HAVE_MPI
    ddpc__strlcatf(b, cap, ", mpi backend");
#endif
}

void ddpc__sysinfo_build(ddpc_sysinfo *out)
{
    compiler(out);
    build_flags(out);
    snprintf(out->blas_library, sizeof out->blas_library, "%s", DDPC_BLAS_PATH);
    const char *cfg = openblas_get_config();
    snprintf(out->blas_config, sizeof out->blas_config, "%s", cfg ? cfg : "unknown");
    size_t n = strlen(out->blas_config); /* OpenBLAS ends the string with a space */
    while (n > 0 && out->blas_config[n - 1] == ' ')
        out->blas_config[--n] = '\0';
    out->blas_threads = openblas_get_num_threads();
    snprintf(out->openmp, sizeof out->openmp, "OpenMP %s (%d)",
             _OPENMP >= 202011   ? "5.1"
             : _OPENMP >= 201811 ? "5.0"
             : _OPENMP >= 201511 ? "4.5"
             : _OPENMP >= 201307 ? "4.0"
                                 : "3.x or older",
             (int)_OPENMP);
    out->omp_max_threads = omp_get_max_threads();
}
