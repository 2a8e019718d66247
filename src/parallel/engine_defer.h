// SPDX-License-Identifier: MIT
/* A device engine's values kept on the device between reads (engine_defer.c): one record in the
 * table's memory, read back with one wait. Layout (doubles): [0] the last step's sum of squares of
 * the gradients, [1] their running sum since the last read (NaN or inf once any step's was), then
 * per pass {loss sum, valid targets, correct}. Invariant: `passes` slots are written and not yet
 * read; a pass's slot is its model's loss sink until the pass ends. */
#ifndef DDPC_PARALLEL_ENGINE_DEFER_H
#define DDPC_PARALLEL_ENGINE_DEFER_H

#include <ddpc/device.h>
#include <ddpc/nn.h>

typedef struct {
    const ddpc_kernel_table *k;
    double *dev;  /* (2 + 3 cap) the table's memory */
    double *host; /* (2 + 3 cap) the last read */
    size_t cap, passes;
} ddpc__defer;

/* Allocates the record for cap passes (zeroed); DDPC_ENOMEM naming the device. */
ddpc_status ddpc__defer_init(ddpc__defer *d, const ddpc_kernel_table *k, size_t cap);
void ddpc__defer_fini(ddpc__defer *d);
/* The next pass's sink (3 doubles), NULL when cap passes wait to be read. */
double *ddpc__defer_take_pass(ddpc__defer *d);
/* The step norm record (2 doubles). */
static inline double *ddpc__defer_norm(ddpc__defer *d) { return d->dev; }
/* Waits once and reads: outs (d->passes of them, *n) get each pass's loss (sum / valid as a float,
 * as cross_entropy_forward returns it), n_valid and n_correct; *sumsq the last step's sum of
 * squares, *running the running sum, which restarts at 0. */
void ddpc__defer_read(ddpc__defer *d, ddpc_model_output *outs, size_t *n, double *sumsq,
                      double *running);

#endif
