// SPDX-License-Identifier: MIT
/* A batch's host arrays to the device through pinned staging on a copy stream (the stage_in
 * member): the host copies them into slot s's pinned buffer, the copy stream moves them to the
 * caller's slot-s device buffers, and the compute stream waits for that copy (an event), so the
 * kernels after it see the batch while the copy itself overlaps the work already queued.
 * Invariants: slot s's pinned buffer is rewritten only after its last copy finished (copied[s]);
 * its device buffers only after the work queued before the next stage call finished
 * (consumed[s]), which covers the batch that last used them (a batch's forward and backward are
 * queued before the next batch is staged), but not the batch in between: batch k+1's copy
 * overlaps step k. One thread at a time, like the rest of the table. */
#include "kernels/cuda/cuda_impl.h"

#include <string.h>

static struct {
    cudaStream_t copy;
    cudaEvent_t copied[2], consumed[2];
    bool copying[2]; /* copied[s] was recorded */
    char *pinned[2];
    size_t cap[2];
} g;

/* The copy stream and events, made on first use on our GPU; false when CUDA cannot make them
 * (then batches go the plain way). */
static bool open_once(void)
{
    if (g.copy)
        return true;
    (void)ddpc__cuda_stream(); /* makes our GPU current on this thread */
    cudaStream_t s = nullptr;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    for (int i = 0; i < 2; i++) {
        DDPC_CUDA_CHECK(cudaEventCreateWithFlags(&g.copied[i], cudaEventDisableTiming));
        DDPC_CUDA_CHECK(cudaEventCreateWithFlags(&g.consumed[i], cudaEventDisableTiming));
    }
    g.copy = s;
    return true;
}

static size_t padded(size_t bytes)
{
    return (bytes + 255) / 256 * 256;
}

/* Slot s's pinned buffer with room for `bytes`, or NULL when pinned memory is short. Grows once
 * per larger batch; pinned host memory is not device memory, so it is not in alloc_count. */
static char *pinned(int s, size_t bytes)
{
    if (bytes <= g.cap[s])
        return g.pinned[s];
    if (g.pinned[s])
        DDPC_CUDA_CHECK(cudaFreeHost(g.pinned[s])); /* its copy is done: checked by the caller */
    g.pinned[s] = nullptr;
    g.cap[s] = 0;
    if (cudaHostAlloc((void **)&g.pinned[s], bytes, cudaHostAllocDefault) != cudaSuccess) {
        (void)cudaGetLastError();
        g.pinned[s] = nullptr;
        return nullptr;
    }
    g.cap[s] = bytes;
    return g.pinned[s];
}

extern "C" void ddpc__cuda_stage_in(int slot, void *const *dst, const void *const *src,
                                    const size_t *bytes, int count)
{
    const int s = slot & 1;
    cudaStream_t st = ddpc__cuda_stream();
    size_t total = 0;
    for (int i = 0; i < count; i++)
        total += padded(bytes[i]);
    char *buf = nullptr;
    if (total > 0 && open_once()) {
        /* The other slot's batch is fully queued by now: what its next copy must wait for. */
        DDPC_CUDA_CHECK(cudaEventRecord(g.consumed[s ^ 1], st));
        /* Slot s's last copy (batch k-2's) waited only for batch k-4's work: usually done. If
         * not, the host is so far ahead that batches k-3 to k-1 are still queued behind it, so
         * waiting here cannot leave the device idle: a throttle, not a host wait. */
        if (g.copying[s]) {
            cudaError_t q = cudaEventQuery(g.copied[s]);
            if (q == cudaErrorNotReady)
                ddpc__cuda_throttle(g.copied[s]);
            else
                DDPC_CUDA_CHECK(q);
        }
        buf = pinned(s, total);
    }
    if (!buf) { /* nothing to copy, or no pinned memory: ordinary copies on the compute stream */
        for (int i = 0; i < count; i++)
            ddpc__cuda_to_device(dst[i], src[i], bytes[i]);
        return;
    }
    size_t off = 0;
    for (int i = 0; i < count; i++) {
        memcpy(buf + off, src[i], bytes[i]);
        off += padded(bytes[i]);
    }
    DDPC_CUDA_CHECK(cudaStreamWaitEvent(g.copy, g.consumed[s], 0));
    off = 0;
    for (int i = 0; i < count; i++) {
        if (bytes[i])
            DDPC_CUDA_CHECK(
                cudaMemcpyAsync(dst[i], buf + off, bytes[i], cudaMemcpyHostToDevice, g.copy));
        off += padded(bytes[i]);
    }
    DDPC_CUDA_CHECK(cudaEventRecord(g.copied[s], g.copy));
    g.copying[s] = true;
    DDPC_CUDA_CHECK(cudaStreamWaitEvent(st, g.copied[s], 0));
}
