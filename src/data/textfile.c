/* Whole text files in memory, walked line by line (see textfile.h). */
#include "data/textfile.h"

#include <ddpc/alloc.h>
#include <ddpc/fs.h>

#include <string.h>

ddpc_status ddpc__textfile_read(ddpc__textfile *f, const char *path)
{
    *f = (ddpc__textfile){0};
    DDPC_TRY(ddpc_read_file(path, NULL, 0, NULL, &f->buf, &f->len));
    /* Tokens are NUL-terminated strings once counted (the vocabulary file, encode's lines), so a
     * NUL inside a line would count one token and save or encode another. */
    const char *nul = memchr(f->buf, '\0', f->len);
    if (!nul)
        return DDPC_OK;
    int64_t line = 1;
    for (const char *p = f->buf; p < nul; p++)
        line += *p == '\n';
    size_t at = (size_t)(nul - f->buf);
    ddpc__textfile_free(f);
    return ddpc_errorf(DDPC_EFORMAT, "%s:%lld: a NUL byte (file offset %zu): not a text file", path,
                       (long long)line, at);
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
