// SPDX-License-Identifier: MIT
/* The public collectives, blocking and async: argument checks, then one ddpc__coll with the next
 * sequence number, run in issue order. Invariant: a call that fails its argument checks touches
 * nothing and consumes no sequence number, so every rank still agrees on the numbering. */
#include "comm/pg_front.h"

#include <stdint.h>

static ddpc_status check_common(const ddpc_pg *pg, const char *what, ddpc_dtype dtype)
{
    if (!pg)
        return ddpc_errorf(DDPC_EINVAL, "%s: process group is NULL", what);
    if ((unsigned)dtype >= DDPC_DTYPE_COUNT)
        return ddpc_errorf(DDPC_EINVAL, "%s: dtype %d is not a ddpc_dtype", what, (int)dtype);
    return DDPC_OK;
}

static ddpc_status check_op(const char *what, ddpc_reduce_op op)
{
    if ((unsigned)op >= DDPC_REDUCE_COUNT)
        return ddpc_errorf(DDPC_EINVAL, "%s: op %d is not a ddpc_reduce_op", what, (int)op);
    return DDPC_OK;
}

/* Bytes of `blocks` blocks of `count` elements, or DDPC_EINVAL if that overflows. */
static ddpc_status span(const char *what, size_t count, ddpc_dtype dtype, int blocks, size_t *out)
{
    size_t es = ddpc_dtype_size(dtype);
    if (count > SIZE_MAX / es / (size_t)blocks)
        return ddpc_errorf(DDPC_EINVAL, "%s: count %zu of %s overflows the address space", what,
                           count, ddpc_dtype_name(dtype));
    *out = count * es * (size_t)blocks;
    if (*out > (size_t)PTRDIFF_MAX)
        return ddpc_errorf(DDPC_EINVAL, "%s: count %zu of %s overflows the address space", what,
                           count, ddpc_dtype_name(dtype));
    return DDPC_OK;
}

static ddpc_status check_ptr(const char *what, const char *name, const void *p, size_t bytes)
{
    if (bytes > 0 && !p)
        return ddpc_errorf(DDPC_EINVAL, "%s: %s is NULL with a non-zero count", what, name);
    if (bytes > 0 && (uintptr_t)p > UINTPTR_MAX - bytes)
        return ddpc_errorf(DDPC_EINVAL, "%s: %s + %zu bytes wraps around", what, name, bytes);
    return DDPC_OK;
}

/* The ranges [a, a+na) and [b, b+nb) share a byte, unless `a` sits exactly at `allowed`. */
static ddpc_status check_overlap(const char *what, const void *a, size_t na, const void *b,
                                 size_t nb, const void *allowed)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    if (na == 0 || nb == 0 || a == allowed)
        return DDPC_OK;
    if (x < y + nb && y < x + na)
        return ddpc_errorf(DDPC_EINVAL,
                           "%s: send and recv overlap without being the documented in-place form",
                           what);
    return DDPC_OK;
}

static ddpc__coll make(ddpc__coll_kind kind, const void *send, void *recv, size_t count,
                       ddpc_dtype dtype, ddpc_reduce_op op, int root)
{
    return (ddpc__coll){.kind = kind,
                        .send = send,
                        .recv = recv,
                        .count = count,
                        .dtype = dtype,
                        .op = op,
                        .root = root};
}

static ddpc_status prep_all_reduce(ddpc_pg *pg, const void *send, void *recv, size_t count,
                                   ddpc_dtype dtype, ddpc_reduce_op op, ddpc__coll *c)
{
    const char *w = "all_reduce";
    size_t n = 0;
    DDPC_TRY(check_common(pg, w, dtype));
    DDPC_TRY(check_op(w, op));
    DDPC_TRY(span(w, count, dtype, 1, &n));
    DDPC_TRY(check_ptr(w, "send", send, n));
    DDPC_TRY(check_ptr(w, "recv", recv, n));
    DDPC_TRY(check_overlap(w, send, n, recv, n, recv));
    *c = make(DDPC__COLL_ALL_REDUCE, send, recv, count, dtype, op, 0);
    return DDPC_OK;
}

