// SPDX-License-Identifier: MIT
/* Private to train/: the `device` key and the kernel table it picks (trainer_device.c). */
#ifndef DDPC_TRAIN_TRAINER_DEVICE_H
#define DDPC_TRAIN_TRAINER_DEVICE_H

#include <ddpc/config.h>
#include <ddpc/status.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ddpc_kernel_table;

/* What a run asks of its device. */
typedef struct {
    int kind;               /* the `device` key: a ddpc_device_kind */
    const char *model_type; /* model.type, for the messages */
    bool model_on_gpu;      /* whether that model type runs on a GPU (ddpc_model_ops.gpu) */
    int dp_replicas;        /* parallel.mode dp's replicas in this process; 0 under ddp */
    int local_rank;         /* LOCAL_RANK: the GPU is local_rank mod the visible GPUs */
} ddpc__device_ask;

/* Reads `device` (cpu, cuda or auto; default auto) into *kind, a ddpc_device_kind. */
ddpc_status ddpc__device_read(ddpc_config *c, int *kind);

/* The kernel table the run's model lives on. device: cuda that cannot run here (a model type
 * without GPU passes, DataParallel replicas, no GPU, a build without CUDA) is DDPC_EINVAL with
 * one line saying which; device: auto then stays on the CPU and appends one line saying why to
 * note (cap bytes, NUL-terminated). Opens the GPU for cuda (ddpc_backend_select). */
ddpc_status ddpc__device_select(const ddpc__device_ask *a, const struct ddpc_kernel_table **out,
                                char *note, size_t cap);

/* Every rank's resolved device kind (kinds: world ddpc_device_kind values, as the ranks
 * exchanged them): DDPC_OK when all are of one kind; a mix of CPUs and GPUs is DDPC_EINVAL with one
 * line naming the first rank of each kind, the same on every rank. */
ddpc_status ddpc__device_agree(const int32_t *kinds, int world);

/* The device of a table, as the start line names it: "cpu", or the GPU ("NVIDIA H100 80GB HBM3
 * (GPU 0 of 1, 79.1 GiB, sm_90)"); NULL is the CPU. */
const char *ddpc__device_describe(const struct ddpc_kernel_table *b);

#endif
