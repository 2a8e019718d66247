// SPDX-License-Identifier: MIT
/* Which instruction set ddpc's own loops run with (GEMMs go to OpenBLAS and oneDNN, which choose
 * for themselves). A portable build compiles the hot kernels three times — x86-64 baseline,
 * x86-64-v3 (AVX2, FMA) and x86-64-v4 (AVX-512) — and picks one per call from what this CPU
 * supports, capped by the environment variable DDPC_CPU_ISA (baseline | avx2 | avx512). The
 * variants agree to rounding, not bit for bit: the CPU kernels let the compiler fuse a*b+c where
 * the ISA has FMA (the optimizers do not: explicit fmaf(), same bits everywhere). The uncapped
 * variant on a CPU is what a -march=native build computed there. A job on mixed CPUs still keeps
 * its ranks' weights identical (every rank applies the same averaged gradient). A build with
 * -DDDPC_NATIVE=ON compiles everything for the build machine and has one variant. */
#ifndef DDPC_SIMD_H
#define DDPC_SIMD_H

#include <ddpc/status.h>

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { DDPC_ISA_BASELINE, DDPC_ISA_AVX2, DDPC_ISA_AVX512, DDPC_ISA_COUNT } ddpc_isa;

/* "baseline", "avx2", "avx512". */
const char *ddpc_isa_name(ddpc_isa isa);
/* The variant in use: the best this CPU runs, capped by DDPC_CPU_ISA (read once). */
ddpc_isa ddpc_isa_active(void);
/* Whether this build has the run-time variants (false for native and non-x86 builds). */
bool ddpc_isa_dispatched(void);
/* The best variant this CPU and this build support, ignoring the cap. */
ddpc_isa ddpc_isa_supported(void);
/* DDPC_EINVAL naming the value when DDPC_CPU_ISA is set to something other than the three
 * names; DDPC_OK when it is unset or valid (a cap above what the CPU runs is lowered silently and
 * shows in ddpc_isa_active). The CLI calls it at start so a typo is an error, not a slow run. */
ddpc_status ddpc_isa_check_env(void);

#ifdef __cplusplus
}
#endif
#endif
