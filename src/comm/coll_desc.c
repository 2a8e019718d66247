// SPDX-License-Identifier: MIT
/* Collective descriptors (coll_desc.h): built the same way on every rank, compared bytewise by
 * the backends, and printed in the one wording every backend uses for a mismatch. */
#include "comm/coll_desc.h"

#include <stdio.h>

ddpc__coll_desc ddpc__coll_describe(const ddpc__coll *c)
{
    bool reduces = c->kind == DDPC__COLL_ALL_REDUCE || c->kind == DDPC__COLL_REDUCE_SCATTER;
    bool barrier = c->kind == DDPC__COLL_BARRIER;
    return (ddpc__coll_desc){.seq = c->seq,
                             .count = barrier ? 0 : c->count,
                             .kind = c->kind,
                             .dtype = barrier ? 0 : c->dtype,
                             .op = reduces ? (int32_t)c->op : 0,
                             .root = c->kind == DDPC__COLL_BROADCAST ? c->root : 0};
}

static void print(const ddpc__coll_desc *d, char *out, size_t cap)
{
    const char *kind = ddpc__coll_name((ddpc__coll_kind)d->kind);
    const char *dt = ddpc_dtype_name((ddpc_dtype)d->dtype);
    unsigned long long seq = d->seq, count = d->count;
    if (d->kind == DDPC__COLL_BARRIER)
        snprintf(out, cap, "%s #%llu", kind, seq);
    else if (d->kind == DDPC__COLL_BROADCAST)
        snprintf(out, cap, "%s #%llu of %llu %s from root %d", kind, seq, count, dt, (int)d->root);
    else if (d->kind == DDPC__COLL_ALL_GATHER)
        snprintf(out, cap, "%s #%llu of %llu %s", kind, seq, count, dt);
    else
        snprintf(out, cap, "%s #%llu of %llu %s (%s)", kind, seq, count, dt,
                 ddpc_reduce_op_name((ddpc_reduce_op)d->op));
}

ddpc_status ddpc__coll_mismatch(int me, const ddpc__coll_desc *mine, int other,
                                const ddpc__coll_desc *theirs)
{
    char a[160], b[160];
    print(mine, a, sizeof a);
    print(theirs, b, sizeof b);
    return ddpc_errorf(DDPC_EINVAL,
                       "collective mismatch: rank %d issued %s but rank %d issued %s (every rank "
                       "must issue the same collectives in the same order)",
                       me, a, other, b);
}
