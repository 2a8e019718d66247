// SPDX-License-Identifier: MIT
/* `device: cpu|cuda|auto`, as Lightning's accelerator: the kernel table a run's model lives on,
 * chosen once while the model is built and kept only in the model's config (backend). Refusals
 * come before anything is written to the run directory. auto takes a GPU when one is visible and
 * the run can use it, else the CPU, and says why it stayed there. */
#include "train/trainer_device.h"

#include <ddpc/device.h>

#include <assert.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* In ddpc_device_kind's order. */
static const char *const device_names[] = {"cpu", "cuda", "auto", NULL};
static_assert(DDPC_DEVICE_COUNT == 3, "device_names lists every ddpc_device_kind");

ddpc_status ddpc__device_read(ddpc_config *c, int *kind)
{
    return ddpc_config_choice(c, "device", "auto", device_names, kind);
}

/* Why this run cannot use a GPU on any machine: what stands in the way ("model.type NAME" of a
 * registered type without GPU passes), why, and what to do instead. */
typedef struct {
    char what[96];
    const char *why;
    char instead[160];
    bool with; /* said "with WHAT: WHY" (a setting), not "WHAT WHY" (a sentence) */
} obstacle;

/* Fills *o and returns true when the run must stay on the CPU whatever the machine has. Several
 * ranks are fine (DDP on device buffers); DataParallel's replicas are threads of one process
 * sharing its one device, which GPUs are not built for. */
static bool cpu_only(const ddpc__device_ask *a, obstacle *o)
{
    o->with = false;
    if (!a->model_on_gpu) {
        snprintf(o->what, sizeof o->what, "model.type %s", a->model_type);
        o->why = "does not run on GPUs yet";
        snprintf(o->instead, sizeof o->instead, "use device: cpu");
    } else if (a->dp_replicas > 0) {
        snprintf(o->what, sizeof o->what, "parallel.mode dp (%d replicas)", a->dp_replicas);
        o->why = "DataParallel replicas run on the CPU only";
        snprintf(o->instead, sizeof o->instead,
                 "use DDP ranks for several GPUs (ddpc run --nproc-per-node N, parallel.mode "
                 "ddp) or device: cpu");
        o->with = true;
    } else {
        return false;
    }
    return true;
}

/* Appends "device: auto runs on the CPU: <why>" to note, as much as fits. */
static void say_cpu(char *note, size_t cap, const char *why)
{
    size_t len = strlen(note);
    if (len + 1 < cap)
        snprintf(note + len, cap - len, "device: auto runs on the CPU: %s\n", why);
}

ddpc_status ddpc__device_select(const ddpc__device_ask *a, const ddpc_kernel_table **out, char *note,
                                size_t cap)
{
    *out = ddpc_kernel_table_cpu();
    if (a->kind == DDPC_DEVICE_CPU)
        return DDPC_OK;
    /* The run's own obstacles first: they hold on every machine, so they are the useful answer
     * even where no GPU is visible. */
    obstacle o;
    bool blocked = cpu_only(a, &o);
    if (a->kind == DDPC_DEVICE_CUDA) {
        if (blocked && !o.with)
            return ddpc_errorf(DDPC_EINVAL, "device: cuda: %s %s; %s", o.what, o.why, o.instead);
        if (blocked)
            return ddpc_errorf(DDPC_EINVAL, "device: cuda with %s: %s; %s", o.what, o.why,
                               o.instead);
        return ddpc_device_select(DDPC_DEVICE_CUDA, a->local_rank, out);
    }
    char none[192] = "", why[320];
    if (ddpc_cuda_devices(none, sizeof none) <= 0)
        snprintf(why, sizeof why, "no GPU: %s", none);
    else if (blocked && !o.with)
        snprintf(why, sizeof why, "%s %s", o.what, o.why);
    else if (blocked)
        snprintf(why, sizeof why, "%s: %s", o.what, o.why);
    else
        return ddpc_device_select(DDPC_DEVICE_CUDA, a->local_rank, out);
    say_cpu(note, cap, why);
    return DDPC_OK;
}

const char *ddpc__device_describe(const ddpc_kernel_table *b)
{
    return ddpc_device_describe(b);
}

ddpc_status ddpc__device_agree(const int32_t *kinds, int world)
{
    int gpu = -1, cpu = -1;
    for (int r = 0; r < world; r++) {
        if (kinds[r] == DDPC_DEVICE_CPU && cpu < 0)
            cpu = r;
        else if (kinds[r] != DDPC_DEVICE_CPU && gpu < 0)
            gpu = r;
    }
    if (gpu < 0 || cpu < 0)
        return DDPC_OK;
    return ddpc_errorf(DDPC_EINVAL,
                       "device: rank %d trains on %s but rank %d on cpu (device: auto on hosts "
                       "with and without a GPU?); every rank must use the same kind of device: "
                       "set device: cpu, or give every rank a GPU",
                       gpu, ddpc_device_kind_name((ddpc_device_kind)kinds[gpu]), cpu);
}
