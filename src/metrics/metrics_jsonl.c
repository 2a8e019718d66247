// SPDX-License-Identifier: MIT
/* metrics.jsonl: one JSON object per record and line, {"step": N, "key": value, ...}, in the
 * order recorded; consecutive "group/name" keys nest as "group": {"name": value}. Invariants: a
 * line is valid JSON whatever the values (NaN and infinities are null, strings escaped), and it
 * reaches the file with one write() so concurrent writers cannot interleave inside it; the first
 * failed write makes the sink fail for good; a record appended to a file starts a line of its
 * own, even after a torn last line. */
#include "metrics/metrics_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/fs.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    int fd;
    char path[1024];
    ddpc_status failed;
    char why[128];
    char line[16384];
} jsonl;

/* A file appended to whose last line is torn (a write cut short by a full disk or a kill) gets
 * a newline first, so the next record starts a line of its own instead of gluing itself to the
 * torn one: then only that line fails to parse. Only a regular file has a last byte to look at. */
static ddpc_status end_torn_line(jsonl *j)
{
    struct stat st;
    int rd;
    uint64_t size;
    char last;
    if (fstat(j->fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0 ||
        ddpc_open_regular(j->path, NULL, NULL, &rd, &size) != DDPC_OK) {
        ddpc_clear_error();
        return DDPC_OK;
    }
    ssize_t got = size > 0 ? pread(rd, &last, 1, (off_t)size - 1) : 0;
    close(rd);
    if (got != 1 || last == '\n')
        return DDPC_OK;
    while (write(j->fd, "\n", 1) != 1)
        if (errno != EINTR)
            return ddpc_errorf(DDPC_EIO, "cannot write '%s': %s", j->path, strerror(errno));
    return DDPC_OK;
}

ddpc_status ddpc__metrics_jsonl_open(const char *path, bool append, void **state)
{
    jsonl *j = ddpc_calloc(1, sizeof *j);
    if (!j)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for the metrics file");
    snprintf(j->path, sizeof j->path, "%s", path);
    j->fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0666);
    if (j->fd < 0) {
        int e = errno;
        ddpc_free(j);
        return ddpc_errorf(DDPC_EIO, "cannot write '%s': %s", path, strerror(e));
    }
    ddpc_status s = append ? end_torn_line(j) : DDPC_OK;
    if (s != DDPC_OK) {
        close(j->fd);
        ddpc_free(j);
        return s;
    }
    *state = j;
    return DDPC_OK;
}

typedef struct {
    char *buf;
    size_t cap, len;
} out_buf;

static void put(out_buf *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(out_buf *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(o->buf + o->len, o->len < o->cap ? o->cap - o->len : 0, fmt, ap);
    va_end(ap);
    o->len += n > 0 ? (size_t)n : 0;
}

static void put_string(out_buf *o, const char *s)
{
    put(o, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            put(o, "\\%c", *p);
        else if (*p < 0x20)
            put(o, "\\u%04x", *p);
        else
            put(o, "%c", *p);
    }
    put(o, "\"");
}

static void put_value(out_buf *o, const ddpc__metrics_record *r, const ddpc__metrics_field *f)
{
    switch (f->kind) {
    case DDPC__FIELD_I64:
        put(o, "%lld", (long long)f->i);
        break;
    case DDPC__FIELD_STR:
        put_string(o, r->str[f->str]);
        break;
    case DDPC__FIELD_F64:
        if (!isfinite(f->f))
            put(o, "null"); /* JSON has no NaN or infinity */
        else if (f->digits >= 0)
            put(o, "%.*f", f->digits, f->f);
        else if (f->digits == DDPC_METRICS_EXACT)
            put(o, "%.9g", f->f);
        else
            put(o, "%.6g", f->f);
        break;
    }
}

/* The group of a "group/name" key (length, 0 when none). */
static size_t group_len(const char *key)
{
    const char *slash = strchr(key, '/');
    return slash ? (size_t)(slash - key) : 0;
}

static void format(out_buf *o, const ddpc__metrics_record *r)
{
    put(o, "{\"step\": %lld", (long long)r->step);
    for (size_t i = 0; i < r->n; i++) {
        const ddpc__metrics_field *f = &r->field[i];
        size_t g = group_len(f->key);
        int gi = (int)g;
        if (!g) {
            put(o, ", ");
            put_string(o, f->key);
            put(o, ": ");
            put_value(o, r, f);
            continue;
        }
        put(o, ", \"%.*s\": {", gi, f->key);
        size_t j = i;
        for (; j < r->n && group_len(r->field[j].key) == g &&
               strncmp(r->field[j].key, f->key, g) == 0;
             j++) {
            put(o, "%s", j > i ? ", " : "");
            put_string(o, r->field[j].key + g + 1);
            put(o, ": ");
            put_value(o, r, &r->field[j]);
        }
        put(o, "}");
        i = j - 1;
    }
    put(o, "}\n");
}

static ddpc_status fail(jsonl *j, int err)
{
    j->failed = DDPC_EIO;
    snprintf(j->why, sizeof j->why, "%s", strerror(err));
    return ddpc_errorf(DDPC_EIO, "cannot write '%s': %s", j->path, j->why);
}

static ddpc_status record(void *state, const ddpc__metrics_record *r)
{
    jsonl *j = state;
    if (j->failed != DDPC_OK)
        return ddpc_errorf(j->failed, "cannot write '%s': %s", j->path, j->why);
    out_buf o = {j->line, sizeof j->line, 0};
    format(&o, r);
    if (o.len >= o.cap)
        return ddpc_errorf(DDPC_EINVAL, "metrics: a record of %zu bytes is too long for '%s'",
                           o.len, j->path);
    int err = ddpc_fd_write_all(j->fd, o.buf, o.len);
    return err ? fail(j, err) : DDPC_OK;
}

static void close_jsonl(void *state)
{
    jsonl *j = state;
    close(j->fd);
    ddpc_free(j);
}

const ddpc__metrics_sink_ops ddpc__metrics_jsonl_ops = {record, close_jsonl};
