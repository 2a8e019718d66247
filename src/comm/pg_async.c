// SPDX-License-Identifier: MIT
/* The comm thread and work handles. One thread per group, started by the first async call, takes
 * work from a FIFO (mutex + condvar) and runs it with ddpc__pg_execute; a blocking call runs on
 * the caller's thread when nothing is pending and otherwise queues behind the async work, so
 * completion order is issue order. Invariant: `done` is set after status/msg and never cleared,
 * and a group is destroyed only after all its work is done, so a handle outlives its group. */
#include "comm/pg_front.h"

#include <ddpc/alloc.h>
#include <ddpc/timer.h>

#include <stdio.h>
#include <string.h>

static void complete(ddpc_pg *pg, ddpc_work *w, ddpc_status s)
{
    w->status = s;
    if (s != DDPC_OK)
        snprintf(w->msg, sizeof w->msg, "%s", ddpc_last_error());
    pthread_mutex_lock(&pg->mu);
    atomic_store_explicit(&w->done, true, memory_order_release);
    pg->pending--;
    pthread_cond_broadcast(&pg->done_cv);
    pthread_mutex_unlock(&pg->mu);
}

static void *comm_main(void *arg)
{
    ddpc_pg *pg = arg;
    pthread_mutex_lock(&pg->mu);
    for (;;) {
        while (!pg->head && !pg->stopping)
            pthread_cond_wait(&pg->work_cv, &pg->mu);
        ddpc_work *w = pg->head;
        if (!w)
            break; /* stopping and drained */
        pg->head = w->next;
        if (!pg->head)
            pg->tail = NULL;
        pthread_mutex_unlock(&pg->mu);
        double t0 = ddpc_time_now();
        ddpc_status s = ddpc__pg_execute(pg, &w->coll);
        w->seconds = ddpc_time_now() - t0;
        complete(pg, w, s);
        pthread_mutex_lock(&pg->mu);
    }
    pthread_mutex_unlock(&pg->mu);
    return NULL;
}

static ddpc_status start_thread(ddpc_pg *pg)
{
    if (pg->thread_started)
        return DDPC_OK;
    int rc = pthread_create(&pg->thread, NULL, comm_main, pg);
    if (rc != 0)
        return ddpc_errorf(DDPC_ENOMEM, "could not start the process group's comm thread: %s",
                           strerror(rc));
    pg->thread_started = true;
    return DDPC_OK;
}

static void enqueue(ddpc_pg *pg, ddpc_work *w)
{
    w->next = NULL;
    pthread_mutex_lock(&pg->mu);
    if (pg->tail)
        pg->tail->next = w;
    else
        pg->head = w;
    pg->tail = w;
    pg->pending++;
    pthread_cond_signal(&pg->work_cv);
    pthread_mutex_unlock(&pg->mu);
}

/* Blocks until `w` is done; `pg` must be alive unless `w` is already done. */
static void wait_done(ddpc_pg *pg, ddpc_work *w)
{
    if (atomic_load_explicit(&w->done, memory_order_acquire))
        return;
    pthread_mutex_lock(&pg->mu);
    while (!atomic_load_explicit(&w->done, memory_order_acquire))
        pthread_cond_wait(&pg->done_cv, &pg->mu);
    pthread_mutex_unlock(&pg->mu);
}

ddpc_status ddpc__pg_run_blocking(ddpc_pg *pg, ddpc__coll *coll)
{
    if (!pg->thread_started)
        return ddpc__pg_execute(pg, coll);
    pthread_mutex_lock(&pg->mu);
    bool idle = pg->pending == 0;
    pthread_mutex_unlock(&pg->mu);
    if (idle) /* the comm thread has nothing and only this thread can give it more */
        return ddpc__pg_execute(pg, coll);
    ddpc_work w = {.pg = pg, .coll = *coll};
    atomic_init(&w.done, false);
    enqueue(pg, &w);
    wait_done(pg, &w);
    if (w.status != DDPC_OK)
        return ddpc_errorf(w.status, "%s", w.msg);
    return DDPC_OK;
}

