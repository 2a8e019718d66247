// SPDX-License-Identifier: MIT
/* The CUDA table's memory: device buffers (zeroed, 256-byte aligned by cudaMalloc, so the table's
 * 64-byte promise holds) and copies, all ordered on ddpc__cuda_stream(). Invariant: the stream is
 * non-blocking, so every copy and memset here is the *Async form on that stream (a plain cudaMemcpy
 * would run on the legacy default stream and not wait for our kernels). free and to_host live in
 * memory_vmm.cu, beside the releasable ranges they must tell apart. */
#include "kernels/cuda/cuda_impl.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>

static std::atomic<uint64_t> allocations, waits, throttles;

static void count_wait(const char *site)
{
    uint64_t n = waits.fetch_add(1, std::memory_order_relaxed) + 1;
    static const bool trace = getenv("DDPC_TRACE_HOST_WAITS") != nullptr;
    if (trace)
        fprintf(stderr, "ddpc: host wait %llu at %s\n", (unsigned long long)n, site);
}

extern "C" void ddpc__cuda_count_alloc(void)
{
    allocations.fetch_add(1, std::memory_order_relaxed);
}

extern "C" uint64_t ddpc__cuda_alloc_count(void)
{
    return allocations.load(std::memory_order_relaxed);
}

extern "C" void ddpc__cuda_wait_at(cudaStream_t st, const char *site)
{
    count_wait(site);
    DDPC_CUDA_CHECK(cudaStreamSynchronize(st));
}

extern "C" void ddpc__cuda_wait_event_at(cudaEvent_t ev, const char *site)
{
    count_wait(site);
    DDPC_CUDA_CHECK(cudaEventSynchronize(ev));
}

extern "C" void ddpc__cuda_throttle(cudaEvent_t ev)
{
    throttles.fetch_add(1, std::memory_order_relaxed);
    DDPC_CUDA_CHECK(cudaEventSynchronize(ev));
}

extern "C" uint64_t ddpc__cuda_host_waits(void)
{
    return waits.load(std::memory_order_relaxed);
}

extern "C" uint64_t ddpc__cuda_host_throttles(void)
{
    return throttles.load(std::memory_order_relaxed);
}

/* NULL when the device is out of memory (the table's contract); the caller reports it. */
extern "C" void *ddpc__cuda_alloc(size_t bytes)
{
    void *p = nullptr;
    cudaStream_t stream = ddpc__cuda_stream(); /* first, so this thread's current GPU is ours */
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        /* An allocation failure is not sticky; clear it so the next launch check is not blamed. */
        (void)cudaGetLastError();
        return nullptr;
    }
    ddpc__cuda_count_alloc();
    DDPC_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes ? bytes : 1, stream));
    return p;
}

/* Returns once the host buffer may be reused: cudaMemcpyAsync from pageable memory stages the
 * bytes before returning. */
extern "C" void ddpc__cuda_to_device(void *dst, const void *src, size_t bytes)
{
    if (bytes)
        DDPC_CUDA_CHECK(
            cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, ddpc__cuda_stream()));
}

extern "C" void ddpc__cuda_copy(void *dst, const void *src, size_t bytes)
{
    if (bytes && dst != src)
        DDPC_CUDA_CHECK(
            cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ddpc__cuda_stream()));
}

extern "C" void ddpc__cuda_copy2d(void *dst, size_t dpitch, const void *src, size_t spitch,
                                  size_t width, size_t height)
{
    if (width && height)
        DDPC_CUDA_CHECK(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height,
                                          cudaMemcpyDeviceToDevice, ddpc__cuda_stream()));
}

extern "C" void ddpc__cuda_synchronize(void)
{
    ddpc__cuda_wait_at(ddpc__cuda_stream(), "synchronize");
}

extern "C" size_t ddpc__cuda_memory_total(void)
{
    size_t free_bytes = 0, total = 0;
    DDPC_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
    return total;
}

extern "C" size_t ddpc__cuda_memory_free(void)
{
    size_t free_bytes = 0, total = 0;
    (void)ddpc__cuda_stream(); /* our GPU current on this thread */
    DDPC_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
    return free_bytes;
}
