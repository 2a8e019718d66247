// SPDX-License-Identifier: MIT
/* The nccl backend: NCCL collectives on device buffers, on a stream of their own, one GPU per
 * rank. Every wait polls (stream query, then ncclCommGetAsyncError) against the collective's
 * deadline instead of blocking in CUDA, so a dead or hung peer becomes ddpc's timeout or failure
 * message and the communicator is aborted (as torch's ProcessGroupNCCL watchdog does). A rank
 * that has waited a while writes how far it got to the job's store, so a timeout can name the
 * ranks that never arrived. Invariant: after an abort nothing reaches NCCL again but destroy. */
#include "comm/device_impl.h"

#ifndef DDPC_HAVE_NCCL

ddpc_status ddpc__nccl_create(const ddpc_comm_env *env, double deadline,
                              const ddpc__pg_backend **ops, void **state)
{
    (void)env;
    (void)deadline;
    *ops = NULL;
    *state = NULL;
    return ddpc__nccl_available();
}

#else

#include "comm/nccl_impl.h"
#include "comm/store_job.h"

#include <ddpc/alloc.h>
#include <ddpc/device.h>
#include <ddpc/timer.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* How long a rank waits in a collective before telling the store how far it got. */
static const double SAY_PROGRESS_AFTER_S = 1.0;
/* How long destroy lets ncclCommFinalize flush before aborting instead. */
static const double FINALIZE_S = 10.0;

typedef struct {
    const ddpc__nccl_api *api;
    const ddpc_kernel_table *dev; /* this rank's GPU; its stream produced the buffers */
    ncclComm_t comm;
    cudaStream_t stream; /* the collectives' own */
    float *one;          /* (1) device scalar the barrier all-reduces */
    int rank, world;
    bool aborted;
    ddpc_store_server *server; /* rank 0's, unless a launcher agent serves the store */
    ddpc_store *store;         /* NULL for world size 1 */
    char prefix[DDPC__JOB_PREFIX_CAP];
} nccl_state;

static ncclDataType_t nccl_type(ddpc_dtype t)
{
    static const ncclDataType_t types[DDPC_DTYPE_COUNT] = {ncclFloat32, ncclFloat64, ncclBfloat16,
                                                           ncclFloat16, ncclInt32,   ncclInt64};
    return types[t];
}

/* One rank's average is its own value: ncclSum, since NCCL 2.28.3's ncclAvg on one rank left
 * the last elements of a count that is not a multiple of its vector width wrong (an H200, 2026-11).
 */
static ncclRedOp_t nccl_op(const nccl_state *st, ddpc_reduce_op op)
{
    static const ncclRedOp_t ops[DDPC_REDUCE_COUNT] = {ncclSum, ncclAvg, ncclMin, ncclMax};
    return st->world == 1 && op == DDPC_REDUCE_AVG ? ncclSum : ops[op];
}

static void nap(int *us)
{
    nanosleep(&(struct timespec){0, (long)*us * 1000}, NULL);
    *us = *us < 1000 ? *us * 2 : 1000; /* 20 us at first: a small all-reduce takes about that */
}

static void abort_comm(nccl_state *st)
{
    if (st->comm && !st->aborted)
        st->api->comm_abort(st->comm);
    st->aborted = true;
}

/* NCCL's words for a failed call or asynchronous error. */
static const char *why(const nccl_state *st, ncclResult_t r)
{
    static _Thread_local char buf[400];
    const char *last = st->comm ? st->api->get_last_error(st->comm) : NULL;
    snprintf(buf, sizeof buf, "%s%s%s", st->api->get_error_string(r), last && last[0] ? ": " : "",
             last ? last : "");
    return buf;
}

static ddpc_status cuda_failed(const char *what, cudaError_t e)
{
    (void)cudaGetLastError();
    return ddpc_errorf(DDPC_EINTERNAL, "nccl backend: %s failed: %s", what, cudaGetErrorString(e));
}

/* ---- joining ---- */

/* The store key `suffix` of this job attempt (valid until the next call on this thread). */
static const char *key_of(const nccl_state *st, const char *suffix)
{
    static _Thread_local char key[DDPC_STORE_KEY_MAX + 1];
    snprintf(key, sizeof key, "%s%s", st->prefix, suffix);
    return key;
}

