// SPDX-License-Identifier: MIT
/* profile.steps: a Chrome trace (trace-event JSON, "X" events in microseconds) of steps a..b.
 * Every rank records into ddpc_trace's array, allocated before step a, only while those steps
 * run; after step b the ranks' serialized events are all-gathered through the process group (so
 * a run across hosts needs no shared file system) and rank 0 writes <run_dir>/trace.json. Ranks'
 * clocks are CLOCK_MONOTONIC: comparable across ranks of one host, not across hosts. */
#include "train/trainer_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/fs.h>

#include <stdio.h>
#include <string.h>

enum { EVENTS_PER_STEP = 1024 };

ddpc_status ddpc__trainer_read_profile(ddpc_trainer *t)
{
    int64_t v[2];
    size_t n = 0;
    DDPC_TRY(ddpc_config_int_list(t->cfg, "profile.steps", NULL, 0, 1, INT64_MAX, v, 2, &n));
    if (n == 0)
        return DDPC_OK;
    if (n != 2 || v[1] < v[0])
        return ddpc_errorf(DDPC_EINVAL,
                           "profile.steps must be [first, last] with 1 <= first <= last, got %zu "
                           "value%s",
                           n, n == 1 ? "" : "s");
    t->set.profile_first = v[0];
    t->set.profile_last = v[1];
    return DDPC_OK;
}

ddpc_status ddpc__trainer_trace_before(ddpc_trainer *t, int64_t next)
{
    const trainer_settings *s = &t->set;
    if (s->profile_first == 0 || next < s->profile_first || next > s->profile_last ||
        ddpc_trace_on())
        return DDPC_OK;
    DDPC_TRY(ddpc_trace_open((size_t)(s->profile_last - next + 1) * EVENTS_PER_STEP));
    ddpc_trace_record(true);
    return DDPC_OK;
}

/* Rank 0: {"traceEvents": [every rank's blob]}; the first blob's leading comma is dropped. */
static ddpc_status write_trace(ddpc_trainer *t, const char *all, size_t stride, size_t *bytes)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/trace.json", t->set.run_dir);
    ddpc_fs_out o;
    DDPC_TRY(ddpc_fs_out_open(&o, path, NULL));
    FILE *f = o.f;
    fputs("{\"displayTimeUnit\": \"ms\", \"traceEvents\": [", f);
    for (int r = 0; r < t->dist.world; r++) {
        const char *blob = all + (size_t)r * stride;
        fputs(r == 0 && blob[0] == ',' ? blob + 1 : blob, f);
    }
    fputs("\n]}\n", f);
    *bytes = (size_t)ftell(f);
    return ddpc_fs_out_commit(&o, false);
}

static ddpc_status gather_and_write(ddpc_trainer *t)
{
    char *blob = NULL, *all = NULL;
    size_t len = 0, dropped = 0, bytes = 0;
    DDPC_TRY(ddpc_trace_serialize(t->dist.rank, &blob, &len, &dropped));
    double longest = (double)len + 1.0; /* with its NUL */
    ddpc_status st = t->dist.world > 1 ? ddpc_pg_all_reduce(t->dist.pg, &longest, &longest, 1,
                                                            DDPC_DTYPE_F64, DDPC_REDUCE_MAX)
                                       : DDPC_OK;
    size_t words = ((size_t)longest + 3) / 4, stride = 4 * words;
    if (st == DDPC_OK && !(all = ddpc_calloc((size_t)t->dist.world, stride)))
        st = ddpc_errorf(DDPC_ENOMEM, "out of memory gathering the trace (%zu bytes per rank)",
                         stride);
    if (st == DDPC_OK) {
        char *mine = all + (size_t)t->dist.rank * stride;
        memcpy(mine, blob, len + 1);
        if (t->dist.world > 1) /* in place: rank r's words are already at r x words */
            st = ddpc_pg_all_gather(t->dist.pg, mine, all, words, DDPC_DTYPE_I32);
    }
    if (st == DDPC_OK && t->dist.rank == 0)
        st = write_trace(t, all, stride, &bytes);
    if (st == DDPC_OK && t->dist.rank == 0 && t->log)
        fprintf(t->log, "trace of steps %lld..%lld: %s/trace.json (%zu bytes%s)\n",
                (long long)t->set.profile_first, (long long)ddpc_engine_step(t->engine),
                t->set.run_dir, bytes, dropped ? ", some events dropped: array full" : "");
    ddpc_free(all);
    ddpc_free(blob);
    return st; /* the array stays until the trainer's destroy: a loader may be mid-add */
}

ddpc_status ddpc__trainer_trace_after(ddpc_trainer *t, double t0, double t1)
{
    if (!ddpc_trace_on())
        return DDPC_OK;
    int64_t step = ddpc_engine_step(t->engine);
    ddpc_trace_add(DDPC_TRACE_COMPUTE, "step", t0, t1, step, NULL, 0);
    if (step < t->set.profile_last && step < t->total_steps)
        return DDPC_OK;
    ddpc_trace_record(false);
    return gather_and_write(t);
}
