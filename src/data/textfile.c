/* Whole text files in memory, walked line by line (see textfile.h). */
#include "data/textfile.h"

#include <ddpc/alloc.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

ddpc_status ddpc__textfile_read(ddpc__textfile *f, const char *path)
{
    *f = (ddpc__textfile){0};
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return ddpc_errorf(DDPC_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(fp), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(fp);
        return ddpc_errorf(DDPC_EIO, "%s: not a regular file", path);
    }
    size_t cap = (size_t)st.st_size;
    f->buf = ddpc_malloc(cap + 1);
    if (!f->buf) {
        fclose(fp);
        return ddpc_errorf(DDPC_ENOMEM, "%s: out of memory for %zu bytes", path, cap);
    }
    f->len = fread(f->buf, 1, cap, fp);
    int err = ferror(fp);
    fclose(fp);
    if (err) {
        ddpc__textfile_free(f);
        return ddpc_errorf(DDPC_EIO, "%s: read failed", path);
    }
    f->buf[f->len] = '\0';
    return DDPC_OK;
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