static ddpc_status share_id(nccl_state *st, const ddpc_comm_env *env, double deadline,
                            ncclUniqueId *id)
{
    if (st->world == 1 || st->rank == 0) {
        ncclResult_t r = st->api->get_unique_id(id);
        if (r != ncclSuccess)
            return ddpc_errorf(DDPC_EIO, "nccl backend: ncclGetUniqueId failed: %s", why(st, r));
    }
    if (st->world == 1)
        return DDPC_OK;
    DDPC_TRY(ddpc__job_store_open(env, "the nccl backend", deadline, &st->server, &st->store,
                                  st->prefix));
    char key[DDPC_STORE_KEY_MAX + 1];
    snprintf(key, sizeof key, "%snccl/id", st->prefix);
    if (st->rank == 0)
        return ddpc_store_set(st->store, key, id, sizeof *id);
    size_t len = 0;
    DDPC_TRY(ddpc_store_get(st->store, key, id, sizeof *id, &len, deadline));
    if (len != sizeof *id)
        return ddpc_errorf(DDPC_EIO,
                           "nccl backend: the unique id in the store has %zu bytes, not "
                           "%zu",
                           len, sizeof *id);
    return DDPC_OK;
}

/* Polls a non-blocking communicator until the call in flight finished, failed or the deadline
 * passed (then aborts). `what` names the call for messages. */
static ddpc_status settle(nccl_state *st, const char *what, double deadline, double timeout)
{
    int us = 20;
    for (;;) {
        ncclResult_t err = ncclSuccess;
        ncclResult_t r = st->api->comm_get_async_error(st->comm, &err);
        if (r != ncclSuccess)
            err = r;
        if (err == ncclSuccess)
            return DDPC_OK;
        if (err != ncclInProgress) {
            ddpc_status s =
                ddpc_errorf(DDPC_EPEER, "nccl backend: %s failed: %s", what, why(st, err));
            abort_comm(st);
            return s;
        }
        if (ddpc_time_now() > deadline) {
            abort_comm(st);
            return ddpc_errorf(DDPC_ETIMEOUT, "nccl backend: %s timed out after %.3g s", what,
                               timeout);
        }
        nap(&us);
    }
}

static ddpc_status join(nccl_state *st, const ddpc_comm_env *env, double deadline)
{
    DDPC_TRY(ddpc__nccl_load(&st->api));
    DDPC_TRY(ddpc_device_select(DDPC_DEVICE_CUDA, env->local_rank, &st->dev));
    cudaError_t e = cudaSetDevice(st->dev->device);
    if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags(&st->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess)
        return cuda_failed("creating the communication stream", e);
    e = cudaMalloc((void **)&st->one, sizeof(float));
    if (e != cudaSuccess)
        return cuda_failed("allocating the barrier's scalar", e);
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    DDPC_TRY(share_id(st, env, deadline, &id));
    if (st->store) /* counted, so that a timeout can say how many came */
        DDPC_TRY(ddpc_store_add(st->store, key_of(st, "nccl/joined"), 1, NULL));
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0; /* every wait below polls against a deadline */
    ncclResult_t r = st->api->comm_init_rank_config(&st->comm, st->world, id, st->rank, &cfg);
    if (r != ncclSuccess && r != ncclInProgress) {
        ddpc_status s = ddpc_errorf(DDPC_EIO,
                                    "nccl backend: ncclCommInitRankConfig failed on "
                                    "GPU %d: %s",
                                    st->dev->device, why(st, r));
        if (st->comm)
            abort_comm(st);
        return s;
    }
    double now = ddpc_time_now();
    ddpc_status s =
        settle(st, "joining the communicator", deadline, deadline - now > 0 ? deadline - now : 0);
    int64_t joined = 0;
    if (s == DDPC_ETIMEOUT && st->store &&
        ddpc_store_add(st->store, key_of(st, "nccl/joined"), 0, &joined) == DDPC_OK)
        s = ddpc_errorf(DDPC_ETIMEOUT,
                        "nccl backend: joining the communicator timed out: %lld of "
                        "%d ranks reached it",
                        (long long)joined, st->world);
    return s;
}

/* ---- one collective ---- */

