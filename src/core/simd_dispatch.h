/* Private: how a kernel source becomes three variants. CMake compiles each file listed in
 * DDPC_SIMD_SOURCES once more per extra ISA with DDPC_SIMD_VARIANT=_avx2 or _avx512 (and the
 * matching -march); the base compile gets _baseline here. In such a file:
 *   - each dispatched function is defined as DDPC_SIMD(name)(...) { ... } and followed by
 *     DDPC_SIMD_DISPATCH(ret, name, (params), (args)) (or _VOID for void), which defines `name`
 *     itself in the base compile only, choosing the variant per call;
 *   - everything else that is not static goes inside #if !DDPC_SIMD_CLONE, so it exists once.
 * Without DDPC_SIMD_MULTI (native builds, non-x86) the macros reduce to a plain definition. */
#ifndef DDPC_CORE_SIMD_DISPATCH_H
#define DDPC_CORE_SIMD_DISPATCH_H

#include <ddpc/simd.h>

#define DDPC_SIMD_CAT2(a, b) a##b
#define DDPC_SIMD_CAT(a, b) DDPC_SIMD_CAT2(a, b)

#if defined(DDPC_SIMD_MULTI) && !defined(DDPC_SIMD_VARIANT)
#define DDPC_SIMD_VARIANT _baseline /* ddpc_lib's own compile of the file */
#define DDPC_SIMD_IS_CLONE 0
#endif

#if defined(DDPC_SIMD_MULTI)
#define DDPC_SIMD(name) DDPC_SIMD_CAT(name, DDPC_SIMD_VARIANT)
#define DDPC_SIMD_CLONE DDPC_SIMD_IS_CLONE
#define DDPC_SIMD_DECLARE(ret, name, params)                                                       \
    ret name##_baseline params;                                                                    \
    ret name##_avx2 params;                                                                        \
    ret name##_avx512 params;
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
            return name##_avx512 args;                                                             \
        case DDPC_ISA_AVX2:                                                                        \
            return name##_avx2 args;                                                               \
        default:                                                                                   \
            return name##_baseline args;                                                           \
        }                                                                                          \
    }
#define DDPC_SIMD_DISPATCH_VOID(name, params, args)                                                \
    DDPC_SIMD_DECLARE(void, name, params)                                                          \
    void name params                                                                               \
    {                                                                                              \
        switch (ddpc_isa_active()) {                                                               \
        case DDPC_ISA_AVX512:                                                                      \
            name##_avx512 args;                                                                    \
            break;                                                                                 \
        case DDPC_ISA_AVX2:                                                                        \
            name##_avx2 args;                                                                      \
            break;                                                                                 \
        default:                                                                                   \
            name##_baseline args;                                                                  \
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
