// SPDX-License-Identifier: MIT
/* Pinned host <-> GPU copy bandwidth: the ceiling of host staging (each staged collective copies
 * its buffer down and up through pinned memory), measured so `ddpc bench <coll> --device cuda` can
 * print its busbw next to it from the same run. Allocates its own buffers (outside any training
 * step) and times on a stream of its own with CUDA events. */
#include "kernels/cuda/cuda_impl.h"

#include <ddpc/device.h>

#include <algorithm>
#include <vector>

namespace {

struct copy_buffers {
    void *host = nullptr, *dev = nullptr;
    cudaStream_t stream = nullptr;
    cudaEvent_t start = nullptr, stop = nullptr;
    ~copy_buffers()
    {
        if (start)
            cudaEventDestroy(start);
        if (stop)
            cudaEventDestroy(stop);
        if (stream)
            cudaStreamDestroy(stream);
        if (dev)
            cudaFree(dev);
        if (host)
            cudaFreeHost(host);
    }
};

/* Median seconds of `reps` copies of `bytes` in direction `kind`. */
cudaError_t time_copies(copy_buffers &b, size_t bytes, int reps, cudaMemcpyKind kind, double *out)
{
    std::vector<float> ms((size_t)reps);
    void *dst = kind == cudaMemcpyHostToDevice ? b.dev : b.host;
    const void *src = kind == cudaMemcpyHostToDevice ? b.host : b.dev;
    for (int i = 0; i < reps; i++) {
        cudaError_t e = cudaEventRecord(b.start, b.stream);
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(dst, src, bytes, kind, b.stream);
        if (e == cudaSuccess)
            e = cudaEventRecord(b.stop, b.stream);
        if (e == cudaSuccess)
            e = cudaEventSynchronize(b.stop);
        if (e == cudaSuccess)
            e = cudaEventElapsedTime(&ms[(size_t)i], b.start, b.stop);
        if (e != cudaSuccess)
            return e;
    }
    std::sort(ms.begin(), ms.end());
    *out = 1e-3 * (double)ms[(size_t)reps / 2];
    return cudaSuccess;
}

} // namespace

extern "C" ddpc_status ddpc_cuda_copy_bandwidth(size_t bytes, int reps, double *h2d_gbps,
                                                double *d2h_gbps)
{
    *h2d_gbps = *d2h_gbps = 0.0;
    if (bytes == 0 || reps < 1)
        return ddpc_errorf(DDPC_EINVAL, "copy bandwidth: bytes (%zu) and reps (%d) must be "
                                        "positive", bytes, reps);
    (void)ddpc__cuda_stream(); /* makes this process's GPU current on this thread */
    copy_buffers b;
    cudaError_t e = cudaMallocHost(&b.host, bytes);
    if (e == cudaSuccess)
        e = cudaMalloc(&b.dev, bytes);
    if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags(&b.stream, cudaStreamNonBlocking);
    if (e == cudaSuccess)
        e = cudaEventCreate(&b.start);
    if (e == cudaSuccess)
        e = cudaEventCreate(&b.stop);
    double h2d = 0.0, d2h = 0.0;
    if (e == cudaSuccess) /* one untimed copy each way: first-touch and clock ramp-up */
        e = time_copies(b, bytes, 1, cudaMemcpyHostToDevice, &h2d);
    if (e == cudaSuccess)
        e = time_copies(b, bytes, 1, cudaMemcpyDeviceToHost, &d2h);
    if (e == cudaSuccess)
        e = time_copies(b, bytes, reps, cudaMemcpyHostToDevice, &h2d);
    if (e == cudaSuccess)
        e = time_copies(b, bytes, reps, cudaMemcpyDeviceToHost, &d2h);
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* not sticky: leave no error for the next launch check */
        return ddpc_errorf(DDPC_EIO, "copy bandwidth: %zu pinned bytes: %s", bytes,
                           cudaGetErrorString(e));
    }
    *h2d_gbps = h2d > 0 ? (double)bytes / h2d * 1e-9 : 0.0;
    *d2h_gbps = d2h > 0 ? (double)bytes / d2h * 1e-9 : 0.0;
    return DDPC_OK;
}
