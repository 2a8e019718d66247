// SPDX-License-Identifier: MIT
/* The hang recorder (include/ddpc/comm.h): every process group keeps its last collectives, and
 * the first failure writes them as JSON for a post-mortem, on by default (PyTorch's recorder is
 * opt-in, and its users learn of it after the hang). Recording costs a few stores per collective;
 * the file is written on the failure path only. */
#include "comm/pg_front.h"

#include <ddpc/fs.h>
#include <ddpc/timer.h>

#include <stdio.h>
#include <string.h>

static const char *const PHASES[DDPC_PHASE_COUNT] = {"setup",     "data", "forward",   "backward",
                                                     "optimizer", "eval", "checkpoint"};

const char *ddpc_phase_name(ddpc_phase phase)
{
    return (unsigned)phase < DDPC_PHASE_COUNT ? PHASES[phase] : "unknown";
}

void ddpc_pg_set_phase(ddpc_pg *pg, ddpc_phase phase)
{
    if (!pg || (unsigned)phase >= DDPC_PHASE_COUNT)
        return;
    pg->phase = (int)phase;
    if (pg->ops && pg->ops->set_phase)
        pg->ops->set_phase(pg->state, (int)phase);
}

ddpc_status ddpc_pg_set_flight_dir(ddpc_pg *pg, const char *dir)
{
    if (!dir)
        dir = "";
    if (strlen(dir) >= sizeof pg->flight.dir)
        return ddpc_errorf(DDPC_EINVAL, "flight record directory '%s' is too long", dir);
    snprintf(pg->flight.dir, sizeof pg->flight.dir, "%s", dir);
    return DDPC_OK;
}

ddpc__flight_entry *ddpc__flight_open(ddpc__flight *f, const ddpc__coll *c, double start)
{
    ddpc__flight_entry *e = &f->ring[f->n++ % DDPC_FLIGHT_ENTRIES];
    *e = (ddpc__flight_entry){.seq = c->seq,
                              .kind = (int)c->kind,
                              .dtype = (int)c->dtype,
                              .phase = c->phase,
                              .count = c->count,
                              .start = start};
    return e;
}

/* A JSON string of plain text (messages may hold quotes, backslashes, newlines). */
static void json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(out, "\\u%04x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

void ddpc__flight_dump(const ddpc__flight *f, const ddpc_pg *pg, const char *error)
{
    if (!f->dir[0] || ddpc_mkdirs(f->dir) != DDPC_OK)
        return; /* best effort: the collective's own error is what the caller reports */
    char path[640];
    snprintf(path, sizeof path, "%s/rank%d.json", f->dir, pg->rank);
    ddpc_fs_out o;
    if (ddpc_fs_out_open(&o, path, NULL) != DDPC_OK)
        return;
    FILE *out = o.f;
    double now = ddpc_time_now();
    fprintf(out, "{\"rank\": %d, \"world\": %d, \"backend\": \"%s\", \"phase\": \"%s\", ", pg->rank,
            pg->world, ddpc_backend_name(pg->backend), ddpc_phase_name((ddpc_phase)pg->phase));
    fprintf(out, "\"clock\": \"seconds before this record was written\", \"error\": ");
    json_string(out, error);
    fprintf(out, ",\n \"collectives\": [");
    uint64_t first = f->n > DDPC_FLIGHT_ENTRIES ? f->n - DDPC_FLIGHT_ENTRIES : 0;
    for (uint64_t i = first; i < f->n; i++) {
        const ddpc__flight_entry *e = &f->ring[i % DDPC_FLIGHT_ENTRIES];
        bool last = i + 1 == f->n;
        const char *state = e->end > 0 ? "done" : last ? "failed" : "open";
        fprintf(out,
                "%s\n  {\"seq\": %llu, \"op\": \"%s\", \"dtype\": \"%s\", \"count\": %zu, "
                "\"phase\": \"%s\", \"state\": \"%s\", \"start_s\": %.6f, ",
                i == first ? "" : ",", (unsigned long long)e->seq,
                ddpc__coll_name((ddpc__coll_kind)e->kind), ddpc_dtype_name((ddpc_dtype)e->dtype),
                e->count, ddpc_phase_name((ddpc_phase)e->phase), state, e->start - now);
        if (e->end > 0)
            fprintf(out, "\"end_s\": %.6f}", e->end - now);
        else
            fprintf(out, "\"end_s\": null}");
    }
    fprintf(out, "\n]}\n");
    (void)ddpc_fs_out_commit(&o, false);
}
