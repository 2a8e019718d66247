// SPDX-License-Identifier: MIT
/* Worker output as whole lines: bytes from a pipe wait in a line buffer until their newline, then
 * go to the rank's log file, the console (prefixed when --tee) and the ring of recent lines that a
 * failure report quotes. Invariant: a sink never receives part of a line, except that a line
 * longer than DDPC__LINE_MAX is cut into pieces of that size, each ended with a newline. */
#include "launch/launch_impl.h"

#include <ddpc/alloc.h>

#include <errno.h>
#include <string.h>

void ddpc__ring_push(ddpc__line_ring *r, const char *line, size_t len)
{
    if (len > 0 && line[len - 1] == '\n')
        len--;
    if (len > DDPC__RING_LINE_MAX - 1)
        len = DDPC__RING_LINE_MAX - 1;
    memcpy(r->lines[r->next], line, len);
    r->lines[r->next][len] = '\0';
    r->next = (r->next + 1) % DDPC__RING_LINES;
    if (r->count < DDPC__RING_LINES)
        r->count++;
}

const char *ddpc__ring_line(const ddpc__line_ring *r, int i)
{
    DDPC_ASSERT(i >= 0 && i < r->count);
    int oldest = (r->next - r->count + DDPC__RING_LINES) % DDPC__RING_LINES;
    return r->lines[(oldest + i) % DDPC__RING_LINES];
}

/* One whole line, newline included, to every destination of the sink. */
static void emit(const ddpc__line_sink *sink, const char *line, size_t len)
{
    if (sink->ring)
        ddpc__ring_push(sink->ring, line, len);
    if (sink->log) {
        /* a full disk must not pass unnoticed: the first error is kept for the report */
        size_t put = fwrite(line, 1, len, sink->log);
        if ((put != len || ferror(sink->log)) && sink->log_errno && *sink->log_errno == 0)
            *sink->log_errno = errno ? errno : EIO;
    }
    if (sink->console) {
        /* A line the library's rank-aware logging already prefixed is not prefixed twice. */
        size_t plen = sink->prefix ? strlen(sink->prefix) : 0;
        if (plen && !(len >= plen && memcmp(line, sink->prefix, plen) == 0))
            fputs(sink->prefix, sink->console);
        fwrite(line, 1, len, sink->console);
    }
}

static void emit_with_newline(const ddpc__line_sink *sink, char *buf, size_t len)
{
    /* buf has room: callers keep len < DDPC__LINE_MAX + 1 bytes of storage. */
    buf[len] = '\n';
    emit(sink, buf, len + 1);
}

ddpc_status ddpc__line_feed(ddpc__line_buf *b, const char *data, size_t n,
                            const ddpc__line_sink *sink)
{
    while (n > 0) {
        const char *nl = memchr(data, '\n', n);
        size_t take = nl ? (size_t)(nl - data) + 1 : n;
        if (b->len == 0 && nl && take <= DDPC__LINE_MAX) {
            emit(sink, data, take); /* the common case: a whole line, no copy */
            data += take;
            n -= take;
            continue;
        }
        if (!b->buf) {
            b->buf = ddpc_malloc(DDPC__LINE_MAX + 1);
            if (!b->buf)
                return ddpc_errorf(DDPC_ENOMEM, "out of memory for a %d-byte line buffer",
                                   DDPC__LINE_MAX);
        }
        size_t room = DDPC__LINE_MAX - b->len;
        size_t chunk = take < room ? take : room;
        memcpy(b->buf + b->len, data, chunk);
        b->len += chunk;
        data += chunk;
        n -= chunk;
        if (b->buf[b->len - 1] == '\n') {
            emit(sink, b->buf, b->len);
            b->len = 0;
        } else if (b->len == DDPC__LINE_MAX) {
            emit_with_newline(sink, b->buf, b->len);
            b->len = 0;
        }
    }
    return DDPC_OK;
}

void ddpc__line_flush(ddpc__line_buf *b, const ddpc__line_sink *sink)
{
    if (b->buf && b->len > 0)
        emit_with_newline(sink, b->buf, b->len);
    ddpc_free(b->buf);
    b->buf = NULL;
    b->len = 0;
}
