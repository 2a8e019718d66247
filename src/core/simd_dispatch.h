// SPDX-License-Identifier: MIT
/* Private: how a kernel source becomes three variants. CMake compiles each file listed in
 * DDPC_SIMD_SOURCES once more per extra ISA with DDPC_SIMD_VARIANT=avx2 or avx512 (and the
 * matching -march); the base compile gets baseline here. In such a file:
 *   - each dispatched function is defined as DDPC_SIMD(name)(...) { ... } and followed by
 *     DDPC_SIMD_DISPATCH(ret, name, (params), (args)) (or _VOID for void), which defines `name`
 *     itself in the base compile only, choosing the variant per call;
 *   - everything else that is not static goes inside #if !DDPC_SIMD_CLONE, so it exists once.
 * Without DDPC_SIMD_MULTI (native builds, non-x86) the macros reduce to a plain definition. */
#ifndef DDPC_CORE_SIMD_DISPATCH_H
#define DDPC_CORE_SIMD_DISPATCH_H

#include <ddpc/simd.h>

/* A variant of ddpc_f is ddpc__avx2_ddpc_f: internal (ddpc__), so libddpc.so does not export it. */
#define DDPC_SIMD_PASTE(variant, name) ddpc__##variant##_##name
#define DDPC_SIMD_NAME(variant, name) DDPC_SIMD_PASTE(variant, name) /* expands the variant */

#if defined(DDPC_SIMD_MULTI) && !defined(DDPC_SIMD_VARIANT)
#define DDPC_SIMD_VARIANT baseline /* ddpc_objects' own compile of the file */
#define DDPC_SIMD_IS_CLONE 0
#endif

#if defined(DDPC_SIMD_MULTI)
#define DDPC_SIMD(name) DDPC_SIMD_NAME(DDPC_SIMD_VARIANT, name)
#define DDPC_SIMD_CLONE DDPC_SIMD_IS_CLONE
#define DDPC_SIMD_DECLARE(ret, name, params)                                                       \
    ret ddpc__baseline_##name params;                                                              \
    ret ddpc__avx2_##name params;                                                                  \
    ret ddpc__avx512_##name params;
#if DDPC_SIMD_IS_CLONE
#define DDPC_SIMD_DISPATCH(ret, name, params, args)
#define DDPC_SIMD_DISPATCH_VOID(name, params, args)
#else
#define DDPC_SIMD_DISPATCH(ret, name, params, args)                                                \
    DDPC_SIMD_DECLARE(ret, name, params)                                                           \
    ret name params                                                                                \
    {                                                                                              \
        switch (ddpc_isa_active()) {                                                               \
        case DDPC_ISA_AVX512:                                                                      \
            return ddpc__avx512_##name args;                                                       \
        case DDPC_ISA_AVX2:                                                                        \
            return ddpc__avx2_##name args;                                                         \
        default:                                                                                   \
            return ddpc__baseline_##name args;                                                     \
        }                                                                                          \
    }
#define DDPC_SIMD_DISPATCH_VOID(name, params, args)                                                \
    DDPC_SIMD_DECLARE(void, name, params)                                                          \
    void name params                                                                               \
    {                                                                                              \
        switch (ddpc_isa_active()) {                                                               \
        case DDPC_ISA_AVX512:                                                                      \
            ddpc__avx512_##name args;                                                              \
            break;                                                                                 \
        case DDPC_ISA_AVX2:                                                                        \
            ddpc__avx2_##name args;                                                                \
            break;                                                                                 \
        default:                                                                                   \
            ddpc__baseline_##name args;                                                            \
        }                                                                                          \
    }
#endif
#else
#define DDPC_SIMD(name) name
#define DDPC_SIMD_CLONE 0
#define DDPC_SIMD_DISPATCH(ret, name, params, args)
#define DDPC_SIMD_DISPATCH_VOID(name, params, args)
#endif

#endif
