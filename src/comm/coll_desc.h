// SPDX-License-Identifier: MIT
/* Private to src/comm: what a rank says it is running, so that every backend can check that all
 * ranks issued the same collective before moving a byte, and word a mismatch the same way. The
 * descriptor is plain data of fixed layout (32 bytes), copied between processes as it is; fields
 * that do not apply to a kind are zero, so equal calls give equal bytes. */
#ifndef DDPC_COMM_COLL_DESC_H
#define DDPC_COMM_COLL_DESC_H

#include "comm/pg_impl.h"

#include <assert.h>

typedef struct {
    uint64_t seq, count;
    int32_t kind, dtype, op, root;
} ddpc__coll_desc;

static_assert(sizeof(ddpc__coll_desc) == 32, "the descriptor crosses process boundaries as is");

/* The descriptor of `c`: count and dtype zero for a barrier, op only for the reducing kinds, root
 * only for broadcast. */
ddpc__coll_desc ddpc__coll_describe(const ddpc__coll *c);

/* DDPC_EINVAL: "collective mismatch: rank 0 issued all_reduce #1 of 300 f32 (max) but rank 1
 * issued broadcast #1 of 100 f32 from root 0 (every rank must issue the same collectives in the
 * same order)". `theirs` may come from another process: values outside the enums print as "?". */
ddpc_status ddpc__coll_mismatch(int me, const ddpc__coll_desc *mine, int other,
                                const ddpc__coll_desc *theirs);

#endif
