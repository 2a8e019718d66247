// SPDX-License-Identifier: MIT
/* The gloo backend's collectives: shared memory within a host, gloo between hosts, ddpc's own
 * reductions. all_reduce is hierarchical and pipelined in shm-slot-sized blocks; local rank l owns
 * share l of every block: it gathers that share from its host's ranks over shm, continues the
 * rank-order chain (host 0 starts it, host h adds its ranks to the running value of hosts < h, the
 * last host finishes it and sends the result back), and DEPTH steps later every host's ranks
 * all-gather the finished shares over shm. Since ranks are node-major, the chain is exactly the
 * flat rank-order reduction: bitwise the shm backend's result. Invariant: the sequence of shm
 * steps and messages depends only on (kind, count, dtype, hosts, locals), the same on all ranks. */
#include "comm/gloo_impl.h"

#ifdef DDPC_HAVE_GLOO

#include <ddpc/alloc.h>
#include <ddpc/timer.h>

#include <assert.h>
#include <string.h>

enum {
    ALIGN = 64,
    DEPTH = 6, /* blocks a result may lag its inputs: time for the round trip to the last host */
    SLOT_PARTIAL = 1,
    SLOT_FINAL = 2,
    SLOT_DATA = 3,
    /* staging buffers by role */
    PR = 0,                   /* running values from the previous host */
    PS = DDPC__GLOO_RING,     /* running values to the next host */
    FR = 2 * DDPC__GLOO_RING, /* results from the last host */
    FS = 3 * DDPC__GLOO_RING, /* results to the other hosts */
};
/* a result is taken before its staging buffer is needed again */
static_assert((int)DEPTH < (int)DDPC__GLOO_RING, "results lag by less than the ring");
static const double LOCAL_GRACE_S = 1.0; /* shm waits outlast the wire's so it names the host */

/* ---- messages ---- */

static unsigned char *payload(ddpc__gloo_state *st, int buf)
{
    return (unsigned char *)ddpc__gloo_link_buf(st->link, buf) + DDPC__GLOO_HDR;
}

/* Waits for every send started from buffer `buf`, so it can be written again. */
static ddpc_status drain(ddpc__gloo_state *st, const ddpc__coll *c, int buf, int to_host)
{
    while (st->pending[buf] > 0) {
        ddpc_status s = ddpc__gloo_link_wait_send(st->link, buf, c->deadline);
        if (s != DDPC_OK)
            return ddpc__gloo_lost(st, c, to_host, s);
        st->pending[buf]--;
    }
    return DDPC_OK;
}

/* Sends header + `bytes` of payload already in buffer `buf` to host h. */
static ddpc_status send_to(ddpc__gloo_state *st, const ddpc__coll *c, int buf, int h, uint64_t slot,
                           uint64_t block, size_t bytes)
{
    ddpc__gloo_hdr hdr = {.desc = ddpc__coll_describe(c), .block = block, .bytes = bytes};
    memcpy(ddpc__gloo_link_buf(st->link, buf), &hdr, sizeof hdr);
    ddpc_status s = ddpc__gloo_link_send(st->link, buf, h, slot, DDPC__GLOO_HDR + bytes);
    if (s != DDPC_OK)
        return ddpc__gloo_lost(st, c, h, s);
    st->pending[buf]++;
    return DDPC_OK;
}

static ddpc_status post_recv(ddpc__gloo_state *st, const ddpc__coll *c, int buf, int h,
                             uint64_t slot)
{
    ddpc_status s = ddpc__gloo_link_recv(st->link, buf, h, slot);
    return s == DDPC_OK ? DDPC_OK : ddpc__gloo_lost(st, c, h, s);
}

/* Waits for the message posted on `buf` from host h and checks it is block `block` of the same
 * collective with `bytes` of payload. */
static ddpc_status take(ddpc__gloo_state *st, const ddpc__coll *c, int buf, int h, uint64_t block,
                        size_t bytes)
{
    ddpc_status s = ddpc__gloo_link_wait_recv(st->link, buf, c->deadline);
    if (s != DDPC_OK)
        return ddpc__gloo_lost(st, c, h, s);
    ddpc__gloo_hdr hdr;
    memcpy(&hdr, ddpc__gloo_link_buf(st->link, buf), sizeof hdr);
    ddpc__coll_desc mine = ddpc__coll_describe(c);
    if (memcmp(&hdr.desc, &mine, sizeof mine) != 0)
        return ddpc__coll_mismatch(st->rank, &mine, h * st->locals + st->local, &hdr.desc);
    if (hdr.block != block || hdr.bytes != bytes)
        return ddpc_errorf(DDPC_EINTERNAL,
                           "%s #%llu: host %d sent block %llu of %llu bytes, expected block %llu "
                           "of %zu bytes",
                           ddpc__coll_name(c->kind), (unsigned long long)c->seq, h,
                           (unsigned long long)hdr.block, (unsigned long long)hdr.bytes,
                           (unsigned long long)block, bytes);
    return DDPC_OK;
}

