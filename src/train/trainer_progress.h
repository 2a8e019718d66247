// SPDX-License-Identifier: MIT
/* The progress bar (trainer_progress.c): its state, kept in the trainer, and its calls. */
#ifndef DDPC_TRAIN_TRAINER_PROGRESS_H
#define DDPC_TRAIN_TRAINER_PROGRESS_H

#include <ddpc/train.h>

#include <stdbool.h>
#include <stdint.h>

/* The progress bar's state (trainer_progress.c). */
typedef struct {
    bool decided, on, drawn;
    double start, last_draw; /* ddpc_time_now() of the first call and of the last redraw */
    int64_t start_step;      /* the engine's step at the first call (a resumed run's start) */
    int64_t epoch;
    double loss, rate; /* of the last logging window; loss NaN before the first */
    bool tokens;       /* rate counts tokens, not samples */
} ddpc__progress;

/* trainer_progress.c: the bar drawn on rank 0 in place of the progress lines when log.progress
 * is bar, or auto and the log is a terminal. on: whether it is drawn (decided at the first call);
 * update: the window's loss and rate, redrawn now; tick: after a step, redrawn at most 10 times a
 * second; clear: erases it before another line is printed; finish: its last state and a newline. */
bool ddpc__progress_on(ddpc_trainer *t);
void ddpc__progress_update(ddpc_trainer *t, int64_t epoch, double loss, double rate, bool tokens);
void ddpc__progress_tick(ddpc_trainer *t, int64_t epoch);
void ddpc__progress_clear(ddpc_trainer *t);
void ddpc__progress_finish(ddpc_trainer *t);

#endif
