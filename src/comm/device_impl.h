// SPDX-License-Identifier: MIT
/* Private to src/comm: process groups on device buffers. Either the nccl backend (nccl.c, NCCL
 * loaded at run time by nccl_load.c) moves them, or host staging (staged.c) copies them through
 * pinned host memory around a host backend (shm, gloo, mpi); pg_device.c chooses. staged.c knows
 * no device: it copies through a ddpc__staging_copier, which staged_cuda.c fills for the GPU and
 * tests fill with memcpy. */
#ifndef DDPC_COMM_DEVICE_IMPL_H
#define DDPC_COMM_DEVICE_IMPL_H

#include "comm/pg_impl.h"

enum { DDPC__PG_NOTE_CAP = 256 };

/* How staging reaches the device's memory. Every function is called from the thread running the
 * backend, one at a time. */
typedef struct {
    /* Host memory the device copies to and from fast (pinned); NULL when none is left. */
    void *(*host_alloc)(void *ctx, size_t bytes);
    void (*host_free)(void *ctx, void *p);
    /* Copy device -> host and host -> device; `down` first waits for the device's pending work
     * on the buffer. An error names the copy and the device's reason. */
    ddpc_status (*down)(void *ctx, void *host, const void *dev, size_t bytes);
    ddpc_status (*up)(void *ctx, void *dev, const void *host, size_t bytes);
    void *ctx;
} ddpc__staging_copier;

/* A backend whose collectives take device buffers: each collective copies its input down to
 * pinned host memory, runs `inner` (a joined host backend; NULL for world size 1) on it, and
 * copies the result up. Takes ownership of inner_state, also on failure. */
ddpc_status ddpc__staged_create(int rank, int world, const ddpc__pg_backend *inner,
                                void *inner_state, ddpc__staging_copier copier,
                                const ddpc__pg_backend **ops, void **state);

/* The copier for this process's GPU (local rank mod visible GPUs, made current).
 * DDPC_EUNSUPPORTED in builds without CUDA; DDPC_EINVAL naming why without a GPU. */
ddpc_status ddpc__staging_copier_cuda(int local_rank, ddpc__staging_copier *out);

/* NCCL on device buffers: rank 0 makes the unique id, which travels through the job's store
 * (world size 1 needs none), and every rank joins a non-blocking communicator on GPU local rank
 * mod visible GPUs before `deadline`. DDPC_EUNSUPPORTED in builds without NCCL's header. */
ddpc_status ddpc__nccl_create(const ddpc_comm_env *env, double deadline,
                              const ddpc__pg_backend **ops, void **state);

/* Whether libnccl.so.2 (2.14 or newer) loads in this process: DDPC_OK, or DDPC_EUNSUPPORTED
 * with one line saying why. Loads once; thread safe. */
ddpc_status ddpc__nccl_available(void);

/* For a group on device buffers (`cuda`) or one asked for nccl: the backend that moves the bytes
 * (*backend), whether device buffers are staged through host memory (*staged), and the line to
 * print once at start (note, DDPC__PG_NOTE_CAP bytes; "" for host buffers). `asked` is the
 * config's backend, else the env's (DDPC_BACKEND_AUTO when neither). Refuses in one line: nccl
 * for host buffers, device buffers without a GPU, nccl where NCCL cannot run. */
ddpc_status ddpc__pg_device_choose(const ddpc_comm_env *env, bool cuda, ddpc_backend asked,
                                   ddpc_backend *backend, bool *staged, char *note);

#endif
