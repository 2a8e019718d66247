// SPDX-License-Identifier: MIT
/* Kernels written and checked in the emulator on machines without a GPU, not yet run on one, are
 * candidates: they stay off unless DDPC_CUDA_CANDIDATES names them (comma-separated, or "all").
 * tests/gpu/run.sh checks and times each against the default; the next GPU session then makes it
 * the default or deletes it, so no candidate outlives one GPU run. */
#ifndef DDPC_CUDA_EMULATE /* tests/test_candidates_emu.cpp reads the list's parsing */
#include "kernels/cuda/cuda_impl.h"
#endif

#include <stdlib.h>
#include <string.h>

/* Whether the comma-separated `list` names `name` as a whole item, or is "all". */
static bool candidate_named(const char *list, const char *name)
{
    if (!list || !*list || !*name)
        return false;
    if (strcmp(list, "all") == 0)
        return true;
    const size_t len = strlen(name);
    for (const char *at = list; (at = strstr(at, name)) != nullptr; at += len) {
        const bool starts = at == list || at[-1] == ',', ends = at[len] == ',' || at[len] == 0;
        if (starts && ends)
            return true;
    }
    return false;
}

#ifndef DDPC_CUDA_EMULATE
extern "C" const char *ddpc__cuda_candidates(void)
{
    static const char *const list = getenv("DDPC_CUDA_CANDIDATES"); /* read once */
    return list && *list ? list : nullptr;
}

extern "C" bool ddpc__cuda_candidate(const char *name)
{
    return candidate_named(ddpc__cuda_candidates(), name);
}
#endif