/* A handle from the spare list, or a new one; linked into the group's live list. */
static ddpc_work *take_handle(ddpc_pg *pg)
{
    pthread_mutex_lock(&pg->mu);
    ddpc_work *w = pg->spare;
    if (w)
        pg->spare = w->next;
    pthread_mutex_unlock(&pg->mu);
    if (!w && !(w = ddpc_malloc(sizeof *w)))
        return NULL;
    pthread_mutex_lock(&pg->mu);
    w->live_prev = NULL;
    w->live_next = pg->live;
    if (pg->live)
        pg->live->live_prev = w;
    pg->live = w;
    pthread_mutex_unlock(&pg->mu);
    return w;
}

/* Unlinks a finished handle from the live list and keeps it for reuse. */
static void return_handle(ddpc_pg *pg, ddpc_work *w)
{
    pthread_mutex_lock(&pg->mu);
    if (w->live_prev)
        w->live_prev->live_next = w->live_next;
    else
        pg->live = w->live_next;
    if (w->live_next)
        w->live_next->live_prev = w->live_prev;
    w->next = pg->spare;
    pg->spare = w;
    pthread_mutex_unlock(&pg->mu);
}

void ddpc__pg_release_handles(ddpc_pg *pg)
{
    for (ddpc_work *w = pg->live; w; w = w->live_next)
        w->pg = NULL; /* done (the comm thread has drained); the caller frees it */
    pg->live = NULL;
    while (pg->spare) {
        ddpc_work *w = pg->spare;
        pg->spare = w->next;
        ddpc_free(w);
    }
}

ddpc_status ddpc__pg_submit(ddpc_pg *pg, const ddpc__coll *coll, ddpc_work **work)
{
    ddpc_work *w = take_handle(pg);
    if (!w)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory allocating a work handle for %s #%llu",
                           ddpc__coll_name(coll->kind), (unsigned long long)coll->seq);
    ddpc_status s = start_thread(pg);
    if (s != DDPC_OK) {
        return_handle(pg, w);
        return s;
    }
    w->coll = *coll;
    w->status = DDPC_OK;
    w->seconds = 0;
    w->msg[0] = '\0';
    atomic_init(&w->done, false);
    w->pg = pg;
    enqueue(pg, w);
    *work = w;
    return DDPC_OK;
}

void ddpc__pg_stop_thread(ddpc_pg *pg)
{
    if (!pg->thread_started)
        return;
    pthread_mutex_lock(&pg->mu);
    pg->stopping = true;
    pthread_cond_signal(&pg->work_cv);
    pthread_mutex_unlock(&pg->mu);
    pthread_join(pg->thread, NULL);
    pg->thread_started = false;
}

ddpc_status ddpc_work_wait(ddpc_work *work)
{
    if (!work)
        return ddpc_errorf(DDPC_EINVAL, "ddpc_work_wait: work is NULL");
    wait_done(work->pg, work);
    if (work->status != DDPC_OK)
        return ddpc_errorf(work->status, "%s", work->msg);
    return DDPC_OK;
}

ddpc_status ddpc_work_test(ddpc_work *work, bool *done)
{
    if (!work || !done)
        return ddpc_errorf(DDPC_EINVAL, "ddpc_work_test: %s is NULL", work ? "done" : "work");
    *done = atomic_load_explicit(&work->done, memory_order_acquire);
    if (*done && work->status != DDPC_OK)
        return ddpc_errorf(work->status, "%s", work->msg);
    return DDPC_OK;
}

double ddpc_work_seconds(const ddpc_work *work)
{
    if (!work || !atomic_load_explicit(&((ddpc_work *)work)->done, memory_order_acquire))
        return 0;
    return work->seconds;
}

void ddpc_work_destroy(ddpc_work *work)
{
    if (!work)
        return;
    wait_done(work->pg, work);
    if (work->pg)
        return_handle(work->pg, work);
    else
        ddpc_free(work);
}
