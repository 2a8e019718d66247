// SPDX-License-Identifier: MIT
/* libnccl.so.2 found at run time with dlopen, as `ddpc env` finds it, so that ddpc neither links
 * nor needs NCCL. Invariant: loaded at most once per process and never closed (communicators
 * hold its code); the outcome, good or bad, is kept and repeated to every caller. */
#include "comm/device_impl.h"

#ifndef DDPC_HAVE_NCCL

ddpc_status ddpc__nccl_available(void)
{
    return ddpc_errorf(DDPC_EUNSUPPORTED, "this build of ddpc has no nccl backend (rebuild with "
                                          "the CUDA toolkit and NCCL's header nccl.h installed)");
}

#else

#include "comm/nccl_impl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static ddpc__nccl_api api;
static ddpc_status load_status;
static char load_error[512];

/* dlsym's object pointer as a function pointer (POSIX guarantees the representation). */
#define LOAD(lib, field, name)                                                                     \
    do {                                                                                           \
        void *p_ = dlsym(lib, name);                                                               \
        if (!p_) {                                                                                 \
            missing = name;                                                                        \
            break;                                                                                 \
        }                                                                                          \
        memcpy(&api.field, &p_, sizeof p_);                                                        \
    } while (0)

static void load_once(void)
{
    void *lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        load_status = DDPC_EUNSUPPORTED;
        snprintf(load_error, sizeof load_error, "libnccl.so.2 cannot be loaded (%s)",
                 e ? e : "unknown dlopen error");
        return;
    }
    const char *missing = NULL;
    ncclResult_t (*get_version)(int *) = NULL;
    void *gv = dlsym(lib, "ncclGetVersion");
    memcpy(&get_version, &gv, sizeof gv);
    LOAD(lib, get_unique_id, "ncclGetUniqueId");
    LOAD(lib, comm_init_rank_config, "ncclCommInitRankConfig");
    LOAD(lib, comm_get_async_error, "ncclCommGetAsyncError");
    LOAD(lib, comm_abort, "ncclCommAbort");
    LOAD(lib, comm_finalize, "ncclCommFinalize");
    LOAD(lib, comm_destroy, "ncclCommDestroy");
    LOAD(lib, get_error_string, "ncclGetErrorString");
    LOAD(lib, get_last_error, "ncclGetLastError");
    LOAD(lib, all_reduce, "ncclAllReduce");
    LOAD(lib, broadcast, "ncclBroadcast");
    LOAD(lib, all_gather, "ncclAllGather");
    LOAD(lib, reduce_scatter, "ncclReduceScatter");
    int v = 0;
    if (!get_version || get_version(&v) != ncclSuccess)
        missing = missing ? missing : "ncclGetVersion";
    api.version = v;
    if (missing) {
        load_status = DDPC_EUNSUPPORTED;
        snprintf(load_error, sizeof load_error, "libnccl.so.2 lacks %s (NCCL 2.14 or newer needed)",
                 missing);
    } else if (v < DDPC__NCCL_MIN_VERSION) {
        load_status = DDPC_EUNSUPPORTED;
        snprintf(load_error, sizeof load_error,
                 "libnccl.so.2 is NCCL %d.%d.%d; the nccl backend needs 2.14 or newer", v / 10000,
                 v / 100 % 100, v % 100);
    } else {
        load_status = DDPC_OK;
    }
    /* a failed load keeps the library open too: closing it is not worth a second code path */
}

ddpc_status ddpc__nccl_load(const ddpc__nccl_api **out)
{
    pthread_once(&once, load_once);
    *out = load_status == DDPC_OK ? &api : NULL;
    if (load_status != DDPC_OK)
        return ddpc_errorf(load_status, "%s", load_error);
    return DDPC_OK;
}

ddpc_status ddpc__nccl_available(void)
{
    const ddpc__nccl_api *a;
    return ddpc__nccl_load(&a);
}

#endif
