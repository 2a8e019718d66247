// SPDX-License-Identifier: MIT
/* Choosing a kernel table as the guides choose a device: cpu, cuda (GPU local_rank mod visible,
 * torch.cuda.set_device(local_rank)), or auto. Builds without CUDA answer through cuda_absent.c. */
#include <ddpc/device.h>

#include <stdio.h>
#include <string.h>

#include "kernels/backend_impl.h"

static const char *const kind_names[DDPC_DEVICE_COUNT] = {"cpu", "cuda", "auto"};

const char *ddpc_device_kind_name(ddpc_device_kind k)
{
    return (unsigned)k < DDPC_DEVICE_COUNT ? kind_names[k] : "unknown";
}

bool ddpc_device_kind_from_name(const char *s, ddpc_device_kind *out)
{
    for (int k = 0; s && k < DDPC_DEVICE_COUNT; k++)
        if (strcmp(s, kind_names[k]) == 0) {
            *out = (ddpc_device_kind)k;
            return true;
        }
    return false;
}

ddpc_status ddpc_device_select(ddpc_device_kind kind, int local_rank, const ddpc_kernel_table **out)
{
    *out = ddpc_kernel_table_cpu();
    if (kind == DDPC_DEVICE_CPU)
        return DDPC_OK;
    if (kind != DDPC_DEVICE_CUDA && kind != DDPC_DEVICE_AUTO)
        return ddpc_errorf(DDPC_EINVAL, "unknown device %d (cpu, cuda or auto)", (int)kind);
    char why[160] = "";
    int n = ddpc_cuda_devices(why, sizeof why);
    if (n <= 0) {
        if (kind == DDPC_DEVICE_AUTO)
            return DDPC_OK;
        return ddpc_errorf(DDPC_EINVAL, "device: cuda cannot be used: %s; set device: cpu or auto",
                           why);
    }
    return ddpc__backend_cuda_open(local_rank < 0 ? 0 : local_rank, out);
}

const char *ddpc_device_describe(const ddpc_kernel_table *b)
{
    if (!b || b->kind != DDPC_DEVICE_CUDA)
        return "cpu";
    return ddpc__backend_cuda_describe();
}
