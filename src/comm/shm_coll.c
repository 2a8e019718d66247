// SPDX-License-Identifier: MIT
/* The five collectives over the shm segment, built from steps (shm_wait.c). Small messages take
 * one step: copy in, arrive, every rank reduces everything itself, in rank order. Large ones are
 * pipelined through the areas in slot-sized blocks, one step per block: each rank copies its
 * peers' shares in, reduces its own share (rank order) into out[], and after the next step copies
 * the others' reduced shares out, so the staging stays in cache and no rank reduces it all.
 * Invariant: the number of steps depends only on (kind, count, dtype, world), the same on all
 * ranks; srcs of ddpc__reduce_many never alias the destination except as srcs[0]. */
#include "comm/shm_impl.h"

#include <ddpc/timer.h>

#include <string.h>

enum { ALIGN = 64 };

/* Start of `rank`'s share of a block of m elements, cache-line aligned; share(world) = m. */
static size_t share_lo(size_t m, int k, int world, size_t es)
{
    if (k >= world)
        return m;
    size_t lo = m * (size_t)k / (size_t)world, a = ALIGN / es;
    return lo / a * a;
}

static ddpc_status all_reduce_small(ddpc__shm_state *s, const ddpc__coll *c, size_t bytes)
{
    uint64_t t = s->step + 1;
    const void **srcs = s->srcs;
    if (bytes)
        memcpy(ddpc__shm_in(s, s->rank, t), c->send, bytes);
    DDPC_TRY(ddpc__shm_step(s, c));
    for (int k = 0; k < s->world; k++)
        srcs[k] = ddpc__shm_in(s, k, t);
    if (c->send != c->recv)
        srcs[s->rank] = c->send;
    ddpc__reduce_many(c->recv, srcs, s->world, c->count, c->dtype, c->op);
    return DDPC_OK;
}

/* Copies into my in[] area the shares of block [off, off+m) that my peers reduce. */
static void copy_in_shares(ddpc__shm_state *s, const ddpc__coll *c, uint64_t t, size_t off,
                           size_t m, size_t es)
{
    unsigned char *dst = ddpc__shm_in(s, s->rank, t);
    const unsigned char *src = (const unsigned char *)c->send + off * es;
    for (int k = 0; k < s->world; k++) {
        size_t lo = share_lo(m, k, s->world, es), hi = share_lo(m, k + 1, s->world, es);
        if (k != s->rank && hi > lo)
            memcpy(dst + lo * es, src + lo * es, (hi - lo) * es);
    }
}

/* Copies the peers' reduced shares of block [off, off+m) (step t's out[]) into recv. */
static void copy_out_shares(ddpc__shm_state *s, const ddpc__coll *c, uint64_t t, size_t off,
                            size_t m, size_t es)
{
    unsigned char *dst = (unsigned char *)c->recv + off * es;
    for (int k = 0; k < s->world; k++) {
        size_t lo = share_lo(m, k, s->world, es), hi = share_lo(m, k + 1, s->world, es);
        if (k != s->rank && hi > lo)
            memcpy(dst + lo * es, ddpc__shm_out(s, k, t) + lo * es, (hi - lo) * es);
    }
}

/* Reduces my share of block [off, off+m) from every rank's in[] (mine straight from send) into my
 * out[] area for the others, and into recv. */
static void reduce_my_share(ddpc__shm_state *s, const ddpc__coll *c, uint64_t t, size_t off,
                            size_t m, size_t es)
{
    size_t lo = share_lo(m, s->rank, s->world, es), hi = share_lo(m, s->rank + 1, s->world, es);
    if (hi <= lo)
        return;
    const void **srcs = s->srcs;
    for (int k = 0; k < s->world; k++)
        srcs[k] = ddpc__shm_in(s, k, t) + lo * es;
    srcs[s->rank] = (const unsigned char *)c->send + (off + lo) * es;
    unsigned char *out = ddpc__shm_out(s, s->rank, t) + lo * es;
    ddpc__reduce_many(out, srcs, s->world, hi - lo, c->dtype, c->op);
    memcpy((unsigned char *)c->recv + (off + lo) * es, out, (hi - lo) * es);
}

static ddpc_status all_reduce_pipelined(ddpc__shm_state *s, const ddpc__coll *c)
{
    size_t es = ddpc_dtype_size(c->dtype), block = s->slot / es;
    size_t nblocks = (c->count + block - 1) / block, prev_off = 0, prev_m = 0;
    for (size_t b = 0; b <= nblocks; b++) { /* one extra step copies the last block out */
        uint64_t t = s->step + 1;
        size_t off = b * block, m = b < nblocks ? c->count - off : 0;
        m = m < block ? m : block;
        if (m)
            copy_in_shares(s, c, t, off, m, es);
        DDPC_TRY(ddpc__shm_step(s, c));
        if (prev_m)
            copy_out_shares(s, c, t - 1, prev_off, prev_m, es);
        if (m)
            reduce_my_share(s, c, t, off, m, es);
        prev_off = off;
        prev_m = m;
    }
    return DDPC_OK;
}

