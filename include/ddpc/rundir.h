// SPDX-License-Identifier: MIT
/* ddpc run directory guards: one job per run directory (an advisory lock the kernel drops when the
 * holder dies, so a SIGKILLed job never leaves a stale lock), the effective configuration saved
 * next to the outputs as loadable YAML, and checks at start that outputs written at the end can be
 * written. Library code: errors are status codes naming the path. */
#ifndef DDPC_RUNDIR_H
#define DDPC_RUNDIR_H

#include <ddpc/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The run directory's lock is a ddpc_fs_lock on <dir>/.lock (ddpc/fs.h). */
typedef struct ddpc_fs_lock ddpc_rundir_lock;

/* Creates dir (and its parents) and takes an exclusive lock on <dir>/.lock (flock, non-blocking),
 * writing the holder's pid into it. Held until ddpc_rundir_unlock or the process's death. A dir
 * another job holds is DDPC_EINVAL "run directory 'X' is in use by another job (pid N); use
 * another run_dir or stop that job"; DDPC_EIO naming the path; DDPC_ENOMEM. */
ddpc_status ddpc_rundir_lock_acquire(const char *dir, ddpc_rundir_lock **out);
/* Releases the lock and removes <dir>/.lock (a finished job leaves no trace); NULL is a no-op. */
void ddpc_rundir_unlock(ddpc_rundir_lock *l);

/* Writes <dir>/config.yaml atomically (ddpc_fs_out: a unique temporary, then rename) from `dump`,
 * the "dotted.key: value" lines of ddpc_config_dump, as nested YAML that `ddpc train` loads back
 * (numeric path components are sequence items). DDPC_EIO naming the file; DDPC_ENOMEM. */
ddpc_status ddpc_rundir_write_config(const char *dir, const char *dump);

/* Whether a file can be created at `path` at the end of a run: follows a symlink to its target
 * (ddpc_fs_out_target: a directory there is DDPC_EIO, a device, FIFO or socket DDPC_EINVAL),
 * creates the target's directory if needed, then creates and removes a uniquely named probe beside
 * it. DDPC_EIO naming path and reason. */
ddpc_status ddpc_path_check_writable(const char *path);
/* Whether files can be created in `dir` (created if needed): a probe as above. */
ddpc_status ddpc_dir_check_writable(const char *dir);

#ifdef __cplusplus
}
#endif
#endif