static ddpc_status prep_broadcast(ddpc_pg *pg, void *buf, size_t count, ddpc_dtype dtype, int root,
                                  ddpc__coll *c)
{
    const char *w = "broadcast";
    size_t n = 0;
    DDPC_TRY(check_common(pg, w, dtype));
    if (root < 0 || root >= pg->world)
        return ddpc_errorf(DDPC_EINVAL, "broadcast: root %d is outside world size %d", root,
                           pg->world);
    DDPC_TRY(span(w, count, dtype, 1, &n));
    DDPC_TRY(check_ptr(w, "buf", buf, n));
    *c = make(DDPC__COLL_BROADCAST, buf, buf, count, dtype, DDPC_REDUCE_SUM, root);
    return DDPC_OK;
}

static ddpc_status prep_all_gather(ddpc_pg *pg, const void *send, void *recv, size_t count,
                                   ddpc_dtype dtype, ddpc__coll *c)
{
    const char *w = "all_gather";
    size_t n = 0, nall = 0;
    DDPC_TRY(check_common(pg, w, dtype));
    DDPC_TRY(span(w, count, dtype, 1, &n));
    DDPC_TRY(span(w, count, dtype, pg->world, &nall));
    DDPC_TRY(check_ptr(w, "send", send, n));
    DDPC_TRY(check_ptr(w, "recv", recv, nall));
    const void *in_place = recv ? (const char *)recv + (size_t)pg->rank * n : NULL;
    DDPC_TRY(check_overlap(w, send, n, recv, nall, in_place));
    *c = make(DDPC__COLL_ALL_GATHER, send, recv, count, dtype, DDPC_REDUCE_SUM, 0);
    return DDPC_OK;
}

static ddpc_status prep_reduce_scatter(ddpc_pg *pg, const void *send, void *recv, size_t recv_count,
                                       ddpc_dtype dtype, ddpc_reduce_op op, ddpc__coll *c)
{
    const char *w = "reduce_scatter";
    size_t n = 0, nall = 0;
    DDPC_TRY(check_common(pg, w, dtype));
    DDPC_TRY(check_op(w, op));
    DDPC_TRY(span(w, recv_count, dtype, 1, &n));
    DDPC_TRY(span(w, recv_count, dtype, pg->world, &nall));
    DDPC_TRY(check_ptr(w, "send", send, nall));
    DDPC_TRY(check_ptr(w, "recv", recv, n));
    const void *in_place = send ? (const char *)send + (size_t)pg->rank * n : NULL;
    DDPC_TRY(check_overlap(w, recv, n, send, nall, in_place));
    *c = make(DDPC__COLL_REDUCE_SCATTER, send, recv, recv_count, dtype, op, 0);
    return DDPC_OK;
}

/* Bytes this rank sends for c under a ring algorithm: all-reduce 2(W-1)/W of the buffer,
 * reduce-scatter and all-gather (W-1)/W of the whole (W x count) buffer, broadcast the buffer. */
static uint64_t ring_bytes(const ddpc_pg *pg, const ddpc__coll *c)
{
    uint64_t w = (uint64_t)pg->world, es = ddpc_dtype_size(c->dtype);
    uint64_t bytes = (uint64_t)c->count * es;
    switch (c->kind) {
    case DDPC__COLL_ALL_REDUCE:
        return 2 * (w - 1) * bytes / w;
    case DDPC__COLL_REDUCE_SCATTER:
    case DDPC__COLL_ALL_GATHER:
        return (w - 1) * bytes;
    case DDPC__COLL_BROADCAST:
        return w > 1 ? bytes : 0;
    default:
        return 0;
    }
}

static ddpc_status run(ddpc_pg *pg, ddpc__coll *c)
{
    pg->ring_bytes += ring_bytes(pg, c);
    c->seq = pg->seq++;
    c->phase = pg->phase;
    return ddpc__pg_run_blocking(pg, c);
}

