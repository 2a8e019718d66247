// SPDX-License-Identifier: MIT
/* A GPU run's host waits per training step: how often the host stopped to wait for the device
 * (the kernel table's host_waits) between a step's first pass and its progress line, and the
 * device allocations made there (alloc_count). Evaluation and checkpoints read the device by
 * nature and are left out, and their allocations are counted apart. Invariant: only warm steps (after
 * the second) count, as for device allocations, and the two maxima are kept apart because a step
 * that logs reads its values back by design. Throttles (the host so far ahead that a batch's
 * pinned slot is still in use, the GPU's queue full meanwhile) are counted apart: they cannot
 * leave the GPU idle. */
#include <ddpc/device.h>

#include "train/trainer_impl.h"

#include <stdio.h>

void ddpc__trainer_waits_begin(ddpc_trainer *t)
{
    const ddpc_kernel_table *k = ddpc_model_backend(t->model);
    if (k->kind != DDPC_DEVICE_CPU) {
        t->gpu.waits_at = k->host_waits();
        t->gpu.throttles_at = k->host_throttles();
        t->gpu.allocs_at = k->alloc_count();
    }
}

void ddpc__trainer_waits_end(ddpc_trainer *t, bool logged)
{
    const ddpc_kernel_table *k = ddpc_model_backend(t->model);
    if (k->kind == DDPC_DEVICE_CPU || t->gpu.steps <= 2)
        return;
    uint64_t n = k->host_waits() - t->gpu.waits_at;
    t->gpu.throttles += k->host_throttles() - t->gpu.throttles_at;
    t->gpu.step_allocs += k->alloc_count() - t->gpu.allocs_at;
    uint64_t *most = logged ? &t->gpu.waits_logged : &t->gpu.waits_quiet;
    *most = n > *most ? n : *most;
    *(logged ? &t->gpu.logged_steps : &t->gpu.quiet_steps) += 1;
}

/* "host waits per step: N" first, the figure tests hold a step to; N is the most in a warm step
 * that logged nothing, or in one that logged when every step logs. */
void ddpc__trainer_log_host_waits(const ddpc_trainer *t)
{
    const ddpc__gpu_count *g = &t->gpu;
    if (!t->log || g->quiet_steps + g->logged_steps == 0)
        return;
    if (g->quiet_steps == 0)
        fprintf(t->log, "host waits per step: %llu (every step logs) in %lld steps after step 2",
                (unsigned long long)g->waits_logged, (long long)g->logged_steps);
    else
        fprintf(t->log,
                "host waits per step: %llu (at most; %llu at a step that logs) in %lld steps "
                "after step 2",
                (unsigned long long)g->waits_quiet, (unsigned long long)g->waits_logged,
                (long long)(g->quiet_steps + g->logged_steps));
    fprintf(t->log, "; throttled %llu times (the host two batches ahead, the GPU busy)\n",
            (unsigned long long)g->throttles);
}
