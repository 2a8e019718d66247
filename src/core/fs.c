// SPDX-License-Identifier: MIT
/* File-system helpers. mkdir -p walks the path's components from the root; an existing component
 * must be a directory (a regular file in the way is reported as such, not as EEXIST). The
 * whole-file reader is the one every module uses (config, checkpoints, report): it reads to end of
 * file, so a file that grows or a pipe is read whole, and never more than its caller's limit; a
 * scanner sees each run of bytes as it arrives, so an endless stream is stopped while small. */
#include <ddpc/alloc.h>
#include "core/fs_impl.h"

#include <ddpc/fs.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

ddpc_status ddpc_mkdirs(const char *dir)
{
    char buf[1024];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf)
        return ddpc_errorf(DDPC_EINVAL, "directory path too long: '%.60s...'", dir);
    if (!buf[0])
        return ddpc_errorf(DDPC_EINVAL, "empty directory path");
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char saved = *p;
        *p = '\0';
        struct stat st;
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return ddpc_errorf(DDPC_EIO, "cannot create directory '%s': %s", buf, strerror(errno));
        if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
            return ddpc_errorf(DDPC_EIO, "cannot create directory '%s': a file is in the way", buf);
        *p = saved;
        if (saved == '\0')
            return DDPC_OK;
    }
}

void ddpc__fs_name_of(char *buf, size_t cap, const char *what, const char *path)
{
    snprintf(buf, cap, "%s%s'%s'", what ? what : "", what ? " " : "", path);
}

/* Grows buf (cap bytes, n used) to twice its size. */
static ddpc_status grow(char **buf, size_t *cap, size_t n, const char *name)
{
    char *bigger = *cap <= SIZE_MAX / 2 ? ddpc_malloc(2 * *cap) : NULL;
    if (!bigger)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory reading %s (%zu bytes)", name, 2 * *cap);
    memcpy(bigger, *buf, n);
    ddpc_free(*buf);
    *buf = bigger;
    *cap *= 2;
    return DDPC_OK;
}

/* Reads fd to its end into a buffer of hint + 1 bytes to start with (a regular file's size: one
 * read fills it, and a one-byte read finds its end); *out NUL-terminated. */
static ddpc_status read_all(int fd, const char *name, size_t hint, size_t max,
                            ddpc_read_scan_fn scan, void *ctx, char **out, size_t *len)
{
    size_t cap = hint + 1, n = 0;
    char *buf = ddpc_malloc(cap);
    if (!buf)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory reading %s (%zu bytes)", name, cap);
    ddpc_status s = DDPC_OK;
    for (;;) {
        char probe;
        bool full = n + 1 == cap; /* then only a byte more says whether it grew or ended */
        ssize_t r = full ? read(fd, &probe, 1) : read(fd, buf + n, cap - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            s = ddpc_errorf(DDPC_EIO, "cannot read %s: %s", name, strerror(errno));
            break;
        }
        if (r == 0)
            break;
        if (full) {
            if ((s = grow(&buf, &cap, n, name)) != DDPC_OK)
                break;
            buf[n] = probe;
        }
        if (scan && (s = scan(ctx, buf + n, (size_t)r)) != DDPC_OK)
            break;
        n += (size_t)r;
        if (max > 0 && n > max) {
            s = ddpc_errorf(DDPC_EFORMAT, "%s is larger than %zu bytes", name, max);
            break;
        }
    }
    if (s != DDPC_OK) {
        ddpc_free(buf);
        return s;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return DDPC_OK;
}

ddpc_status ddpc_read_file(const char *path, const char *what, size_t max, bool *missing,
                           char **out, size_t *len)
{
    return ddpc_read_file_scan(path, what, max, missing, NULL, NULL, out, len);
}

ddpc_status ddpc_read_file_scan(const char *path, const char *what, size_t max, bool *missing,
                                ddpc_read_scan_fn scan, void *ctx, char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    if (missing)
        *missing = false;
    char name[1200];
    ddpc__fs_name_of(name, sizeof name, what, path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && missing) {
        *missing = true;
        return DDPC_OK;
    }
    if (fd < 0)
        return ddpc_errorf(DDPC_EIO, "cannot open %s: %s", name, strerror(errno));
    struct stat st;
    ddpc_status s = DDPC_OK;
    if (fstat(fd, &st) != 0)
        s = ddpc_errorf(DDPC_EIO, "cannot read %s: %s", name, strerror(errno));
    else if (S_ISDIR(st.st_mode))
        s = ddpc_errorf(DDPC_EIO, "cannot read %s: it is a directory", name);
    else if (S_ISREG(st.st_mode) && max > 0 && (uint64_t)st.st_size > max)
        s = ddpc_errorf(DDPC_EFORMAT, "%s is larger than %zu bytes", name, max);
    else /* a regular file's size, else (a pipe) a page to start with */
        s = read_all(fd, name, S_ISREG(st.st_mode) ? (size_t)st.st_size : 4096, max, scan, ctx, out,
                     len);
    close(fd);
    return s;
}

const char *ddpc__fs_kind_of(mode_t m)
{
    return S_ISDIR(m)    ? "a directory"
           : S_ISFIFO(m) ? "a FIFO"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISSOCK(m) ? "a socket"
                         : "a file of an unknown kind";
}

ddpc_status ddpc_open_regular(const char *path, const char *what, bool *missing, int *fd,
                              uint64_t *size)
{
    *fd = -1;
    *size = 0;
    if (missing)
        *missing = false;
    char name[1200];
    ddpc__fs_name_of(name, sizeof name, what, path);
    /* O_NONBLOCK: opening a FIFO without a writer (or some devices) would wait forever; the
     * descriptor is made blocking again once fstat has shown a regular file. */
    int f = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (f < 0 && errno == ENOENT && missing) {
        *missing = true;
        return DDPC_OK;
    }
    if (f < 0)
        return ddpc_errorf(DDPC_EIO, "cannot open %s: %s", name, strerror(errno));
    struct stat st;
    int flags;
    ddpc_status s = DDPC_OK;
    if (fstat(f, &st) != 0)
        s = ddpc_errorf(DDPC_EIO, "cannot read %s: %s", name, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        s = ddpc_errorf(DDPC_EIO, "cannot read %s: it is %s, not a regular file", name,
                        ddpc__fs_kind_of(st.st_mode));
    else if ((flags = fcntl(f, F_GETFL)) < 0 || fcntl(f, F_SETFL, flags & ~O_NONBLOCK) != 0)
        s = ddpc_errorf(DDPC_EIO, "cannot read %s: %s", name, strerror(errno));
    if (s != DDPC_OK) {
        close(f);
        return s;
    }
    *fd = f;
    *size = (uint64_t)st.st_size;
    return DDPC_OK;
}

ddpc_status ddpc_read_regular_file(const char *path, const char *what, size_t max, bool *missing,
                                   char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    char name[1200];
    ddpc__fs_name_of(name, sizeof name, what, path);
    int fd;
    uint64_t size;
    DDPC_TRY(ddpc_open_regular(path, what, missing, &fd, &size));
    if (fd < 0) /* missing */
        return DDPC_OK;
    ddpc_status s = max > 0 && size > max
                        ? ddpc_errorf(DDPC_EFORMAT, "%s is larger than %zu bytes", name, max)
                        : read_all(fd, name, (size_t)size, max, NULL, NULL, out, len);
    close(fd);
    return s;
}
