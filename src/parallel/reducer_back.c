// SPDX-License-Identifier: MIT
/* ZeRO-2/3 on released memory: on the CPU a released page faults back in zeroed on its next
 * touch, but on a GPU with virtual memory management an unmapped granule is a fault, so every
 * writer or reader of a released range of the flat gradient or parameter buffer backs it first:
 * backward's writes into the flat buffer (a bucket at a time, from the grad-use hook, in the order
 * backward reaches them), the reduce-scatter's read of a bucket, the pool's copy of what a no_sync
 * pass summed, the gathers of stage 3's parameters. Invariant: the owned chunks are always backed;
 * everything else is backed only between such a back and the release that follows it. On the CPU
 * back does nothing, so this file changes no CPU result. */
#include "parallel/reducer_impl.h"

#include <ddpc/device.h>
#include <ddpc/nn.h>

bool ddpc__reducer_back(ddpc_reducer *r, float *buf, size_t lo, size_t floats)
{
    ddpc_status st = ddpc__zmem_back(r, buf + lo, floats);
    ddpc__reducer_keep_error(r, st); /* the table's message names what failed */
    return st == DDPC_OK;
}

bool ddpc__reducer_back_bucket(ddpc_reducer *r, const ddpc__bucket *b, float *buf)
{
    return ddpc__reducer_back(r, buf, b->lo, b->hi - b->lo);
}

void ddpc__reducer_back_shard(ddpc_reducer *r, float *buf)
{
    for (size_t i = 0; i < r->n_shard; i++)
        ddpc__reducer_back(r, buf, r->shard[i].lo, r->shard[i].len);
}

ddpc_status ddpc__reducer_release_all_but_shard(ddpc_reducer *r, float *buf)
{
    ddpc_status st = ddpc__zmem_release(r, buf, ddpc_model_num_params(r->model));
    ddpc__reducer_keep_error(r, st);
    if (st != DDPC_OK)
        return st;
    ddpc__reducer_back_shard(r, buf);
    return r->error; /* back_shard's failure (kept), if any */
}
