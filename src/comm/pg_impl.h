// SPDX-License-Identifier: MIT
/* Private to src/comm: the backend function table behind ddpc_pg, and the reduction kernels the
 * backends share. pg.c owns argument checks, sequence numbers, the comm thread and the failed
 * state; a backend only moves and reduces bytes, and honours the deadline it is given. */
#ifndef DDPC_COMM_PG_IMPL_H
#define DDPC_COMM_PG_IMPL_H

#include <ddpc/comm.h>

typedef enum {
    DDPC__COLL_ALL_REDUCE,
    DDPC__COLL_BROADCAST,
    DDPC__COLL_ALL_GATHER,
    DDPC__COLL_REDUCE_SCATTER,
    DDPC__COLL_BARRIER,
    DDPC__COLL_COUNT
} ddpc__coll_kind;

/* "all_reduce", "broadcast", ... as used in error messages. */
const char *ddpc__coll_name(ddpc__coll_kind kind);

/* One collective as the backend sees it; arguments were already validated by pg.c. */
typedef struct {
    ddpc__coll_kind kind;
    const void *send; /* all_reduce: (count); all_gather: (count); reduce_scatter: (world, count) */
    void *recv;       /* all_reduce: (count); all_gather: (world, count); reduce_scatter: (count);
                         broadcast: the buffer, (count) */
    size_t count;     /* elements, as in the public call (recv_count for reduce_scatter) */
    ddpc_dtype dtype;
    ddpc_reduce_op op;
    int root;        /* broadcast only */
    uint64_t seq;    /* sequence number, the same on every rank */
    int phase;       /* ddpc_phase of the caller when it issued the collective */
    double deadline; /* ddpc_time_now() value after which the backend returns DDPC_ETIMEOUT */
} ddpc__coll;

/* A backend's function table. `state` is what init returned. Every function returns a status;
 * on DDPC_ETIMEOUT the message must name the collective, its sequence number and the ranks that
 * never arrived ("all_reduce #17 timed out after 300 s: ranks 2, 3 never arrived"). */
typedef struct {
    const char *name;
    /* Runs one collective to completion or failure. Called from one thread at a time. */
    ddpc_status (*run)(void *state, const ddpc__coll *coll);
    /* Frees everything; called once, after the last run. Must not block on peers for long. */
    void (*destroy)(void *state);
    /* Optional (NULL): shows the caller's phase to peers. Called from the caller's thread, also
     * while `run` is busy on the comm thread. */
    void (*set_phase)(void *state, int phase);
    /* Optional (NULL: the env's figures stand): this rank's index among the ranks on its host and
     * their number, as the backend found them while joining (gloo counts them in the store). */
    void (*layout)(const void *state, int *local_rank, int *local_world);
} ddpc__pg_backend;

/* Backend constructors: join the group (blocking until every rank joined or `deadline`). */
ddpc_status ddpc__shm_create(const ddpc_comm_env *env, double deadline,
                             const ddpc__pg_backend **ops, void **state);
/* Returns DDPC_EUNSUPPORTED with a clear message in builds without gloo (gloo.c). */
ddpc_status ddpc__gloo_create(const ddpc_comm_env *env, double deadline,
                              const ddpc__pg_backend **ops, void **state);
/* Returns DDPC_EUNSUPPORTED with a clear message in builds without MPI. */
ddpc_status ddpc__mpi_create(const ddpc_comm_env *env, double deadline,
                             const ddpc__pg_backend **ops, void **state);

/* dst[i] = dst[i] (op) src[i] for i < count, accumulating as the public header says (bf16/f16:
 * callers that reduce many inputs should use ddpc__reduce_many to round once). */
void ddpc__reduce_into(void *dst, const void *src, size_t count, ddpc_dtype dtype,
                       ddpc_reduce_op op);
/* dst[i] = reduce(srcs[0][i], ..., srcs[n-1][i]) in that order, AVG divided by n, bf16/f16
 * accumulated in f32 and rounded once (round to nearest even). dst may alias srcs[0]. */
void ddpc__reduce_many(void *dst, const void *const *srcs, int n, size_t count, ddpc_dtype dtype,
                       ddpc_reduce_op op);

/* reduce_chain.c: a rank-order reduction continued across hosts. The running value has
 * ddpc__reduce_acc_size(dtype) bytes per element (f32 for bf16/f16). acc = [acc_in op] srcs[0] op
 * ... op srcs[n-1] (acc_in NULL: start from srcs[0]; acc may alias acc_in); AVG accumulates as SUM.
 * ddpc__reduce_finish turns the running value over `world` inputs into the result (AVG divides,
 * 16-bit types round once); dst may alias acc for the other types. Together they give the bits of
 * ddpc__reduce_many over the same inputs in the same order. */
size_t ddpc__reduce_acc_size(ddpc_dtype dtype);
void ddpc__reduce_chain(void *acc, const void *acc_in, const void *const *srcs, int n, size_t count,
                        ddpc_dtype dtype, ddpc_reduce_op op);
void ddpc__reduce_finish(void *dst, const void *acc, size_t count, ddpc_dtype dtype,
                         ddpc_reduce_op op, int world);

#endif
