// SPDX-License-Identifier: MIT
/* Joining the job's key-value store for a backend (gloo, nccl). torchrun's agent (static
 * rendezvous) serves torch's own store at MASTER_PORT, whose protocol is not ddpc's: then rank 0
 * serves ddpc's store on the next port. Invariant: keys start with the run id and restart count,
 * so a restarted job never reads an earlier attempt's keys. */
#include "comm/store_job.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* Rank 0's server, shared by the process's groups: a GPU run's device group rendezvous on the
 * same store as its host group (their keys differ by run id), and a second server could not
 * bind the port the first one holds. Counted, so the last group to go stops it. */
enum { SHARED_CAP = 8, ADDR_CAP = 256 };
static struct {
    ddpc_store_server *server;
    char bind[ADDR_CAP];
    char token[DDPC_STORE_TOKEN_MAX + 1];
    int port;
    int users;
} shared[SHARED_CAP];
static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;

static ddpc_status serve(const char *bind, int port, const char *token, ddpc_store_server **out)
{
    pthread_mutex_lock(&shared_lock);
    int slot = -1;
    for (int i = 0; i < SHARED_CAP; i++) {
        if (shared[i].users > 0 && shared[i].port == port && !strcmp(shared[i].bind, bind) &&
            !strcmp(shared[i].token, token)) {
            shared[i].users++;
            *out = shared[i].server;
            pthread_mutex_unlock(&shared_lock);
            return DDPC_OK;
        }
        if (shared[i].users == 0 && slot < 0)
            slot = i;
    }
    ddpc_status s = ddpc_store_server_start(bind, port, token, out);
    if (s == DDPC_OK && slot >= 0 && strlen(bind) < ADDR_CAP &&
        strlen(token) <= DDPC_STORE_TOKEN_MAX) {
        shared[slot].server = *out;
        snprintf(shared[slot].bind, ADDR_CAP, "%s", bind);
        snprintf(shared[slot].token, sizeof shared[slot].token, "%s", token);
        shared[slot].port = port;
        shared[slot].users = 1;
    }
    pthread_mutex_unlock(&shared_lock);
    return s;
}

void ddpc__job_store_release(ddpc_store_server *server)
{
    if (!server)
        return;
    pthread_mutex_lock(&shared_lock);
    for (int i = 0; i < SHARED_CAP; i++) {
        if (shared[i].users > 0 && shared[i].server == server) {
            if (--shared[i].users > 0) {
                pthread_mutex_unlock(&shared_lock);
                return; /* another group of this process still uses it */
            }
            memset(&shared[i], 0, sizeof shared[i]);
            break;
        }
    }
    pthread_mutex_unlock(&shared_lock);
    ddpc_store_server_stop(server);
}

ddpc_status ddpc__job_store_open(const ddpc_comm_env *env, const char *who, double deadline,
                                 ddpc_store_server **server, ddpc_store **store, char *prefix)
{
    *server = NULL;
    *store = NULL;
    if (env->master_port <= 0 || env->master_addr[0] == '\0')
        return ddpc_errorf(DDPC_EINVAL,
                           "%s needs MASTER_ADDR and MASTER_PORT (where the job's "
                           "key-value store listens)",
                           who);
    bool foreign_agent = env->agent_store && !env->ddpc_launcher;
    int port = foreign_agent ? env->master_port + 1 : env->master_port;
    if (foreign_agent && port > 65535)
        return ddpc_errorf(DDPC_EINVAL,
                           "MASTER_PORT %d leaves no next port for ddpc's store "
                           "beside torchrun's",
                           env->master_port);
    /* Without a token only a store on this host's loopback is safe to join: across hosts anyone
     * who reaches the port could read the job's keys and stop it. */
    if (!env->store_token[0] && !ddpc_store_addr_is_loopback(env->master_addr))
        return ddpc_errorf(DDPC_EINVAL,
                           "%s's store at MASTER_ADDR %s:%d spans hosts but no token "
                           "was given: set DDPC_STORE_TOKEN (or DDPC_STORE_TOKEN_FILE) to the "
                           "same secret for every rank (ddpc run does this for its workers)",
                           who, env->master_addr, port);
    if ((!env->agent_store || foreign_agent) && env->rank == 0) {
        const char *bind = env->store_bind[0] ? env->store_bind : env->master_addr;
        DDPC_TRY(serve(bind, port, env->store_token, server));
    }
    ddpc_status s = ddpc_store_connect(env->master_addr, port, env->store_token, deadline, store);
    if (s != DDPC_OK) {
        ddpc__job_store_release(*server);
        *server = NULL;
        return s;
    }
    const char *run = env->run_id[0] ? env->run_id : "job";
    snprintf(prefix, DDPC__JOB_PREFIX_CAP, "ddpc/%.120s/%d/", run, env->restart_count);
    return DDPC_OK;
}
