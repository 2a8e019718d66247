// SPDX-License-Identifier: MIT
/* File-system steps of the checkpoint commit protocol: durable writes (write, fsync, close),
 * directory fsync, checksums, tree removal and the names the protocol uses. Invariant: nothing
 * here renames into a final name; callers do that after these helpers have made data durable. */
#include "ckpt/checkpoint_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/fs.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

ddpc_status ddpc__ckpt_join(char *out, size_t cap, const char *a, const char *b)
{
    int w = snprintf(out, cap, "%s/%s", a, b);
    if (w < 0 || (size_t)w >= cap)
        return ddpc_errorf(DDPC_EINVAL, "%s: path too long", a);
    return DDPC_OK;
}

void ddpc__ckpt_fsync_dir(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

ddpc_status ddpc__ckpt_write_new(const char *path, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0)
        return ddpc_errorf(DDPC_EIO, "cannot create %s: %s", path, strerror(errno));
    ddpc_status s = DDPC_OK;
    int err = ddpc_fd_write_all(fd, data, len);
    if (err != 0)
        s = ddpc_errorf(DDPC_EIO, "%s: write failed: %s", path, strerror(err));
    else if (fsync(fd) != 0)
        s = ddpc_errorf(DDPC_EIO, "%s: fsync failed: %s", path, strerror(errno));
    if (close(fd) != 0 && s == DDPC_OK)
        s = ddpc_errorf(DDPC_EIO, "%s: close failed: %s", path, strerror(errno));
    return s;
}

ddpc_status ddpc__ckpt_file_crc(const char *path, uint64_t *bytes, uint32_t *crc)
{
    int fd;
    uint64_t size;
    bool missing;
    /* A FIFO or a device in a checkpoint would block or never end: regular files only. */
    DDPC_TRY(ddpc_open_regular(path, NULL, &missing, &fd, &size));
    if (missing)
        return ddpc_errorf(DDPC_EFORMAT, "%s is missing (incomplete checkpoint)", path);
    enum { CHUNK = 1 << 20 };
    unsigned char *buf = ddpc_malloc(CHUNK);
    if (!buf) {
        close(fd);
        return ddpc_errorf(DDPC_ENOMEM, "out of memory checksumming %s", path);
    }
    uLong c = crc32(0L, Z_NULL, 0);
    uint64_t total = 0;
    ddpc_status s = DDPC_OK;
    for (;;) {
        ssize_t r = read(fd, buf, CHUNK);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            s = ddpc_errorf(DDPC_EIO, "cannot read %s: %s", path, strerror(errno));
            break;
        }
        if (r == 0)
            break;
        c = crc32(c, buf, (uInt)r);
        total += (uint64_t)r;
    }
    ddpc_free(buf);
    close(fd);
    *bytes = total;
    *crc = (uint32_t)c;
    return s;
}

static bool remove_at(const char *path, int depth)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT;
    if (!S_ISDIR(st.st_mode))
        return unlink(path) == 0 || errno == ENOENT;
    bool ok = depth < 8;
    DIR *d = ok ? opendir(path) : NULL;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char child[DDPC__CKPT_PATH_MAX];
        int w = snprintf(child, sizeof child, "%s/%s", path, e->d_name);
        ok = ok && w > 0 && (size_t)w < sizeof child && remove_at(child, depth + 1);
    }
    if (d)
        closedir(d);
    return rmdir(path) == 0 && ok;
}

bool ddpc__ckpt_remove_tree(const char *path)
{
    return remove_at(path, 0);
}

bool ddpc__ckpt_parse_step_name(const char *name, int64_t *step)
{
    if (strncmp(name, "step-", 5) != 0)
        return false;
    const char *d = name + 5;
    size_t n = strlen(d);
    if (n < 8 || n > 18)
        return false;
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (d[i] < '0' || d[i] > '9')
            return false;
        v = v * 10 + (d[i] - '0');
    }
    *step = v;
    return true;
}

long ddpc__ckpt_tmp_pid(const char *name)
{
    if (strncmp(name, DDPC__CKPT_TMP_PREFIX, strlen(DDPC__CKPT_TMP_PREFIX)) != 0)
        return -1;
    const char *last = strrchr(name, '-');
    if (!last || last == name)
        return -1;
    const char *p = last - 1;
    while (p > name && *p != '-')
        p--;
    if (*p != '-' || p + 1 == last)
        return -1;
    long pid = 0;
    for (const char *q = p + 1; q < last; q++) {
        if (*q < '0' || *q > '9' || pid > 100000000L)
            return -1;
        pid = pid * 10 + (*q - '0');
    }
    return pid;
}