/* ---- hierarchical all_reduce ---- */

/* Start of local rank k's share of a block of m elements, cache-line aligned; k == locals: m. */
static size_t share_lo(size_t m, int k, int n, size_t es)
{
    if (k >= n)
        return m;
    size_t lo = m * (size_t)k / (size_t)n, a = ALIGN / es;
    return lo / a * a;
}

typedef struct {
    const ddpc__coll *id; /* what every rank issued (for descriptors and messages) */
    const unsigned char *send;
    unsigned char *recv;
    size_t count, es, block; /* elements; element size; elements per block */
    size_t nblocks;
    int depth;
} reduce_job;

static void block_range(const reduce_job *j, ddpc__gloo_state *st, size_t b, int k, size_t *off,
                        size_t *lo, size_t *hi)
{
    size_t m = j->count - b * j->block < j->block ? j->count - b * j->block : j->block;
    *off = b * j->block;
    *lo = share_lo(m, k, st->locals, j->es);
    *hi = share_lo(m, k + 1, st->locals, j->es);
}

/* Before step t: the shares of block b that my host's other ranks own, into my in area. */
static void copy_in(ddpc__gloo_state *st, const reduce_job *j, size_t b, uint64_t t)
{
    unsigned char *dst = ddpc__shm_in(st->shm, st->local, t);
    for (int k = 0; k < st->locals; k++) {
        size_t off, lo, hi;
        block_range(j, st, b, k, &off, &lo, &hi);
        if (k != st->local && hi > lo)
            memcpy(dst + lo * j->es, j->send + (off + lo) * j->es, (hi - lo) * j->es);
    }
}

/* After step t: the other local ranks' results of block b, from their out areas into recv. */
static void copy_out(ddpc__gloo_state *st, const reduce_job *j, size_t b, uint64_t t)
{
    for (int k = 0; k < st->locals; k++) {
        size_t off, lo, hi;
        block_range(j, st, b, k, &off, &lo, &hi);
        if (k != st->local && hi > lo)
            memcpy(j->recv + (off + lo) * j->es, ddpc__shm_out(st->shm, k, t) + lo * j->es,
                   (hi - lo) * j->es);
    }
}

static ddpc_status post_block(ddpc__gloo_state *st, const reduce_job *j, size_t b, bool partial)
{
    int last = st->hosts - 1, r = (int)(b % DDPC__GLOO_RING);
    if (b >= j->nblocks)
        return DDPC_OK;
    if (partial && st->host > 0)
        DDPC_TRY(post_recv(st, j->id, PR + r, st->host - 1, SLOT_PARTIAL));
    if (!partial && st->host < last)
        DDPC_TRY(post_recv(st, j->id, FR + r, last, SLOT_FINAL));
    return DDPC_OK;
}

/* After the step that brought block b's inputs: my share's link of the chain. */
static ddpc_status chain_block(ddpc__gloo_state *st, const reduce_job *j, size_t b, uint64_t t)
{
    const ddpc__coll *c = j->id;
    int h = st->host, last = st->hosts - 1, r = (int)(b % DDPC__GLOO_RING);
    size_t off, lo, hi;
    block_range(j, st, b, st->local, &off, &lo, &hi);
    size_t n = hi - lo, abytes = n * ddpc__reduce_acc_size(c->dtype);
    for (int k = 0; k < st->locals; k++)
        st->srcs[k] = ddpc__shm_in(st->shm, k, t) + lo * j->es;
    st->srcs[st->local] = j->send + (off + lo) * j->es;
    const void *acc_in = NULL;
    if (h > 0) {
        DDPC_TRY(take(st, c, PR + r, h - 1, b, abytes));
        acc_in = payload(st, PR + r);
    }
    if (h < last) {
        DDPC_TRY(drain(st, c, PS + r, h + 1));
        ddpc__reduce_chain(payload(st, PS + r), acc_in, st->srcs, st->locals, n, c->dtype, c->op);
        DDPC_TRY(send_to(st, c, PS + r, h + 1, SLOT_PARTIAL, b, abytes));
    } else {
        void *acc = payload(st, PR + r); /* the running value is finished in place */
        ddpc__reduce_chain(acc, acc_in, st->srcs, st->locals, n, c->dtype, c->op);
        ddpc__reduce_finish(j->recv + (off + lo) * j->es, acc, n, c->dtype, c->op, st->world);
        DDPC_TRY(drain(st, c, FS + r, 0));
        memcpy(payload(st, FS + r), j->recv + (off + lo) * j->es, n * j->es);
        for (int o = 0; o < last; o++)
            DDPC_TRY(send_to(st, c, FS + r, o, SLOT_FINAL, b, n * j->es));
    }
    return h > 0 ? post_block(st, j, b + DDPC__GLOO_RING, true) : DDPC_OK;
}

