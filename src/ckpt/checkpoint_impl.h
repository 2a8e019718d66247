// SPDX-License-Identifier: MIT
/* Internals shared by the checkpoint_*.c files: file-system steps of the commit protocol, the
 * state.json codec and the names of a checkpoint's parts. Invariant kept by every writer here:
 * data reaches its final name only by rename after an fsync, and the directory is fsynced after. */
#ifndef DDPC_CKPT_CHECKPOINT_IMPL_H
#define DDPC_CKPT_CHECKPOINT_IMPL_H

#include <ddpc/checkpoint.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/json.h"

#define DDPC__CKPT_MODEL "model.safetensors"
#define DDPC__CKPT_OPTIM "optimizer.safetensors"
#define DDPC__CKPT_STATE "state.json"
#define DDPC__CKPT_LATEST "latest"
#define DDPC__CKPT_TMP_PREFIX ".tmp-"
#define DDPC__CKPT_PATH_MAX 4096

/* "shard-<rank 5 digits>-of-<world 5 digits>.safetensors" */
#define DDPC__CKPT_SHARD_FMT "shard-%05d-of-%05d.safetensors"
/* The tensor of a shard file that holds its parameters (its ranges' elements in order); the
 * optimizer state buffers sit beside it under their state names ("exp_avg", "momentum"). */
#define DDPC__CKPT_SHARD_PARAMS "params"
/* Rank 0's shard file also holds the model's buffers (BatchNorm running statistics), each as
 * "buffer.<name>" of its own shape; a full checkpoint keeps them in model.safetensors. */
#define DDPC__CKPT_SHARD_BUFFER_PREFIX "buffer."
#define DDPC__CKPT_FILE_NAME_MAX 64

/* Size and CRC-32 (zlib) of one file of a checkpoint, as recorded in state.json. */
typedef struct {
    char name[DDPC__CKPT_FILE_NAME_MAX]; /* DDPC__CKPT_MODEL, DDPC__CKPT_OPTIM, or a shard's */
    uint64_t bytes;
    uint32_t crc;
} ddpc__ckpt_file;

/* One parameter of the model's tensor table (sharded checkpoints record it, so that export
 * needs no model): its flat range is [offset, offset + numel). */
typedef struct {
    char name[DDPC_PARAM_NAME_MAX];
    int ndim;
    int64_t shape[4];
    size_t offset, numel;
} ddpc__ckpt_tensor;

/* Everything state.json holds besides ddpc_ckpt_state. A full checkpoint (zero_stage 0) has
 * files {model, optimizer} and no tensors or shards; a sharded one has one file per rank, and
 * shard i is files[i], holding the flat ranges ranges[first[i] .. first[i + 1]) in that order. */
typedef struct {
    char model_type[16];
    int64_t num_params;
    char optim_type[16];
    int64_t optim_step_count;
    int zero_stage;          /* 0: the full format */
    ddpc__ckpt_file *files;  /* (n_files) ddpc_malloc'd */
    size_t n_files;
    ddpc__ckpt_tensor *tensors; /* (n_tensors) sharded only */
    size_t n_tensors;
    ddpc_range *ranges; /* (first[n_files]) sharded only */
    size_t *first;      /* (n_files + 1) sharded only */
} ddpc__ckpt_extra;

/* Frees what ddpc__ckpt_state_parse/load allocated in x and zeroes it; NULL is a no-op. */
void ddpc__ckpt_extra_fini(ddpc__ckpt_extra *x);

/* ---- checkpoint_fs.c ---- */
/* "<a>/<b>" into out (cap); DDPC_EINVAL naming a if it does not fit. */
ddpc_status ddpc__ckpt_join(char *out, size_t cap, const char *a, const char *b);
/* fsync of a directory (best effort: some file systems refuse it). */
void ddpc__ckpt_fsync_dir(const char *path);
/* Creates path (must not exist), writes len bytes, fsyncs, closes; DDPC_EIO naming path. */
ddpc_status ddpc__ckpt_write_new(const char *path, const void *data, size_t len);
/* Size and CRC-32 of a file; DDPC_EFORMAT if missing, DDPC_EIO if unreadable. */
ddpc_status ddpc__ckpt_file_crc(const char *path, uint64_t *bytes, uint32_t *crc);
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
/* obj[key] as an integer / a string; DDPC_EFORMAT naming origin and key otherwise. */
ddpc_status ddpc__ckpt_get_int(const ddpc__json *obj, const char *key, const char *origin,
                               int64_t *out);
