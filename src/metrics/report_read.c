// SPDX-License-Identifier: MIT
/* metrics.jsonl into records for `ddpc report`. Invariant: every line that is not a JSON object
 * with a numeric "step" is counted in `skipped` and left out, never fatal — a killed run leaves
 * its last line torn, and a report of everything before it is what is wanted. */
#include "metrics/report_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/fs.h>

#include <string.h>

static ddpc_status push(ddpc__report_data *d, ddpc__json *v)
{
    if (d->n == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 256;
        ddpc__json **r = ddpc_malloc(cap * sizeof *r);
        if (!r)
            return ddpc_errorf(DDPC_ENOMEM, "out of memory for %zu metrics records", cap);
        if (d->n)
            memcpy(r, d->rec, d->n * sizeof *r);
        ddpc_free(d->rec);
        d->rec = r;
        d->cap = cap;
    }
    d->rec[d->n++] = v;
    return DDPC_OK;
}

static bool blank(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r')
            return false;
    return true;
}

ddpc_status ddpc__report_read(ddpc__report_data *d, const char *path)
{
    memset(d, 0, sizeof *d);
    char *text = NULL;
    size_t len = 0;
    DDPC_TRY(ddpc_read_file(path, NULL, 0, NULL, &text, &len));
    ddpc_status st = DDPC_OK;
    size_t line_no = 0;
    for (size_t at = 0; at < len && st == DDPC_OK;) {
        const char *nl = memchr(text + at, '\n', len - at);
        size_t end = nl ? (size_t)(nl - text) : len;
        line_no++;
        if (!blank(text + at, end - at)) {
            ddpc__json *v = NULL;
            ddpc_status pst = ddpc__json_parse(&v, text + at, end - at, path);
            const ddpc__json *step = pst == DDPC_OK ? ddpc__json_get(v, "step") : NULL;
            if (step && step->type == DDPC__JSON_NUMBER) {
                st = push(d, v);
                if (st != DDPC_OK)
                    ddpc__json_free(v);
            } else if (pst == DDPC_ENOMEM) {
                st = pst;
            } else {
                ddpc__json_free(v);
                d->skipped++;
                if (!d->first_bad_line)
                    d->first_bad_line = line_no;
                d->torn_last = !nl;
            }
        }
        at = end + 1;
    }
    ddpc_free(text);
    if (st != DDPC_OK)
        ddpc__report_data_fini(d);
    return st;
}

void ddpc__report_data_fini(ddpc__report_data *d)
{
    for (size_t i = 0; i < d->n; i++)
        ddpc__json_free(d->rec[i]);
    ddpc_free(d->rec);
    memset(d, 0, sizeof *d);
}
