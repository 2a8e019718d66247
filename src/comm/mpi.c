// SPDX-License-Identifier: MIT
/* The mpi backend (Open MPI or MPICH): joins MPI_COMM_WORLD as a ddpc group, polls non-blocking
 * MPI against each collective's deadline, and on a timeout names the ranks that never arrived or
 * stopped mid-transfer from what they published in shared memory (mpi_progress.c). ddpc initialises
 * MPI (MPI_THREAD_SERIALIZED: collectives come from one thread at a time, sometimes the comm
 * thread) unless the program did, and then finalises it at exit, never earlier: MPI cannot be
 * initialised twice in a process, so groups may come and go. Compiled always; without DDPC_HAVE_MPI
 * creating a group says how to get the backend. */
#include "comm/pg_impl.h"

#ifndef DDPC_HAVE_MPI

ddpc_status ddpc__mpi_create(const ddpc_comm_env *env, double deadline,
                             const ddpc__pg_backend **ops, void **state)
{
    (void)env;
    (void)deadline;
    *ops = NULL;
    *state = NULL;
    return ddpc_errorf(DDPC_EUNSUPPORTED, "ddpc was built without MPI; rebuild with an MPI library "
                                          "(libopenmpi-dev) or use backend shm");
}

#else

#include "comm/mpi_state.h"

#include <ddpc/alloc.h>
#include <ddpc/timer.h>

#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

/* Set once any mpi group failed. Process-wide because MPI is: the exit handler then leaves MPI
 * unfinalized, since MPI_Finalize waits for every rank (a stopped peer would hang the exit) and
 * mpirun tears the job down when a rank exits without it. The library's only mutable global. */
static atomic_bool any_group_failed;

static void finalize_at_exit(void)
{
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (init && !fin && !atomic_load(&any_group_failed))
        MPI_Finalize();
}

static const char *thread_level(int level)
{
    return level == MPI_THREAD_SINGLE       ? "MPI_THREAD_SINGLE"
           : level == MPI_THREAD_FUNNELED   ? "MPI_THREAD_FUNNELED"
           : level == MPI_THREAD_SERIALIZED ? "MPI_THREAD_SERIALIZED"
                                            : "MPI_THREAD_MULTIPLE";
}

/* Initialises MPI unless the program already did, and registers the exit-time MPI_Finalize. */
static ddpc_status ensure_init(void)
{
    int init = 0, fin = 0, provided = MPI_THREAD_SINGLE;
    MPI_Finalized(&fin);
    if (fin)
        return ddpc_errorf(DDPC_EUNSUPPORTED,
                           "mpi backend: MPI was already finalized in this process and cannot be "
                           "initialised again; create mpi groups before calling MPI_Finalize");
    MPI_Initialized(&init);
    if (!init) {
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
            return ddpc_errorf(DDPC_EIO, "mpi backend: MPI_Init_thread failed");
        if (atexit(finalize_at_exit) != 0)
            return ddpc_errorf(DDPC_EINTERNAL, "mpi backend: cannot register MPI_Finalize at exit");
    } else {
        MPI_Query_thread(&provided);
    }
    if (provided < MPI_THREAD_SERIALIZED)
        return ddpc_errorf(DDPC_EUNSUPPORTED,
                           "mpi backend: MPI runs at thread level %s, but ddpc's comm thread needs "
                           "MPI_THREAD_SERIALIZED; initialise MPI with MPI_Init_thread or use "
                           "backend shm",
                           thread_level(provided));
    return DDPC_OK;
}

static ddpc_status check_place(const ddpc_comm_env *env)
{
    int rank = -1, size = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank != env->rank || size != env->world_size)
        return ddpc_errorf(DDPC_EINVAL,
                           "mpi backend: MPI says this process is rank %d of %d, but the "
                           "environment (%s variables) says rank %d of %d; start every rank with "
                           "mpirun or srun, or use backend shm",
                           rank, size, ddpc_comm_source_name(env->source), env->rank,
                           env->world_size);
    return DDPC_OK;
}

