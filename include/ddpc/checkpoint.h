// SPDX-License-Identifier: MIT
/* Training checkpoints: <dir>/step-<8 digits>/ {model.safetensors, optimizer.safetensors,
 * state.json} plus <dir>/latest naming the newest; under ZeRO (stage >= 1 on several ranks) one
 * shard-<rank>-of-<world>.safetensors per rank instead of the first two, with a manifest of the
 * flat ranges each holds in state.json. Invariant: a step-* directory appears only by
 * renaming a fully written and fsynced temporary directory (.tmp-*), and state.json records each
 * file's size and CRC-32, so whatever moment a writer dies at, a checkpoint is either complete and
 * verifiable or ignored. Every function is "one thread at a time" per checkpoint directory. */
#ifndef DDPC_CHECKPOINT_H
#define DDPC_CHECKPOINT_H

#include <ddpc/comm.h>
#include <ddpc/nn.h>
#include <ddpc/optim.h>
#include <ddpc/status.h>
#include <ddpc/version.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Every checkpoint's state.json records the DDPC_VERSION that wrote it (ddpc/version.h). */
/* state.json's "format_version"; readers refuse a newer one. Full checkpoints are version 1,
 * sharded ones version 2 (a reader of version 1 refuses them instead of misreading them). */
#define DDPC_CKPT_FORMAT_VERSION 2

typedef struct {
    int64_t step;          /* optimizer steps completed */
    int64_t epoch;         /* epoch the next step belongs to */
    int64_t epoch_step;    /* optimizer steps already taken in that epoch */
    int64_t samples_seen;  /* global samples consumed so far (all ranks, all micro-batches) */
    int64_t global_batch;  /* samples per optimizer step over all ranks */
    int world;             /* ranks of the run that wrote it */
    int zero_stage;        /* its ZeRO stage: 0 for a full checkpoint (written by
                              ddpc_ckpt_save, which ignores this field), >= 1 for a sharded one */
    uint64_t seed;
    int64_t skipped_steps; /* optimizer steps skipped (non-finite) */
    bool loss_scaling;     /* the run scaled its loss (fp16); then: */
    float loss_scale;      /* the dynamic loss scale for the next step */
    int64_t loss_scale_growth_tracker; /* consecutive finite steps behind it */
    char *config;          /* effective config text (ddpc_config_dump output); on read: ddpc_malloc'd */
    char version[32];      /* ddpc version that wrote it (on write: filled by the module) */
    uint32_t state_crc;    /* on read: state.json's own CRC-32 (its "state_crc32"), which covers
                              every file's CRC: the checkpoint's identity */
} ddpc_ckpt_state;

/* Frees the config text of a state filled by ddpc_ckpt_read_state/ddpc_ckpt_load and sets it to
 * NULL; a state whose config the caller owns must not be passed here. NULL is a no-op. */
void ddpc_ckpt_state_fini(ddpc_ckpt_state *s);

/* Rank 0 only. Writes <dir>/step-<8 digits of s->step>/ (creating dir and its parents): the
 * parameters, the optimizer state and step count, and *s (config may be NULL). Protocol: a
 * mkdtemp directory .tmp-step-<step>-<pid>-XXXXXX in dir, every file and the directory fsynced,
 * renamed to step-<step> (an existing one is swapped out atomically and removed), dir fsynced,
 * then <dir>/latest replaced atomically. Only after that: prune to the newest `keep` step
 * directories (0 = keep all; the new one and the one latest names always stay) and remove stale
 * .tmp-* directories (their pid is dead, or they are ours, or older than an hour). *out_path (cap
 * bytes; may be NULL) gets the committed directory. Errors name the file: DDPC_EINVAL (bad
 * arguments, optimizer size differs from the model), DDPC_EIO, DDPC_ENOMEM; on error the
 * previous checkpoints and latest are as they were. */
ddpc_status ddpc_ckpt_save(const char *dir, const ddpc_model *m, ddpc_optim *o,
                           const ddpc_ckpt_state *s, int64_t keep, char *out_path, size_t cap);

/* Collective over pg: every rank calls it, in the same order as the group's other collectives.
 * Writes the sharded checkpoint <dir>/step-<8 digits of s->step>/: rank r's file
 * shard-<r 5 digits>-of-<world 5 digits>.safetensors holds the 1-D F32 tensor "params" (its
 * parameters' elements of `ranges`, n_ranges flat ranges in ascending order: its ZeRO shard,
 * concatenated in range order) and one tensor of the same length per optimizer state buffer,
 * named after it ("exp_avg"); o holds exactly the ranges' elements in order (as the engine's
 * optimizer under ZeRO). Rank 0 creates the temporary directory (its dir and keep count), writes
 * state.json (*s with its zero_stage and world, the model's tensor table, the manifest of every
 * file's ranges, every file's size and CRC-32) and commits as ddpc_ckpt_save does; *out_path as
 * there, on every rank. Every rank returns the same status and, on error, the same message (the
 * first failing rank's, or the group's: a dead or hung rank makes the others fail at the group's
 * timeout). On error the previous checkpoints and latest are as they were. */
ddpc_status ddpc_ckpt_save_sharded(const char *dir, ddpc_pg *pg, const ddpc_model *m,
                                   ddpc_optim *o, const ddpc_range *ranges, size_t n_ranges,
                                   const ddpc_ckpt_state *s, int64_t keep, char *out_path,
                                   size_t cap);

/* The newest complete and verifiable checkpoint of dir: the one `latest` names if it verifies,
 * else the newest step-* that verifies (temporary directories are ignored). *found is false if
 * there is none, which is not an error (nor is a missing dir); DDPC_EINVAL if path is too small. */
