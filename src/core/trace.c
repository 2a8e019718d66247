// SPDX-License-Identifier: MIT
/* The process-wide trace recorder. Invariant: a slot below `n` belongs to the thread that reserved
 * it; its `ready` flag is set (release) after its fields, so serialize reads only finished ones.
 * Times are kept as integer nanoseconds, so a child's [ts, ts + dur] printed in microseconds stays
 * inside its parent's exactly. */
#include <ddpc/alloc.h>
#include <ddpc/trace.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t t0, t1; /* ns */
    const char *name, *op;
    int64_t step, bytes;
    int tid;
    atomic_bool ready;
} trace_event;

static trace_event *events;
static size_t capacity;
static atomic_size_t n_reserved, n_dropped;
static atomic_bool recording;
static atomic_int next_loader;
static _Thread_local int loader_tid; /* 0: not assigned yet */

/* Replicas after the loaders' tids, far enough that no run has as many loader threads. */
enum { TID_COMPUTE = 1, TID_COMM = 2, TID_LOADER = 10, TID_REPLICA = 1000 };

ddpc_status ddpc_trace_open(size_t cap)
{
    ddpc_trace_close();
    events = ddpc_calloc(cap ? cap : 1, sizeof *events);
    if (!events)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for a trace of %zu events", cap);
    capacity = cap;
    atomic_store(&n_reserved, 0);
    atomic_store(&n_dropped, 0);
    return DDPC_OK;
}

void ddpc_trace_record(bool on)
{
    atomic_store_explicit(&recording, on && events, memory_order_release);
}

bool ddpc_trace_on(void)
{
    return atomic_load_explicit(&recording, memory_order_relaxed);
}

static void add(int tid, const char *name, double t0, double t1, int64_t step, const char *op,
                int64_t bytes)
{
    size_t i = atomic_fetch_add_explicit(&n_reserved, 1, memory_order_relaxed);
    if (i >= capacity) {
        atomic_fetch_add_explicit(&n_dropped, 1, memory_order_relaxed);
        return;
    }
    trace_event *e = &events[i];
    e->t0 = (int64_t)(t0 * 1e9);
    e->t1 = (int64_t)(t1 * 1e9);
    e->name = name;
    e->op = op;
    e->step = step;
    e->bytes = bytes;
    e->tid = tid;
    atomic_store_explicit(&e->ready, true, memory_order_release);
}

void ddpc_trace_add(ddpc_trace_thread thread, const char *name, double t0, double t1, int64_t step,
                    const char *op, int64_t bytes)
{
    if (!atomic_load_explicit(&recording, memory_order_acquire))
        return;
    if (thread == DDPC_TRACE_LOADER && !loader_tid)
        loader_tid = TID_LOADER + atomic_fetch_add(&next_loader, 1);
    int tid = thread == DDPC_TRACE_COMPUTE ? TID_COMPUTE
              : thread == DDPC_TRACE_COMM  ? TID_COMM
                                           : loader_tid;
    add(tid, name, t0, t1, step, op, bytes);
}

void ddpc_trace_add_replica(int replica, const char *name, double t0, double t1)
{
    if (!atomic_load_explicit(&recording, memory_order_acquire))
        return;
    add(replica > 0 ? TID_REPLICA + replica : TID_COMPUTE, name, t0, t1, -1, NULL, 0);
}

/* By thread, then start, then the longer first (a parent before the child that starts with it). */
static int by_thread_start(const void *a, const void *b)
{
    const trace_event *x = *(trace_event *const *)a, *y = *(trace_event *const *)b;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    if (x->t0 != y->t0)
        return x->t0 < y->t0 ? -1 : 1;
    int64_t dx = x->t1 - x->t0, dy = y->t1 - y->t0;
    return dx > dy ? -1 : dx < dy;
}

static const char *thread_name(int tid, char *buf, size_t cap)
{
    if (tid == TID_COMPUTE)
        return "compute";
    if (tid == TID_COMM)
        return "comm";
    if (tid > TID_REPLICA)
        snprintf(buf, cap, "replica %d", tid - TID_REPLICA);
    else
        snprintf(buf, cap, "loader %d", tid - TID_LOADER);
    return buf;
}

ddpc_status ddpc_trace_serialize(int rank, char **out, size_t *len, size_t *dropped)
{
    size_t n = atomic_load(&n_reserved);
    n = n < capacity ? n : capacity;
    trace_event **order = ddpc_malloc((n ? n : 1) * sizeof *order);
    size_t cap = 256 * (n + 8) + 64;
    char *buf = ddpc_malloc(cap);
    if (!order || !buf) {
        ddpc_free(order);
        ddpc_free(buf);
        return ddpc_errorf(DDPC_ENOMEM, "out of memory serializing a trace of %zu events", n);
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (atomic_load_explicit(&events[i].ready, memory_order_acquire))
            order[k++] = &events[i];
    qsort(order, k, sizeof *order, by_thread_start);
    size_t at = (size_t)snprintf(buf, cap,
                                 ",\n{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, "
                                 "\"tid\": 0, \"args\": {\"name\": \"rank %d\"}}",
                                 rank, rank);
    at += (size_t)snprintf(buf + at, cap - at,
                           ",\n{\"name\": \"process_sort_index\", \"ph\": \"M\", \"pid\": %d, "
                           "\"tid\": 0, \"args\": {\"sort_index\": %d}}",
                           rank, rank);
    for (size_t i = 0; i < k; i++) {
        const trace_event *e = order[i];
        char tn[32];
        if (i == 0 || e->tid != order[i - 1]->tid)
            at += (size_t)snprintf(buf + at, cap - at,
                                   ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, "
                                   "\"tid\": %d, \"args\": {\"name\": \"%s\"}}",
                                   rank, e->tid, thread_name(e->tid, tn, sizeof tn));
        int64_t dur = e->t1 > e->t0 ? e->t1 - e->t0 : 0;
        at += (size_t)snprintf(buf + at, cap - at,
                               ",\n{\"name\": \"%s\", \"ph\": \"X\", \"pid\": %d, \"tid\": %d, "
                               "\"ts\": %lld.%03lld, \"dur\": %lld.%03lld",
                               e->name, rank, e->tid, (long long)(e->t0 / 1000),
                               (long long)(e->t0 % 1000), (long long)(dur / 1000),
                               (long long)(dur % 1000));
        if (e->step >= 0)
            at += (size_t)snprintf(buf + at, cap - at, ", \"args\": {\"step\": %lld}}",
                                   (long long)e->step);
        else if (e->op)
            at += (size_t)snprintf(buf + at, cap - at,
                                   ", \"args\": {\"op\": \"%s\", \"bytes\": %lld}}", e->op,
                                   (long long)e->bytes);
        else
            at += (size_t)snprintf(buf + at, cap - at, "}");
    }
    ddpc_free(order);
    *out = buf;
    *len = at;
    *dropped = atomic_load(&n_dropped);
    return DDPC_OK;
}

void ddpc_trace_close(void)
{
    atomic_store(&recording, false);
    ddpc_free(events);
    events = NULL;
    capacity = 0;
    atomic_store(&n_reserved, 0);
}
