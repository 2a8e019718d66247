// SPDX-License-Identifier: MIT
/* Single-copy large collectives with cross-memory attach (process_vm_readv): each rank posts its
 * buffer addresses in its control block, and peers copy straight out of them, once. All-reduce
 * splits the message into one contiguous share per rank: each rank pulls its share of every
 * peer's input (in cache-sized chunks) and reduces it in rank order into its own recv, then pulls
 * the others' reduced shares from their recv. Invariant: a rank leaves a collective only after a
 * final step, so no peer still reads its buffers; the probe at join decides for all ranks alike. */
#define _GNU_SOURCE /* process_vm_readv */
#include "comm/shm_impl.h"

#include <ddpc/timer.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

/* Copies `bytes` from address `remote` in rank k's memory to `local`. */
ddpc_status ddpc__shm_cma_pull(ddpc__shm_state *s, const ddpc__coll *c, int k, uint64_t remote,
                               void *local, size_t bytes)
{
    while (bytes > 0) {
        struct iovec l = {local, bytes}, r = {(void *)(uintptr_t)remote, bytes};
        ssize_t got = process_vm_readv(s->pids[k], &l, 1, &r, 1, 0);
        if (got <= 0) {
            if (got < 0 && errno == EINTR)
                continue;
            if (got < 0 && errno == ESRCH)
                return ddpc_errorf(DDPC_EPEER, "rank %d (pid %d) exited during %s #%llu",
                                   k + s->rank_base, (int)s->pids[k], ddpc__coll_name(c->kind),
                                   (unsigned long long)c->seq);
            return ddpc_errorf(DDPC_EPEER, "%s #%llu: cannot read rank %d's buffer: %s",
                               ddpc__coll_name(c->kind), (unsigned long long)c->seq,
                               k + s->rank_base, got < 0 ? strerror(errno) : "nothing read");
        }
        local = (unsigned char *)local + got;
        remote += (uint64_t)got;
        bytes -= (size_t)got;
    }
    return DDPC_OK;
}

/* Publishes this collective's buffers and waits until every rank did. */
ddpc_status ddpc__shm_cma_post(ddpc__shm_state *s, const ddpc__coll *c)
{
    ddpc__shm_rank *me = &s->ranks[s->rank];
    me->post_send = (uint64_t)(uintptr_t)c->send;
    me->post_recv = (uint64_t)(uintptr_t)c->recv;
    return ddpc__shm_step(s, c); /* release/acquire: peers see the addresses after this */
}

/* [lo, hi) elements of rank k's share of `count`, cache-line aligned. */
static void share(size_t count, int k, int world, size_t es, size_t *lo, size_t *hi)
{
    size_t a = 64 / es;
    *lo = k == 0 ? 0 : count * (size_t)k / (size_t)world / a * a;
    *hi = k == world - 1 ? count : count * (size_t)(k + 1) / (size_t)world / a * a;
}

/* dst[e - lo] = reduce over ranks of their send[remote_off + e], e in [lo, hi): peers' elements
 * are pulled chunk by chunk into tmp; mine are read in place unless they are dst itself. */
static ddpc_status reduce_range(ddpc__shm_state *s, const ddpc__coll *c, size_t remote_off,
                                size_t lo, size_t hi, unsigned char *dst)
{
    size_t es = ddpc_dtype_size(c->dtype), chunk = s->cma_chunk / es;
    for (size_t off = lo; off < hi; off += chunk) {
        size_t m = hi - off < chunk ? hi - off : chunk;
        unsigned char *out = dst + (off - lo) * es;
        for (int k = 0; k < s->world; k++) {
            unsigned char *tmp = s->tmp + (size_t)k * s->cma_chunk;
            const unsigned char *mine = (const unsigned char *)c->send + (remote_off + off) * es;
            if (k == s->rank && mine != out) {
                s->srcs[k] = mine;
            } else if (k == s->rank) {
                memcpy(tmp, mine, m * es); /* in place: reduce_many's dst may alias srcs[0] only */
                s->srcs[k] = tmp;
            } else {
                DDPC_TRY(ddpc__shm_cma_pull(
                    s, c, k, s->ranks[k].post_send + (remote_off + off) * es, tmp, m * es));
                s->srcs[k] = tmp;
            }
        }
        ddpc__reduce_many(out, s->srcs, s->world, m, c->dtype, c->op);
    }
    return DDPC_OK;
}