ddpc_status ddpc__ckpt_get_str(const ddpc__json *obj, const char *key, const char *origin,
                               const ddpc__json **out);
/* Reads and parses <ckpt>/state.json (x: free with ddpc__ckpt_extra_fini, also on error). */
ddpc_status ddpc__ckpt_state_load(const char *ckpt, ddpc_ckpt_state *s, ddpc__ckpt_extra *x);

/* ---- checkpoint_save.c ---- */
/* Creates dir (and parents) and a fresh temporary directory for step into tmp (cap bytes); name
 * (name_cap bytes) gets "step-<8 digits>". */
ddpc_status ddpc__ckpt_begin(const char *dir, int64_t step, char *name, size_t name_cap,
                             char *tmp, size_t cap);
/* Commits the fully written and fsynced tmp as <dir>/<name>: rename (or atomic swap), fsync,
 * latest, then prune to keep; removes tmp on error. out_path (cap) gets <dir>/<name>. */
ddpc_status ddpc__ckpt_commit(const char *dir, const char *tmp, const char *name, int64_t keep,
                              char *out_path, size_t cap);

/* ---- checkpoint_manifest.c ---- */
/* Parses the "files" object of state.json (full: model and optimizer; sharded: the shards that
 * "shards" names, in its order) and, for a sharded checkpoint, "tensors" and "shards". */
ddpc_status ddpc__ckpt_manifest_parse(const ddpc__json *j, const char *origin,
                                      ddpc__ckpt_extra *x);
/* Checks a sharded manifest against itself: ranges inside [0, num_params), no two overlapping,
 * every tensor element covered exactly once, tensors inside the buffer. DDPC_EFORMAT naming
 * origin and the first problem. */
ddpc_status ddpc__ckpt_manifest_check(const ddpc__ckpt_extra *x, const char *origin);

/* ---- checkpoint_reshard.c ---- */
#define DDPC__CKPT_MAX_STATE 4

/* What ddpc__ckpt_read fills: every parameter into params when it is not NULL, and the state
 * buffers snames[0..ns) of the flat ranges `ranges` (ascending) into state[k], the ranges'
 * elements in order. tensors is the model's table (names and shapes the full format is checked
 * against). Elements no file holds are left as they are. */
typedef struct {
    const ddpc__ckpt_tensor *tensors; /* (n_tensors) */
    size_t n_tensors;
    float *params; /* (num_params) or NULL */
    size_t ns;
    const char *snames[DDPC__CKPT_MAX_STATE];
    float *state[DDPC__CKPT_MAX_STATE]; /* (sum of the ranges' len) each */
    const ddpc_range *ranges;
    size_t n_ranges;
    const ddpc__ckpt_tensor *buffers; /* (n_buffers) the model's buffers, offsets into */
    size_t n_buffers;
    float *buffer_data;               /* (the model's buffer floats) or NULL */
} ddpc__ckpt_want;

/* Reads checkpoint `path` (state.json parsed into x; its files verified and, when sharded, its
 * manifest checked by the caller) into the buffers of w. DDPC_EFORMAT naming the file and the
 * problem; the buffers may be partly written on error (they are the caller's staging). */
ddpc_status ddpc__ckpt_read(const char *path, const ddpc__ckpt_extra *x, const ddpc__ckpt_want *w);

/* ---- checkpoint_dir.c ---- */
/* Prunes dir to the newest keep step directories, never removing `keep_name`, then removes stale
 * temporaries; DDPC_EIO naming a directory that could not be removed. */
ddpc_status ddpc__ckpt_prune(const char *dir, int64_t keep, const char *keep_name);

#endif
