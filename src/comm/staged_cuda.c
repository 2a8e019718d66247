// SPDX-License-Identifier: MIT
/* Host staging's copier on this process's GPU: pinned host memory (cudaMallocHost, which the
 * device reads and writes at full copy bandwidth) and synchronous copies. Both wait for the
 * kernel table's stream first, since the buffer is written there; the copies run on whichever
 * thread runs the backend, so each makes the GPU current on it. */
#include "comm/device_impl.h"

#include <string.h>

#ifndef DDPC_HAVE_CUDA

ddpc_status ddpc__staging_copier_cuda(int local_rank, ddpc__staging_copier *out)
{
    (void)local_rank;
    memset(out, 0, sizeof *out);
    return ddpc_errorf(DDPC_EUNSUPPORTED, "this build of ddpc has no CUDA: collectives on device "
                                          "buffers need a build with nvcc installed");
}

#else

#include <ddpc/device.h>

#include <cuda_runtime_api.h>

static void *host_alloc(void *ctx, size_t bytes)
{
    const ddpc_kernel_table *t = ctx;
    void *p = NULL;
    if (cudaSetDevice(t->device) != cudaSuccess || cudaMallocHost(&p, bytes) != cudaSuccess) {
        (void)cudaGetLastError(); /* not sticky: leave no error for the next launch check */
        return NULL;
    }
    return p;
}

static void host_free(void *ctx, void *p)
{
    (void)ctx;
    cudaFreeHost(p);
}

static ddpc_status copy(const ddpc_kernel_table *t, void *dst, const void *src, size_t bytes,
                        const char *dir)
{
    cudaError_t e = cudaSetDevice(t->device);
    if (e == cudaSuccess)
        e = cudaMemcpy(dst, src, bytes, cudaMemcpyDefault);
    if (e == cudaSuccess)
        return DDPC_OK;
    (void)cudaGetLastError();
    return ddpc_errorf(DDPC_EIO, "host staging: copying %zu bytes %s GPU %d failed: %s", bytes, dir,
                       t->device, cudaGetErrorString(e));
}

static ddpc_status down(void *ctx, void *host, const void *dev, size_t bytes)
{
    const ddpc_kernel_table *t = ctx;
    t->synchronize(); /* the buffer was written on the kernels' stream */
    return copy(t, host, dev, bytes, "down from");
}

static ddpc_status up(void *ctx, void *dev, const void *host, size_t bytes)
{
    const ddpc_kernel_table *t = ctx;
    /* Work still queued on the kernels' stream may write the same buffer (a broadcast's
     * receivers never copy it down, so nothing waited yet): it lands first, not over the result. */
    t->synchronize();
    return copy(t, dev, host, bytes, "up to");
}

ddpc_status ddpc__staging_copier_cuda(int local_rank, ddpc__staging_copier *out)
{
    memset(out, 0, sizeof *out);
    const ddpc_kernel_table *t = NULL;
    DDPC_TRY(ddpc_device_select(DDPC_DEVICE_CUDA, local_rank, &t));
    *out = (ddpc__staging_copier){
        .host_alloc = host_alloc, .host_free = host_free, .down = down, .up = up, .ctx = (void *)t};
    return DDPC_OK;
}

#endif