/* Only device memory: a host pointer would crash inside NCCL's kernels. */
static ddpc_status check_device(const ddpc__coll *c, const void *p, const char *name)
{
    struct cudaPointerAttributes a;
    cudaError_t e = cudaPointerGetAttributes(&a, p);
    if (e != cudaSuccess)
        (void)cudaGetLastError();
    if (e == cudaSuccess && (a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged))
        return DDPC_OK;
    return ddpc_errorf(DDPC_EINVAL,
                       "%s #%" PRIu64 ": %s is not device memory (the nccl backend moves GPU "
                       "buffers only)",
                       ddpc__coll_name(c->kind), c->seq, name);
}

static ncclResult_t enqueue(nccl_state *st, const ddpc__coll *c)
{
    ncclDataType_t t = nccl_type(c->dtype);
    const ddpc__nccl_api *a = st->api;
    /* count 0 still synchronises (comm.h), and its buffers may be NULL: a barrier */
    switch (c->count == 0 ? DDPC__COLL_BARRIER : c->kind) {
    case DDPC__COLL_ALL_REDUCE:
        return a->all_reduce(c->send, c->recv, c->count, t, nccl_op(st, c->op), st->comm,
                             st->stream);
    case DDPC__COLL_BROADCAST:
        return a->broadcast(c->recv, c->recv, c->count, t, c->root, st->comm, st->stream);
    case DDPC__COLL_ALL_GATHER:
        return a->all_gather(c->send, c->recv, c->count, t, st->comm, st->stream);
    case DDPC__COLL_REDUCE_SCATTER:
        return a->reduce_scatter(c->send, c->recv, c->count, t, nccl_op(st, c->op), st->comm,
                                 st->stream);
    default: /* NCCL has no barrier: a one-element all-reduce, as torch does */
        return a->all_reduce(st->one, st->one, 1, ncclFloat32, ncclSum, st->comm, st->stream);
    }
}

/* Tells the other ranks (through the store) that this rank reached collective `seq`. */
static void say_progress(nccl_state *st, uint64_t seq)
{
    char key[DDPC_STORE_KEY_MAX + 1], val[32];
    snprintf(key, sizeof key, "%snccl/at/%d", st->prefix, st->rank);
    snprintf(val, sizeof val, "%" PRIu64, seq);
    (void)ddpc_store_set(st->store, key, val, strlen(val)); /* best effort: only for messages */
}

/* "ranks 2, 3 never arrived", from what the waiting ranks wrote to the store. */
static void who_is_missing(nccl_state *st, uint64_t seq, char *out, size_t cap)
{
    size_t len = 0;
    int missing = 0;
    out[0] = '\0';
    for (int r = 0; r < st->world && st->store && len + 16 < cap; r++) {
        char key[DDPC_STORE_KEY_MAX + 1], val[32] = "";
        size_t n = 0;
        bool found = false;
        snprintf(key, sizeof key, "%snccl/at/%d", st->prefix, r);
        if (r != st->rank &&
            ddpc_store_try_get(st->store, key, val, sizeof val - 1, &n, &found) == DDPC_OK) {
            val[n < sizeof val ? n : sizeof val - 1] = '\0';
            if (!found || strtoull(val, NULL, 10) < seq)
                len += (size_t)snprintf(out + len, cap - len, "%s%d", missing++ ? ", " : "", r);
        }
    }
    if (missing) {
        char list[256];
        snprintf(list, sizeof list, "%s", out);
        snprintf(out, cap, "rank%s %s never arrived", missing > 1 ? "s" : "", list);
    } else {
        snprintf(out, cap,
                 "every rank arrived, so NCCL's transfer itself stalled "
                 "(NCCL_DEBUG=WARN may say why)");
    }
}

