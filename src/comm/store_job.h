// SPDX-License-Identifier: MIT
/* Private to src/comm: the job's key-value store as the backends that need one (gloo, nccl) join
 * it. One door, so every backend honours the launcher's agent store, the token rule and the
 * per-attempt key prefix alike. */
#ifndef DDPC_COMM_STORE_JOB_H
#define DDPC_COMM_STORE_JOB_H

#include <ddpc/comm.h>
#include <ddpc/store.h>

enum { DDPC__JOB_PREFIX_CAP = 200 };

/* Global rank 0 serves the store at MASTER_PORT (listening on MASTER_ADDR, or DDPC_STORE_BIND)
 * unless a launcher's agent does; every rank connects to it, proving the job's token, and gets
 * the key prefix of this attempt ("ddpc/<run id>/<restart count>/") in prefix (cap
 * DDPC__JOB_PREFIX_CAP). `who` names the backend in messages ("the gloo backend"). On success
 * *server (rank 0 only, else NULL) and *store are the caller's to release (below) and close; on
 * failure both are NULL. A process's groups share rank 0's server (a GPU run's second group). */
ddpc_status ddpc__job_store_open(const ddpc_comm_env *env, const char *who, double deadline,
                                 ddpc_store_server **server, ddpc_store **store, char *prefix);
/* Gives back a server from ddpc__job_store_open; the last of the process's groups stops it. NULL
 * is a no-op. */
void ddpc__job_store_release(ddpc_store_server *server);

#endif
