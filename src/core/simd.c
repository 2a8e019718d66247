// SPDX-License-Identifier: MIT
/* The active kernel variant: detected once (first call), from the CPU and DDPC_CPU_ISA. Racing
 * first calls compute the same value, so a relaxed atomic is enough. */
#include <ddpc/simd.h>

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[DDPC_ISA_COUNT] = {"baseline", "avx2", "avx512"};

const char *ddpc_isa_name(ddpc_isa isa)
{
    return (unsigned)isa < DDPC_ISA_COUNT ? names[isa] : "unknown";
}

bool ddpc_isa_dispatched(void)
{
#if defined(DDPC_SIMD_MULTI)
    return true;
#else
    return false;
#endif
}

ddpc_isa ddpc_isa_supported(void)
{
#if defined(DDPC_SIMD_MULTI) && (defined(__x86_64__) || defined(__i386__))
    __builtin_cpu_init();
    if (__builtin_cpu_supports("x86-64-v4"))
        return DDPC_ISA_AVX512;
    if (__builtin_cpu_supports("x86-64-v3"))
        return DDPC_ISA_AVX2;
#endif
    return DDPC_ISA_BASELINE; /* a native or non-x86 build has one variant */
}

/* The cap DDPC_CPU_ISA asks for; DDPC_ISA_COUNT when unset, -1 when not a name. */
static int env_cap(void)
{
    const char *v = getenv("DDPC_CPU_ISA");
    if (!v || !v[0])
        return DDPC_ISA_COUNT;
    for (int i = 0; i < DDPC_ISA_COUNT; i++)
        if (strcmp(v, names[i]) == 0)
            return i;
    return -1;
}

ddpc_status ddpc_isa_check_env(void)
{
    if (env_cap() < 0)
        return ddpc_errorf(DDPC_EINVAL, "DDPC_CPU_ISA='%s' is not one of baseline, avx2, avx512",
                           getenv("DDPC_CPU_ISA"));
    return DDPC_OK;
}

ddpc_isa ddpc_isa_active(void)
{
    static atomic_int active = -1;
    int a = atomic_load_explicit(&active, memory_order_relaxed);
    if (a >= 0)
        return (ddpc_isa)a;
    int cap = env_cap();
    a = (int)ddpc_isa_supported();
    if (cap >= 0 && cap < a)
        a = cap; /* an invalid value is the CLI's error (ddpc_isa_check_env); here: no cap */
    atomic_store_explicit(&active, a, memory_order_relaxed);
    return (ddpc_isa)a;
}
