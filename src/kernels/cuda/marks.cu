// SPDX-License-Identifier: MIT
/* Device time on the compute stream: a ring of CUDA events with timing on (the kernel table's
 * marks_create / mark / mark_seconds), from which the engine measures the step's phases as the
 * GPU ran them. Invariant: nothing here waits for the device; a mark the device has not passed
 * yet reads as not ready. */
#include "kernels/cuda/cuda_impl.h"

#include <ddpc/alloc.h>

struct ddpc__cuda_marks {
    int n;
    cudaEvent_t *ev; /* (n) */
};

extern "C" void ddpc__cuda_marks_destroy(void *marks)
{
    ddpc__cuda_marks *m = (ddpc__cuda_marks *)marks;
    if (!m)
        return;
    for (int i = 0; i < m->n; i++)
        if (m->ev[i])
            (void)cudaEventDestroy(m->ev[i]);
    ddpc_free(m->ev);
    ddpc_free(m);
}

extern "C" void *ddpc__cuda_marks_create(int n)
{
    (void)ddpc__cuda_stream(); /* first, so this thread's current GPU is ours */
    if (n <= 0)
        return nullptr;
    ddpc__cuda_marks *m = (ddpc__cuda_marks *)ddpc_calloc(1, sizeof *m);
    if (m)
        m->ev = (cudaEvent_t *)ddpc_calloc((size_t)n, sizeof *m->ev);
    if (!m || !m->ev) {
        ddpc_free(m);
        return nullptr;
    }
    m->n = n;
    for (int i = 0; i < n; i++)
        if (cudaEventCreate(&m->ev[i]) != cudaSuccess) {
            (void)cudaGetLastError(); /* not sticky: the next launch check must not see it */
            m->ev[i] = nullptr;
            ddpc__cuda_marks_destroy(m);
            return nullptr;
        }
    return m;
}

extern "C" void ddpc__cuda_mark(void *marks, int i)
{
    ddpc__cuda_marks *m = (ddpc__cuda_marks *)marks;
    DDPC_CUDA_CHECK(cudaEventRecord(m->ev[i], ddpc__cuda_stream()));
}

extern "C" bool ddpc__cuda_mark_seconds(void *marks, int a, int b, double *seconds)
{
    ddpc__cuda_marks *m = (ddpc__cuda_marks *)marks;
    cudaError_t q = cudaEventQuery(m->ev[b]);
    if (q == cudaErrorNotReady)
        return false;
    DDPC_CUDA_CHECK(q);
    float ms = 0.0f; /* a precedes b on the one stream, so it has passed too */
    DDPC_CUDA_CHECK(cudaEventElapsedTime(&ms, m->ev[a], m->ev[b]));
    *seconds = (double)ms * 1e-3;
    return true;
}
