// SPDX-License-Identifier: MIT
/* Worker environments: torchrun's contract (RANK, LOCAL_RANK, WORLD_SIZE, ... see docs/launcher.md)
 * layered over the launcher's own environment. Invariant: a variable the launcher owns appears
 * exactly once in a worker's vector, with the launcher's value, whatever the base held. */
#include "launch/launch_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/sysinfo.h>

#include <stdarg.h>
#include <string.h>

/* Variables a worker always gets from the launcher. */
static const char *const owned_vars[] = {
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "GROUP_WORLD_SIZE",
    "ROLE_NAME",
    "ROLE_RANK",
    "ROLE_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RESTART_COUNT",
    "TORCHELASTIC_MAX_RESTARTS",
    "TORCHELASTIC_RUN_ID",
    "DDPC_LAUNCHER",
    "TORCHELASTIC_USE_AGENT_STORE",
    "DDPC_STORE_TOKEN",
    "DDPC_STORE_TOKEN_FILE",
};

static bool key_is(const char *kv, const char *key)
{
    size_t n = strlen(key);
    return strncmp(kv, key, n) == 0 && kv[n] == '=';
}

void ddpc__strv_free(char **v)
{
    for (int i = 0; v && v[i]; i++)
        ddpc_free(v[i]);
    ddpc_free(v);
}

/* Slots a vector holding `slots` entries (its NULL included) has: a power of two, at least 8. */
static int strv_cap(int slots)
{
    int cap = 8;
    while (cap < slots)
        cap *= 2;
    return cap;
}

ddpc_status ddpc__strv_push(char ***v, int *n, const char *s)
{
    /* Capacity is implied by the count, so growth is amortised O(1) with no stored field. */
    if (*v == NULL || strv_cap(*n + 1) < *n + 2) {
        int cap = strv_cap(*n + 2);
        char **grown = ddpc_calloc((size_t)cap, sizeof *grown);
        if (!grown)
            return ddpc_errorf(DDPC_ENOMEM, "out of memory building a %d-entry string vector",
                               *n + 1);
        if (*v)
            memcpy(grown, *v, (size_t)*n * sizeof *grown);
        ddpc_free(*v);
        *v = grown;
    }
    size_t len = strlen(s);
    char *copy = ddpc_malloc(len + 1);
    if (!copy)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory copying a %zu-byte string", len);
    memcpy(copy, s, len + 1);
    (*v)[(*n)++] = copy;
    (*v)[*n] = NULL;
    return DDPC_OK;
}

ddpc_status ddpc__strv_pushf(char ***v, int *n, const char *fmt, ...)
{
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (len < 0 || (size_t)len >= sizeof buf)
        return ddpc_errorf(DDPC_EINVAL, "string '%.40s...' is longer than %zu bytes", buf,
                           sizeof buf - 1);
    return ddpc__strv_push(v, n, buf);
}

int ddpc__omp_threads(const char *const *base, int nproc, int cpus)
{
    if (nproc <= 1 || ddpc_comm_env_lookup(base, "OMP_NUM_THREADS"))
        return 0;
    return ddpc_sysinfo_threads_per_rank(cpus, nproc);
}

static bool launcher_owns(const ddpc_launch_config *cfg, const ddpc__job_ids *ids, const char *kv)
{
    for (size_t i = 0; i < sizeof owned_vars / sizeof owned_vars[0]; i++)
        if (key_is(kv, owned_vars[i]))
            return true;
    return (cfg->backend != DDPC_BACKEND_AUTO && key_is(kv, "DDPC_BACKEND")) ||
           (cfg->collective_timeout_s > 0 && key_is(kv, "DDPC_COLLECTIVE_TIMEOUT")) ||
           (ids->omp_threads > 0 && key_is(kv, "OMP_NUM_THREADS"));
}

