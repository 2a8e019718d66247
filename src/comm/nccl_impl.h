// SPDX-License-Identifier: MIT
/* Private to src/comm: NCCL's functions as nccl_load.c found them in libnccl.so.2. NCCL's header
 * gives the types only; ddpc never links the library, so the same binary runs where it is absent.
 * Only in builds with NCCL's header (DDPC_HAVE_NCCL). */
#ifndef DDPC_COMM_NCCL_IMPL_H
#define DDPC_COMM_NCCL_IMPL_H

#include "comm/device_impl.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

/* Non-blocking communicators (ncclConfig_t.blocking = 0) came with NCCL 2.14. */
#define DDPC__NCCL_MIN_VERSION 21400

typedef struct {
    int version; /* ncclGetVersion's code: 22803 is 2.28.3 */
    ncclResult_t (*get_unique_id)(ncclUniqueId *id);
    ncclResult_t (*comm_init_rank_config)(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                          ncclConfig_t *config);
    ncclResult_t (*comm_get_async_error)(ncclComm_t comm, ncclResult_t *err);
    ncclResult_t (*comm_abort)(ncclComm_t comm);
    ncclResult_t (*comm_finalize)(ncclComm_t comm);
    ncclResult_t (*comm_destroy)(ncclComm_t comm);
    const char *(*get_error_string)(ncclResult_t r);
    const char *(*get_last_error)(ncclComm_t comm);
    ncclResult_t (*all_reduce)(const void *send, void *recv, size_t count, ncclDataType_t type,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
    ncclResult_t (*broadcast)(const void *send, void *recv, size_t count, ncclDataType_t type,
                              int root, ncclComm_t comm, cudaStream_t stream);
    ncclResult_t (*all_gather)(const void *send, void *recv, size_t send_count, ncclDataType_t type,
                               ncclComm_t comm, cudaStream_t stream);
    ncclResult_t (*reduce_scatter)(const void *send, void *recv, size_t recv_count,
                                   ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                                   cudaStream_t stream);
} ddpc__nccl_api;

/* The functions, loaded once per process (thread safe); every later call gives the same answer.
 * DDPC_EUNSUPPORTED with one line naming the library and why (absent, a function missing, older
 * than 2.14). */
ddpc_status ddpc__nccl_load(const ddpc__nccl_api **out);

#endif