static ddpc_status broadcast(ddpc__shm_state *s, const ddpc__coll *c)
{
    size_t bytes = c->count * ddpc_dtype_size(c->dtype), off = 0;
    do {
        size_t n = bytes - off < s->slot ? bytes - off : s->slot;
        uint64_t t = s->step + 1;
        if (s->rank == c->root && n)
            memcpy(ddpc__shm_in(s, c->root, t), (unsigned char *)c->recv + off, n);
        DDPC_TRY(ddpc__shm_step(s, c));
        if (s->rank != c->root && n)
            memcpy((unsigned char *)c->recv + off, ddpc__shm_in(s, c->root, t), n);
        off += n;
    } while (off < bytes);
    return DDPC_OK;
}

static ddpc_status all_gather(ddpc__shm_state *s, const ddpc__coll *c)
{
    size_t bytes = c->count * ddpc_dtype_size(c->dtype), off = 0;
    unsigned char *recv = c->recv;
    if (bytes && c->send != recv + (size_t)s->rank * bytes)
        memcpy(recv + (size_t)s->rank * bytes, c->send, bytes);
    do {
        size_t n = bytes - off < s->slot ? bytes - off : s->slot;
        uint64_t t = s->step + 1;
        if (n)
            memcpy(ddpc__shm_in(s, s->rank, t), (const unsigned char *)c->send + off, n);
        DDPC_TRY(ddpc__shm_step(s, c));
        for (int k = 0; k < s->world && n; k++)
            if (k != s->rank)
                memcpy(recv + (size_t)k * bytes + off, ddpc__shm_in(s, k, t), n);
        off += n;
    } while (off < bytes);
    return DDPC_OK;
}

static ddpc_status reduce_scatter(ddpc__shm_state *s, const ddpc__coll *c)
{
    size_t es = ddpc_dtype_size(c->dtype), count = c->count, off = 0;
    size_t chunk = s->slot / es / (size_t)s->world; /* elements of each block per step */
    const unsigned char *send = c->send;
    bool in_place = c->recv == send + (size_t)s->rank * count * es;
    const void **srcs = s->srcs;
    do {
        size_t m = count - off < chunk ? count - off : chunk;
        uint64_t t = s->step + 1;
        unsigned char *mine = ddpc__shm_in(s, s->rank, t);
        for (int j = 0; j < s->world && m; j++)
            if (j != s->rank || in_place)
                memcpy(mine + (size_t)j * m * es, send + ((size_t)j * count + off) * es, m * es);
        DDPC_TRY(ddpc__shm_step(s, c));
        for (int k = 0; k < s->world; k++)
            srcs[k] = ddpc__shm_in(s, k, t) + (size_t)s->rank * m * es;
        if (!in_place)
            srcs[s->rank] = send + ((size_t)s->rank * count + off) * es;
        if (m)
            ddpc__reduce_many((unsigned char *)c->recv + off * es, srcs, s->world, m, c->dtype,
                              c->op);
        off += m;
    } while (off < count);
    return DDPC_OK;
}

ddpc_status ddpc__shm_run(void *state, const ddpc__coll *c)
{
    ddpc__shm_state *s = state;
    s->timeout_s = c->deadline - ddpc_time_now();
    size_t bytes = c->count * ddpc_dtype_size(c->dtype);
    ddpc_status st;
    bool cma = s->use_cma && bytes >= s->cma_min;
    ddpc__shm_describe(s, c);
    switch (c->kind) {
    case DDPC__COLL_ALL_REDUCE:
        st = cma                     ? ddpc__shm_cma_all_reduce(s, c)
             : bytes <= s->small_max ? all_reduce_small(s, c, bytes)
                                     : all_reduce_pipelined(s, c);
        break;
    case DDPC__COLL_BROADCAST:
        st = cma ? ddpc__shm_cma_broadcast(s, c) : broadcast(s, c);
        break;
    case DDPC__COLL_ALL_GATHER:
        st = cma ? ddpc__shm_cma_all_gather(s, c) : all_gather(s, c);
        break;
    case DDPC__COLL_REDUCE_SCATTER:
        st = cma ? ddpc__shm_cma_reduce_scatter(s, c) : reduce_scatter(s, c);
        break;
    default:
        st = ddpc__shm_step(s, c);
        break;
    }
    if (st != DDPC_OK)
        ddpc__shm_abort(s, st);
    return st;
}
