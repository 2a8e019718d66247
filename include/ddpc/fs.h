/* ddpc file-system helpers shared by every layer that reads or writes files (configs, run
 * directories, checkpoints, metrics, launcher logs). */
#ifndef DDPC_FS_H
#define DDPC_FS_H

#include <ddpc/status.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* mkdir -p: creates every missing component of `dir`. DDPC_EINVAL for a path of 1024 bytes or
 * more; DDPC_EIO naming the component that cannot be created or is not a directory. */
ddpc_status ddpc_mkdirs(const char *dir);

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
