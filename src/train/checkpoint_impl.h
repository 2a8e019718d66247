/* Internals shared by the checkpoint_*.c files: file-system steps of the commit protocol, the
 * state.json codec and the names of a checkpoint's parts. Invariant kept by every writer here:
 * data reaches its final name only by rename after an fsync, and the directory is fsynced after. */
#ifndef DDPC_TRAIN_CHECKPOINT_IMPL_H
#define DDPC_TRAIN_CHECKPOINT_IMPL_H

#include <ddpc/checkpoint.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DDPC__CKPT_MODEL "model.safetensors"
#define DDPC__CKPT_OPTIM "optimizer.safetensors"
#define DDPC__CKPT_STATE "state.json"
#define DDPC__CKPT_LATEST "latest"
#define DDPC__CKPT_TMP_PREFIX ".tmp-"
#define DDPC__CKPT_PATH_MAX 4096

/* Size and CRC-32 (zlib) of one file of a checkpoint, as recorded in state.json. */
typedef struct {
    const char *name; /* DDPC__CKPT_MODEL / DDPC__CKPT_OPTIM */
    uint64_t bytes;
    uint32_t crc;
} ddpc__ckpt_file;

/* Everything state.json holds besides ddpc_ckpt_state. */
typedef struct {
    char model_type[16];
    int64_t num_params;
    char optim_type[16];
    int64_t optim_step_count;
    ddpc__ckpt_file files[2];
    size_t n_files;
} ddpc__ckpt_extra;

/* ---- checkpoint_fs.c ---- */
/* "<a>/<b>" into out (cap); DDPC_EINVAL naming a if it does not fit. */
ddpc_status ddpc__ckpt_join(char *out, size_t cap, const char *a, const char *b);
/* fsync of a directory (best effort: some file systems refuse it). */
void ddpc__ckpt_fsync_dir(const char *path);
/* Creates path (must not exist), writes len bytes, fsyncs, closes; DDPC_EIO naming path. */
ddpc_status ddpc__ckpt_write_new(const char *path, const void *data, size_t len);
/* Size and CRC-32 of a file; DDPC_EFORMAT if missing, DDPC_EIO if unreadable. */
ddpc_status ddpc__ckpt_file_crc(const char *path, uint64_t *bytes, uint32_t *crc);
/* Reads a whole file of at most max bytes into a NUL-terminated ddpc_malloc'd buffer. */
ddpc_status ddpc__ckpt_read_file(const char *path, size_t max, char **out, size_t *len);
/* Removes a file or a directory tree (best effort; false if something stayed). */
bool ddpc__ckpt_remove_tree(const char *path);
/* Whether name is "step-<digits>" (8 or more); the step into *step. */
bool ddpc__ckpt_parse_step_name(const char *name, int64_t *step);
/* The pid of a ".tmp-...-<pid>-XXXXXX" name, or -1 if it has none. */
long ddpc__ckpt_tmp_pid(const char *name);

/* ---- checkpoint_state.c ---- */
/* state.json's text for s and x (ddpc_malloc'd, NUL-terminated), its own checksum included. */
ddpc_status ddpc__ckpt_state_format(const ddpc_ckpt_state *s, const ddpc__ckpt_extra *x,
                                    char **out, size_t *len);
/* Parses state.json text read from `origin` after checking its own checksum; s->config is
 * ddpc_malloc'd. DDPC_EFORMAT naming origin and the problem. */
ddpc_status ddpc__ckpt_state_parse(const char *text, size_t len, const char *origin,
                                   ddpc_ckpt_state *s, ddpc__ckpt_extra *x);
/* Reads and parses <ckpt>/state.json. */
ddpc_status ddpc__ckpt_state_load(const char *ckpt, ddpc_ckpt_state *s, ddpc__ckpt_extra *x);

/* ---- checkpoint_dir.c ---- */
/* Prunes dir to the newest keep step directories, never removing `keep_name`, then removes stale
 * temporaries; DDPC_EIO naming a directory that could not be removed. */
ddpc_status ddpc__ckpt_prune(const char *dir, int64_t keep, const char *keep_name);

#endif
