// SPDX-License-Identifier: MIT
/* Which backend moves a group's device buffers: nccl where it can run (built, libnccl.so.2 loads,
 * one GPU per rank of the host), else host staging over the host rule's backend; an explicit
 * nccl that cannot run is refused, not staged behind the user's back. Every rank of a host sees
 * the same GPUs and library, so every rank chooses alike. */
#include "comm/device_impl.h"

#include <ddpc/device.h>

#include <stdio.h>
#include <string.h>

/* NULL when NCCL can run here for this host's ranks, else why not (into buf). */
static const char *nccl_blocked(const ddpc_comm_env *env, int gpus, char *buf, size_t cap)
{
    if (env->local_world_size > gpus) {
        snprintf(buf, cap, "%d ranks on this host share %d GPU%s, which NCCL refuses",
                 env->local_world_size, gpus, gpus == 1 ? "" : "s");
        return buf;
    }
    if (!ddpc_backend_available(DDPC_BACKEND_NCCL) || ddpc__nccl_available() != DDPC_OK) {
        snprintf(buf, cap, "%s", ddpc_last_error());
        return buf;
    }
    return NULL;
}

ddpc_status ddpc__pg_device_choose(const ddpc_comm_env *env, bool cuda, ddpc_backend asked,
                                   ddpc_backend *backend, bool *staged, char *note)
{
    *staged = false;
    note[0] = '\0';
    if (!cuda) {
        if (asked == DDPC_BACKEND_NCCL)
            return ddpc_errorf(DDPC_EINVAL,
                               "backend nccl moves GPU buffers only, and this process group's "
                               "collectives are on the CPU (use backend shm, gloo or mpi)");
        return DDPC_OK;
    }
    char why[200] = "";
    int gpus = ddpc_cuda_devices(why, sizeof why);
    if (gpus <= 0)
        return ddpc_errorf(DDPC_EINVAL, "collectives on GPU buffers%s need a GPU: %s",
                           asked == DDPC_BACKEND_NCCL ? " (backend nccl)" : "", why);
    char blocked[DDPC__PG_NOTE_CAP - 64];
    const char *no_nccl = nccl_blocked(env, gpus, blocked, sizeof blocked);
    if (asked == DDPC_BACKEND_NCCL || (asked == DDPC_BACKEND_AUTO && !no_nccl)) {
        if (no_nccl)
            return ddpc_errorf(DDPC_EUNSUPPORTED,
                               "backend nccl cannot run: %s (backend shm, gloo or mpi stages GPU "
                               "buffers through host memory instead)",
                               no_nccl);
        *backend = DDPC_BACKEND_NCCL;
        snprintf(note, DDPC__PG_NOTE_CAP, "nccl on GPU %d", env->local_rank % gpus);
        return DDPC_OK;
    }
    /* staging: the host rule's choice, as if no GPU were involved */
    ddpc_comm_env host = *env;
    host.backend = DDPC_BACKEND_AUTO;
    *backend =
        asked == DDPC_BACKEND_AUTO ? ddpc_pg_choose_backend(&host, DDPC_BACKEND_AUTO) : asked;
    *staged = true;
    const char *b = ddpc_backend_name(*backend);
    if (asked == DDPC_BACKEND_AUTO)
        snprintf(note, DDPC__PG_NOTE_CAP, "host staging over %s: %s", b, no_nccl);
    else
        snprintf(note, DDPC__PG_NOTE_CAP, "host staging over %s: backend %s was asked for", b, b);
    return DDPC_OK;
}
