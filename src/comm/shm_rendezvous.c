// SPDX-License-Identifier: MIT
/* The shm backend's constructor and destructor: checks that every rank is on this host, finds the
 * peers, waits until all joined, and fills the per-process state. With a run id (torchrun and
 * `ddpc run` always give one) the segment is named from it (shm_named.c): torchrun's agent already
 * listens on MASTER_PORT, so the port only tells jobs apart; with MASTER_PORT alone, rank 0 listens
 * there (shm_tcp.c). Invariant: once every rank has attached, rank 0 unlinks the segment's name,
 * so nothing is left in /dev/shm whatever happens to the processes later. */
#include "comm/shm_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/timer.h>

#include <stdio.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

enum {
    MAX_WORLD = 1024,
    CMA_CHUNK = 64 * 1024, /* per peer, reduced while still in L1/L2 */
    SMALL_MAX = 32 * 1024, /* measured crossover: above, the pipeline's split work wins */
};

/* "2, 5" for ranks whose slot is still unclaimed; returns how many. */
static int unclaimed(const ddpc__shm_state *s, char *out, size_t cap)
{
    size_t len = 0;
    int n = 0;
    out[0] = '\0';
    for (int k = 0; k < s->world; k++) {
        if (atomic_load_explicit(&s->ranks[k].pid, memory_order_acquire) != 0)
            continue;
        if (len + 16 < cap)
            len += (size_t)snprintf(out + len, cap - len, "%s%d", n ? ", " : "", k);
        n++;
    }
    return n;
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
        /* an abort being written (1, not yet 2) is the cause even if rank 0 already exited */
        if (s->rank != 0 && atomic_load_explicit(&h->aborted, memory_order_acquire) == 0 &&
            !ddpc__pid_alive(h->owner_pid, h->owner_start))
            return ddpc_errorf(DDPC_EPEER, "rank 0 (pid %d) exited during the shm rendezvous %s",
                               (int)h->owner_pid, where);
        if (ddpc_time_now() > deadline) {
            char list[256];
            int n = unclaimed(s, list, sizeof list);
            if (n == 0)
                return ddpc_errorf(DDPC_ETIMEOUT,
                                   "shm rendezvous %s timed out after %.3g s: rank "
                                   "0 did not confirm the join",
                                   where, s->timeout_s);
            return ddpc_errorf(DDPC_ETIMEOUT,
                               "shm rendezvous %s timed out after %.3g s: rank%s %s never joined",
                               where, s->timeout_s, n == 1 ? "" : "s", list);
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
    ddpc_free(s->watch);
    ddpc_free(s->tmp);
    ddpc_free(s);
}

static const ddpc__pg_backend shm_ops = {"shm", ddpc__shm_run, shm_destroy, ddpc__shm_set_phase,
                                         NULL};

/* After the join: peers' identities for liveness checks, how long to spin, whether CMA works. */
static ddpc_status finish(ddpc__shm_state *s, double deadline)
{
    for (int k = 0; k < s->world; k++) {
        s->pids[k] = atomic_load_explicit(&s->ranks[k].pid, memory_order_acquire);
        s->starts[k] = s->ranks[k].start_time;
        /* a peer in another pid namespace cannot be watched; the timeout still holds */
        s->watch[k] = k != s->rank && s->ranks[k].pid_ns == s->ranks[s->rank].pid_ns;
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    /* ~3 us of pause (25 ns each here) covers a peer that is running and nearly there; beyond
     * that it is busy or off-CPU and yielding (~0.6 us a call) costs less than spinning. Ranks
     * that outnumber the cores yield almost at once so the peer they wait for can run. */
    s->spin = cpus >= s->world ? 128 : 16;
    s->small_max = SMALL_MAX;
    s->cma_chunk = CMA_CHUNK;
    /* Measured on the 2-core reference VM, the cache-resident two-copy pipeline beat CMA at every
     * size, collective and world size (pinning remote pages costs ~0.5 us each there), so CMA is
     * off unless a caller lowers cma_min; the probe still runs so it can be turned on. */
    s->cma_min = SIZE_MAX;
    s->tmp = ddpc_malloc((size_t)s->world * s->cma_chunk);
    if (!s->tmp)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for the shm backend");
    return ddpc__shm_cma_probe(s, deadline);
}

ddpc_status ddpc__shm_create(const ddpc_comm_env *env, double deadline,
                             const ddpc__pg_backend **ops, void **state)
{
    *ops = NULL;
    *state = NULL;
    if (env->local_world_size != env->world_size || env->num_nodes > 1)
        return ddpc_errorf(DDPC_EINVAL,
                           "the shm backend needs every rank on one host, but this job has %d of "
                           "%d ranks here (use backend gloo or mpi across hosts)",
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
    s->cma_word = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull ^ (uint64_t)(ddpc_time_now() * 1e9);
    s->pids = ddpc_calloc((size_t)s->world, sizeof *s->pids);
    s->starts = ddpc_calloc((size_t)s->world, sizeof *s->starts);
    s->srcs = ddpc_calloc((size_t)s->world, sizeof *s->srcs);
    s->watch = ddpc_calloc((size_t)s->world, sizeof *s->watch);
    ddpc_status st = DDPC_OK;
    if (!s->pids || !s->starts || !s->srcs || !s->watch)
        st = ddpc_errorf(DDPC_ENOMEM, "out of memory for the shm backend");
    else if (env->run_id[0] == '\0')
        st = ddpc__shm_rdzv_tcp(s, env, deadline);
    else
        st = ddpc__shm_rdzv_named(s, env, deadline);
    if (st == DDPC_OK)
        st = finish(s, deadline);
    if (st != DDPC_OK) {
        shm_destroy(s);
        return st;
    }
    *ops = &shm_ops;
    *state = s;
    return DDPC_OK;
}
