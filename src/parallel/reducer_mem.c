// SPDX-License-Identifier: MIT
/* ZeRO's one door to model memory. Every buffer ZeRO keeps beside the model (reduce-scatter
 * slots, the gradient pool, stage 3's parameter slots) and every copy or fill of the model's own
 * flat buffers goes through the model's kernel table, so one code path runs on the CPU (the table
 * is host memory: calloc, memmove, fill) and on a GPU (device memory on the table's stream).
 * Invariant: ZeRO only ever names the device buffers (ddpc_model_device_params/_grads), which on
 * the CPU are the host ones. Giving memory back is the one difference: see ddpc__zmem_release. */
#include "parallel/reducer_impl.h"

#include <ddpc/device.h>

static const ddpc_kernel_table *table(const ddpc_reducer *r)
{
    return ddpc_model_backend(r->model);
}

bool ddpc__zmem_on_device(const ddpc_reducer *r)
{
    return table(r)->kind != DDPC_DEVICE_CPU;
}

float *ddpc__zmem_params(const ddpc_reducer *r)
{
    return ddpc_model_device_params(r->model);
}

float *ddpc__zmem_grads(const ddpc_reducer *r)
{
    return ddpc_model_device_grads(r->model);
}

float *ddpc__zmem_alloc(const ddpc_reducer *r, size_t floats)
{
    return table(r)->alloc((floats ? floats : 1) * sizeof(float));
}

void ddpc__zmem_free(const ddpc_reducer *r, void *p)
{
    if (p)
        table(r)->free(p);
}

void ddpc__zmem_copy(const ddpc_reducer *r, float *dst, const float *src, size_t floats)
{
    if (floats)
        table(r)->copy(dst, src, floats * sizeof(float));
}

void ddpc__zmem_zero(const ddpc_reducer *r, float *p, size_t floats)
{
    if (floats) /* a CUDA launch of zero blocks is an error, not a no-op */
        table(r)->fill_f32(p, 0.0f, (int64_t)floats);
}

/* The table's release: on the CPU the pages go back to the OS (madvise) and fault back in zeroed
 * when next written, which is where ZeRO-2/3's saving of host memory comes from; on a GPU with
 * virtual memory management the granules inside the range are unmapped, and reducer_back.c maps
 * them again before anything touches the range. */
ddpc_status ddpc__zmem_release(const ddpc_reducer *r, float *p, size_t floats)
{
    return table(r)->release(p, floats * sizeof(float));
}

ddpc_status ddpc__zmem_back(const ddpc_reducer *r, float *p, size_t floats)
{
    return table(r)->back(p, floats * sizeof(float));
}
