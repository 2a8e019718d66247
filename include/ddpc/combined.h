// SPDX-License-Identifier: MIT
/* ddpc combined loader: several named per-task loaders stepped together for multi-task training,
 * with the modes of Lightning's CombinedLoader (lightning.pytorch.utilities.combined_loader):
 *   max_size_cycle  steps = the longest loader's length; shorter loaders start over when they run
 *                   out (same epoch, so the same order again); default for training.
 *   min_size        steps = the shortest loader's length.
 *   max_size        steps = the longest length; a loader that ran out yields NULL.
 *   sequential      every loader's batches, one loader after another, one batch per step;
 *                   default for evaluation.
 * Used by one thread at a time. */
#ifndef DDPC_COMBINED_H
#define DDPC_COMBINED_H

#include <ddpc/loader.h>
#include <ddpc/status.h>

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    DDPC_COMBINED_MAX_SIZE_CYCLE,
    DDPC_COMBINED_MIN_SIZE,
    DDPC_COMBINED_MAX_SIZE,
    DDPC_COMBINED_SEQUENTIAL,
    DDPC_COMBINED_COUNT
} ddpc_combined_mode;

/* "max_size_cycle", "min_size", "max_size", "sequential"; "unknown" outside the enum. */
const char *ddpc_combined_mode_name(ddpc_combined_mode mode);
/* Parses a mode name; anything else is DDPC_EINVAL naming the value. */
ddpc_status ddpc_combined_mode_parse(const char *name, ddpc_combined_mode *out);

/* One step, owned by the combined loader, valid until its next call of next, start_epoch or
 * destroy. */
typedef struct {
    int64_t step;  /* step number within the epoch, from 0 */
    int64_t index; /* Lightning's batch_idx: = step, except sequential counts within its task */
    int task;      /* sequential: the task whose batch this is; -1 in the other modes */
    const ddpc_batch *const *batches; /* (num_tasks) task t's batch, or NULL when t yields
                                         nothing this step */
    double wait_s;                    /* seconds blocked in the loaders for this step */
} ddpc_combined_step;

typedef struct ddpc_combined ddpc_combined;

/* Combines `loaders` (num_tasks >= 1, borrowed until destroy, each used by nothing else
 * meanwhile) named by `names` (copied; distinct, non-empty). DDPC_EINVAL names a bad mode, a
 * missing loader or a bad or duplicate name; DDPC_ENOMEM. */
ddpc_status ddpc_combined_create(ddpc_loader *const *loaders, const char *const *names,
                                 int num_tasks, ddpc_combined_mode mode, ddpc_combined **out);
/* Does not destroy the loaders; NULL is a no-op. */
void ddpc_combined_destroy(ddpc_combined *c);

/* Starts `epoch` on every loader. In max_size_cycle mode a loader with no batches while another
 * has some is DDPC_EINVAL naming the task (it cannot be cycled). */
ddpc_status ddpc_combined_start_epoch(ddpc_combined *c, int64_t epoch);
/* *step = the next step, or NULL at the end of the epoch. Loader errors pass through unchanged. */
ddpc_status ddpc_combined_next(ddpc_combined *c, const ddpc_combined_step **step);

/* Steps per epoch: max, min, max or sum of the loaders' lengths by mode. */
int64_t ddpc_combined_len(const ddpc_combined *c);
/* Number of tasks (loaders). */
int ddpc_combined_num_tasks(const ddpc_combined *c);
/* Name of task t; NULL out of range. */
const char *ddpc_combined_task_name(const ddpc_combined *c, int task);
/* The mode it was created with. */
ddpc_combined_mode ddpc_combined_mode_of(const ddpc_combined *c);
/* Seconds blocked in the loaders during the current epoch (sum of the steps' wait_s). */
double ddpc_combined_epoch_wait(const ddpc_combined *c);

#ifdef __cplusplus
}
#endif
#endif
