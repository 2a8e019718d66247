// SPDX-License-Identifier: MIT
/* The mpi backend's collectives, each opened by the descriptor exchange (mpi_check.c), which
 * completes barriers and small collectives itself. MPI only moves bytes; every reduction runs
 * locally through ddpc__reduce_many in rank order, so results are bitwise identical on every rank,
 * run to run, and to the shm backend's (bf16/f16 accumulate in f32 and round once, AVG is SUM / n),
 * which MPI_Allreduce could not promise. Large all_reduce is a reduce-scatter (MPI_Ialltoallv, then
 * each rank reduces its chunk) followed by MPI_Iallgatherv: the bandwidth of a ring. Every request
 * is polled against the deadline by ddpc__mpi_wait. Counts travel as int: at most INT_MAX elements.
 */
#include "comm/pg_impl.h"

#ifdef DDPC_HAVE_MPI

#include "comm/mpi_state.h"

#include <ddpc/timer.h>

#include <limits.h>

/* Below this many bytes gathered per rank (count x size x world) an all_reduce gathers every
 * input and reduces locally: one collective instead of two. */
enum { SMALL_GATHER_BYTES = 64 << 10 };

static MPI_Datatype mpi_type(ddpc_dtype dt)
{
    switch (dt) {
    case DDPC_DTYPE_F32:
        return MPI_FLOAT;
    case DDPC_DTYPE_F64:
        return MPI_DOUBLE;
    case DDPC_DTYPE_I32:
        return MPI_INT32_T;
    case DDPC_DTYPE_I64:
        return MPI_INT64_T;
    default: /* bf16, f16: only moved, never reduced by MPI */
        return MPI_UINT16_T;
    }
}

/* Rank c's chunk of n elements split over w ranks: the first n % w chunks are one longer. */
static void chunk(size_t n, int w, int c, size_t *off, size_t *len)
{
    size_t base = n / (size_t)w, rem = n % (size_t)w, cc = (size_t)c;
    *off = cc * base + (cc < rem ? cc : rem);
    *len = base + (cc < rem);
}

/* dst = reduce over ranks of the `n`-element blocks laid out rank after rank in tmp, a piece at
 * a time with a heartbeat between pieces: a rank reducing a large chunk is not a stalled one. The
 * reduction is elementwise, so the pieces do not change a bit of the result. */
static void reduce_blocks(ddpc__mpi_state *st, const ddpc__coll *c, void *dst, const char *tmp,
                          size_t n)
{
    size_t es = ddpc_dtype_size(c->dtype), bytes = n * es, piece = (1u << 20) / es;
    for (size_t off = 0; off < n; off += piece) {
        size_t m = n - off < piece ? n - off : piece;
        for (int k = 0; k < st->world; k++)
            st->srcs[k] = tmp + (size_t)k * bytes + off * es;
        ddpc__reduce_many((char *)dst + off * es, st->srcs, st->world, m, c->dtype, c->op);
        ddpc__mpi_beat(st);
    }
}

/* MPI_Iallgather and MPI_Ialltoall share this signature. */
typedef int mpi_exchange_fn(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm,
                            MPI_Request *);

/* Exchanges world blocks of count elements with `fn` into scratch, then reduces them in rank
 * order into recv: all_reduce's small-message path (allgather) and reduce_scatter (alltoall). */
static ddpc_status exchange_and_reduce(ddpc__mpi_state *st, const ddpc__coll *c, double start,
                                       mpi_exchange_fn *fn, const char *fn_name)
{
    size_t n = c->count, es = ddpc_dtype_size(c->dtype);
    char *tmp = ddpc__mpi_scratch(st, n * es * (size_t)st->world);
    if (!tmp)
        return DDPC_ENOMEM;
    MPI_Datatype t = mpi_type(c->dtype);
    MPI_Request req;
    int err = fn(c->send, (int)n, t, tmp, (int)n, t, st->comm, &req);
    if (err)
        return ddpc__mpi_fail(st, c, fn_name, err);
    DDPC_TRY(ddpc__mpi_wait(st, &req, c, start));
    reduce_blocks(st, c, c->recv, tmp, n);
    return DDPC_OK;
}

/* Large messages: chunk r of every rank's input goes to rank r (alltoallv), rank r reduces it,
 * and the reduced chunks are gathered back into every rank's recv (allgatherv, in place). */
