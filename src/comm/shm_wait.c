// SPDX-License-Identifier: MIT
/* Waiting for peers in the shm segment: one step = publish my arrival counter (release), then
 * wait until every peer's counter reaches it (acquire). Spins with a pause first (microsecond
 * latency when every rank has a core), then yields (ranks outnumber cores), and every ~20 ms looks
 * at the deadline, the abort flag and whether the missing ranks are still alive. */
#include "comm/shm_impl.h"

#include <ddpc/timer.h>

#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

enum { CHECK_EVERY = 64, SLEEP_NS = 100000 }; /* yields between clock reads; sleep when idle */
static const double CHECK_S = 0.02;           /* between liveness / abort checks */
static const double YIELD_S = 0.005;          /* then sleep instead of yielding */

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* "2, 3" for the ranks whose counter is below `target`; returns how many. */
static int missing_list(const ddpc__shm_state *s, uint64_t target, char *out, size_t cap)
{
    int n = 0;
    size_t len = 0;
    out[0] = '\0';
    for (int k = 0; k < s->world; k++) {
        if (atomic_load_explicit(&s->ranks[k].step, memory_order_acquire) >= target)
            continue;
        if (len + 16 < cap)
            len += (size_t)snprintf(out + len, cap - len, "%s%d", n ? ", " : "", k + s->rank_base);
        else if (len + 5 < cap && out[len - 1] != '.')
            len += (size_t)snprintf(out + len, cap - len, ", ...");
        n++;
    }
    return n;
}

/* The hang recorder's diagnosis of a timeout: where each missing rank is, from what it last
 * showed in shared memory (the collective it entered last and its phase), then who waits:
 * "; rank 1 is still in backward after all_reduce #411; ranks 0, 2 wait in all_reduce #412". */
static void where_stuck(const ddpc__shm_state *s, const ddpc__coll *c, uint64_t target, char *out,
                        size_t cap)
{
    size_t len = 0;
    out[0] = '\0';
    char waiting[256] = "";
    size_t wlen = 0;
    int n_wait = 0;
    for (int k = 0; k < s->world && len + 128 < cap; k++) {
        const ddpc__shm_rank *r = &s->ranks[k];
        int global = k + s->rank_base;
        if (k == s->rank || atomic_load_explicit(&r->step, memory_order_acquire) >= target) {
            if (wlen + 16 < sizeof waiting)
                wlen += (size_t)snprintf(waiting + wlen, sizeof waiting - wlen, "%s%d",
                                         n_wait ? ", " : "", global);
            n_wait++;
            continue;
        }
        uint64_t entered = atomic_load_explicit(&r->entered, memory_order_acquire);
        unsigned kind = atomic_load_explicit(&r->entered_kind, memory_order_relaxed);
        const char *phase =
            ddpc_phase_name((ddpc_phase)atomic_load_explicit(&r->phase, memory_order_relaxed));
        if (entered == c->seq + 1)
            len += (size_t)snprintf(out + len, cap - len,
                                    "; rank %d entered %s #%llu (in %s) but stopped inside it",
                                    global, ddpc__coll_name(c->kind), (unsigned long long)c->seq,
                                    phase);
        else if (entered == 0)
            len += (size_t)snprintf(out + len, cap - len,
                                    "; rank %d is still in %s before its first collective",
                                    global, phase);
        else
            len += (size_t)snprintf(out + len, cap - len, "; rank %d is still in %s after %s #%llu",
                                    global, phase, ddpc__coll_name((ddpc__coll_kind)kind),
                                    (unsigned long long)(entered - 1));
    }
    if (n_wait > 0 && len < cap)
        snprintf(out + len, cap - len, "; rank%s %s wait%s in %s #%llu", n_wait == 1 ? "" : "s",
                 waiting, n_wait == 1 ? "s" : "", ddpc__coll_name(c->kind),
                 (unsigned long long)c->seq);
}

/* Another rank failed this collective first: same status, its message, and who saw it. */
static ddpc_status fail_aborted(const ddpc__shm_state *s)
{
    const ddpc__shm_header *h = s->hdr;
    return ddpc_errorf((ddpc_status)h->abort_status, "%s (reported by rank %d)", h->abort_msg,
                       (int)h->abort_rank + s->rank_base);
}

ddpc_status ddpc__shm_check_mates(const ddpc__shm_state *s, const ddpc__coll *c)
{
    for (int k = 0; k < s->world; k++) {
        if (k != s->rank && s->watch[k] && !ddpc__pid_alive(s->pids[k], s->starts[k]))
            return ddpc_errorf(DDPC_EPEER, "rank %d (pid %d) exited during %s #%llu",
                               k + s->rank_base, (int)s->pids[k], ddpc__coll_name(c->kind),
                               (unsigned long long)c->seq);
    }
    return DDPC_OK;
}

