// SPDX-License-Identifier: MIT
/* Releasable memory in granules, for a device whose memory is mapped one granule at a time (CUDA's
 * virtual memory management, or a test's stand-in). A region is `bytes` (whole granules) at `base`;
 * each granule is backed (memory mapped: it can be read and written) or not (touching it faults).
 * Invariant: a released byte reads as zero again once backed, and release changes no byte outside
 * the range it is given. This file only decides which granules a call covers; the device maps,
 * unmaps and zeroes through ddpc__vmem_ops. One thread at a time per region. */
#ifndef DDPC_KERNELS_VMEM_H
#define DDPC_KERNELS_VMEM_H

#include <ddpc/status.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    void *ctx;
    /* Backs [at, at + bytes): whole granules, none backed, `first` the index of the first;
     * the new memory reads zero. On failure (DDPC_ENOMEM: the device is out of memory; else the
     * driver's, named by ddpc_errorf) nothing of the run is left mapped. */
    ddpc_status (*map)(void *ctx, char *at, size_t bytes, size_t first);
    /* Gives back [at, at + bytes): whole granules, all backed, `first` the index of the first.
     * On failure (ddpc_errorf's) the driver's state of the run is unknown. */
    ddpc_status (*unmap)(void *ctx, char *at, size_t bytes, size_t first);
    /* Zeroes [at, at + bytes), backed. */
    void (*zero)(void *ctx, char *at, size_t bytes);
} ddpc__vmem_ops;

typedef struct {
    char *base;
    size_t bytes, granule;
    uint8_t *backed;  /* (bytes / granule) 1 where backed */
    size_t n_backed;  /* granules backed */
} ddpc__vmem;

/* A region of `bytes` (a multiple of granule) at base, every granule backed. DDPC_ENOMEM. */
ddpc_status ddpc__vmem_init(ddpc__vmem *v, void *base, size_t bytes, size_t granule);
void ddpc__vmem_fini(ddpc__vmem *v);
/* Whether p lies inside the region. */
bool ddpc__vmem_contains(const ddpc__vmem *v, const void *p);
/* [p, p + bytes) (inside the region) reads zero from now on: whole granules inside are unmapped,
 * the backed parts of the granules at its ends zeroed. The first unmap's failure is returned at
 * once: that run counts as released, the rest of the range is left as it was, and the region's
 * contents are not to be trusted again (the caller stops). */
ddpc_status ddpc__vmem_release(ddpc__vmem *v, const ddpc__vmem_ops *ops, void *p, size_t bytes);
/* Backs every granule [p, p + bytes) touches; a map's failure is returned (what it mapped before
 * stays backed). */
ddpc_status ddpc__vmem_back(ddpc__vmem *v, const ddpc__vmem_ops *ops, void *p, size_t bytes);
/* Whether every granule [p, p + bytes) touches is backed. */
bool ddpc__vmem_is_backed(const ddpc__vmem *v, const void *p, size_t bytes);
/* Reads [src, src + bytes) into host memory: backed runs through copy(dst, src, n), unbacked runs
 * as zeros (what a released range reads as). */
void ddpc__vmem_read(const ddpc__vmem *v, void *host_dst, const void *src, size_t bytes,
                     void (*copy)(void *dst, const void *src, size_t n));

#ifdef __cplusplus
}
#endif
#endif
