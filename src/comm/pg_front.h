// SPDX-License-Identifier: MIT
/* Private to src/comm: the process-group object shared by pg.c (create, queries, running one
 * collective, the failed state), pg_coll.c (argument checks, public collectives) and pg_async.c
 * (comm thread, queue, work handles). Invariants: `seq` and the queue's tail are touched only by
 * the caller's thread; the backend runs on one thread at a time (the caller's when nothing is
 * pending, else the comm thread); `error` is written once, before `failed` is set (release). */
#ifndef DDPC_COMM_PG_FRONT_H
#define DDPC_COMM_PG_FRONT_H

#include "comm/flight.h"
#include "comm/pg_impl.h"

#include <pthread.h>
#include <stdatomic.h>

enum { DDPC__PG_MSG_CAP = 1024 };

struct ddpc_work {
    ddpc_pg *pg; /* NULL once the group is destroyed (the handle then owns itself) */
    ddpc__coll coll;
    ddpc_status status;
    double seconds;         /* how long the collective ran, set before done */
    atomic_bool done;       /* set (release) after status and msg; never cleared */
    struct ddpc_work *next; /* queue or spare-list link, guarded by pg->mu */
    struct ddpc_work *live_prev, *live_next; /* the group's handles in use, guarded by pg->mu */
    char msg[DDPC__PG_MSG_CAP];
};

struct ddpc_pg {
    int rank, world, local_rank, local_world;
    ddpc_backend backend;
    char device_note[256]; /* see ddpc_pg_device_note; "" for host buffers */
    double timeout_s;
    const ddpc__pg_backend *ops; /* NULL for world size 1 */
    void *state;
    uint64_t seq;
    uint64_t ring_bytes; /* see ddpc_pg_ring_bytes; caller's thread only, like seq */
    int phase;           /* ddpc_phase; caller's thread only, like seq */
    ddpc__flight flight; /* written by the thread running the backend, one at a time */
    _Atomic uint64_t busy_ns; /* see ddpc_pg_busy_seconds; added to by the backend's thread */

    atomic_bool failed;
    char error[DDPC__PG_MSG_CAP];

    pthread_mutex_t mu;
    pthread_cond_t work_cv; /* comm thread: work queued or stopping */
    pthread_cond_t done_cv; /* waiters: some work completed */
    struct ddpc_work *head, *tail;
    /* Handles the caller holds (orphaned at destroy) and destroyed ones kept for reuse, so that
     * async collectives allocate nothing after warm-up (a DDP step issues one per bucket). */
    struct ddpc_work *live, *spare;
    int pending; /* queued or running on the comm thread */
    bool thread_started, stopping;
    pthread_t thread;
};

/* Test hook and common tail of ddpc_pg_create: a group over an already-joined backend (ops NULL
 * only for world size 1). Takes ownership of `state` even on failure. */
ddpc_status ddpc__pg_create_with(const ddpc_comm_env *env, ddpc_backend backend, double timeout_s,
                                 const ddpc__pg_backend *ops, void *state, ddpc_pg **out);

/* Runs one collective on the current thread: fails at once if the group failed earlier, sets the
 * deadline, calls the backend (or the local copy for world size 1) and records a failure. On
 * error the message is this thread's last error. */
ddpc_status ddpc__pg_execute(ddpc_pg *pg, ddpc__coll *coll);

/* At destroy, after the comm thread stopped: orphans the handles the caller still holds (they
 * free themselves on ddpc_work_destroy) and frees the spare ones. */
void ddpc__pg_release_handles(ddpc_pg *pg);

/* Runs `coll` in issue order: inline when nothing is pending, else queued behind the async work
 * and waited for. */
ddpc_status ddpc__pg_run_blocking(ddpc_pg *pg, ddpc__coll *coll);
/* Allocates a work handle for `coll` and queues it on the comm thread (started on first use). */
ddpc_status ddpc__pg_submit(ddpc_pg *pg, const ddpc__coll *coll, ddpc_work **work);
/* Drains the queue and joins the comm thread, if it was started. */
void ddpc__pg_stop_thread(ddpc_pg *pg);

#endif
