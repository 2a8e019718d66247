/* The mpi backend (Open MPI or MPICH): joins MPI_COMM_WORLD as a ddpc group, polls non-blocking
 * MPI against each collective's deadline, and on a timeout names the ranks that never arrived by
 * reading their published sequence numbers from an RMA window. ddpc initialises MPI
 * (MPI_THREAD_SERIALIZED: collectives come from one thread at a time, sometimes the comm thread)
 * unless the program did, and then finalises it at exit, never earlier: MPI cannot be initialised
 * twice in a process, so groups may come and go. Compiled always; without DDPC_HAVE_MPI creating
 * a group says how to get the backend. */
#include "comm/pg_impl.h"

#ifndef DDPC_HAVE_MPI

ddpc_status ddpc__mpi_create(const ddpc_dist_env *env, double deadline,
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static ddpc_status check_place(const ddpc_dist_env *env)
{
    int rank = -1, size = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank != env->rank || size != env->world_size)
        return ddpc_errorf(DDPC_EINVAL,
                           "mpi backend: MPI says this process is rank %d of %d, but the "
                           "environment (%s variables) says rank %d of %d; start every rank with "
                           "mpirun or srun, or use backend shm",
                           rank, size, ddpc_dist_source_name(env->source), env->rank,
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

static bool publish(ddpc__mpi_state *st, uint64_t value)
{
    return MPI_Accumulate(&value, 1, MPI_UINT64_T, st->rank, 0, 1, MPI_UINT64_T, MPI_REPLACE,
                          st->win) == MPI_SUCCESS &&
           MPI_Win_flush(st->rank, st->win) == MPI_SUCCESS;
}

void ddpc__mpi_enter(ddpc__mpi_state *st, uint64_t seq)
{
    if (st->win_ok && !publish(st, seq + 1))
        st->win_ok = false; /* only the timeout report loses its detail */
}

/* The progress window; without one (no RMA component) timeouts say the ranks are unknown. */
static void open_window(ddpc__mpi_state *st)
{
    uint64_t *base = NULL;
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "same_disp_unit", "true");
    MPI_Info_set(info, "accumulate_ops", "same_op_no_op");
    int err = MPI_Win_allocate(sizeof(uint64_t), sizeof(uint64_t), info, st->comm, &base, &st->win);
    MPI_Info_free(&info);
    if (err != MPI_SUCCESS)
        return;
    MPI_Win_set_errhandler(st->win, MPI_ERRORS_RETURN);
    st->win_ok = MPI_Win_lock_all(MPI_MODE_NOCHECK, st->win) == MPI_SUCCESS && publish(st, 0);
}

static void append(char *buf, size_t cap, const char *fmt, int v)
{
    size_t n = strlen(buf);
    if (n + 1 < cap)
        snprintf(buf + n, cap - n, fmt, v);
}

enum { ARRIVED, MISSING, UNKNOWN };

/* What a timed-out rank learnt about rank r at collective `seq` (after name_missing's reads). */
static int classify(const ddpc__mpi_state *st, int r, uint64_t seq)
{
    if (st->reqs[r] != MPI_REQUEST_NULL || st->seen[r] == UINT64_MAX)
        return UNKNOWN;
    return st->seen[r] < seq + 1 ? MISSING : ARRIVED;
}

/* Appends "ranks 2, 3" (or "rank 2") for the ranks of class `kind`, at most 32 of them. */
static void list_ranks(const ddpc__mpi_state *st, uint64_t seq, int kind, int count, char *buf,
                       size_t cap)
{
    append(buf, cap, count == 1 ? "rank" : "ranks", 0);
    for (int r = 0, shown = 0; r < st->world; r++) {
        if (classify(st, r, seq) != kind)
            continue;
        if (shown == 32) {
            append(buf, cap, " and %d more", count - shown);
            break;
        }
        append(buf, cap, shown ? ", %d" : " %d", r);
        shown++;
    }
}

/* Reads every peer's progress (for at most 2 s: a peer's memory may only be readable with its
 * help, which a stopped peer cannot give) and says who never entered collective `seq`. */
static void name_missing(ddpc__mpi_state *st, uint64_t seq, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (!st->win_ok) {
        snprintf(buf, cap, "the ranks that never arrived are unknown (no progress window)");
        return;
    }
    for (int r = 0; r < st->world; r++) {
        st->seen[r] = UINT64_MAX;
        st->reqs[r] = MPI_REQUEST_NULL;
        if (r != st->rank &&
            MPI_Rget_accumulate(NULL, 0, MPI_UINT64_T, &st->seen[r], 1, MPI_UINT64_T, r, 0, 1,
                                MPI_UINT64_T, MPI_NO_OP, st->win, &st->reqs[r]) != MPI_SUCCESS)
            st->reqs[r] = MPI_REQUEST_NULL;
    }
    st->seen[st->rank] = seq + 1;
    double until = ddpc_time_now() + 2.0;
    for (int pending = 1; pending && ddpc_time_now() < until;) {
        pending = 0;
        for (int r = 0; r < st->world; r++) {
            int done = 1;
            if (st->reqs[r] != MPI_REQUEST_NULL &&
                MPI_Test(&st->reqs[r], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
                st->reqs[r] = MPI_REQUEST_NULL; /* unanswerable: stays UINT64_MAX, unknown */
                st->seen[r] = UINT64_MAX;
            }
            pending |= !done;
        }
        if (pending)
            sched_yield();
    }
    int n[3] = {0, 0, 0};
    for (int r = 0; r < st->world; r++)
        n[classify(st, r, seq)]++;
    if (n[MISSING]) {
        list_ranks(st, seq, MISSING, n[MISSING], buf, cap);
        append(buf, cap, " never arrived", 0);
    }
    if (n[UNKNOWN]) {
        append(buf, cap, n[MISSING] ? "; " : "", 0);
        list_ranks(st, seq, UNKNOWN, n[UNKNOWN], buf, cap);
        append(buf, cap, " did not answer, so whether they arrived is unknown", 0);
    }
    if (!n[MISSING] && !n[UNKNOWN])
        snprintf(buf, cap,
                 "every rank arrived, but the collective did not complete (a rank "
                 "stalled or died during the transfer)");
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
        double now = ddpc_time_now();
        if (now > coll->deadline) {
            char who[512];
            name_missing(st, coll->seq, who, sizeof who);
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
    /* The window stays for MPI_Finalize to free: MPI_Win_free waits for every rank, and destroy
     * must not wait on peers. */
    if (st->win_ok)
        MPI_Win_unlock_all(st->win);
    if (st->comm != MPI_COMM_NULL)
        MPI_Comm_free(&st->comm);
    ddpc_free(st->scratch);
    ddpc_free(st->counts);
    ddpc_free(st->seen);
    ddpc_free(st->reqs);
    ddpc_free(st->srcs);
    ddpc_free(st);
}

static const ddpc__pg_backend mpi_ops = {"mpi", ddpc__mpi_run, mpi_destroy};

static ddpc_status alloc_state(int world, ddpc__mpi_state **out)
{
    ddpc__mpi_state *st = ddpc_calloc(1, sizeof *st);
    if (!st)
        return ddpc_errorf(DDPC_ENOMEM, "mpi backend: out of memory for the group state");
    st->comm = MPI_COMM_NULL;
    size_t w = (size_t)world;
    st->counts = ddpc_calloc(4 * w, sizeof(int));
    st->seen = ddpc_calloc(w, sizeof(uint64_t));
    st->reqs = ddpc_calloc(w, sizeof(MPI_Request));
    st->srcs = ddpc_calloc(w, sizeof(void *));
    if (!st->counts || !st->seen || !st->reqs || !st->srcs) {
        mpi_destroy(st);
        return ddpc_errorf(DDPC_ENOMEM, "mpi backend: out of memory for a group of %d", world);
    }
    st->displs = st->counts + w;
    st->rcounts = st->counts + 2 * w;
    st->rdispls = st->counts + 3 * w;
    *out = st;
    return DDPC_OK;
}

ddpc_status ddpc__mpi_create(const ddpc_dist_env *env, double deadline,
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
    open_window(st);
    *ops = &mpi_ops;
    *state = st;
    return DDPC_OK;
}

#endif
