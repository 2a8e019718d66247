// SPDX-License-Identifier: MIT
/* Private to src/train: what a GPU run keeps about its steps — device allocations and host waits
 * per warm step (trainer_waits.c, trainer_fit_log.c), and the passes whose losses a deferred
 * engine has not read back yet (trainer_pending.c). */
#ifndef DDPC_TRAIN_TRAINER_GPU_STEP_H
#define DDPC_TRAIN_TRAINER_GPU_STEP_H

#include <ddpc/nn.h>
#include <ddpc/status.h>
#include <ddpc/train.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A GPU run: device allocations made by the end of the second step, and steps taken, so the end
 * of the run can say how many warm steps made (none is the promise) and how many evaluations and
 * checkpoints between them made (their first batches of a larger size); and the host's waits for
 * the device in each warm step (trainer_waits.c), the most in one that logged nothing and in one
 * that logged. */
typedef struct {
    uint64_t allocs_warm, allocs_last;
    uint64_t allocs_at;   /* alloc_count() when the current step began */
    uint64_t step_allocs; /* made inside warm steps (their passes, update and progress line) */
    int64_t steps;
    uint64_t waits_at;     /* host_waits() when the current step began */
    uint64_t throttles_at; /* host_throttles() then */
    uint64_t throttles;    /* in warm steps: the host a batch ring ahead, the GPU busy */
    uint64_t waits_quiet, waits_logged; /* the most in one step */
    int64_t quiet_steps, logged_steps;
    /* Device memory in use (cudaMemGetInfo: every process on the GPU) after the latest step and
     * the most after any step, for ZeRO's saving (trainer_fit_log.c). */
    size_t used_last, used_most;
} ddpc__gpu_count;

/* A deferred engine's passes not yet read back (trainer_pending.c): in order, each pass's task
 * (>= 0) and each step's end (-1), so that the losses are accounted as they would have been when
 * the engine reads them. */
typedef struct {
    int32_t *entry;          /* (cap_entries) */
    ddpc_model_output *outs; /* (cap_passes) what the engine reads */
    size_t cap_entries, cap_passes, n_entries, n_passes;
    int64_t per_step; /* passes a step makes at most */
    double step_sum;  /* the current step's weighted loss sum so far */
} ddpc__pending;

/* trainer_waits.c: a GPU run's host waits and device allocations per step: begin before a step's
 * first pass, end after its progress line (before evaluation and checkpoints); the log line at the
 * end. No-ops on the CPU. */
void ddpc__trainer_waits_begin(ddpc_trainer *t);
void ddpc__trainer_waits_end(ddpc_trainer *t, bool logged);
void ddpc__trainer_log_host_waits(const ddpc_trainer *t);
/* trainer_pending.c: a GPU run's losses read at logged steps. init sizes the engine's deferral
 * (engine_cfg.defer_passes) before the engine is made; note_pass/note_step account a pass's loss
 * and a step's end now, or, deferred, when read_pending reads them (before stats sync, checkpoint
 * saves, and a step that might not fit); fini frees. */
ddpc_status ddpc__trainer_pending_init(ddpc_trainer *t);
void ddpc__trainer_pending_fini(ddpc_trainer *t);
ddpc_status ddpc__trainer_note_pass(ddpc_trainer *t, int task, const ddpc_model_output *out);
void ddpc__trainer_note_step(ddpc_trainer *t);
ddpc_status ddpc__trainer_read_pending(ddpc_trainer *t);
ddpc_status ddpc__trainer_make_room(ddpc_trainer *t);
#endif
