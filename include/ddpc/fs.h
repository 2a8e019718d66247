// SPDX-License-Identifier: MIT
/* ddpc file-system helpers shared by every layer that reads or writes files (configs, run
 * directories, checkpoints, metrics, launcher logs). */
#ifndef DDPC_FS_H
#define DDPC_FS_H

#include <ddpc/status.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* mkdir -p: creates every missing component of `dir`. DDPC_EINVAL for a path of 1024 bytes or
 * more; DDPC_EIO naming the component that cannot be created or is not a directory. */
ddpc_status ddpc_mkdirs(const char *dir);

/* Writes all `len` bytes of buf to fd, retrying short writes and EINTR; on a socket it sends
 * with MSG_NOSIGNAL, so a closed peer is EPIPE rather than a fatal SIGPIPE. Returns 0, or the
 * errno of the failure (ENOSPC when a write makes no progress). */
int ddpc_fd_write_all(int fd, const void *buf, size_t len);

/* The longest path the output and lock helpers take (bytes, with the NUL). */
#define DDPC_FS_PATH_MAX 4096

/* Where an output named `path` is written: `path` itself, or, for a symbolic link (followed up to
 * 40 links deep, relative links from the link's directory), the file it finally points to, which
 * need not exist yet. Into target (cap bytes). Refuses, before anything is written, what a
 * rename would destroy: a directory (DDPC_EIO), anything else not a regular file (a device node
 * such as /dev/null, a FIFO, a socket): DDPC_EINVAL "cannot write <what> 'path': it is a FIFO,
 * not a regular file (...)". A loop of links, a path too long: DDPC_EINVAL; a stat that fails
 * for another reason than absence: DDPC_EIO. `what` names the role in messages (NULL: the path
 * alone). */
ddpc_status ddpc_fs_out_target(const char *path, const char *what, char *target, size_t cap);

/* An output file being written: a uniquely named temporary beside its target, renamed over the
 * target on commit, so a reader or a crash sees the old file or the new one, never a torn one.
 * The one atomic-replace door: every user-named output goes through it. */
typedef struct {
    FILE *f; /* the temporary: write the contents here */
    char target[DDPC_FS_PATH_MAX];
    char tmp[DDPC_FS_PATH_MAX + 16];
    char name[DDPC_FS_PATH_MAX + 64]; /* "what 'path'" for messages */
} ddpc_fs_out;

/* Opens a temporary "<target>.tmp-XXXXXX" for path's target (ddpc_fs_out_target's checks),
 * with the mode of the file it replaces, else 0644. DDPC_EINVAL / DDPC_EIO naming the path; on
 * error nothing is left behind and o->f is NULL. */
ddpc_status ddpc_fs_out_open(ddpc_fs_out *o, const char *path, const char *what);
/* As ddpc_fs_out_open, for a secret: the temporary is mode 0600 from its creation (so never
 * readable by another user, even for an instant) and the file committed stays 0600, whatever mode
 * the file it replaces had. */
ddpc_status ddpc_fs_out_open_secret(ddpc_fs_out *o, const char *path, const char *what);
/* Flushes, fsyncs and closes the temporary and renames it over the target (after checking again
 * that the target is still a regular file or absent), then fsyncs the directory. On error the
 * temporary is removed and the target untouched: DDPC_EIO naming the path. `failed` true (the
 * caller's writing failed) only removes the temporary and returns DDPC_OK. */
ddpc_status ddpc_fs_out_commit(ddpc_fs_out *o, bool failed);
/* Writes len bytes of data as the file path (open, write, commit). Errors as above. */
ddpc_status ddpc_fs_write_file(const char *path, const char *what, const void *data, size_t len);

/* An exclusive advisory lock (flock) on a lock file, held until released or the holder's death
 * (the kernel drops it with the descriptor, so a killed job never leaves a stale lock). */
typedef struct ddpc_fs_lock ddpc_fs_lock;

/* Creates lock_file if needed and locks it without waiting, writing "pid host" into it. A file
 * another process holds is DDPC_EINVAL "<what> '<name>' is in use by another job (pid N[ on host
 * H]); <advice>". With remove_on_release the file is deleted on release (an acquire that finds
 * its file deleted under it tries again, a bounded number of times): for lock files that sit
 * beside a user's files. DDPC_EIO naming lock_file; DDPC_ENOMEM. */
ddpc_status ddpc_fs_lock_acquire(const char *lock_file, const char *what, const char *name,
                                 const char *advice, bool remove_on_release, ddpc_fs_lock **out);
/* Releases the lock (removing the file when acquired so); NULL is a no-op. */
void ddpc_fs_lock_release(ddpc_fs_lock *l);

/* A line scanner for ddpc_read_file_scan: sees the bytes in file order, each run right after it
 * is read, and returns DDPC_OK to read on or an error (with its message) to stop reading. */
typedef ddpc_status (*ddpc_read_scan_fn)(void *ctx, const char *bytes, size_t n);

/* Reads the whole file `path` (a regular file, or a pipe read to its end) into *out, a
 * NUL-terminated buffer from ddpc_malloc that the caller frees, of *len bytes before the NUL.
 * `what` names the file's role in messages ("config": "cannot open config 'x.yaml': No such file
 * or directory"; NULL: the path alone). max > 0 refuses a longer file. With `missing` not NULL a
 * file that does not exist is no error: *missing = true, *out = NULL, *len = 0, DDPC_OK, no
 * message (the caller says what its absence means); else *missing = false. Errors name the path:
 * DDPC_EIO (cannot be opened or read, with the system's reason; a directory), DDPC_EFORMAT (longer
 * than max), DDPC_ENOMEM. Thread-safe. */
ddpc_status ddpc_read_file(const char *path, const char *what, size_t max, bool *missing,
                           char **out, size_t *len);
/* ddpc_read_file that shows each run of bytes to scan (ctx passed through) as it is read, so a
 * caller can stop an endless or malformed stream (/dev/zero) within bounded memory. */
ddpc_status ddpc_read_file_scan(const char *path, const char *what, size_t max, bool *missing,
                                ddpc_read_scan_fn scan, void *ctx, char **out, size_t *len);

/* The door for files whose bytes must be a file's (checkpoints, safetensors, state.json): opens
 * `path` for reading only if it is a regular file (symlinks followed). A FIFO, a device, a socket
 * or a directory in its place is refused at once, without blocking on it or reading it: DDPC_EIO
 * "cannot read '<path>': it is a FIFO, not a regular file". *fd (blocking, close-on-exec) is the
 * caller's to close; *size its size. `what` and `missing` as for ddpc_read_file. Thread-safe. */
ddpc_status ddpc_open_regular(const char *path, const char *what, bool *missing, int *fd,
                              uint64_t *size);

/* ddpc_read_file for a regular file only, refusing anything else as ddpc_open_regular does. */
ddpc_status ddpc_read_regular_file(const char *path, const char *what, size_t max, bool *missing,
                                   char **out, size_t *len);

#ifdef __cplusplus
}
#endif
#endif
