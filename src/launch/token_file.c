// SPDX-License-Identifier: MIT
/* Node 0's token file: across hosts with no token given, node 0's launcher makes the job's token
 * and writes it where the other nodes can read it (a shared file system) or the platform can copy
 * it from; a node given that file's name waits for it to appear. Invariant: the file is mode 0600
 * from its creation, replaces only a regular file of this user (never through a link), and is
 * removed only by the launcher that wrote it, and only while the path still names what it wrote. */
#include "launch/launch_impl.h"

#include <ddpc/fs.h>
#include <ddpc/timer.h>

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The longest pause between two looks for the file: a node that starts first joins at most this
 * late, and a shared file system sees one stat per pause. */
enum { AWAIT_PAUSE_MS_MAX = 200 };

/* Absolute when the working directory is known: the other nodes' working directories differ. */
static void token_file_path(const ddpc_launch_config *cfg, int port, char *out, size_t cap)
{
    char cwd[DDPC_FS_PATH_MAX - 1200], name[1100];
    if (cfg->log_dir[0])
        snprintf(name, sizeof name, "%s/store.token", cfg->log_dir);
    else
        snprintf(name, sizeof name, "ddpc-store-token-%d", port);
    if (name[0] != '/' && getcwd(cwd, sizeof cwd))
        snprintf(out, cap, "%s/%s", strcmp(cwd, "/") ? cwd : "", name);
    else
        snprintf(out, cap, "%s", name);
}

/* A file already at `path` may only be this user's regular file (a leftover of a killed job):
 * a link could make the write replace whatever it points at, another user's file is not ours. */
static ddpc_status check_replaceable(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? DDPC_OK
                               : ddpc_errorf(DDPC_EIO, "cannot write the job's token file %s: %s",
                                             path, strerror(errno));
    if (S_ISLNK(st.st_mode) || !S_ISREG(st.st_mode))
        return ddpc_errorf(DDPC_EINVAL,
                           "cannot write the job's token file %s: something that is not a regular "
                           "file (%s) is there; remove it, or give --log-dir",
                           path,
                           S_ISLNK(st.st_mode)   ? "a symbolic link"
                           : S_ISDIR(st.st_mode) ? "a directory"
                                                 : "a device, FIFO or socket");
    if (st.st_uid != geteuid())
        return ddpc_errorf(DDPC_EINVAL,
                           "cannot write the job's token file %s: it belongs to another user (uid "
                           "%u); remove it, or give --log-dir",
                           path, (unsigned)st.st_uid);
    return DDPC_OK;
}

ddpc_status ddpc__token_file_write(const ddpc_launch_config *cfg, int port, const char *token,
                                   ddpc__token_file *tf)
{
    memset(tf, 0, sizeof *tf);
    token_file_path(cfg, port, tf->path, sizeof tf->path);
    DDPC_TRY(check_replaceable(tf->path));
    ddpc_fs_out o;
    DDPC_TRY(ddpc_fs_out_open_secret(&o, tf->path, "the job's token file"));
    if (fprintf(o.f, "%s\n", token) < 0) {
        int e = errno;
        (void)ddpc_fs_out_commit(&o, true);
        return ddpc_errorf(DDPC_EIO, "cannot write the job's token file %s: %s", tf->path,
                           strerror(e));
    }
    DDPC_TRY(ddpc_fs_out_commit(&o, false));
    struct stat st;
    if (lstat(tf->path, &st) == 0) {
        tf->dev = st.st_dev;
        tf->ino = st.st_ino;
        tf->written = true;
    }
    fprintf(cfg->err,
            "ddpc run: the job's store token is in %s (mode 0600, removed when the job ends); "
            "start the other nodes with DDPC_STORE_TOKEN_FILE=%s on a shared file system, or "
            "with DDPC_STORE_TOKEN set to its contents by your platform\n",
            tf->path, tf->path);
    fflush(cfg->err);
    return DDPC_OK;
}

void ddpc__token_file_remove(ddpc__token_file *tf)
{
    struct stat st;
    if (tf->written && lstat(tf->path, &st) == 0 && st.st_dev == tf->dev && st.st_ino == tf->ino)
        (void)unlink(tf->path);
    tf->written = false;
}

ddpc_status ddpc__token_file_await(const ddpc_launch_config *cfg, const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0 || errno != ENOENT)
        return DDPC_OK; /* there (or unreadable): the token loader checks and names it */
    fprintf(cfg->err,
            "ddpc run: waiting up to %g s (--rdzv-timeout) for DDPC_STORE_TOKEN_FILE=%s, which "
            "node 0's launcher writes\n",
            cfg->rdzv_timeout_s, path);
    fflush(cfg->err);
    double deadline = ddpc_time_now() + cfg->rdzv_timeout_s;
    for (int pause_ms = 10;;
         pause_ms = pause_ms < AWAIT_PAUSE_MS_MAX / 2 ? 2 * pause_ms : AWAIT_PAUSE_MS_MAX) {
        if (stat(path, &st) == 0 || errno != ENOENT)
            return DDPC_OK;
        if (ddpc_time_now() > deadline)
            return ddpc_errorf(DDPC_ETIMEOUT,
                               "DDPC_STORE_TOKEN_FILE=%s did not appear within %g s "
                               "(--rdzv-timeout): is node 0's launcher running, with no token "
                               "given, and writing its token file there?",
                               path, cfg->rdzv_timeout_s);
        struct timespec ts = {0, (long)pause_ms * 1000000L};
        nanosleep(&ts, NULL);
    }
}
