// SPDX-License-Identifier: MIT
/* Host staging: a backend on device buffers made of a host backend (shm, gloo, mpi) and two
 * copies per collective, for where NCCL cannot run (not installed, or several ranks sharing one
 * GPU, which NCCL refuses). Invariant: the host image keeps the device buffers' aliasing (in-place
 * all_gather and reduce_scatter stay in place), so the host backend sees exactly the call the
 * caller made and every rank gets the host backend's bits. One grow-only pinned buffer, so a warm
 * step allocates nothing. */
#include "comm/device_impl.h"

#include <ddpc/alloc.h>

#include <stdint.h>
#include <string.h>

typedef struct {
    const ddpc__pg_backend *inner; /* NULL for world size 1 */
    void *inner_state;
    ddpc__staging_copier copier;
    int rank, world;
    unsigned char *host; /* (cap) pinned */
    size_t cap;
} staged;

static ddpc_status reserve(staged *st, size_t bytes)
{
    if (bytes <= st->cap)
        return DDPC_OK;
    void *p = st->copier.host_alloc(st->copier.ctx, bytes);
    if (!p)
        return ddpc_errorf(DDPC_ENOMEM, "host staging: no pinned host memory for %zu bytes", bytes);
    if (st->host)
        st->copier.host_free(st->copier.ctx, st->host);
    st->host = p;
    st->cap = bytes;
    return DDPC_OK;
}

/* Bytes of the input (send) and output (recv) regions of `c`, as pg_coll.c checked them. */
static void regions(const staged *st, const ddpc__coll *c, size_t *sb, size_t *rb)
{
    size_t b = c->count * ddpc_dtype_size(c->dtype), all = b * (size_t)st->world;
    *sb = c->kind == DDPC__COLL_REDUCE_SCATTER ? all : b;
    *rb = c->kind == DDPC__COLL_ALL_GATHER ? all : b;
}

static bool inside(const void *p, const void *base, size_t n)
{
    uintptr_t x = (uintptr_t)p, b = (uintptr_t)base;
    return x >= b && x < b + n;
}

/* The host image of `c`: send and recv placed in the pinned buffer as they lie on the device. */
static ddpc_status host_image(staged *st, const ddpc__coll *c, ddpc__coll *h)
{
    size_t sb, rb;
    regions(st, c, &sb, &rb);
    *h = *c;
    if (c->kind == DDPC__COLL_BROADCAST || c->send == c->recv) {
        /* rank 0's in-place reduce_scatter (or all_gather) has send == recv: the larger wins */
        DDPC_TRY(reserve(st, sb > rb ? sb : rb));
        h->send = h->recv = st->host;
    } else if (sb && inside(c->send, c->recv, rb)) { /* all_gather in place */
        DDPC_TRY(reserve(st, rb));
        h->recv = st->host;
        h->send = st->host + ((const unsigned char *)c->send - (unsigned char *)c->recv);
    } else if (rb && inside(c->recv, c->send, sb)) { /* reduce_scatter in place */
        DDPC_TRY(reserve(st, sb));
        h->send = st->host;
        h->recv = st->host + ((unsigned char *)c->recv - (const unsigned char *)c->send);
    } else {
        size_t off = (sb + 63) & ~(size_t)63; /* recv 64-byte aligned, as ddpc_malloc gives */
        DDPC_TRY(reserve(st, off + rb));
        h->send = st->host;
        h->recv = st->host + off;
    }
    return DDPC_OK;
}

/* World size 1: what pg.c's local copy does, on the host image. */
static void run_local(const ddpc__coll *h)
{
    size_t b = h->count * ddpc_dtype_size(h->dtype);
    if (h->kind != DDPC__COLL_BROADCAST && h->send != h->recv && b)
        memmove(h->recv, h->send, b);
}

static ddpc_status run(void *state, const ddpc__coll *c)
{
    staged *st = state;
    if (c->kind == DDPC__COLL_BARRIER)
        return st->inner ? st->inner->run(st->inner_state, c) : DDPC_OK;
    size_t sb, rb;
    regions(st, c, &sb, &rb);
    ddpc__coll h;
    DDPC_TRY(host_image(st, c, &h));
    /* broadcast: only the root's buffer is read; the others are overwritten whole */
    if (c->kind == DDPC__COLL_BROADCAST) {
        if (st->rank == c->root && rb)
            DDPC_TRY(st->copier.down(st->copier.ctx, h.recv, c->recv, rb));
    } else if (sb) {
        DDPC_TRY(st->copier.down(st->copier.ctx, (void *)h.send, c->send, sb));
    }
    if (st->inner)
        DDPC_TRY(st->inner->run(st->inner_state, &h));
    else
        run_local(&h);
    return rb ? st->copier.up(st->copier.ctx, c->recv, h.recv, rb) : DDPC_OK;
}

static void destroy(void *state)
{
    staged *st = state;
    if (st->inner)
        st->inner->destroy(st->inner_state);
    if (st->host)
        st->copier.host_free(st->copier.ctx, st->host);
    ddpc_free(st);
}

static void set_phase(void *state, int phase)
{
    staged *st = state;
    if (st->inner && st->inner->set_phase)
        st->inner->set_phase(st->inner_state, phase);
}

static void layout(const void *state, int *local_rank, int *local_world)
{
    const staged *st = state;
    if (st->inner && st->inner->layout)
        st->inner->layout(st->inner_state, local_rank, local_world);
}

static const ddpc__pg_backend staged_ops = {"staged", run, destroy, set_phase, layout};

ddpc_status ddpc__staged_create(int rank, int world, const ddpc__pg_backend *inner,
                                void *inner_state, ddpc__staging_copier copier,
                                const ddpc__pg_backend **ops, void **state)
{
    *ops = NULL;
    *state = NULL;
    staged *st = ddpc_calloc(1, sizeof *st);
    if (!st) {
        if (inner)
            inner->destroy(inner_state);
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for host staging");
    }
    *st = (staged){
        .inner = inner, .inner_state = inner_state, .copier = copier, .rank = rank, .world = world};
    *ops = &staged_ops;
    *state = st;
    return DDPC_OK;
}