/* Keeps a waiting rank polite on oversubscribed cores without slowing MPI's progress, which
 * happens inside MPI_Test: spin briefly, then yield, and only sleep once a wait is clearly long. */
static void backoff(unsigned *spins, double waited)
{
    if (++*spins < 64)
        return;
    if (waited < 1.0) {
        sched_yield();
        return;
    }
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
}

/* Joins with MPI_Comm_idup (bounded by the deadline, unlike a blocking MPI_Comm_dup). `start` is
 * when ddpc__mpi_create began, before MPI_Init (which the deadline cannot bound). */
static ddpc_status join(ddpc__mpi_state *st, double start, double deadline)
{
    MPI_Request req;
    if (MPI_Comm_idup(MPI_COMM_WORLD, &st->comm, &req) != MPI_SUCCESS)
        return ddpc_errorf(DDPC_EIO, "mpi backend: MPI_Comm_idup failed");
    unsigned spins = 0;
    for (int done = 0; !done;) {
        if (MPI_Test(&req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
            st->failed = true;
            return ddpc_errorf(DDPC_EPEER, "mpi backend: joining the group failed in MPI_Test");
        }
        double now = ddpc_time_now();
        if (!done && now > deadline) {
            st->failed = true; /* the request may still complete into st->comm */
            return ddpc_errorf(DDPC_ETIMEOUT,
                               "mpi backend: joining the group timed out after %.3g s: not every "
                               "rank called ddpc_pg_create (the mpi backend cannot tell which)",
                               deadline - start);
        }
        if (!done)
            backoff(&spins, now - start);
    }
    MPI_Comm_set_errhandler(st->comm, MPI_ERRORS_RETURN);
    return DDPC_OK;
}

static void mark_failed(ddpc__mpi_state *st)
{
    st->failed = true;
    atomic_store(&any_group_failed, true);
}

ddpc_status ddpc__mpi_fail(ddpc__mpi_state *st, const ddpc__coll *coll, const char *call, int err)
{
    char why[MPI_MAX_ERROR_STRING] = "unknown MPI error";
    int len = 0;
    MPI_Error_string(err, why, &len);
    mark_failed(st);
    return ddpc_errorf(DDPC_EPEER, "%s #%llu failed in %s: %s", ddpc__coll_name(coll->kind),
                       (unsigned long long)coll->seq, call, why);
}

ddpc_status ddpc__mpi_wait(ddpc__mpi_state *st, MPI_Request *req, const ddpc__coll *coll,
                           double start)
{
    unsigned spins = 0;
    for (;;) {
        int done = 0, err = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (err != MPI_SUCCESS)
            return ddpc__mpi_fail(st, coll, "MPI_Test", err);
        if (done)
            return DDPC_OK;
        ddpc__mpi_beat(st);
        double now = ddpc_time_now();
        if (now > coll->deadline) {
            /* Left, as far as the peers diagnosing at the same time are concerned: this rank is
             * responsive, not the one that stalled. */
            ddpc__mpi_leave(st, coll->seq);
            char who[512];
            ddpc__mpi_diagnose(st, coll->seq, who, sizeof who);
            mark_failed(st);
            return ddpc_errorf(DDPC_ETIMEOUT, "%s #%llu timed out after %.3g s: %s",
                               ddpc__coll_name(coll->kind), (unsigned long long)coll->seq,
                               st->timeout_s, who);
        }
        backoff(&spins, now - start);
    }
}

void *ddpc__mpi_scratch(ddpc__mpi_state *st, size_t bytes)
{
    if (bytes <= st->scratch_cap)
        return st->scratch;
    void *p = ddpc_malloc(bytes);
    if (!p) {
        ddpc_errorf(DDPC_ENOMEM, "mpi backend: out of memory for %zu bytes of scratch", bytes);
        return NULL;
    }
    ddpc_free(st->scratch); /* no request is outstanding: every run waits for its requests */
    st->scratch = p;
    st->scratch_cap = bytes;
    return p;
}

/* Frees a healthy group. A failed one is left as it is: MPI may still write into its scratch,
 * progress values and request arrays, and its communicator may be half-built. */
static void mpi_destroy(void *state)
{
    ddpc__mpi_state *st = state;
    if (!st || st->failed)
        return;
    ddpc__mpi_close_window(st);
    if (st->comm != MPI_COMM_NULL)
        MPI_Comm_free(&st->comm);
    ddpc_free(st->scratch);
    ddpc_free(st->counts);
    ddpc_free(st->xsend);
    ddpc_free(st->xrecv);
    ddpc_free(st->seen);
    ddpc_free(st->peer);
    ddpc_free(st->srcs);
    ddpc_free(st);
}

static const ddpc__pg_backend mpi_ops = {"mpi", ddpc__mpi_run, mpi_destroy, NULL, NULL};

/* Bytes per rank of the descriptor exchange: the descriptor and up to 224 bytes of data in small
 * groups (on one host Open MPI's allgather of 256 bytes per rank costs what one of 4 bytes does,
 * 0.75 us, and one of 320 bytes or more 1.1-1.2 us), shrinking so that a large group exchanges
 * about 1 KiB per collective, but always a multiple of 64 that holds the descriptor and 32 bytes.
 * The same on every rank: it depends only on the world size. */
static size_t exchange_block(int world)
{
    size_t b = 1024 / (size_t)world / 64 * 64;
    return b > 256 ? 256 : b < 64 ? 64 : b;
}

static ddpc_status alloc_state(int world, ddpc__mpi_state **out)
{
    ddpc__mpi_state *st = ddpc_calloc(1, sizeof *st);
    if (!st)
        return ddpc_errorf(DDPC_ENOMEM, "mpi backend: out of memory for the group state");
    st->comm = st->node = MPI_COMM_NULL;
    size_t w = (size_t)world;
    st->xblock = exchange_block(world);
    st->counts = ddpc_calloc(5 * w, sizeof(int));
    st->seen = ddpc_calloc(4 * w, sizeof(uint64_t));
    st->peer = ddpc_calloc(w, sizeof(uint64_t *));
    st->srcs = ddpc_calloc(w, sizeof(void *));
    /* zeroed: the unused tail of a block is sent as it is */
    st->xsend = ddpc_calloc(1, st->xblock);
    st->xrecv = ddpc_calloc(w, st->xblock);
    if (!st->counts || !st->seen || !st->peer || !st->srcs || !st->xsend || !st->xrecv) {
        mpi_destroy(st);
        return ddpc_errorf(DDPC_ENOMEM, "mpi backend: out of memory for a group of %d", world);
    }
    st->displs = st->counts + w;
    st->rcounts = st->counts + 2 * w;
    st->rdispls = st->counts + 3 * w;
    st->cls = st->counts + 4 * w;
    *out = st;
    return DDPC_OK;
}

ddpc_status ddpc__mpi_create(const ddpc_comm_env *env, double deadline,
                             const ddpc__pg_backend **ops, void **state)
{
    *ops = NULL;
    *state = NULL;
    double start = ddpc_time_now();
    DDPC_TRY(ensure_init());
    DDPC_TRY(check_place(env));
    ddpc__mpi_state *st = NULL;
    DDPC_TRY(alloc_state(env->world_size, &st));
    st->rank = env->rank;
    st->world = env->world_size;
    st->timeout_s = deadline - start; /* pg_create set deadline = now + timeout just before */
    ddpc_status s = join(st, start, deadline);
    if (s != DDPC_OK) {
        if (st->failed)
            mark_failed(st); /* st leaks: the idup may still complete into it */
        else
            mpi_destroy(st);
        return s;
    }
    ddpc__mpi_open_window(st);
    *ops = &mpi_ops;
    *state = st;
    return DDPC_OK;
}

#endif
