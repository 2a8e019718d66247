// SPDX-License-Identifier: MIT
/* Private to kernels/: what backend.c asks of the CUDA side (kernels/cuda/device.cu in a build
 * with CUDA, cuda_absent.c otherwise). */
#ifndef DDPC_KERNELS_BACKEND_IMPL_H
#define DDPC_KERNELS_BACKEND_IMPL_H

#include <ddpc/device.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Makes GPU local_rank mod visible current and returns its table (needs a visible GPU). */
ddpc_status ddpc__backend_cuda_open(int local_rank, const ddpc_kernel_table **out);
/* The open GPU, as ddpc_backend_describe says it. */
const char *ddpc__backend_cuda_describe(void);

#ifdef __cplusplus
}
#endif
#endif