static ddpc_status push_contract(char ***v, int *n, const ddpc_launch_config *cfg,
                                 const ddpc__job_ids *ids, int local_rank)
{
    int world = cfg->nnodes * cfg->nproc_per_node;
    int rank = cfg->node_rank * cfg->nproc_per_node + local_rank;
    DDPC_TRY(ddpc__strv_pushf(v, n, "RANK=%d", rank));
    DDPC_TRY(ddpc__strv_pushf(v, n, "LOCAL_RANK=%d", local_rank));
    DDPC_TRY(ddpc__strv_pushf(v, n, "WORLD_SIZE=%d", world));
    DDPC_TRY(ddpc__strv_pushf(v, n, "LOCAL_WORLD_SIZE=%d", cfg->nproc_per_node));
    DDPC_TRY(ddpc__strv_pushf(v, n, "GROUP_RANK=%d", cfg->node_rank));
    DDPC_TRY(ddpc__strv_pushf(v, n, "GROUP_WORLD_SIZE=%d", cfg->nnodes));
    DDPC_TRY(ddpc__strv_push(v, n, "ROLE_NAME=default"));
    DDPC_TRY(ddpc__strv_pushf(v, n, "ROLE_RANK=%d", rank));
    DDPC_TRY(ddpc__strv_pushf(v, n, "ROLE_WORLD_SIZE=%d", world));
    DDPC_TRY(ddpc__strv_pushf(v, n, "MASTER_ADDR=%s", cfg->master_addr));
    DDPC_TRY(ddpc__strv_pushf(v, n, "MASTER_PORT=%d", ids->master_port));
    DDPC_TRY(ddpc__strv_pushf(v, n, "TORCHELASTIC_RESTART_COUNT=%d", ids->restart_count));
    DDPC_TRY(ddpc__strv_pushf(v, n, "TORCHELASTIC_MAX_RESTARTS=%d", cfg->max_restarts));
    DDPC_TRY(ddpc__strv_pushf(v, n, "TORCHELASTIC_RUN_ID=%s", ids->run_id));
    DDPC_TRY(ddpc__strv_push(v, n, "DDPC_LAUNCHER=1"));
    /* The workers prove the same token to the store (node 0's, or rank 0's under gloo). */
    if (ids->store_token[0])
        DDPC_TRY(ddpc__strv_pushf(v, n, "DDPC_STORE_TOKEN=%s", ids->store_token));
    /* Across hosts node 0's launcher already serves a store at MASTER_ADDR:MASTER_PORT: the
     * workers' process group connects to it (keys under "<run id>/<restart>/") instead of
     * serving its own, as torchrun's workers do with this variable. */
    if (ddpc_launch_per_node(cfg))
        DDPC_TRY(ddpc__strv_push(v, n, "TORCHELASTIC_USE_AGENT_STORE=True"));
    if (cfg->backend != DDPC_BACKEND_AUTO)
        DDPC_TRY(ddpc__strv_pushf(v, n, "DDPC_BACKEND=%s", ddpc_backend_name(cfg->backend)));
    if (cfg->collective_timeout_s > 0)
        DDPC_TRY(ddpc__strv_pushf(v, n, "DDPC_COLLECTIVE_TIMEOUT=%g", cfg->collective_timeout_s));
    if (ids->omp_threads > 0)
        DDPC_TRY(ddpc__strv_pushf(v, n, "OMP_NUM_THREADS=%d", ids->omp_threads));
    return DDPC_OK;
}

ddpc_status ddpc__worker_env(const ddpc_launch_config *cfg, const char *const *base,
                             const ddpc__job_ids *ids, int local_rank, char ***out)
{
    char **v = NULL;
    int n = 0;
    ddpc_status s = DDPC_OK;
    for (int i = 0; base && base[i] && s == DDPC_OK; i++)
        if (!launcher_owns(cfg, ids, base[i]))
            s = ddpc__strv_push(&v, &n, base[i]);
    if (s == DDPC_OK)
        s = push_contract(&v, &n, cfg, ids, local_rank);
    if (s != DDPC_OK) {
        ddpc__strv_free(v);
        return s;
    }
    *out = v;
    return DDPC_OK;
}
