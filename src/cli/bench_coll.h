// SPDX-License-Identifier: MIT
/* Private to `ddpc bench <collective>` (bench_coll.c, bench_coll_check.c): the sweep options and
 * the input/reference functions of --check. Inputs are small integers, exact in every dtype, so
 * sums, minima and maxima have one right answer whatever the reduction order. */
#ifndef DDPC_CLI_BENCH_COLL_H
#define DDPC_CLI_BENCH_COLL_H

#include <ddpc/comm.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    DDPC__BENCH_ALL_REDUCE,
    DDPC__BENCH_BROADCAST,
    DDPC__BENCH_ALL_GATHER,
    DDPC__BENCH_REDUCE_SCATTER,
    DDPC__BENCH_COUNT
} ddpc__bench_coll;

typedef struct {
    ddpc__bench_coll coll;
    size_t min_bytes, max_bytes; /* total bytes S of one call, as nccl-tests' -b/-e */
    long factor, iters, warmup;
    long min_ms, max_ms; /* 0: off; else raise/lower the timed iterations to last about this */
    ddpc_dtype dtype;
    ddpc_reduce_op op;
    ddpc_backend backend;
    int root; /* broadcast */
    bool check, json;
    bool cuda; /* --device cuda (implied by --backend nccl): the collectives on GPU buffers */
} ddpc__bench_options;

/* One call's shape on a group of `world` ranks: `per` elements per rank block (all_reduce and
 * broadcast: the whole count), send (n_send) and recv (n_recv) element counts. */
typedef struct {
    int rank, world;
    size_t per, n_send, n_recv;
} ddpc__bench_shape;

/* Writes rank's inputs into send (n_send) and a sentinel into recv (n_recv); for broadcast the
 * root's buffer (recv) holds the root's inputs. Touches every element the call will use. */
void ddpc__bench_fill(const ddpc__bench_options *o, const ddpc__bench_shape *s, void *send,
                      void *recv);
/* Number of elements of recv (n_recv) that differ from the locally computed result (exact for
 * integers, sum, min and max; within the dtype's rounding for a floating-point avg). */
int64_t ddpc__bench_count_wrong(const ddpc__bench_options *o, const ddpc__bench_shape *s,
                                const void *recv);

#endif
