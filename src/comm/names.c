// SPDX-License-Identifier: MIT
/* Names and sizes of the comm enums (dtype, reduce op, backend, rank source, collective kind), the
 * backend parser and availability, and the process-group config default. Every table is indexed
 * by its enum and has exactly COUNT entries; values outside the enum map to "?" or 0. */
#include "comm/pg_impl.h"

#include <string.h>

size_t ddpc_dtype_size(ddpc_dtype dtype)
{
    static const size_t sizes[DDPC_DTYPE_COUNT] = {4, 8, 2, 2, 4, 8};
    return (unsigned)dtype < DDPC_DTYPE_COUNT ? sizes[dtype] : 0;
}

const char *ddpc_dtype_name(ddpc_dtype dtype)
{
    static const char *const names[DDPC_DTYPE_COUNT] = {"f32", "f64", "bf16", "f16", "i32", "i64"};
    return (unsigned)dtype < DDPC_DTYPE_COUNT ? names[dtype] : "?";
}

const char *ddpc_reduce_op_name(ddpc_reduce_op op)
{
    static const char *const names[DDPC_REDUCE_COUNT] = {"sum", "avg", "min", "max"};
    return (unsigned)op < DDPC_REDUCE_COUNT ? names[op] : "?";
}

const char *ddpc_backend_name(ddpc_backend backend)
{
    static const char *const names[DDPC_BACKEND_COUNT] = {"auto", "shm", "mpi", "gloo", "nccl"};
    return (unsigned)backend < DDPC_BACKEND_COUNT ? names[backend] : "?";
}

const char *ddpc_comm_source_name(ddpc_comm_source src)
{
    static const char *const names[DDPC_COMM_SOURCE_COUNT] = {"none", "torchrun", "openmpi", "pmi",
                                                              "slurm"};
    return (unsigned)src < DDPC_COMM_SOURCE_COUNT ? names[src] : "?";
}

const char *ddpc__coll_name(ddpc__coll_kind kind)
{
    static const char *const names[DDPC__COLL_COUNT] = {"all_reduce", "broadcast", "all_gather",
                                                        "reduce_scatter", "barrier"};
    return (unsigned)kind < DDPC__COLL_COUNT ? names[kind] : "?";
}

ddpc_status ddpc_backend_parse(const char *name, ddpc_backend *out)
{
    if (!name)
        return ddpc_errorf(DDPC_EINVAL,
                           "backend name is NULL (expected auto, shm, mpi, gloo or nccl)");
    for (int b = 0; b < DDPC_BACKEND_COUNT; b++) {
        if (strcmp(name, ddpc_backend_name((ddpc_backend)b)) == 0) {
            *out = (ddpc_backend)b;
            return DDPC_OK;
        }
    }
    return ddpc_errorf(DDPC_EINVAL, "unknown backend '%s' (expected auto, shm, mpi, gloo or nccl)",
                       name);
}

bool ddpc_backend_available(ddpc_backend backend)
{
    switch (backend) {
    case DDPC_BACKEND_AUTO:
    case DDPC_BACKEND_SHM:
        return true;
    case DDPC_BACKEND_MPI:
#ifdef DDPC_HAVE_MPI
        return true;
#else
        return false;
#endif
    case DDPC_BACKEND_GLOO:
#ifdef DDPC_HAVE_GLOO
        return true;
#else
        return false;
#endif
    case DDPC_BACKEND_NCCL:
#ifdef DDPC_HAVE_NCCL
        return true;
#else
        return false;
#endif
    default:
        return false;
    }
}

ddpc_pg_config ddpc_pg_config_default(void)
{
    return (ddpc_pg_config){.backend = DDPC_BACKEND_AUTO, .timeout_s = 0.0};
}
