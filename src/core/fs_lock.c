// SPDX-License-Identifier: MIT
/* Job locks on files: flock(2), which the kernel releases when the holder's descriptor closes (at
 * exit or death), so a lock is never stale, a restarted or rerun job takes it again, and it also
 * works over NFS (emulated with byte-range locks). The "pid host" written into the file is only
 * for the refusal message. A lock file that is removed on release could be unlinked between
 * another process's open and flock, leaving it holding a lock on a file no longer there: after
 * flock the path must still name the locked inode, else the acquire starts over. */
#include <ddpc/alloc.h>
#include <ddpc/fs.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* Rounds of "the file was removed under us" before giving up: each needs a holder to release,
 * so more than a few means something else keeps deleting it. */
enum { MAX_TRIES = 16 };

struct ddpc_fs_lock {
    int fd;
    bool remove;
    char path[DDPC_FS_PATH_MAX];
};

/* The message for a lock held elsewhere, from the "pid host" the holder wrote. */
static ddpc_status refuse(int fd, const char *what, const char *name, const char *advice)
{
    char text[320] = "", host[256] = "", holder[300];
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    text[n > 0 ? n : 0] = '\0';
    text[strcspn(text, "\n")] = '\0';
    long pid = 0;
    int got = sscanf(text, "%ld %255s", &pid, host);
    char self[256] = "";
    (void)gethostname(self, sizeof self - 1);
    if (got < 1)
        snprintf(holder, sizeof holder, "pid unknown");
    else if (got == 2 && strcmp(host, self) != 0)
        snprintf(holder, sizeof holder, "pid %ld on host %s", pid, host);
    else
        snprintf(holder, sizeof holder, "pid %ld", pid);
    return ddpc_errorf(DDPC_EINVAL, "%s '%s' is in use by another job (%s); %s", what, name, holder,
                       advice);
}

/* Whether path still names the inode fd is open on. */
static bool same_file(int fd, const char *path)
{
    struct stat a, b;
    return fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

ddpc_status ddpc_fs_lock_acquire(const char *lock_file, const char *what, const char *name,
                                 const char *advice, bool remove_on_release, ddpc_fs_lock **out)
{
    *out = NULL;
    ddpc_fs_lock *l = ddpc_malloc(sizeof *l);
    if (!l)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for the lock on '%s'", lock_file);
    if (snprintf(l->path, sizeof l->path, "%s", lock_file) >= (int)sizeof l->path) {
        ddpc_free(l);
        return ddpc_errorf(DDPC_EINVAL, "lock file path too long: '%.60s...'", lock_file);
    }
    l->remove = remove_on_release;
    for (int tries = 0;; tries++) {
        int fd = open(lock_file, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
        if (fd < 0) {
            int e = errno;
            ddpc_free(l);
            return ddpc_errorf(DDPC_EIO, "cannot create '%s': %s", lock_file, strerror(e));
        }
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            int e = errno;
            ddpc_status s = e == EWOULDBLOCK ? refuse(fd, what, name, advice)
                                             : ddpc_errorf(DDPC_EIO, "cannot lock '%s': %s",
                                                           lock_file, strerror(e));
            close(fd);
            ddpc_free(l);
            return s;
        }
        if (same_file(fd, lock_file)) {
            l->fd = fd;
            break;
        }
        close(fd); /* a holder released and removed it between our open and flock */
        if (tries == MAX_TRIES) {
            ddpc_free(l);
            return ddpc_errorf(DDPC_EIO, "cannot lock '%s': it keeps being removed", lock_file);
        }
    }
    char self[256] = "", line[320];
    (void)gethostname(self, sizeof self - 1);
    int len = snprintf(line, sizeof line, "%ld %s\n", (long)getpid(), self[0] ? self : "-");
    if (ftruncate(l->fd, 0) != 0 || pwrite(l->fd, line, (size_t)len, 0) != len) {
        int e = errno;
        ddpc_fs_lock_release(l);
        return ddpc_errorf(DDPC_EIO, "cannot write '%s': %s", lock_file, strerror(e));
    }
    *out = l;
    return DDPC_OK;
}

void ddpc_fs_lock_release(ddpc_fs_lock *l)
{
    if (!l)
        return;
    if (l->remove) /* while still held: see the file's comment */
        unlink(l->path);
    close(l->fd); /* releases the flock */
    ddpc_free(l);
}
