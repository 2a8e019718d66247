// SPDX-License-Identifier: MIT
/* The descriptor exchange that opens every mpi collective: one MPI_Iallgather of a fixed-size
 * block per rank, the same size on every rank whatever it called, so it always matches and MPI
 * never sees two ranks' differing sizes (which it reports as MPI_ERR_TRUNCATE or worse). Each block
 * is this rank's ddpc__coll_desc, then the collective's data when all of it fits: such small
 * collectives (and barriers) complete right here in one exchange, at the latency of one tiny
 * allgather; larger ones pay that latency once before their data moves. Every rank sees every
 * descriptor, so every rank reports a mismatch, in the shm backend's words (coll_desc.c). */
#include "comm/pg_impl.h"

#ifdef DDPC_HAVE_MPI

#include "comm/coll_desc.h"
#include "comm/mpi_state.h"

#include <string.h>

enum { DESC = sizeof(ddpc__coll_desc) };

/* Bytes of data c puts in its block when every rank's whole collective fits (count 0 and
 * barriers: none), else SIZE_MAX. Depends only on the descriptor and the world, so ranks that
 * agree on the descriptor agree on this. */
static size_t inline_bytes(const ddpc__mpi_state *st, const ddpc__coll *c)
{
    size_t cap = st->xblock - DESC, es = ddpc_dtype_size(c->dtype);
    if (c->kind == DDPC__COLL_BARRIER || c->count == 0)
        return 0;
    if (c->count > cap / es)
        return SIZE_MAX;
    size_t bytes = c->count * es;
    if (c->kind == DDPC__COLL_REDUCE_SCATTER) /* each rank sends its whole (world, count) input */
        return bytes <= cap / (size_t)st->world ? bytes * (size_t)st->world : SIZE_MAX;
    return bytes;
}

static const unsigned char *block(const ddpc__mpi_state *st, int rank)
{
    return st->xrecv + (size_t)rank * st->xblock;
}

/* The data of c this rank contributes inline. */
static const void *inline_source(const ddpc__mpi_state *st, const ddpc__coll *c)
{
    if (c->kind == DDPC__COLL_BROADCAST)
        return st->rank == c->root ? c->recv : NULL;
    return c->send;
}

/* Completes c from the exchanged blocks, reducing in rank order as every path does. */
static void finish_inline(ddpc__mpi_state *st, const ddpc__coll *c, size_t bytes)
{
    unsigned char *recv = c->recv;
    size_t each = c->count * ddpc_dtype_size(c->dtype);
    if (bytes == 0)
        return;
    switch (c->kind) {
    case DDPC__COLL_ALL_REDUCE:
    case DDPC__COLL_REDUCE_SCATTER: {
        size_t off = c->kind == DDPC__COLL_REDUCE_SCATTER ? (size_t)st->rank * each : 0;
        for (int k = 0; k < st->world; k++)
            st->srcs[k] = block(st, k) + DESC + off;
        ddpc__reduce_many(recv, st->srcs, st->world, c->count, c->dtype, c->op);
        break;
    }
    case DDPC__COLL_BROADCAST:
        if (st->rank != c->root)
            memcpy(recv, block(st, c->root) + DESC, each);
        break;
    case DDPC__COLL_ALL_GATHER:
        for (int k = 0; k < st->world; k++)
            memcpy(recv + (size_t)k * each, block(st, k) + DESC, each);
        break;
    default:
        break;
    }
}

ddpc_status ddpc__mpi_check(ddpc__mpi_state *st, const ddpc__coll *c, double start, bool *done)
{
    ddpc__coll_desc mine = ddpc__coll_describe(c);
    size_t bytes = inline_bytes(st, c);
    const void *src = inline_source(st, c);
    *done = false;
    memcpy(st->xsend, &mine, DESC);
    if (bytes != SIZE_MAX && bytes && src)
        memcpy(st->xsend + DESC, src, bytes);
    MPI_Request req;
    int err = MPI_Iallgather(st->xsend, (int)st->xblock, MPI_BYTE, st->xrecv, (int)st->xblock,
                             MPI_BYTE, st->comm, &req);
    if (err)
        return ddpc__mpi_fail(st, c, "MPI_Iallgather", err);
    DDPC_TRY(ddpc__mpi_wait(st, &req, c, start));
    for (int k = 0; k < st->world; k++) {
        ddpc__coll_desc theirs;
        memcpy(&theirs, block(st, k), DESC);
        if (memcmp(&theirs, &mine, DESC) != 0)
            return ddpc__coll_mismatch(st->rank, &mine, k, &theirs);
    }
    if (bytes != SIZE_MAX) {
        finish_inline(st, c, bytes);
        *done = true;
    }
    return DDPC_OK;
}

#endif
