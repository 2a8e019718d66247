// SPDX-License-Identifier: MIT
/* Process-group front-end: checks the env, picks the backend and timeout, joins, answers queries,
 * and runs one collective (ddpc__pg_execute) with its deadline and the sticky failed state.
 * Invariant: once `failed` is set, no collective reaches the backend again and every call says
 * "process group failed earlier: <first message>". World size 1 has no backend: every collective
 * is a local copy. */
#include "comm/device_impl.h"
#include "comm/env_impl.h"
#include "comm/mpi_impl.h"
#include "comm/pg_front.h"

#include <ddpc/alloc.h>
#include <ddpc/timer.h>
#include <ddpc/trace.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { DEFAULT_TIMEOUT_S = 300 };

static ddpc_status check_env(const ddpc_comm_env *e)
{
    if (e->world_size < 1)
        return ddpc_errorf(DDPC_EINVAL, "world size %d must be at least 1", e->world_size);
    if (e->rank < 0 || e->rank >= e->world_size)
        return ddpc_errorf(DDPC_EINVAL, "rank %d is outside world size %d", e->rank, e->world_size);
    if (e->local_world_size < 1 || e->local_world_size > e->world_size)
        return ddpc_errorf(DDPC_EINVAL, "local world size %d must be between 1 and world size %d",
                           e->local_world_size, e->world_size);
    if (e->local_rank < 0 || e->local_rank >= e->local_world_size)
        return ddpc_errorf(DDPC_EINVAL, "local rank %d is outside local world size %d",
                           e->local_rank, e->local_world_size);
    if (e->master_port < 0 || e->master_port > 65535)
        return ddpc_errorf(DDPC_EINVAL, "master port %d is outside 0..65535", e->master_port);
    if ((unsigned)e->backend >= DDPC_BACKEND_COUNT)
        return ddpc_errorf(DDPC_EINVAL, "env backend %d is not a ddpc_backend", (int)e->backend);
    if (!(e->timeout_s >= 0) || isinf(e->timeout_s))
        return ddpc_errorf(DDPC_EINVAL, "env collective timeout %g s must be finite and >= 0",
                           e->timeout_s);
    if (memchr(e->master_addr, '\0', sizeof e->master_addr) == NULL ||
        memchr(e->run_id, '\0', sizeof e->run_id) == NULL)
        return ddpc_errorf(DDPC_EINVAL, "env master_addr or run_id is not NUL-terminated");
    return DDPC_OK;
}

/* AUTO: the env's choice; mpi under mpirun/PMI/SLURM when built; gloo when torchrun-style
 * variables (ddpc run per node, torchrun, a platform) put ranks on several hosts; else shm. */
ddpc_backend ddpc_pg_choose_backend(const ddpc_comm_env *e, ddpc_backend asked)
{
    if (asked != DDPC_BACKEND_AUTO)
        return asked;
    if (e->backend != DDPC_BACKEND_AUTO)
        return e->backend;
    bool mpi_launched = e->source == DDPC_COMM_SOURCE_OPENMPI ||
                        e->source == DDPC_COMM_SOURCE_PMI || e->source == DDPC_COMM_SOURCE_SLURM;
    bool many_hosts = e->num_nodes > 1 || e->local_world_size < e->world_size;
    if (mpi_launched && ddpc_backend_available(DDPC_BACKEND_MPI))
        return DDPC_BACKEND_MPI;
    /* A platform that sets only RANK, LOCAL_RANK, WORLD_SIZE and MASTER_*: whether ranks share a
     * host is unknown, and every rank must choose alike; gloo finds out through the store. */
    bool layout_unknown = e->source == DDPC_COMM_SOURCE_TORCHRUN && !e->layout_known &&
                          e->world_size > 1 && e->master_addr[0] != '\0' && e->master_port > 0;
    if (!mpi_launched && (many_hosts || layout_unknown) &&
        ddpc_backend_available(DDPC_BACKEND_GLOO))
        return DDPC_BACKEND_GLOO;
    if (many_hosts && ddpc_backend_available(DDPC_BACKEND_MPI))
        return DDPC_BACKEND_MPI;
    return DDPC_BACKEND_SHM;
}