/* Before step t: my share's result of block b into recv (from the last host unless we are it)
 * and into my out area for the other local ranks. */
static ddpc_status publish_result(ddpc__gloo_state *st, const reduce_job *j, size_t b, uint64_t t)
{
    int last = st->hosts - 1, r = (int)(b % DDPC__GLOO_RING);
    size_t off, lo, hi;
    block_range(j, st, b, st->local, &off, &lo, &hi);
    unsigned char *mine = j->recv + (off + lo) * j->es;
    if (st->host < last) {
        DDPC_TRY(take(st, j->id, FR + r, last, b, (hi - lo) * j->es));
        memcpy(mine, payload(st, FR + r), (hi - lo) * j->es);
        DDPC_TRY(post_block(st, j, b + DDPC__GLOO_RING, false));
    }
    memcpy(ddpc__shm_out(st->shm, st->local, t) + lo * j->es, mine, (hi - lo) * j->es);
    return DDPC_OK;
}

static ddpc_status all_reduce_run(ddpc__gloo_state *st, reduce_job *j, const ddpc__coll *local)
{
    j->block = DDPC__SHM_SLOT / j->es;
    j->nblocks = (j->count + j->block - 1) / j->block;
    j->depth = j->nblocks == 1 ? 1 : DEPTH; /* the same on every rank: a function of count */
    for (size_t b = 0; b < DDPC__GLOO_RING; b++) {
        DDPC_TRY(post_block(st, j, b, true));
        DDPC_TRY(post_block(st, j, b, false));
    }
    ddpc__shm_describe(st->shm, local);
    for (size_t s = 0; s < j->nblocks + (size_t)j->depth; s++) {
        uint64_t t = st->shm->step + 1;
        bool in = s < j->nblocks, out = s >= (size_t)j->depth;
        size_t bo = s - (size_t)j->depth;
        if (in)
            copy_in(st, j, s, t);
        if (out)
            DDPC_TRY(publish_result(st, j, bo, t));
        DDPC_TRY(ddpc__shm_step(st->shm, local));
        if (out)
            copy_out(st, j, bo, t);
        if (in)
            DDPC_TRY(chain_block(st, j, s, t));
    }
    for (int b = 0; b < DDPC__GLOO_NBUF; b++)
        DDPC_TRY(drain(st, j->id, b, b >= FS ? 0 : st->host + 1));
    return DDPC_OK;
}

/* ---- large all_reduce with cross-memory attach: three shm steps in all ----
 * Under load every wait is a chance to lose the CPU, so large messages avoid per-block steps:
 * after one step that publishes the buffers, local rank l pulls share l of its host-mates' inputs
 * straight from their memory (process_vm_readv) in chunks and runs the same chain across hosts
 * per chunk, results landing in its own recv; a step; it pulls the host-mates' result shares from
 * their recv; a last step keeps every buffer alive until all have read it. */

static ddpc_status take_final(ddpc__gloo_state *st, const reduce_job *j, size_t k, size_t nchunks,
                              size_t chunk, size_t lo, size_t hi)
{
    int r = (int)(k % DDPC__GLOO_RING), last = st->hosts - 1;
    size_t off = lo + k * chunk, n = hi - off < chunk ? hi - off : chunk;
    DDPC_TRY(take(st, j->id, FR + r, last, k, n * j->es));
    memcpy(j->recv + off * j->es, payload(st, FR + r), n * j->es);
    if (k + DDPC__GLOO_RING < nchunks)
        DDPC_TRY(post_recv(st, j->id, FR + r, last, SLOT_FINAL));
    return DDPC_OK;
}