ddpc_status ddpc_ckpt_find_latest(const char *dir, char *path, size_t cap, bool *found);

/* One step-* directory of a run's checkpoint directory, for listings. */
typedef struct {
    char name[32];       /* "step-00000030" */
    int64_t step;        /* from the name */
    int64_t epoch;       /* from state.json; -1 if unreadable */
    int world;           /* from state.json; 0 if unreadable */
    int zero_stage;      /* from state.json: 0 for a full checkpoint (or unreadable) */
    uint64_t bytes;      /* sum of the sizes of the files in it */
    bool ok;             /* ddpc_ckpt_verify passed */
    bool latest;         /* `latest` names it */
    char problem[512];   /* verify's message when !ok */
} ddpc_ckpt_entry;

/* ddpc_ckpt_find_latest, also saying what it passed over: *skipped (ddpc_malloc'd, free with
 * ddpc_free; NULL when *n_skipped is 0) gets each checkpoint it tried that did not verify, in
 * the order tried (the one `latest` names, then step-* newest first), with its name and verify's
 * message in problem (only name, step and problem are set). *found false with *n_skipped > 0:
 * checkpoints exist and none verifies. Reads only; changes nothing in dir. */
ddpc_status ddpc_ckpt_find_usable(const char *dir, char *path, size_t cap, bool *found,
                                  ddpc_ckpt_entry **skipped, size_t *n_skipped);

/* Checks a checkpoint directory: state.json parses and its own checksum holds, every file it
 * lists is present with the recorded size and CRC-32. DDPC_EFORMAT naming the file that is
 * missing, short or corrupt; DDPC_EIO if one cannot be read; DDPC_ENOMEM. */
ddpc_status ddpc_ckpt_verify(const char *path);

/* Reads state.json of checkpoint `path` into *s (zeroed first; config is ddpc_malloc'd, free it
 * with ddpc_ckpt_state_fini). Checks state.json's own checksum, not the other files. */
ddpc_status ddpc_ckpt_read_state(const char *path, ddpc_ckpt_state *s);

/* Loads parameters (and, when o != NULL, optimizer state and step count) of checkpoint `path`
 * into m / o, and its state into *s when s != NULL; all-or-nothing: the checkpoint is verified
 * and every tensor checked against m and o before anything is copied. DDPC_EFORMAT for a corrupt
 * checkpoint or one of another model or optimizer type (the message names the difference).
 * Same as ddpc_ckpt_load_shard(path, m, o, NULL, 0, s): o holds state for every parameter. */
ddpc_status ddpc_ckpt_load(const char *path, ddpc_model *m, ddpc_optim *o, ddpc_ckpt_state *s);

/* The resharding load: reads checkpoint `path`, full or sharded, of any world size and ZeRO
 * stage, into every parameter of m and, when o != NULL, the optimizer state of the flat ranges
 * `ranges` (n_ranges, ascending and disjoint; NULL: one range over all parameters) into o's
 * state buffers, the ranges' elements in order (ZeRO: this rank's shard under the current
 * partition, ddpc_engine_shard; o holds at least their total), and o's step count; the state
 * into *s when s != NULL (free with ddpc_ckpt_state_fini). Only the overlap of each file's
 * ranges with the requested ones is copied. All-or-nothing: sizes and CRC-32s are verified and
 * the model type and tensor table, the optimizer type and the manifest (every tensor element
 * held exactly once) checked before anything is copied. Errors: DDPC_EFORMAT naming the file and
 * the problem, DDPC_EINVAL for ranges outside the model, DDPC_EIO, DDPC_ENOMEM. Not collective:
 * each rank reads what it needs. */
ddpc_status ddpc_ckpt_load_shard(const char *path, ddpc_model *m, ddpc_optim *o,
                                 const ddpc_range *ranges, size_t n_ranges, ddpc_ckpt_state *s);

/* Writes the parameters of (verified) checkpoint `path`, full or sharded (the shards'
 * parameters consolidated under the tensor names and shapes state.json records), as one
 * safetensors file out_file, loadable without ddpc (metadata format "pt", model type, step). */
ddpc_status ddpc_ckpt_export(const char *path, const char *out_file);

/* One file of a sharded checkpoint, for listings. */
typedef struct {
    char file[64];   /* "shard-00000-of-00004.safetensors" */
    size_t n_ranges; /* flat ranges it holds */
    uint64_t floats; /* parameters it holds: the sum of its ranges' lengths */
} ddpc_ckpt_shard_info;

/* The layout state.json of checkpoint `path` records (its checksum checked, the other files not
 * read): *zero_stage (0 for a full checkpoint) and, for a sharded one, its files in rank order
 * (*out ddpc_malloc'd, free with ddpc_free; NULL with *n 0 for a full checkpoint). */
ddpc_status ddpc_ckpt_layout(const char *path, int *zero_stage, ddpc_ckpt_shard_info **out,
                             size_t *n);

/* Whether path is a checkpoint directory: a directory holding state.json (or something else
 * under that name, which loading it then refuses, naming it). */
bool ddpc_ckpt_is_dir(const char *path);

/* path itself when it is a checkpoint directory, else the latest checkpoint of run directory
 * path (ddpc_ckpt_find_latest); DDPC_EINVAL "<path>: no checkpoint found" when neither. */
ddpc_status ddpc_ckpt_resolve(const char *path, char *out, size_t cap);

/* Every step-* directory of dir, by increasing step, verified. *out is ddpc_malloc'd (free with
 * ddpc_free; NULL when *n is 0). A missing dir gives *n = 0; DDPC_EIO if it cannot be read. */
ddpc_status ddpc_ckpt_list(const char *dir, ddpc_ckpt_entry **out, size_t *n);

#ifdef __cplusplus
}
#endif
#endif