ddpc_status ddpc__pg_create_with(const ddpc_comm_env *env, ddpc_backend backend, double timeout_s,
                                 const ddpc__pg_backend *ops, void *state, ddpc_pg **out)
{
    ddpc_pg *pg = ddpc_calloc(1, sizeof *pg);
    if (!pg) {
        if (ops)
            ops->destroy(state);
        return ddpc_errorf(DDPC_ENOMEM, "out of memory allocating the process group");
    }
    *pg = (ddpc_pg){.rank = env->rank,
                    .world = env->world_size,
                    .local_rank = env->local_rank,
                    .local_world = env->local_world_size,
                    .backend = backend,
                    .timeout_s = timeout_s,
                    .ops = ops,
                    .state = state};
    /* A platform that gives no local layout leaves env's guess (every rank here); the backend
     * that counted the ranks on this host knows better (the trainer's threads divide by it). */
    if (ops && ops->layout)
        ops->layout(state, &pg->local_rank, &pg->local_world);
    atomic_init(&pg->failed, false);
    if (pthread_mutex_init(&pg->mu, NULL) != 0 || pthread_cond_init(&pg->work_cv, NULL) != 0 ||
        pthread_cond_init(&pg->done_cv, NULL) != 0) {
        if (ops)
            ops->destroy(state);
        ddpc_free(pg); /* the pthread objects need no destroy on Linux when init fails */
        return ddpc_errorf(DDPC_ENOMEM, "could not initialise the process group's mutex");
    }
    *out = pg;
    return DDPC_OK;
}

/* Wraps the joined host backend (none for world size 1) in host staging on this rank's GPU. */
static ddpc_status stage(const ddpc_comm_env *env, const ddpc__pg_backend **ops, void **state)
{
    ddpc__staging_copier copier;
    ddpc_status s = ddpc__staging_copier_cuda(env->local_rank, &copier);
    if (s != DDPC_OK) {
        if (*ops)
            (*ops)->destroy(*state);
        *ops = NULL;
        *state = NULL;
        return s;
    }
    return ddpc__staged_create(env->rank, env->world_size, *ops, *state, copier, ops, state);
}

ddpc_status ddpc_pg_create(const ddpc_comm_env *env, const ddpc_pg_config *cfg, ddpc_pg **out)
{
    if (!env || !out)
        return ddpc_errorf(DDPC_EINVAL, "ddpc_pg_create: %s is NULL", env ? "out" : "env");
    *out = NULL;
    ddpc_pg_config c = cfg ? *cfg : ddpc_pg_config_default();
    DDPC_TRY(check_env(env));
    if ((unsigned)c.backend >= DDPC_BACKEND_COUNT)
        return ddpc_errorf(DDPC_EINVAL, "config backend %d is not a ddpc_backend", (int)c.backend);
    if (!(c.timeout_s >= 0) || isinf(c.timeout_s))
        return ddpc_errorf(DDPC_EINVAL, "collective timeout %g s must be finite and >= 0",
                           c.timeout_s);
    double timeout = c.timeout_s > 0      ? c.timeout_s
                     : env->timeout_s > 0 ? env->timeout_s
                                          : DEFAULT_TIMEOUT_S;
    ddpc_backend backend = ddpc_pg_choose_backend(env, c.backend);
    bool staged = false;
    char note[DDPC__PG_NOTE_CAP] = "";
    if (c.cuda || backend == DDPC_BACKEND_NCCL)
        DDPC_TRY(ddpc__pg_device_choose(env, c.cuda,
                                        c.backend != DDPC_BACKEND_AUTO ? c.backend : env->backend,
                                        &backend, &staged, note));
    if (!ddpc_backend_available(backend))
        return ddpc_errorf(DDPC_EUNSUPPORTED,
                           "backend %s is not built into this ddpc (rebuild with %s installed, "
                           "or use backend shm)",
                           ddpc_backend_name(backend),
                           backend == DDPC_BACKEND_GLOO   ? "libgloo-dev"
                           : backend == DDPC_BACKEND_NCCL ? "the CUDA toolkit and nccl.h"
                                                          : "an MPI library");
    const ddpc__pg_backend *ops = NULL;
    void *state = NULL;
    double deadline = ddpc_time_now() + timeout;
    if (backend == DDPC_BACKEND_NCCL) {
        /* even alone: the one-rank group still needs device-to-device copies */
        DDPC_TRY(ddpc__nccl_create(env, deadline, &ops, &state));
    } else if (env->world_size > 1) {
        if (backend == DDPC_BACKEND_MPI) {
            /* MPI_Init aborts the process where Open MPI cannot start: say why first */
            DDPC_TRY(ddpc__slurm_mpi_check(ddpc__env_process(), env, ddpc__mpi_is_open_mpi()));
            DDPC_TRY(ddpc__mpi_create(env, deadline, &ops, &state));
        } else if (backend == DDPC_BACKEND_GLOO) {
            DDPC_TRY(ddpc__gloo_create(env, deadline, &ops, &state));
        } else {
            DDPC_TRY(ddpc__shm_create(env, deadline, &ops, &state));
        }
    }
    if (staged)
        DDPC_TRY(stage(env, &ops, &state));
    DDPC_TRY(ddpc__pg_create_with(env, backend, timeout, ops, state, out));
    snprintf((*out)->device_note, sizeof(*out)->device_note, "%s", note);
    return DDPC_OK;
}