static ddpc_status chain_chunk(ddpc__gloo_state *st, const reduce_job *j, const ddpc__coll *local,
                               size_t k, size_t nchunks, size_t off, size_t n)
{
    const ddpc__coll *c = j->id;
    int h = st->host, last = st->hosts - 1, r = (int)(k % DDPC__GLOO_RING);
    size_t abytes = n * ddpc__reduce_acc_size(c->dtype);
    for (int m = 0, slot = 0; m < st->locals; m++) {
        if (m == st->local) {
            st->srcs[m] = j->send + off * j->es;
            continue;
        }
        unsigned char *dst = st->pulled + (size_t)slot++ * st->payload_cap;
        DDPC_TRY(ddpc__shm_cma_pull(st->shm, local, m, st->shm->ranks[m].post_send + off * j->es,
                                    dst, n * j->es));
        st->srcs[m] = dst;
    }
    const void *acc_in = NULL;
    if (h > 0) {
        DDPC_TRY(take(st, c, PR + r, h - 1, k, abytes));
        acc_in = payload(st, PR + r);
    }
    if (h < last) {
        DDPC_TRY(drain(st, c, PS + r, h + 1));
        ddpc__reduce_chain(payload(st, PS + r), acc_in, st->srcs, st->locals, n, c->dtype, c->op);
        DDPC_TRY(send_to(st, c, PS + r, h + 1, SLOT_PARTIAL, k, abytes));
    } else {
        void *acc = payload(st, PR + r);
        ddpc__reduce_chain(acc, acc_in, st->srcs, st->locals, n, c->dtype, c->op);
        ddpc__reduce_finish(j->recv + off * j->es, acc, n, c->dtype, c->op, st->world);
        DDPC_TRY(drain(st, c, FS + r, 0));
        memcpy(payload(st, FS + r), j->recv + off * j->es, n * j->es);
        for (int o = 0; o < last; o++)
            DDPC_TRY(send_to(st, c, FS + r, o, SLOT_FINAL, k, n * j->es));
    }
    if (h > 0 && k + DDPC__GLOO_RING < nchunks)
        DDPC_TRY(post_recv(st, c, PR + r, h - 1, SLOT_PARTIAL));
    return DDPC_OK;
}

static ddpc_status all_reduce_direct(ddpc__gloo_state *st, reduce_job *j, const ddpc__coll *local)
{
    int h = st->host, last = st->hosts - 1;
    size_t ae = ddpc__reduce_acc_size(j->id->dtype), a = ALIGN / j->es;
    size_t chunk = (st->payload_cap - 256) / ae / a * a;
    size_t lo = share_lo(j->count, st->local, st->locals, j->es);
    size_t hi = share_lo(j->count, st->local + 1, st->locals, j->es);
    size_t nchunks = hi > lo ? (hi - lo + chunk - 1) / chunk : 0;
    for (size_t k = 0; k < nchunks && k < DDPC__GLOO_RING; k++) {
        if (h > 0)
            DDPC_TRY(post_recv(st, j->id, PR + (int)k, h - 1, SLOT_PARTIAL));
        if (h < last)
            DDPC_TRY(post_recv(st, j->id, FR + (int)k, last, SLOT_FINAL));
    }
    ddpc__coll posted = *local; /* the buffers host-mates read */
    posted.send = j->send;
    posted.recv = j->recv;
    ddpc__shm_describe(st->shm, local);
    DDPC_TRY(ddpc__shm_cma_post(st->shm, &posted));
    size_t lag = DDPC__GLOO_RING / 2, taken = 0; /* results may trail by half the ring */
    for (size_t k = 0; k < nchunks; k++) {
        size_t off = lo + k * chunk, n = hi - off < chunk ? hi - off : chunk;
        DDPC_TRY(chain_chunk(st, j, local, k, nchunks, off, n));
        for (; h < last && taken + lag <= k; taken++)
            DDPC_TRY(take_final(st, j, taken, nchunks, chunk, lo, hi));
    }
    for (; h < last && taken < nchunks; taken++)
        DDPC_TRY(take_final(st, j, taken, nchunks, chunk, lo, hi));
    DDPC_TRY(ddpc__shm_step(st->shm, local)); /* every share of every recv is final */
    for (int m = 0; m < st->locals; m++) {
        size_t mlo = share_lo(j->count, m, st->locals, j->es);
        size_t mhi = share_lo(j->count, m + 1, st->locals, j->es);
        if (m != st->local && mhi > mlo)
            DDPC_TRY(ddpc__shm_cma_pull(st->shm, local, m,
                                        st->shm->ranks[m].post_recv + mlo * j->es,
                                        j->recv + mlo * j->es, (mhi - mlo) * j->es));
    }
    DDPC_TRY(ddpc__shm_step(st->shm, local)); /* nobody reads my buffers any more */
    for (int b = 0; b < DDPC__GLOO_NBUF; b++)
        DDPC_TRY(drain(st, j->id, b, b >= FS ? 0 : st->host + 1));
    return DDPC_OK;
}

