// SPDX-License-Identifier: MIT
/* Series for `ddpc report`: (step, value) pairs pulled from records by key path. Invariant (see
 * report_impl.h): x strictly increases — a step at or before the last one (a resumed run
 * replaying steps after its checkpoint) replaces the points from that step on, and a "rerun"
 * record (a new run appended to an earlier one's metrics) drops the points from its step on. */
#include "metrics/report_impl.h"

#include <ddpc/alloc.h>

#include <math.h>
#include <string.h>

bool ddpc__report_is_progress(const ddpc__json *rec)
{
    return ddpc__json_get(rec, "loss") != NULL && ddpc__json_get(rec, "split") == NULL;
}

bool ddpc__report_is_eval(const ddpc__json *rec)
{
    const ddpc__json *s = ddpc__json_get(rec, "split");
    return s && s->type == DDPC__JSON_STRING;
}

static bool event_is(const ddpc__json *rec, const char *name)
{
    const ddpc__json *e = ddpc__json_get(rec, "event");
    return e && e->type == DDPC__JSON_STRING && strcmp(e->str, name) == 0;
}

bool ddpc__report_is_rerun(const ddpc__json *rec)
{
    return event_is(rec, "rerun");
}

bool ddpc__report_is_resume(const ddpc__json *rec)
{
    return event_is(rec, "resume") || event_is(rec, "restart");
}

const ddpc__json *ddpc__report_lookup(const ddpc__json *rec, const char *path)
{
    const char *slash = strchr(path, '/');
    if (!slash)
        return ddpc__json_get(rec, path);
    char group[128];
    size_t n = (size_t)(slash - path);
    if (n >= sizeof group)
        return NULL;
    memcpy(group, path, n);
    group[n] = '\0';
    const ddpc__json *g = ddpc__json_get(rec, group);
    /* A writer that did not nest the key spells it whole. */
    return g ? ddpc__json_get(g, slash + 1) : ddpc__json_get(rec, path);
}

ddpc_status ddpc__series_push(ddpc__series *s, double x, double y)
{
    while (s->n > 0 && s->x[s->n - 1] >= x) {
        s->n--;
        if (isfinite(s->y[s->n]))
            s->finite--;
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        double *nx = ddpc_malloc(cap * sizeof *nx), *ny = ddpc_malloc(cap * sizeof *ny);
        if (!nx || !ny) {
            ddpc_free(nx);
            ddpc_free(ny);
            return ddpc_errorf(DDPC_ENOMEM, "out of memory for the series '%s'", s->name);
        }
        if (s->n) {
            memcpy(nx, s->x, s->n * sizeof *nx);
            memcpy(ny, s->y, s->n * sizeof *ny);
        }
        ddpc_free(s->x);
        ddpc_free(s->y);
        s->x = nx;
        s->y = ny;
        s->cap = cap;
    }
    s->x[s->n] = x;
    s->y[s->n] = y;
    s->n++;
    if (isfinite(y))
        s->finite++;
    return DDPC_OK;
}

void ddpc__series_fini(ddpc__series *s)
{
    ddpc_free(s->x);
    ddpc_free(s->y);
    s->x = s->y = NULL;
    s->n = s->cap = s->finite = 0;
}

ddpc_status ddpc__report_series(const ddpc__report_data *d, ddpc__report_pred keep,
                                const char *split, const char *task, const char *path,
                                ddpc__series *s)
{
    for (size_t i = 0; i < d->n; i++) {
        const ddpc__json *r = d->rec[i];
        if (ddpc__report_is_rerun(r)) { /* a new run from this step: no earlier point stays */
            double from = ddpc__json_get(r, "step")->number;
            while (s->n > 0 && s->x[s->n - 1] >= from)
                s->finite -= isfinite(s->y[--s->n]) ? 1 : 0;
            continue;
        }
        if (!keep(r, split, task))
            continue;
        const ddpc__json *v = ddpc__report_lookup(r, path);
        if (!v || (v->type != DDPC__JSON_NUMBER && v->type != DDPC__JSON_NULL))
            continue;
        double y = v->type == DDPC__JSON_NUMBER && isfinite(v->number) ? v->number : NAN;
        DDPC_TRY(ddpc__series_push(s, ddpc__json_get(r, "step")->number, y));
    }
    return DDPC_OK;
}