void ddpc_pg_destroy(ddpc_pg *pg)
{
    if (!pg)
        return;
    ddpc__pg_stop_thread(pg);
    ddpc__pg_release_handles(pg);
    if (pg->ops)
        pg->ops->destroy(pg->state);
    pthread_cond_destroy(&pg->done_cv);
    pthread_cond_destroy(&pg->work_cv);
    pthread_mutex_destroy(&pg->mu);
    ddpc_free(pg);
}

int ddpc_pg_rank(const ddpc_pg *pg)
{
    return pg->rank;
}
int ddpc_pg_world_size(const ddpc_pg *pg)
{
    return pg->world;
}
int ddpc_pg_local_rank(const ddpc_pg *pg)
{
    return pg->local_rank;
}
int ddpc_pg_local_world_size(const ddpc_pg *pg)
{
    return pg->local_world;
}
ddpc_backend ddpc_pg_backend(const ddpc_pg *pg)
{
    return pg->backend;
}
const char *ddpc_pg_device_note(const ddpc_pg *pg)
{
    return pg->device_note[0] ? pg->device_note : NULL;
}
double ddpc_pg_timeout(const ddpc_pg *pg)
{
    return pg->timeout_s;
}
uint64_t ddpc_pg_seq(const ddpc_pg *pg)
{
    return pg->seq;
}

uint64_t ddpc_pg_ring_bytes(const ddpc_pg *pg)
{
    return pg->ring_bytes;
}

double ddpc_pg_busy_seconds(const ddpc_pg *pg)
{
    return (double)atomic_load_explicit(&((ddpc_pg *)pg)->busy_ns, memory_order_relaxed) * 1e-9;
}

const char *ddpc_pg_error(const ddpc_pg *pg)
{
    return atomic_load_explicit(&((ddpc_pg *)pg)->failed, memory_order_acquire) ? pg->error : NULL;
}

/* World size 1: every collective is a copy from send to recv (or nothing, in place). */
static void run_local(const ddpc__coll *c)
{
    size_t bytes = c->count * ddpc_dtype_size(c->dtype);
    if (c->kind == DDPC__COLL_BROADCAST || c->kind == DDPC__COLL_BARRIER || bytes == 0)
        return;
    if (c->send != c->recv)
        memmove(c->recv, c->send, bytes);
}

ddpc_status ddpc__pg_execute(ddpc_pg *pg, ddpc__coll *coll)
{
    if (atomic_load_explicit(&pg->failed, memory_order_acquire))
        return ddpc_errorf(DDPC_EPEER, "process group failed earlier: %s", pg->error);
    if (!pg->ops) {
        run_local(coll);
        return DDPC_OK;
    }
    double t0 = ddpc_time_now();
    coll->deadline = t0 + pg->timeout_s;
    ddpc__flight_entry *e = ddpc__flight_open(&pg->flight, coll, t0);
    ddpc_status s = pg->ops->run(pg->state, coll);
    double t1 = ddpc_time_now();
    atomic_fetch_add_explicit(&pg->busy_ns, (uint64_t)((t1 - t0) * 1e9), memory_order_relaxed);
    if (ddpc_trace_on()) /* the backend runs on one thread at a time: one "comm" track */
        ddpc_trace_add(DDPC_TRACE_COMM, ddpc__coll_name(coll->kind), t0, t1, -1,
                       ddpc__coll_name(coll->kind),
                       (int64_t)(coll->count * ddpc_dtype_size(coll->dtype)));
    if (s != DDPC_OK) {
        /* Only the thread running the backend writes here, and only before `failed` is set. */
        snprintf(pg->error, sizeof pg->error, "%s", ddpc_last_error());
        ddpc__flight_dump(&pg->flight, pg, pg->error);
        ddpc_errorf(s, "%s", pg->error); /* the dump must not change the message */
        atomic_store_explicit(&pg->failed, true, memory_order_release);
        return s;
    }
    e->end = t1;
    return s;
}
