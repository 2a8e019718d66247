// SPDX-License-Identifier: MIT
/* The one atomic-replace door for output files. Invariant: only a regular file (or nothing) is
 * ever replaced, and always by rename of a complete, fsynced temporary in the same directory; a
 * symbolic link is followed to the file it names, which is replaced while the link stays. A rename
 * over /dev/null, a FIFO or a socket would put a regular file in its place (as root, the system's
 * /dev/null), so those are refused before anything is written. */
#include "core/fs_impl.h"

#include <ddpc/fs.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Linux's own limit on links followed in one lookup (MAXSYMLINKS). */
enum { MAX_LINKS = 40 };

/* Refuses a target that exists and is not a regular file; *exists and *mode describe it. */
static ddpc_status check_kind(const char *target, const char *name, bool *exists, mode_t *mode)
{
    struct stat st;
    *exists = false;
    if (lstat(target, &st) != 0) {
        if (errno == ENOENT || errno == ENOTDIR) /* absent: its directory is checked later */
            return DDPC_OK;
        return ddpc_errorf(DDPC_EIO, "cannot write %s: %s", name, strerror(errno));
    }
    *exists = true;
    *mode = st.st_mode;
    if (S_ISREG(st.st_mode))
        return DDPC_OK;
    if (S_ISDIR(st.st_mode))
        return ddpc_errorf(DDPC_EIO, "cannot write %s: it is a directory", name);
    return ddpc_errorf(DDPC_EINVAL,
                       "cannot write %s: it is %s, not a regular file (ddpc replaces outputs by "
                       "renaming a new file over them)",
                       name, ddpc__fs_kind_of(st.st_mode));
}

/* Follows path's links into target; *exists and *mode describe what is there. */
static ddpc_status resolve(const char *path, const char *name, char *target, size_t cap,
                           bool *exists, mode_t *mode)
{
    char cur[DDPC_FS_PATH_MAX], link[DDPC_FS_PATH_MAX];
    if (!path[0] || snprintf(cur, sizeof cur, "%s", path) >= (int)sizeof cur)
        return ddpc_errorf(DDPC_EINVAL, "cannot write %s: empty or too long a path", name);
    for (int hops = 0;; hops++) {
        struct stat st;
        if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode))
            break;
        if (hops == MAX_LINKS)
            return ddpc_errorf(DDPC_EINVAL,
                               "cannot write %s: more than %d symbolic links (a loop?)", name,
                               MAX_LINKS);
        ssize_t n = readlink(cur, link, sizeof link - 1);
        if (n < 0)
            return ddpc_errorf(DDPC_EIO, "cannot read the link %s: %s", name, strerror(errno));
        link[n] = '\0';
        /* A relative link is resolved from the link's own directory, as the kernel does. */
        const char *slash = strrchr(cur, '/');
        size_t keep = link[0] == '/' || !slash ? 0 : (size_t)(slash - cur) + 1;
        if (keep + (size_t)n >= sizeof cur)
            return ddpc_errorf(DDPC_EINVAL, "cannot write %s: its link target is too long", name);
        memcpy(cur + keep, link, (size_t)n + 1);
    }
    DDPC_TRY(check_kind(cur, name, exists, mode));
    if (snprintf(target, cap, "%s", cur) >= (int)cap)
        return ddpc_errorf(DDPC_EINVAL, "cannot write %s: path too long", name);
    return DDPC_OK;
}

ddpc_status ddpc_fs_out_target(const char *path, const char *what, char *target, size_t cap)
{
    char name[DDPC_FS_PATH_MAX + 64];
    bool exists;
    mode_t mode;
    ddpc__fs_name_of(name, sizeof name, what, path);
    return resolve(path, name, target, cap, &exists, &mode);
}

/* `secret`: the temporary keeps mkstemp's 0600 from its creation, so no other user can open it
 * (an open descriptor would read what is written later), whatever mode the replaced file had. */
static ddpc_status out_open(ddpc_fs_out *o, const char *path, const char *what, bool secret)
{
    o->f = NULL;
    ddpc__fs_name_of(o->name, sizeof o->name, what, path);
    bool exists;
    mode_t mode = 0;
    DDPC_TRY(resolve(path, o->name, o->target, sizeof o->target, &exists, &mode));
    snprintf(o->tmp, sizeof o->tmp, "%s.tmp-XXXXXX", o->target);
    int fd = mkstemp(o->tmp);
    if (fd < 0)
        return ddpc_errorf(DDPC_EIO, "cannot write %s: cannot create %s: %s", o->name, o->tmp,
                           strerror(errno));
    /* mkstemp makes 0600: the replaced file's permissions, else the usual 0644. */
    if (!secret)
        (void)fchmod(fd, exists ? (mode & 07777) : 0644);
    o->f = fdopen(fd, "w");
    if (!o->f) {
        int e = errno;
        close(fd);
        unlink(o->tmp);
        return ddpc_errorf(DDPC_EIO, "cannot write %s: %s", o->name, strerror(e));
    }
    return DDPC_OK;
}

ddpc_status ddpc_fs_out_open(ddpc_fs_out *o, const char *path, const char *what)
{
    return out_open(o, path, what, false);
}

ddpc_status ddpc_fs_out_open_secret(ddpc_fs_out *o, const char *path, const char *what)
{
    return out_open(o, path, what, true);
}

/* fsync of the target's directory, so the rename itself is durable. Best effort: some file
 * systems refuse to fsync directories, which does not make the write itself fail. */
static void sync_dir_of(const char *path)
{
    char dir[DDPC_FS_PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else
        snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    int fd = open(dir, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

ddpc_status ddpc_fs_out_commit(ddpc_fs_out *o, bool failed)
{
    if (!o->f)
        return DDPC_OK;
    bool ok = !failed && fflush(o->f) == 0 && !ferror(o->f) && fsync(fileno(o->f)) == 0;
    int e = errno;
    if (fclose(o->f) != 0 && ok) {
        ok = false;
        e = errno;
    }
    o->f = NULL;
    ddpc_status s = DDPC_OK;
    bool exists;
    mode_t mode;
    if (!ok && !failed)
        s = ddpc_errorf(DDPC_EIO, "cannot write %s: %s", o->name, strerror(e));
    /* Checked again: something else may have been put there while the file was written. */
    if (ok)
        s = check_kind(o->target, o->name, &exists, &mode);
    if (ok && s == DDPC_OK && rename(o->tmp, o->target) != 0)
        s = ddpc_errorf(DDPC_EIO, "cannot write %s: cannot rename %s over it: %s", o->name, o->tmp,
                        strerror(errno));
    else if (ok && s == DDPC_OK) {
        sync_dir_of(o->target);
        return DDPC_OK;
    }
    unlink(o->tmp);
    return s;
}

ddpc_status ddpc_fs_write_file(const char *path, const char *what, const void *data, size_t len)
{
    ddpc_fs_out o;
    DDPC_TRY(ddpc_fs_out_open(&o, path, what));
    bool failed = len > 0 && fwrite(data, 1, len, o.f) != len;
    if (failed) {
        int e = errno;
        (void)ddpc_fs_out_commit(&o, true);
        return ddpc_errorf(DDPC_EIO, "cannot write %s: %s", o.name, strerror(e));
    }
    return ddpc_fs_out_commit(&o, false);
}