static ddpc_status all_reduce_scatter_gather(ddpc__mpi_state *st, const ddpc__coll *c, double start)
{
    size_t n = c->count, es = ddpc_dtype_size(c->dtype), off, len;
    for (int k = 0; k < st->world; k++) {
        chunk(n, st->world, k, &off, &len);
        st->counts[k] = (int)len;
        st->displs[k] = (int)off;
    }
    chunk(n, st->world, st->rank, &off, &len);
    for (int k = 0; k < st->world; k++) {
        st->rcounts[k] = (int)len;
        st->rdispls[k] = (int)(len * (size_t)k);
    }
    char *tmp = ddpc__mpi_scratch(st, len * es * (size_t)st->world);
    if (!tmp)
        return DDPC_ENOMEM;
    MPI_Datatype t = mpi_type(c->dtype);
    MPI_Request req;
    int err = MPI_Ialltoallv(c->send, st->counts, st->displs, t, tmp, st->rcounts, st->rdispls, t,
                             st->comm, &req);
    if (err)
        return ddpc__mpi_fail(st, c, "MPI_Ialltoallv", err);
    DDPC_TRY(ddpc__mpi_wait(st, &req, c, start));
    reduce_blocks(st, c, (char *)c->recv + off * es, tmp, len);
    err = MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, c->recv, st->counts, st->displs, t,
                          st->comm, &req);
    if (err)
        return ddpc__mpi_fail(st, c, "MPI_Iallgatherv", err);
    return ddpc__mpi_wait(st, &req, c, start);
}

static ddpc_status all_reduce(ddpc__mpi_state *st, const ddpc__coll *c, double start)
{
    size_t gathered = c->count * ddpc_dtype_size(c->dtype) * (size_t)st->world;
    /* Small messages: every rank gathers every input and reduces all of them. */
    if (gathered <= SMALL_GATHER_BYTES || c->count < (size_t)st->world)
        return exchange_and_reduce(st, c, start, MPI_Iallgather, "MPI_Iallgather");
    return all_reduce_scatter_gather(st, c, start);
}

/* Block r of every rank's send goes to rank r, which reduces the world blocks into recv. */
static ddpc_status reduce_scatter(ddpc__mpi_state *st, const ddpc__coll *c, double start)
{
    return exchange_and_reduce(st, c, start, MPI_Ialltoall, "MPI_Ialltoall");
}

static ddpc_status all_gather(ddpc__mpi_state *st, const ddpc__coll *c, double start)
{
    size_t bytes = c->count * ddpc_dtype_size(c->dtype);
    bool in_place = c->send == (const char *)c->recv + (size_t)st->rank * bytes;
    MPI_Datatype t = mpi_type(c->dtype);
    MPI_Request req;
    int err = MPI_Iallgather(in_place ? MPI_IN_PLACE : c->send, (int)c->count, t, c->recv,
                             (int)c->count, t, st->comm, &req);
    if (err)
        return ddpc__mpi_fail(st, c, "MPI_Iallgather", err);
    return ddpc__mpi_wait(st, &req, c, start);
}

static ddpc_status broadcast(ddpc__mpi_state *st, const ddpc__coll *c, double start)
{
    MPI_Request req;
    int err = MPI_Ibcast(c->recv, (int)c->count, mpi_type(c->dtype), c->root, st->comm, &req);
    if (err)
        return ddpc__mpi_fail(st, c, "MPI_Ibcast", err);
    return ddpc__mpi_wait(st, &req, c, start);
}

static ddpc_status run_data(ddpc__mpi_state *st, const ddpc__coll *c, double start)
{
    switch (c->kind) {
    case DDPC__COLL_ALL_REDUCE:
        return all_reduce(st, c, start);
    case DDPC__COLL_REDUCE_SCATTER:
        return reduce_scatter(st, c, start);
    case DDPC__COLL_ALL_GATHER:
        return all_gather(st, c, start);
    case DDPC__COLL_BROADCAST:
        return broadcast(st, c, start);
    default:
        return ddpc_errorf(DDPC_EINTERNAL, "mpi backend: unknown collective kind %d", (int)c->kind);
    }
}

ddpc_status ddpc__mpi_run(void *state, const ddpc__coll *c)
{
    ddpc__mpi_state *st = state;
    if (st->failed)
        return ddpc_errorf(DDPC_EPEER, "%s #%llu: the mpi group failed earlier",
                           ddpc__coll_name(c->kind), (unsigned long long)c->seq);
    double start = ddpc_time_now();
    bool done = false;
    ddpc__mpi_enter(st, c->seq);
    ddpc_status s = ddpc__mpi_check(st, c, start, &done);
    /* After the check, so that every rank agrees that the call is refused. */
    if (s == DDPC_OK && !done && c->count > (size_t)INT_MAX)
        s = ddpc_errorf(DDPC_EINVAL,
                        "%s #%llu: %zu elements is more than the mpi backend's limit of %d per "
                        "call",
                        ddpc__coll_name(c->kind), (unsigned long long)c->seq, c->count, INT_MAX);
    if (s == DDPC_OK && !done)
        s = run_data(st, c, start);
    ddpc__mpi_leave(st, c->seq);
    return s;
}

#endif