/* The per-block pipeline for messages of up to this many blocks or without CMA. */
enum { DIRECT_MIN_BLOCKS = 2 };

static ddpc_status all_reduce(ddpc__gloo_state *st, reduce_job *j, const ddpc__coll *local)
{
    size_t bytes = j->count * j->es;
    if (st->direct && bytes > DIRECT_MIN_BLOCKS * (size_t)DDPC__SHM_SLOT)
        return all_reduce_direct(st, j, local);
    return all_reduce_run(st, j, local);
}

/* ---- the other collectives: shm within the host, whole buffers between hosts ---- */

/* Every rank tells its peer on every other host that it arrived, and hears the same from them. */
static ddpc_status cross_barrier(ddpc__gloo_state *st, const ddpc__coll *c)
{
    for (int o = 0, i = 0; o < st->hosts; o++)
        if (o != st->host)
            DDPC_TRY(post_recv(st, c, PR + i++ % DDPC__GLOO_RING, o, SLOT_DATA));
    for (int o = 0, i = 0; o < st->hosts; o++) {
        if (o == st->host)
            continue;
        DDPC_TRY(drain(st, c, PS + i % DDPC__GLOO_RING, o));
        DDPC_TRY(send_to(st, c, PS + i++ % DDPC__GLOO_RING, o, SLOT_DATA, 0, 0));
    }
    for (int o = 0, i = 0; o < st->hosts; o++)
        if (o != st->host)
            DDPC_TRY(take(st, c, PR + i++ % DDPC__GLOO_RING, o, 0, 0));
    return DDPC_OK;
}

/* Sends `bytes` at buf to host `to` and/or receives as many from host `from` into rbuf (either
 * may be -1), in payload-sized chunks through the staging rings. */
static ddpc_status move_bytes(ddpc__gloo_state *st, const ddpc__coll *c, const void *buf, int to,
                              void *rbuf, int from, size_t bytes)
{
    size_t cap = st->payload_cap, nchunks = bytes ? (bytes + cap - 1) / cap : 0;
    for (size_t k = 0; k < nchunks && k < DDPC__GLOO_RING && from >= 0; k++)
        DDPC_TRY(post_recv(st, c, PR + (int)k, from, SLOT_DATA));
    for (size_t k = 0; k < nchunks; k++) {
        int r = (int)(k % DDPC__GLOO_RING);
        size_t off = k * cap, n = bytes - off < cap ? bytes - off : cap;
        if (to >= 0) {
            DDPC_TRY(drain(st, c, PS + r, to));
            memcpy(payload(st, PS + r), (const unsigned char *)buf + off, n);
            DDPC_TRY(send_to(st, c, PS + r, to, SLOT_DATA, k, n));
        }
        if (from >= 0) {
            DDPC_TRY(take(st, c, PR + r, from, k, n));
            memcpy((unsigned char *)rbuf + off, payload(st, PR + r), n);
            if (k + DDPC__GLOO_RING < nchunks)
                DDPC_TRY(post_recv(st, c, PR + r, from, SLOT_DATA));
        }
    }
    for (int r = 0; r < DDPC__GLOO_RING && to >= 0; r++)
        DDPC_TRY(drain(st, c, PS + r, to));
    return DDPC_OK;
}

static ddpc_status broadcast(ddpc__gloo_state *st, const ddpc__coll *c, ddpc__coll *local)
{
    int root_host = c->root / st->locals, root_local = c->root % st->locals;
    size_t bytes = c->count * ddpc_dtype_size(c->dtype);
    if (st->local == root_local && st->hosts > 1) {
        if (st->host == root_host) {
            for (int o = 0; o < st->hosts; o++)
                if (o != root_host)
                    DDPC_TRY(move_bytes(st, c, c->recv, o, NULL, -1, bytes));
        } else {
            DDPC_TRY(move_bytes(st, c, NULL, -1, c->recv, root_host, bytes));
        }
    }
    local->root = root_local;
    return ddpc__shm_run(st->shm, local);
}