static ddpc_status submit(ddpc_pg *pg, ddpc__coll *c, ddpc_work **work)
{
    if (!work)
        return ddpc_errorf(DDPC_EINVAL, "%s: work is NULL", ddpc__coll_name(c->kind));
    *work = NULL;
    c->seq = pg->seq;
    c->phase = pg->phase;
    DDPC_TRY(ddpc__pg_submit(pg, c, work));
    pg->seq++;
    pg->ring_bytes += ring_bytes(pg, c);
    return DDPC_OK;
}

ddpc_status ddpc_pg_all_reduce(ddpc_pg *pg, const void *send, void *recv, size_t count,
                               ddpc_dtype dtype, ddpc_reduce_op op)
{
    ddpc__coll c;
    DDPC_TRY(prep_all_reduce(pg, send, recv, count, dtype, op, &c));
    return run(pg, &c);
}

ddpc_status ddpc_pg_broadcast(ddpc_pg *pg, void *buf, size_t count, ddpc_dtype dtype, int root)
{
    ddpc__coll c;
    DDPC_TRY(prep_broadcast(pg, buf, count, dtype, root, &c));
    return run(pg, &c);
}

ddpc_status ddpc_pg_all_gather(ddpc_pg *pg, const void *send, void *recv, size_t count,
                               ddpc_dtype dtype)
{
    ddpc__coll c;
    DDPC_TRY(prep_all_gather(pg, send, recv, count, dtype, &c));
    return run(pg, &c);
}

ddpc_status ddpc_pg_reduce_scatter(ddpc_pg *pg, const void *send, void *recv, size_t recv_count,
                                   ddpc_dtype dtype, ddpc_reduce_op op)
{
    ddpc__coll c;
    DDPC_TRY(prep_reduce_scatter(pg, send, recv, recv_count, dtype, op, &c));
    return run(pg, &c);
}

ddpc_status ddpc_pg_barrier(ddpc_pg *pg)
{
    if (!pg)
        return ddpc_errorf(DDPC_EINVAL, "barrier: process group is NULL");
    ddpc__coll c = make(DDPC__COLL_BARRIER, NULL, NULL, 0, DDPC_DTYPE_F32, DDPC_REDUCE_SUM, 0);
    return run(pg, &c);
}

ddpc_status ddpc_pg_iall_reduce(ddpc_pg *pg, const void *send, void *recv, size_t count,
                                ddpc_dtype dtype, ddpc_reduce_op op, ddpc_work **work)
{
    ddpc__coll c;
    DDPC_TRY(prep_all_reduce(pg, send, recv, count, dtype, op, &c));
    return submit(pg, &c, work);
}

ddpc_status ddpc_pg_ibroadcast(ddpc_pg *pg, void *buf, size_t count, ddpc_dtype dtype, int root,
                               ddpc_work **work)
{
    ddpc__coll c;
    DDPC_TRY(prep_broadcast(pg, buf, count, dtype, root, &c));
    return submit(pg, &c, work);
}

ddpc_status ddpc_pg_iall_gather(ddpc_pg *pg, const void *send, void *recv, size_t count,
                                ddpc_dtype dtype, ddpc_work **work)
{
    ddpc__coll c;
    DDPC_TRY(prep_all_gather(pg, send, recv, count, dtype, &c));
    return submit(pg, &c, work);
}

ddpc_status ddpc_pg_ireduce_scatter(ddpc_pg *pg, const void *send, void *recv, size_t recv_count,
                                    ddpc_dtype dtype, ddpc_reduce_op op, ddpc_work **work)
{
    ddpc__coll c;
    DDPC_TRY(prep_reduce_scatter(pg, send, recv, recv_count, dtype, op, &c));
    return submit(pg, &c, work);
}

ddpc_status ddpc_pg_ibarrier(ddpc_pg *pg, ddpc_work **work)
{
    if (!pg)
        return ddpc_errorf(DDPC_EINVAL, "barrier: process group is NULL");
    ddpc__coll c = make(DDPC__COLL_BARRIER, NULL, NULL, 0, DDPC_DTYPE_F32, DDPC_REDUCE_SUM, 0);
    return submit(pg, &c, work);
}
