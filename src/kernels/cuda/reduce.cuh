// SPDX-License-Identifier: MIT
/* Fixed-order reductions shared by the CUDA kernels (no float atomics, so a rerun gives the same
 * bits): a warp's butterfly sum, and the row chunking of two-pass column sums (pass 1 writes one
 * partial per (chunk, column) summing its rows in order, pass 2 adds the chunks in order).
 * Invariant: the chunking depends only on the number of rows, never on the GPU. */
#ifndef DDPC_KERNELS_CUDA_REDUCE_CUH
#define DDPC_KERNELS_CUDA_REDUCE_CUH

#include <stdint.h>

/* The sum of v over the 32 lanes of a full warp, the same in every lane. */
static __device__ __forceinline__ float ddpc__warp_sum(float v)
{
    for (int off = 16; off > 0; off >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

/* n rows in *chunks runs of *per rows (the last may be shorter): about 32 rows each, at most
 * 1024 chunks, so the partials stay small and fit a grid's y dimension. */
static inline void ddpc__row_chunks(int64_t n, int64_t *chunks, int64_t *per)
{
    int64_t ch = (n + 31) / 32;
    ch = ch < 1 ? 1 : ch > 1024 ? 1024 : ch;
    *per = (n + ch - 1) / ch;
    *chunks = (n + *per - 1) / *per;
}

#endif
