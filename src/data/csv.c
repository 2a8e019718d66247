// SPDX-License-Identifier: MIT
/* RFC 4180 records: fields separated by commas, a field optionally in double quotes (then it may
 * hold commas, line breaks and "" for one quote), records ending in LF or CRLF (a lone CR too);
 * an empty line is skipped, so a trailing newline or blank lines between records are fine.
 * Invariant: pos only moves forward and next_line counts every line break passed, quoted or not. */
#include "data/csv.h"

#include <ddpc/alloc.h>

#include <string.h>

void ddpc__csv_init(ddpc__csv *r, const char *path, const char *buf, size_t len)
{
    memset(r, 0, sizeof *r);
    r->path = path;
    r->buf = buf;
    r->len = len;
    r->next_line = 1;
}

void ddpc__csv_fini(ddpc__csv *r)
{
    ddpc_free(r->text);
    ddpc_free(r->cell);
    r->text = NULL;
    r->cell = NULL;
}

static ddpc_status put_byte(ddpc__csv *r, char c)
{
    if (r->text_len == r->text_cap) {
        size_t cap = r->text_cap ? 2 * r->text_cap : 256;
        char *t = ddpc_malloc(cap);
        if (!t)
            return ddpc_errorf(DDPC_ENOMEM, "%s: out of memory reading line %lld", r->path,
                               (long long)r->line);
        if (r->text_len)
            memcpy(t, r->text, r->text_len);
        ddpc_free(r->text);
        r->text = t;
        r->text_cap = cap;
    }
    r->text[r->text_len++] = c;
    return DDPC_OK;
}

static ddpc_status begin_cell(ddpc__csv *r)
{
    if (r->n_cells == r->cap_cells) {
        size_t cap = r->cap_cells ? 2 * r->cap_cells : 32;
        size_t *c = ddpc_malloc(cap * sizeof *c);
        if (!c)
            return ddpc_errorf(DDPC_ENOMEM, "%s: out of memory reading line %lld", r->path,
                               (long long)r->line);
        if (r->n_cells)
            memcpy(c, r->cell, r->n_cells * sizeof *c);
        ddpc_free(r->cell);
        r->cell = c;
        r->cap_cells = cap;
    }
    r->cell[r->n_cells++] = r->text_len;
    return DDPC_OK;
}

/* Whether a line break starts at pos; consumes it (CRLF as one) and counts the line. */
static bool take_break(ddpc__csv *r)
{
    if (r->pos >= r->len || (r->buf[r->pos] != '\n' && r->buf[r->pos] != '\r'))
        return false;
    if (r->buf[r->pos] == '\r' && r->pos + 1 < r->len && r->buf[r->pos + 1] == '\n')
        r->pos++;
    r->pos++;
    r->next_line++;
    return true;
}

/* A quoted field from just after its opening quote up to and including the closing quote. */
static ddpc_status quoted(ddpc__csv *r)
{
    int64_t opened = r->next_line;
    while (r->pos < r->len) {
        char c = r->buf[r->pos];
        if (c == '"') {
            r->pos++;
            if (r->pos < r->len && r->buf[r->pos] == '"') {
                r->pos++;
                DDPC_TRY(put_byte(r, '"'));
                continue;
            }
            if (r->pos < r->len && r->buf[r->pos] != ',' && r->buf[r->pos] != '\n' &&
                r->buf[r->pos] != '\r')
                return ddpc_errorf(DDPC_EFORMAT, "%s:%lld: a quoted field must end at a comma "
                                   "or the line's end", r->path, (long long)r->next_line);
            return DDPC_OK;
        }
        if (c == '\n' || (c == '\r' && !(r->pos + 1 < r->len && r->buf[r->pos + 1] == '\n')))
            r->next_line++;
        DDPC_TRY(put_byte(r, c));
        r->pos++;
    }
    return ddpc_errorf(DDPC_EFORMAT, "%s:%lld: a quote opened here is never closed", r->path,
                       (long long)opened);
}

ddpc_status ddpc__csv_next(ddpc__csv *r, bool *got)
{
    *got = false;
    while (take_break(r)) /* blank lines */
        ;
    if (r->pos >= r->len)
        return DDPC_OK;
    r->line = r->next_line;
    r->text_len = 0;
    r->n_cells = 0;
    for (;;) {
        DDPC_TRY(begin_cell(r));
        if (r->pos < r->len && r->buf[r->pos] == '"') {
            r->pos++;
            DDPC_TRY(quoted(r));
        } else {
            while (r->pos < r->len && r->buf[r->pos] != ',' && r->buf[r->pos] != '\n' &&
                   r->buf[r->pos] != '\r')
                DDPC_TRY(put_byte(r, r->buf[r->pos++]));
        }
        DDPC_TRY(put_byte(r, '\0'));
        if (r->pos < r->len && r->buf[r->pos] == ',') {
            r->pos++;
            continue;
        }
        take_break(r); /* or the end of the file */
        *got = true;
        return DDPC_OK;
    }
}