static ddpc_status all_gather(ddpc__gloo_state *st, const ddpc__coll *c, ddpc__coll *local)
{
    size_t bytes = c->count * ddpc_dtype_size(c->dtype);
    unsigned char *recv = c->recv;
    local->recv = recv + (size_t)st->host * st->locals * bytes;
    DDPC_TRY(ddpc__shm_run(st->shm, local)); /* my host's blocks */
    unsigned char *mine = recv + (size_t)st->rank * bytes;
    for (int d = 1; d < st->hosts; d++) { /* a shift per distance: everyone sends and receives */
        int to = (st->host + d) % st->hosts, from = (st->host - d + st->hosts) % st->hosts;
        DDPC_TRY(move_bytes(st, c, mine, to, recv + ((size_t)from * st->locals + st->local) * bytes,
                            from, bytes));
    }
    for (int o = 0; o < st->hosts; o++) { /* the other hosts' blocks, from my host's ranks */
        if (o == st->host)
            continue;
        local->recv = recv + (size_t)o * st->locals * bytes;
        local->send = recv + ((size_t)o * st->locals + st->local) * bytes;
        DDPC_TRY(ddpc__shm_run(st->shm, local));
    }
    return DDPC_OK;
}

/* reduce_scatter as an all_reduce of the whole (world, count) input, keeping my block: the same
 * bits as shm (the same rank-order chain), at twice the bytes of a ring reduce-scatter. */
static ddpc_status reduce_scatter(ddpc__gloo_state *st, const ddpc__coll *c, ddpc__coll *local)
{
    size_t es = ddpc_dtype_size(c->dtype), total = c->count * (size_t)st->world;
    if (total * es > st->scratch_cap) {
        void *p = ddpc_malloc(total * es);
        if (!p)
            return ddpc_errorf(DDPC_ENOMEM, "out of memory for reduce_scatter's %zu bytes",
                               total * es);
        ddpc_free(st->scratch);
        st->scratch = p;
        st->scratch_cap = total * es;
    }
    reduce_job j = {.id = c, .send = c->send, .recv = st->scratch, .count = total, .es = es};
    DDPC_TRY(all_reduce(st, &j, local));
    memmove(c->recv, (unsigned char *)st->scratch + (size_t)st->rank * c->count * es,
            c->count * es);
    return DDPC_OK;
}

static ddpc_status run(ddpc__gloo_state *st, const ddpc__coll *c)
{
    ddpc__coll local = *c; /* the host-local part: later deadline, so the wire names the host */
    local.deadline = c->deadline + LOCAL_GRACE_S;
    st->shm->timeout_s = c->deadline - ddpc_time_now();
    bool empty = c->count == 0 || c->kind == DDPC__COLL_BARRIER;
    if (st->hosts == 1 && !empty)
        return ddpc__shm_run(st->shm, &local); /* one host: exactly the shm backend */
    if (empty) {
        ddpc__shm_describe(st->shm, &local);
        DDPC_TRY(ddpc__shm_step(st->shm, &local));
        return st->hosts > 1 ? cross_barrier(st, c) : DDPC_OK;
    }
    switch (c->kind) {
    case DDPC__COLL_ALL_REDUCE: {
        reduce_job j = {.id = c,
                        .send = c->send,
                        .recv = c->recv,
                        .count = c->count,
                        .es = ddpc_dtype_size(c->dtype)};
        return all_reduce(st, &j, &local);
    }
    case DDPC__COLL_BROADCAST:
        return broadcast(st, c, &local);
    case DDPC__COLL_ALL_GATHER:
        return all_gather(st, c, &local);
    default:
        return reduce_scatter(st, c, &local);
    }
}

ddpc_status ddpc__gloo_run(void *state, const ddpc__coll *c)
{
    ddpc__gloo_state *st = state;
    if (!st->link && st->hosts > 1)
        return ddpc_errorf(DDPC_EPEER, "%s #%llu: the gloo group failed earlier",
                           ddpc__coll_name(c->kind), (unsigned long long)c->seq);
    ddpc_status s = run(st, c);
    if (s != DDPC_OK)
        ddpc__gloo_fail(st, s);
    return s;
}

#endif
