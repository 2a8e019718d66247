// SPDX-License-Identifier: MIT
/* The flash attention kernels' shared device pieces (attention_flash.cu, attention_flash2.cu):
 * tile sizes and padded shared-memory strides, 16-bit rounding, WMMA fragment types, the warp's
 * tile products, and P and dS from a score. Invariant: every product accumulates in fp32 in a
 * fixed order (k blocks of 16 ascending), so kernels built from these give the same bits for the
 * same operands and the same call order. */
#ifndef DDPC_KERNELS_CUDA_ATTENTION_FLASH_CUH
#define DDPC_KERNELS_CUDA_ATTENTION_FLASH_CUH

#ifndef DDPC_CUDA_EMULATE /* tests/test_attention_flash_emu.cpp runs the kernels on the host */
#include "kernels/cuda/cuda_impl.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <mma.h>

/* The block's dynamic shared memory. */
#define FLASH_SMEM(name) extern __shared__ __align__(128) unsigned char name[]
#endif

using namespace nvcuda;

/* A block is 4 warps, each owning 16 rows of a 64-row tile (WMMA's m = 16). Shared-memory rows
 * are padded (8 halves, 4 floats) against bank conflicts; every WMMA pointer stays 32-byte
 * aligned and every leading dimension a multiple of 8 halves or 4 floats, as WMMA requires. */
enum { TILE = 64, WARPS = 4, THREADS = WARPS * 32, WR = 16, PAD_H = 8, PAD_F = 4 };
enum { LDS = TILE + PAD_F, LDP = TILE + PAD_H }; /* a warp's scores (floats), probabilities (H) */

template <int HS> struct flash_dims {
    static constexpr int LDH = HS + PAD_H; /* a Q/K/V/dout tile row, in halves */
    static constexpr int LDO = HS + PAD_F; /* a warp's output or gradient row, in floats */
    static constexpr size_t TILE_BYTES = (size_t)TILE * LDH * 2;
    static constexpr size_t WARP_S_BYTES = (size_t)WARPS * WR * LDS * 4;
    static constexpr size_t WARP_P_BYTES = (size_t)WARPS * WR * LDP * 2;
    static constexpr size_t WARP_O_BYTES = (size_t)WARPS * WR * LDO * 4;
    /* forward: O, S (floats), then Q, K, V, P (halves) */
    static constexpr size_t FWD_BYTES = WARP_O_BYTES + WARP_S_BYTES + 3 * TILE_BYTES + WARP_P_BYTES;
    /* backward: lse, D, then S and dP per warp (floats), then Q, dout, K, V, then P^T and dS */
    static constexpr size_t BWD_BYTES =
        2 * TILE * 4 + 2 * WARP_S_BYTES + 4 * TILE_BYTES + 2 * WARP_P_BYTES;
    /* A warp's gradients are staged in its own S and dP rows, which are adjacent. */
    static_assert(WR * LDO <= 2 * WR * LDS, "a warp's staging fits in its S and dP rows");
    static_assert(HS % 16 == 0 && TILE % 16 == 0, "WMMA tiles");
};

template <typename H> __device__ H to_half(float x);
template <> __device__ inline __nv_bfloat16 to_half<__nv_bfloat16>(float x)
{
    return __float2bfloat16_rn(x);
}
template <> __device__ inline __half to_half<__half>(float x)
{
    return __float2half_rn(x);
}

template <typename H> using frag_a = wmma::fragment<wmma::matrix_a, 16, 16, 16, H, wmma::row_major>;
template <typename H>
using frag_b_row = wmma::fragment<wmma::matrix_b, 16, 16, 16, H, wmma::row_major>;
template <typename H>
using frag_b_col = wmma::fragment<wmma::matrix_b, 16, 16, 16, H, wmma::col_major>;
using frag_acc = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

/* s (WR, LDS) floats = a (WR rows of width HS, ld LDH) times b^T (TILE rows of width HS): one
 * warp's scores against the 64 rows of b. */
template <typename H, int HS> __device__ void rows_times_tile_t(float *s, const H *a, const H *b)
{
    constexpr int LDH = flash_dims<HS>::LDH;
    for (int nb = 0; nb < TILE / 16; nb++) {
        frag_acc acc;
        wmma::fill_fragment(acc, 0.0f);
        for (int kk = 0; kk < HS / 16; kk++) {
            frag_a<H> fa;
            frag_b_col<H> fb; /* b^T (HS, 16 rows of b): b row-major read column-major */
            wmma::load_matrix_sync(fa, a + kk * 16, LDH);
            wmma::load_matrix_sync(fb, b + nb * 16 * LDH + kk * 16, LDH);
            wmma::mma_sync(acc, fa, fb, acc);
        }
        wmma::store_matrix_sync(s + nb * 16, acc, LDS, wmma::mem_row_major);
    }
}

/* acc[HS/16] += p (WR, TILE; ld LDP) times b (TILE rows of width HS, ld LDH). */
template <typename H, int HS>
__device__ void accumulate_p_times(frag_acc *acc, const H *p, const H *b)
{
    constexpr int LDH = flash_dims<HS>::LDH;
    for (int nd = 0; nd < HS / 16; nd++)
        for (int kb = 0; kb < TILE / 16; kb++) {
            frag_a<H> fa;
            frag_b_row<H> fb;
            wmma::load_matrix_sync(fa, p + kb * 16, LDP);
            wmma::load_matrix_sync(fb, b + kb * 16 * LDH + nd * 16, LDH);
            wmma::mma_sync(acc[nd], fa, fb, acc[nd]);
        }
}

/* One warp's WR rows of acc, through its staging rows `stage` (WR, LDO), into global rows
 * dst + r * ld (r0 + r < t only), HS floats each, times scale[r] where scale is not NULL. */
template <int HS>
__device__ void write_rows(float *dst, int64_t ld, float *stage, const frag_acc *acc, int r0, int t,
                           int lane)
{
    constexpr int LDO = flash_dims<HS>::LDO;
    __syncwarp();
    for (int nd = 0; nd < HS / 16; nd++)
        wmma::store_matrix_sync(stage + nd * 16, acc[nd], LDO, wmma::mem_row_major);
    __syncwarp();
    for (int r = 0; r < WR && r0 + r < t; r++)
        for (int d = lane; d < HS; d += 32)
            dst[(int64_t)r * ld + d] = stage[r * LDO + d];
}

/* P and dS of (query i, key j) from a score and dP: P = exp(scale s - lse) where key j may be
 * seen by query i (j <= i < t), else 0; dS = scale P (dP - D). */
__device__ __forceinline__ void p_ds(float s, float dp, int i, int j, int t, float lse, float d,
                                     float scale, float *p, float *ds)
{
    *p = j <= i && i < t ? expf(scale * s - lse) : 0.0f;
    *ds = scale * *p * (dp - d);
}

#endif
