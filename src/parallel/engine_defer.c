// SPDX-License-Identifier: MIT
/* The engine's deferred values (engine_defer.h): a record on the device that the step's kernels
 * write and the host reads only when asked (at logged steps), so a step never waits for the
 * device to learn its loss or gradient norm. */
#include "parallel/engine_defer.h"

#include <ddpc/alloc.h>

#include <string.h>

ddpc_status ddpc__defer_init(ddpc__defer *d, const ddpc_kernel_table *k, size_t cap)
{
    *d = (ddpc__defer){.k = k, .cap = cap};
    size_t bytes = (2 + 3 * cap) * sizeof(double);
    d->host = ddpc_calloc(2 + 3 * cap, sizeof(double));
    d->dev = d->host ? k->alloc(bytes) : NULL; /* zeroed: the running sum starts at 0 */
    if (!d->dev) {
        ddpc_free(d->host);
        *d = (ddpc__defer){0};
        return ddpc_errorf(DDPC_ENOMEM, "engine: out of %s memory for %zu bytes of deferred "
                           "losses", k->name, bytes);
    }
    return DDPC_OK;
}

void ddpc__defer_fini(ddpc__defer *d)
{
    if (d->dev)
        d->k->free(d->dev);
    ddpc_free(d->host);
    *d = (ddpc__defer){0};
}

double *ddpc__defer_take_pass(ddpc__defer *d)
{
    return d->passes < d->cap ? d->dev + 2 + 3 * d->passes++ : NULL;
}

void ddpc__defer_read(ddpc__defer *d, ddpc_model_output *outs, size_t *n, double *sumsq,
                      double *running)
{
    d->k->to_host(d->host, d->dev, (2 + 3 * d->passes) * sizeof(double)); /* the one wait */
    *sumsq = d->host[0];
    *running = d->host[1];
    for (size_t i = 0; i < d->passes; i++) {
        const double *r = d->host + 2 + 3 * i;
        int64_t valid = (int64_t)r[1];
        outs[i] = (ddpc_model_output){
            .loss = valid ? (float)(r[0] / (double)valid) : 0.0f,
            .n_valid = valid,
            .n_correct = (int64_t)r[2],
        };
    }
    *n = d->passes;
    d->passes = 0;
    /* Running sum back to 0: a double's +0.0 is all zero bits, which fill_f32 can write as two
     * float zeros without a copy from the host. */
    d->k->fill_f32((float *)(d->dev + 1), 0.0f, 2);
}