ddpc_status ddpc__shm_cma_all_reduce(ddpc__shm_state *s, const ddpc__coll *c)
{
    size_t es = ddpc_dtype_size(c->dtype), lo, hi;
    unsigned char *recv = c->recv;
    DDPC_TRY(ddpc__shm_cma_post(s, c));
    share(c->count, s->rank, s->world, es, &lo, &hi);
    DDPC_TRY(reduce_range(s, c, 0, lo, hi, recv + lo * es));
    DDPC_TRY(ddpc__shm_step(s, c)); /* every share reduced */
    for (int k = 0; k < s->world; k++) {
        size_t klo, khi;
        share(c->count, k, s->world, es, &klo, &khi);
        if (k != s->rank && khi > klo)
            DDPC_TRY(ddpc__shm_cma_pull(s, c, k, s->ranks[k].post_recv + klo * es, recv + klo * es,
                                        (khi - klo) * es));
    }
    return ddpc__shm_step(s, c); /* nobody reads my buffers any more */
}

ddpc_status ddpc__shm_cma_reduce_scatter(ddpc__shm_state *s, const ddpc__coll *c)
{
    DDPC_TRY(ddpc__shm_cma_post(s, c));
    DDPC_TRY(reduce_range(s, c, (size_t)s->rank * c->count, 0, c->count, c->recv));
    return ddpc__shm_step(s, c);
}

ddpc_status ddpc__shm_cma_all_gather(ddpc__shm_state *s, const ddpc__coll *c)
{
    size_t bytes = c->count * ddpc_dtype_size(c->dtype);
    unsigned char *recv = c->recv;
    if (c->send != recv + (size_t)s->rank * bytes)
        memcpy(recv + (size_t)s->rank * bytes, c->send, bytes);
    DDPC_TRY(ddpc__shm_cma_post(s, c));
    for (int i = 1; i < s->world; i++) { /* start at the next rank: spread the readers out */
        int k = (s->rank + i) % s->world;
        DDPC_TRY(
            ddpc__shm_cma_pull(s, c, k, s->ranks[k].post_send, recv + (size_t)k * bytes, bytes));
    }
    return ddpc__shm_step(s, c);
}

ddpc_status ddpc__shm_cma_broadcast(ddpc__shm_state *s, const ddpc__coll *c)
{
    size_t bytes = c->count * ddpc_dtype_size(c->dtype);
    DDPC_TRY(ddpc__shm_cma_post(s, c));
    if (s->rank != c->root)
        DDPC_TRY(ddpc__shm_cma_pull(s, c, c->root, s->ranks[c->root].post_recv, c->recv, bytes));
    return ddpc__shm_step(s, c);
}

/* Reads one word from every peer through process_vm_readv; publishes the verdict and waits for
 * everyone's, so all ranks choose the same paths. */
ddpc_status ddpc__shm_cma_probe(ddpc__shm_state *s, double deadline)
{
    bool ok = true;
    for (int k = 0; k < s->world && ok; k++) {
        uint64_t word = 0;
        struct iovec l = {&word, sizeof word},
                     r = {(void *)(uintptr_t)s->ranks[k].cma_addr, sizeof word};
        ok = k == s->rank || (process_vm_readv(s->pids[k], &l, 1, &r, 1, 0) == sizeof word &&
                              word == s->ranks[k].cma_word);
    }
    atomic_store_explicit(&s->ranks[s->rank].cma_ok, ok ? 2u : 1u, memory_order_release);
    bool all = true;
    for (int k = 0; k < s->world; k++) {
        unsigned v;
        while ((v = atomic_load_explicit(&s->ranks[k].cma_ok, memory_order_acquire)) == 0) {
            if (ddpc_time_now() > deadline)
                return ddpc_errorf(DDPC_ETIMEOUT,
                                   "shm join timed out after %.3g s: rank %d did "
                                   "not finish joining",
                                   s->timeout_s, k);
            if (s->watch[k] && !ddpc__pid_alive(s->pids[k], s->starts[k]))
                return ddpc_errorf(DDPC_EPEER, "rank %d (pid %d) exited while joining", k,
                                   (int)s->pids[k]);
            nanosleep(&(struct timespec){0, 200000}, NULL);
        }
        all = all && v == 2;
    }
    s->use_cma = all;
    return DDPC_OK;
}
