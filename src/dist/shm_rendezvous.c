/* The shm backend's constructor and destructor: checks that every rank is on this host, runs the
 * TCP rendezvous (MASTER_ADDR/MASTER_PORT) or the named one (run id), waits until all joined, and
 * fills the per-process state. Invariant: once every rank has attached, rank 0 unlinks the
 * segment's name, so nothing is left in /dev/shm whatever happens to the processes later. */
#include "dist/shm_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/timer.h>

#include <stdio.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

enum { MAX_WORLD = 1024 };

/* "2, 5" for ranks whose slot is still unclaimed. */
static void unclaimed(const ddpc__shm_state *s, char *out, size_t cap)
{
    size_t len = 0;
    out[0] = '\0';
    for (int k = 0; k < s->world && len + 16 < cap; k++)
        if (atomic_load_explicit(&s->ranks[k].pid, memory_order_acquire) == 0)
            len += (size_t)snprintf(out + len, cap - len, "%s%d", len ? ", " : "", k);
}

ddpc_status ddpc__shm_wait_joined(ddpc__shm_state *s, const char *name, double deadline,
                                  const char *where)
{
    ddpc__shm_header *h = s->hdr;
    for (;;) {
        if (atomic_load_explicit(&h->aborted, memory_order_acquire) == 2)
            return ddpc_errorf((ddpc_status)h->abort_status, "shm rendezvous failed: %s",
                               h->abort_msg);
        if (s->rank == 0 &&
            atomic_load_explicit(&h->attached, memory_order_acquire) == (unsigned)s->world) {
            shm_unlink(name);
            atomic_store_explicit(&h->joined, 1, memory_order_release);
            return DDPC_OK;
        }
        if (s->rank != 0 && atomic_load_explicit(&h->joined, memory_order_acquire))
            return DDPC_OK;
        if (s->rank != 0 && !ddpc__pid_alive(h->owner_pid, h->owner_start))
            return ddpc_errorf(DDPC_EPEER, "rank 0 (pid %d) exited during the shm rendezvous %s",
                               (int)h->owner_pid, where);
        if (ddpc_time_now() > deadline) {
            char list[256];
            unclaimed(s, list, sizeof list);
            return ddpc_errorf(DDPC_ETIMEOUT, "shm rendezvous %s timed out after %.3g s: %s%s",
                               where, s->timeout_s, list[0] ? "never joined: ranks " : "",
                               list[0] ? list : "rank 0 did not confirm the join");
        }
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
}

static void shm_destroy(void *state)
{
    ddpc__shm_state *s = state;
    if (!s)
        return;
    if (s->hdr)
        munmap(s->hdr, s->map_bytes);
    ddpc_free(s->pids);
    ddpc_free(s->starts);
    ddpc_free(s->srcs);
    ddpc_free(s);
}

static const ddpc__pg_backend shm_ops = {"shm", ddpc__shm_run, shm_destroy};

/* After the join: peers' identities for liveness checks, and how long to spin. */
static void finish(ddpc__shm_state *s)
{
    for (int k = 0; k < s->world; k++) {
        s->pids[k] = atomic_load_explicit(&s->ranks[k].pid, memory_order_acquire);
        s->starts[k] = s->ranks[k].start_time;
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    s->spin = cpus >= s->world ? 20000 : 50; /* ranks outnumber cores: yield almost at once */
}

ddpc_status ddpc__shm_create(const ddpc_dist_env *env, double deadline,
                             const ddpc__pg_backend **ops, void **state)
{
    *ops = NULL;
    *state = NULL;
    if (env->local_world_size != env->world_size || env->num_nodes > 1)
        return ddpc_errorf(DDPC_EINVAL,
                           "the shm backend needs every rank on one host, but this job has %d of "
                           "%d ranks here (use backend mpi across hosts)",
                           env->local_world_size, env->world_size);
    if (env->world_size > MAX_WORLD)
        return ddpc_errorf(DDPC_EINVAL, "the shm backend supports up to %d ranks, not %d",
                           MAX_WORLD, env->world_size);
    if (env->master_port <= 0 && env->run_id[0] == '\0')
        return ddpc_errorf(DDPC_EINVAL,
                           "the shm backend cannot find its peers: set MASTER_ADDR/MASTER_PORT or "
                           "a run id (TORCHELASTIC_RUN_ID), or start the job with `ddpc run`");
    ddpc__shm_state *s = ddpc_calloc(1, sizeof *s);
    if (!s)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for the shm backend");
    s->rank = env->rank;
    s->world = env->world_size;
    s->timeout_s = deadline - ddpc_time_now();
    s->pids = ddpc_calloc((size_t)s->world, sizeof *s->pids);
    s->starts = ddpc_calloc((size_t)s->world, sizeof *s->starts);
    s->srcs = ddpc_calloc((size_t)s->world, sizeof *s->srcs);
    ddpc_status st = DDPC_OK;
    if (!s->pids || !s->starts || !s->srcs)
        st = ddpc_errorf(DDPC_ENOMEM, "out of memory for the shm backend");
    else if (env->run_id[0] == '\0')
        st = ddpc__shm_rdzv_tcp(s, env, deadline);
    else
        st = ddpc__shm_rdzv_named(s, env, deadline);
    if (st != DDPC_OK) {
        shm_destroy(s);
        return st;
    }
    finish(s);
    *ops = &shm_ops;
    *state = s;
    return DDPC_OK;
}
