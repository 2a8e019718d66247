// SPDX-License-Identifier: MIT
/* The `task_shard` sampler: whole tasks (sources) assigned to ranks, balanced by size.
 * Assignment: tasks by decreasing size (ties: lower task first), each to the rank with the least
 * load so far (ties: lower rank), the longest-processing-time rule. A rank visits the global
 * indices of its tasks, tasks in increasing order, each task's samples in order, or all of them
 * shuffled with seed + epoch. Ranks' counts differ; every sample is visited exactly once. */
#include "data/sampler_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/rng.h>

/* order (n) = task numbers sorted by decreasing size, ties by increasing task (insertion sort:
 * task counts are small). */
static void sort_by_size(const int64_t *sizes, int n, int *order)
{
    for (int i = 0; i < n; i++) {
        int t = i, j = i;
        while (j > 0 && sizes[order[j - 1]] < sizes[t]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = t;
    }
}

ddpc_status ddpc__sampler_task_shard_init(ddpc_sampler *s)
{
    const ddpc_sampler_config *c = &s->cfg;
    int n = s->num_sources;
    s->owner = ddpc_malloc((size_t)n * sizeof *s->owner);
    int *order = ddpc_malloc((size_t)n * sizeof *order);
    int64_t *load = ddpc_calloc((size_t)c->world, sizeof *load);
    if (!s->owner || !order || !load) {
        ddpc_free(order);
        ddpc_free(load);
        return ddpc_errorf(DDPC_ENOMEM, "task_shard sampler: out of memory for %d tasks", n);
    }
    sort_by_size(s->sizes, n, order);
    for (int k = 0; k < n; k++) {
        int best = 0;
        for (int r = 1; r < c->world; r++)
            if (load[r] < load[best])
                best = r;
        s->owner[order[k]] = best;
        load[best] += s->sizes[order[k]];
    }
    s->len = load[c->rank];
    ddpc_free(order);
    ddpc_free(load);
    return ddpc__sampler_alloc(&s->out, s->len, "rank indices");
}

void ddpc__sampler_task_shard_fill(ddpc_sampler *s)
{
    int64_t k = 0;
    for (int t = 0; t < s->num_sources; t++)
        if (s->owner[t] == s->cfg.rank)
            for (int64_t j = 0; j < s->sizes[t]; j++)
                s->out[k++] = s->offsets[t] + j;
    if (s->cfg.shuffle) {
        ddpc_rng r =
            ddpc_rng_make(s->cfg.seed + (uint64_t)s->epoch, DDPC__SAMPLER_STREAM_TASK_SHUFFLE);
        ddpc_rng_shuffle(&r, s->out, k);
    }
}