/* Slow-path checks for the peers that have not reached `target`. */
static ddpc_status check_peers(const ddpc__shm_state *s, const ddpc__coll *c, uint64_t target,
                               double now)
{
    if (atomic_load_explicit(&s->hdr->aborted, memory_order_acquire) == 2)
        return fail_aborted(s);
    for (int k = 0; k < s->world; k++) {
        if (k == s->rank || atomic_load_explicit(&s->ranks[k].step, memory_order_acquire) >= target)
            continue;
        if (s->watch[k] && !ddpc__pid_alive(s->pids[k], s->starts[k]))
            return ddpc_errorf(DDPC_EPEER, "rank %d (pid %d) exited during %s #%llu",
                               k + s->rank_base, (int)s->pids[k], ddpc__coll_name(c->kind),
                               (unsigned long long)c->seq);
    }
    if (now > c->deadline) {
        char list[256], where[768];
        int n = missing_list(s, target, list, sizeof list);
        where_stuck(s, c, target, where, sizeof where);
        return ddpc_errorf(DDPC_ETIMEOUT,
                           "%s #%llu timed out after %.3g s: rank%s %s never arrived%s",
                           ddpc__coll_name(c->kind), (unsigned long long)c->seq, s->timeout_s,
                           n == 1 ? "" : "s", list, where);
    }
    return DDPC_OK;
}

static ddpc_status wait_slow(ddpc__shm_state *s, const ddpc__coll *c, int k, uint64_t target)
{
    const atomic_uint_least64_t *step = &s->ranks[k].step;
    /* A peer that kept us waiting past the spin last time is probably not on a CPU (it shares
     * ours, or the machine is busy): spinning would only delay it, so spin briefly. */
    int spin = s->yielded ? s->spin / 8 : s->spin;
    for (int i = 0; i < spin; i++) {
        cpu_relax();
        if (atomic_load_explicit(step, memory_order_acquire) >= target) {
            s->yielded = false;
            return DDPC_OK;
        }
    }
    s->yielded = true;
    double start = ddpc_time_now(), last = start;
    bool sleeping = false; /* a long wait: stop burning the core */
    for (unsigned i = 1;; i++) {
        if (sleeping)
            nanosleep(&(struct timespec){0, SLEEP_NS}, NULL);
        else
            sched_yield();
        if (atomic_load_explicit(step, memory_order_acquire) >= target)
            return DDPC_OK;
        if (!sleeping && i % CHECK_EVERY)
            continue;
        double now = ddpc_time_now();
        sleeping = now - start > YIELD_S;
        if (now - last >= CHECK_S || now > c->deadline) {
            last = now;
            DDPC_TRY(check_peers(s, c, target, now));
        }
    }
}

void ddpc__shm_set_phase(void *state, int phase)
{
    ddpc__shm_state *s = state;
    atomic_store_explicit(&s->ranks[s->rank].phase, (unsigned)phase, memory_order_relaxed);
}

void ddpc__shm_describe(ddpc__shm_state *s, const ddpc__coll *c)
{
    ddpc__shm_rank *me = &s->ranks[s->rank];
    atomic_store_explicit(&me->entered_kind, (unsigned)c->kind, memory_order_relaxed);
    atomic_store_explicit(&me->entered, c->seq + 1, memory_order_release);
    me->desc[(s->step + 1) & 1] = ddpc__coll_describe(c);
    s->check_desc = true;
}

/* After a collective's first step: every rank must be running the very same collective. */
static ddpc_status compare_desc(ddpc__shm_state *s)
{
    s->check_desc = false;
    const ddpc__coll_desc *mine = &s->ranks[s->rank].desc[s->step & 1];
    for (int k = 0; k < s->world; k++) {
        const ddpc__coll_desc *d = &s->ranks[k].desc[s->step & 1];
        if (memcmp(d, mine, sizeof *d) != 0)
            return ddpc__coll_mismatch(s->rank + s->rank_base, mine, k + s->rank_base, d);
    }
    return DDPC_OK;
}

ddpc_status ddpc__shm_step(ddpc__shm_state *s, const ddpc__coll *c)
{
    uint64_t target = ++s->step;
    atomic_store_explicit(&s->ranks[s->rank].step, target, memory_order_release);
    for (int k = 0; k < s->world; k++) {
        if (k == s->rank || atomic_load_explicit(&s->ranks[k].step, memory_order_acquire) >= target)
            continue;
        DDPC_TRY(wait_slow(s, c, k, target));
    }
    return s->check_desc ? compare_desc(s) : DDPC_OK;
}

void ddpc__shm_abort(ddpc__shm_state *s, ddpc_status status)
{
    ddpc__shm_header_abort(s->hdr, s->rank, status, ddpc_last_error());
}