static ddpc_status wait_stream(nccl_state *st, const ddpc__coll *c)
{
    const char *name = ddpc__coll_name(c->kind);
    double start = ddpc_time_now(), timeout = c->deadline - start;
    double say_at =
        start + (timeout / 2 < SAY_PROGRESS_AFTER_S ? timeout / 2 : SAY_PROGRESS_AFTER_S);
    bool said = false;
    int us = 20;
    for (;;) {
        cudaError_t e = cudaStreamQuery(st->stream);
        if (e == cudaSuccess)
            return DDPC_OK;
        if (e != cudaErrorNotReady) {
            abort_comm(st);
            return cuda_failed(name, e);
        }
        ncclResult_t err = ncclSuccess;
        if (st->api->comm_get_async_error(st->comm, &err) == ncclSuccess && err != ncclSuccess &&
            err != ncclInProgress) {
            ddpc_status s =
                ddpc_errorf(DDPC_EPEER, "%s #%" PRIu64 " failed on the nccl backend: %s", name,
                            c->seq, why(st, err));
            abort_comm(st);
            return s;
        }
        double now = ddpc_time_now();
        if (!said && st->store && now > say_at) {
            say_progress(st, c->seq);
            said = true;
        }
        if (now > c->deadline) {
            char missing[320];
            who_is_missing(st, c->seq, missing, sizeof missing);
            abort_comm(st);
            return ddpc_errorf(DDPC_ETIMEOUT, "%s #%" PRIu64 " timed out after %.3g s: %s", name,
                               c->seq, timeout, missing);
        }
        nap(&us);
    }
}

static ddpc_status run(void *state, const ddpc__coll *c)
{
    nccl_state *st = state;
    if (st->aborted)
        return ddpc_errorf(DDPC_EPEER, "nccl backend: the communicator was aborted earlier");
    cudaError_t e = cudaSetDevice(st->dev->device);
    if (e != cudaSuccess)
        return cuda_failed("making the GPU current", e);
    if (c->kind != DDPC__COLL_BARRIER && c->count > 0) {
        DDPC_TRY(check_device(c, c->recv, c->kind == DDPC__COLL_BROADCAST ? "buf" : "recv"));
        if (c->kind != DDPC__COLL_BROADCAST)
            DDPC_TRY(check_device(c, c->send, "send"));
    }
    /* The buffers were written on the kernels' stream: let it finish first (DDP overlap, with
     * events between the streams, is the trainer's to add). */
    st->dev->synchronize();
    ncclResult_t r = enqueue(st, c);
    if (r != ncclSuccess && r != ncclInProgress) {
        ddpc_status s = ddpc_errorf(DDPC_EPEER, "%s #%" PRIu64 " failed on the nccl backend: %s",
                                    ddpc__coll_name(c->kind), c->seq, why(st, r));
        abort_comm(st);
        return s;
    }
    if (r == ncclInProgress) {
        char what[64];
        snprintf(what, sizeof what, "%s #%" PRIu64, ddpc__coll_name(c->kind), c->seq);
        DDPC_TRY(settle(st, what, c->deadline, c->deadline - ddpc_time_now()));
    }
    return wait_stream(st, c);
}

/* ---- teardown ---- */

static void destroy(void *state)
{
    nccl_state *st = state;
    if (st->comm && !st->aborted) {
        /* Finalize flushes and may wait for peers: bounded, then abort (settle aborts). */
        ncclResult_t r = st->api->comm_finalize(st->comm);
        if (r != ncclSuccess && r != ncclInProgress)
            abort_comm(st);
        else
            (void)settle(st, "finalizing the communicator", ddpc_time_now() + FINALIZE_S,
                         FINALIZE_S);
        if (!st->aborted)
            st->api->comm_destroy(st->comm);
    }
    if (st->one)
        cudaFree(st->one);
    if (st->stream)
        cudaStreamDestroy(st->stream);
    (void)cudaGetLastError();
    ddpc_store_close(st->store);
    ddpc__job_store_release(st->server);
    ddpc_free(st);
}

static const ddpc__pg_backend nccl_ops = {"nccl", run, destroy, NULL, NULL};

ddpc_status ddpc__nccl_create(const ddpc_comm_env *env, double deadline,
                              const ddpc__pg_backend **ops, void **state)
{
    *ops = NULL;
    *state = NULL;
    nccl_state *st = ddpc_calloc(1, sizeof *st);
    if (!st)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for the nccl backend");
    st->rank = env->rank;
    st->world = env->world_size;
    ddpc_status s = join(st, env, deadline);
    if (s != DDPC_OK) {
        if (st->api) {
            abort_comm(st);
            destroy(st);
        } else {
            ddpc_free(st);
        }
        return s;
    }
    *ops = &nccl_ops;
    *state = st;
    return DDPC_OK;
}

#endif
