// SPDX-License-Identifier: MIT
/* Whole text files in memory, walked line by line (see textfile.h). */
#include "data/textfile.h"

#include <ddpc/alloc.h>
#include <ddpc/fs.h>

#include <string.h>

/* Where the read has got to, for the scanner: line number and the current line's length. */
typedef struct {
    const char *path;
    int64_t line;  /* 1-based line of the next byte */
    size_t offset; /* file offset of the next byte */
    size_t run;    /* bytes of the current line so far */
} scan_state;

/* Stops the read at the first NUL byte or line past the limit, so neither an endless stream
 * (/dev/zero) nor an endless line is read whole first. */
static ddpc_status scan(void *ctx, const char *bytes, size_t n)
{
    scan_state *st = ctx;
    for (size_t i = 0; i < n; i++, st->offset++) {
        /* Tokens are NUL-terminated strings once counted (the vocabulary file, encode's lines),
         * so a NUL inside a line would count one token and save or encode another. */
        if (bytes[i] == '\0')
            return ddpc_errorf(DDPC_EFORMAT,
                               "%s:%lld: a NUL byte (file offset %zu): not a text file", st->path,
                               (long long)st->line, st->offset);
        if (bytes[i] == '\n') {
            st->line++;
            st->run = 0;
        } else if (++st->run > DDPC__TEXTFILE_MAX_LINE) {
            return ddpc_errorf(
                DDPC_EFORMAT, "%s:%lld: a line longer than %d bytes (the limit for a line of text)",
                st->path, (long long)st->line, DDPC__TEXTFILE_MAX_LINE);
        }
    }
    return DDPC_OK;
}

ddpc_status ddpc__textfile_read(ddpc__textfile *f, const char *path)
{
    *f = (ddpc__textfile){0};
    scan_state st = {.path = path, .line = 1};
    return ddpc_read_file_scan(path, NULL, DDPC__TEXTFILE_MAX_BYTES, NULL, scan, &st, &f->buf,
                               &f->len);
}

bool ddpc__textfile_next(ddpc__textfile *f, const char **s, size_t *n)
{
    if (f->pos >= f->len)
        return false;
    const char *start = f->buf + f->pos;
    const char *nl = memchr(start, '\n', f->len - f->pos);
    size_t len = nl ? (size_t)(nl - start) : f->len - f->pos;
    f->pos += len + (nl ? 1 : 0);
    if (len > 0 && start[len - 1] == '\r')
        len--;
    f->line++;
    *s = start;
    *n = len;
    return true;
}

int64_t ddpc__textfile_count_lines(const ddpc__textfile *f)
{
    int64_t lines = 0;
    for (size_t i = 0; i < f->len; i++)
        lines += f->buf[i] == '\n';
    return lines + (f->len > 0 && f->buf[f->len - 1] != '\n');
}

void ddpc__textfile_free(ddpc__textfile *f)
{
    ddpc_free(f->buf);
    *f = (ddpc__textfile){0};
}
