// SPDX-License-Identifier: MIT
/* The step engine's state, shared by engine.c (create, passes, accessors) and engine_update.c
 * (the norm, clipping, the optimizer step and the deferred reads). */
#ifndef DDPC_PARALLEL_ENGINE_IMPL_H
#define DDPC_PARALLEL_ENGINE_IMPL_H

#include <ddpc/engine.h>

#include "parallel/dp_impl.h"
#include "parallel/engine_clock.h"
#include "parallel/engine_defer.h"

struct ddpc_engine {
    ddpc_model *model;
    ddpc_reducer *reducer; /* NULL on one rank */
    ddpc_optim *opt;
    ddpc_engine_config cfg;
    int rank, world;
    int64_t step, skipped;
    ddpc_loss_scale_state scaler; /* {1, 0} without loss scaling */
    /* The flat ranges whose optimizer state this rank holds and updates (ZeRO: the reducer's
     * shard, `owned` floats in all; otherwise `whole`), and the stage in effect (0 on one rank). */
    const ddpc_range *shard;
    size_t n_shard, owned;
    ddpc_range whole;
    int stage;
    /* Per step: whether a pass communicated during its backward, and the first non-finite
     * local loss (for the message). */
    bool synced;
    bool buffers_sent; /* this step broadcast the model buffers already */
    bool bad_loss;
    float bad_loss_value;
    ddpc_engine_timing spent; /* cfg.timing: since the last ddpc_engine_take_timing */
    ddpc__clock clock;        /* cfg.timing on a device with marks: the phases in device time */
    /* DataParallel (cfg.dp_replicas > 0): the replicas, and whether this step copied the
     * parameters into them yet (at its first pass, after whatever changed them). */
    ddpc__dp *dp;
    bool replicated;
    /* cfg.defer_passes in effect (a device, one rank, stop or loss scaling): the passes' losses
     * and the steps' norms wait on the device for ddpc_engine_read; read_step is the step count
     * at the last read, last_skipped whether the last step was skipped (its norm is NaN). */
    bool deferred, last_skipped;
    ddpc__defer defer;
    int64_t read_step;
    double last_norm; /* without deferral: the last step's norm, for ddpc_engine_read */
};

/* cfg.timing (or a trace recording): adds the seconds since `since` to *acc (a field of
 * e->spent) and traces them as `name` (when given) and returns now; else 0. On a device with
 * marks, also a mark, whose span from the previous lap's adds to the same field in device time. */
double ddpc__engine_lap(ddpc_engine *e, double *acc, double since, const char *name);

/* The hang recorder's phase on the host group and, for a GPU model, the device group. */
void ddpc__engine_set_phase(ddpc_engine *e, ddpc_phase phase);

#endif
