// SPDX-License-Identifier: MIT
/* Fused causal attention at bf16/fp16 (FlashAttention-2, Dao 2023): 8-warp blocks of 128 rows,
 * each warp 16 rows of a 64-row tile, Q K^T and P V on the tensor cores (WMMA 16x16x16, fp32
 * accumulation), an online fp32 softmax, and only each row's logsumexp saved for backward, which
 * recomputes the probabilities. Forward keeps each warp's Q in fragments and prefetches the next
 * K/V tile into registers; backward rounds q, k, v, dout to 16 bits once, the dK/dV kernel keeps K
 * and V in fragments and stores each causal tile pair's dS (16-bit, the rounding point dQ uses),
 * and dQ = dS K reads it: 5 tile products per tile pair. tests/test_attention_flash_ref.c runs
 * this algorithm on the CPU. Invariants: the tensor cores' operands are the CPU kernel's rounding
 * points (q, k, v, P, dout, dS); every product accumulates in fp32 in a fixed order (k blocks of
 * 16 ascending); no float atomics, each output element written once: reruns give the same bits. */
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

/* A warp owns 16 rows of a 64-row tile (WMMA's m = 16); the dQ kernel's blocks are 4 warps (one
 * tile), the others' 8 (BIG = 128 rows: warp w rows 16w.., in the 64-row tile 2 * block + w / 4).
 * Shared-memory rows are padded (8 halves, 4 floats) against bank conflicts; every WMMA pointer
 * stays 32-byte aligned and every leading dimension a multiple of 8 halves or 4 floats, as WMMA
 * requires. */
enum { TILE = 64, WARPS = 4, THREADS = WARPS * 32, WR = 16, PAD_H = 8, PAD_F = 4 };
enum { W8 = 8, THREADS8 = W8 * 32, BIG = 2 * TILE };
enum { LDS = TILE + PAD_F, LDP = TILE + PAD_H }; /* a warp's scores (floats), probabilities (H) */

/* 16 bytes moved as one: 8 halves. */
struct alignas(16) h8_chunk {
    uint32_t x, y, z, w;
};

/* The backward's workspace, in floats from ws, each region 64-float aligned: D (B*NH, T), then
 * q, k, v and dout rounded (B*NH, tp, HS) halves each, rows t..tp zero, then dS^T of each causal
 * tile pair (B*NH, ntri, TILE keys, TILE queries) halves, pair (qt, kt) at qt (qt + 1) / 2 + kt. */
struct flash_layout {
    int64_t tiles, tp, ntri, dd, r16, ds, total;
};

static inline int64_t flash_region(int64_t floats)
{
    return (floats + 63) / 64 * 64;
}

static inline flash_layout flash_plan(int64_t b, int64_t t, int64_t c, int64_t nh)
{
    flash_layout l;
    l.tiles = (t + TILE - 1) / TILE;
    l.tp = (t + BIG - 1) / BIG * BIG;
    l.ntri = l.tiles * (l.tiles + 1) / 2;
    l.dd = flash_region(b * nh * t);
    l.r16 = flash_region(b * nh * l.tp * (c / nh) / 2);
    l.ds = flash_region(b * nh * l.ntri * TILE * TILE / 2);
    l.total = l.dd + 4 * l.r16 + l.ds;
    return l;
}

template <int HS> struct flash_dims {
    static constexpr int LDH = HS + PAD_H; /* a Q/K/V/dout tile row, in halves */
    static constexpr int LDO = HS + PAD_F; /* a warp's output or gradient row, in floats */
    /* forward: O, S (floats), then P, K, V (halves); Q is staged in K and V (128 rows) */
    static constexpr size_t FO = (size_t)W8 * WR * LDO * 4, FS = (size_t)W8 * WR * LDS * 4;
    static constexpr size_t FP = (size_t)W8 * WR * LDP * 2, FKV = 2 * (size_t)TILE * LDH * 2;
    static constexpr size_t FWD_BYTES = FO + FS + FP + FKV;
    /* dK/dV: lse, D, per warp S and dP (floats, adjacent), per warp P^T and dS^T, then Q, dout */
    static constexpr size_t BS = (size_t)W8 * 2 * WR * LDS * 4, BP = (size_t)W8 * 2 * WR * LDP * 2;
    static constexpr size_t DKDV_BYTES = 2 * TILE * 4 + BS + BP + 2 * (size_t)TILE * LDH * 2;
    /* dQ: each warp's staging rows, then the dS^T and K tiles */
    static constexpr size_t DQ_STAGE = (size_t)WARPS * WR * LDO * 4;
    static constexpr size_t DQ_BYTES = DQ_STAGE + (size_t)TILE * LDP * 2 + (size_t)TILE * LDH * 2;
    static constexpr size_t MAX_BYTES = FWD_BYTES > DKDV_BYTES
                                            ? (FWD_BYTES > DQ_BYTES ? FWD_BYTES : DQ_BYTES)
                                            : (DKDV_BYTES > DQ_BYTES ? DKDV_BYTES : DQ_BYTES);
    /* the forward's K/V prefetch (float4s) and the backward's Q/dout prefetch (chunks) */
    static constexpr int FPF = 2 * TILE * HS / 4 / THREADS8, BPF = 2 * TILE * HS / 8 / THREADS8;
    static_assert(FPF * THREADS8 == 2 * TILE * HS / 4 && BPF * THREADS8 == 2 * TILE * HS / 8,
                  "the prefetch divides among the threads");
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

/* s (WR, LDS) floats = a warp's WR rows, held as fragments a[HS/16], times b^T (TILE rows of width
 * HS, ld LDH): the warp's scores against the 64 rows of b. */
template <typename H, int HS>
__device__ void frags_times_tile_t(float *s, const frag_a<H> *a, const H *b)
{
    constexpr int LDH = flash_dims<HS>::LDH;
    for (int nb = 0; nb < TILE / 16; nb++) {
        frag_acc acc;
        wmma::fill_fragment(acc, 0.0f);
        for (int kk = 0; kk < HS / 16; kk++) {
            frag_b_col<H> fb;
            wmma::load_matrix_sync(fb, b + nb * 16 * LDH + kk * 16, LDH);
            wmma::mma_sync(acc, a[kk], fb, acc);
        }
        wmma::store_matrix_sync(s + nb * 16, acc, LDS, wmma::mem_row_major);
    }
}

/* Four floats at p: one 16-byte load where VEC (p 16-byte aligned), else one at a time. */
template <bool VEC> __device__ __forceinline__ float4 load4(const float *p)
{
    return VEC ? *(const float4 *)p : make_float4(p[0], p[1], p[2], p[3]);
}

/* The block's share of the K and V rows k0.. (fp32, row stride ld; rows at or past t are zero)
 * in registers, so the next tile's loads run under this tile's products. Thread x holds float4s
 * x, x + THREADS8, ... of K's TILE * HS / 4 then V's. */
template <int HS, bool VEC> struct kv_prefetch {
    static constexpr int Q = HS / 4, N = flash_dims<HS>::FPF;
    float4 r[N];
    __device__ void load(const float *k, const float *v, int64_t ld, int k0, int t)
    {
        for (int n = 0; n < N; n++) {
            const int e = (int)threadIdx.x + n * THREADS8, which = e / (TILE * Q);
            const int row = e % (TILE * Q) / Q, d = e % Q * 4, i = k0 + row;
            r[n] = i < t ? load4<VEC>((which ? v : k) + (int64_t)i * ld + d)
                         : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
    }
    /* Into sk (TILE, LDH) and the V tile right after it, rounded. */
    template <typename H> __device__ void store(H *sk) const
    {
        for (int n = 0; n < N; n++) {
            const int e = (int)threadIdx.x + n * THREADS8, which = e / (TILE * Q);
            const int row = e % (TILE * Q) / Q, d = e % Q * 4;
            H *o = sk + (which * TILE + row) * flash_dims<HS>::LDH + d;
            o[0] = to_half<H>(r[n].x);
            o[1] = to_half<H>(r[n].y);
            o[2] = to_half<H>(r[n].z);
            o[3] = to_half<H>(r[n].w);
        }
    }
};

/* The same for the backward's already rounded Q and dout rows q0.. (head-major, HS wide, rows up
 * to tp exist and are zero past t): plain 16-byte copies. */
template <int HS> struct qdo_prefetch {
    static constexpr int Q = HS / 8, N = flash_dims<HS>::BPF;
    h8_chunk r[N];
    template <typename H> __device__ void load(const H *q, const H *dout, int q0)
    {
        for (int n = 0; n < N; n++) {
            const int e = (int)threadIdx.x + n * THREADS8, which = e / (TILE * Q);
            const int row = e % (TILE * Q) / Q, d = e % Q * 8;
            r[n] = *(const h8_chunk *)((which ? dout : q) + (int64_t)(q0 + row) * HS + d);
        }
    }
    /* Into sq (TILE, LDH) and the dout tile right after it. */
    template <typename H> __device__ void store(H *sq) const
    {
        for (int n = 0; n < N; n++) {
            const int e = (int)threadIdx.x + n * THREADS8, which = e / (TILE * Q);
            const int row = e % (TILE * Q) / Q, d = e % Q * 8;
            *(h8_chunk *)(sq + (which * TILE + row) * flash_dims<HS>::LDH + d) = r[n];
        }
    }
};

/* Forward. Block (128-query block, b*nh + h), the later blocks first, which see more keys; each
 * warp's 16 rows see the key tiles up to their own 64-row tile (the warps of the block's earlier
 * tile skip its later one). out (B, T, C); saved = lse (B, NH, T) then a copy of out (B, T, C).
 * Each lane pair owns one row of its warp's 16 (lane / 2), every other column each (lane % 2: the
 * pair reads adjacent words, which halves shared-memory bank conflicts). VEC: qkv is 16-byte
 * aligned (the GPT's arena is 64-byte aligned), so its rows load as float4s. */
template <typename H, int HS, bool VEC>
__global__ void __launch_bounds__(THREADS8)
    flash_forward_kernel(float *out, float *saved, const float *qkv, int t, int c, int nh,
                         int tiles, int64_t bnh, float scale)
{
    using D = flash_dims<HS>;
    FLASH_SMEM(smem);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, row = lane / 2, half = lane % 2;
    float *o_w = (float *)smem + warp * WR * D::LDO;
    float *s_w = (float *)(smem + D::FO) + warp * WR * LDS;
    H *p_w = (H *)(smem + D::FO + D::FS) + warp * WR * LDP;
    H *sk = (H *)(smem + D::FO + D::FS + D::FP), *sv = sk + TILE * D::LDH;

    const int nblk = (tiles + 1) / 2, qb = nblk - 1 - (int)(blockIdx.x % nblk);
    const int64_t bh = blockIdx.x / nblk, bi = bh / nh, h = bh % nh, c3 = 3 * (int64_t)c;
    const int q0 = qb * BIG + warp * WR, wt = q0 / TILE, i = q0 + row;
    const int last = 2 * qb + 1 < tiles ? 2 * qb + 1 : tiles - 1;
    const bool live = wt < tiles; /* the last block's second tile may not exist */
    const float *base = qkv + bi * t * c3 + h * HS;
    /* The block's 128 query rows, rounded (rows at or past t zero), staged in the K and V tiles */
    for (int e = threadIdx.x; e < BIG * HS / 4; e += THREADS8) {
        const int r = e / (HS / 4), d = e % (HS / 4) * 4, iq = qb * BIG + r;
        const float4 v =
            iq < t ? load4<VEC>(base + (int64_t)iq * c3 + d) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        H *o = sk + r * D::LDH + d;
        o[0] = to_half<H>(v.x);
        o[1] = to_half<H>(v.y);
        o[2] = to_half<H>(v.z);
        o[3] = to_half<H>(v.w);
    }
    __syncthreads();
    frag_a<H> qf[HS / 16];
    for (int kk = 0; kk < HS / 16; kk++)
        wmma::load_matrix_sync(qf[kk], sk + warp * WR * D::LDH + kk * 16, D::LDH);
    for (int e = lane; e < WR * HS; e += 32)
        o_w[e / HS * D::LDO + e % HS] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    kv_prefetch<HS, VEC> pf;
    pf.load(base + c, base + 2 * (int64_t)c, c3, 0, t);
    for (int kt = 0; kt <= last; kt++) {
        const int k0 = kt * TILE;
        __syncthreads(); /* every warp is done with the previous K and V (or its Q) */
        pf.store(sk);
        __syncthreads();
        if (kt < last)
            pf.load(base + c, base + 2 * (int64_t)c, c3, k0 + TILE, t);
        if (!live || kt > wt)
            continue;
        frags_times_tile_t<H, HS>(s_w, qf, sk);
        __syncwarp();
        /* Online softmax of row i over this tile: masked keys are -inf; a row with no key yet
         * keeps m = -inf and exponentiates against 0, giving 0 rather than NaN. */
        float *srow = s_w + row * LDS + half;
        float mt = -INFINITY;
        for (int x = 0; x < TILE; x += 2) {
            const int j = k0 + half + x;
            srow[x] = j <= i && j < t ? scale * srow[x] : -INFINITY;
            mt = fmaxf(mt, srow[x]);
        }
        mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 1));
        const float mn = fmaxf(m, mt), at = mn == -INFINITY ? 0.0f : mn;
        const float alpha = expf(m - at);
        float sum = 0.0f;
        H *prow = p_w + row * LDP + half;
        for (int x = 0; x < TILE; x += 2) {
            const float e = expf(srow[x] - at);
            sum += e;
            prow[x] = to_half<H>(e);
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        m = mn;
        l = l * alpha + sum;
        float *orow = o_w + row * D::LDO + half;
        for (int d = 0; d < HS; d += 2)
            orow[d] *= alpha;
        __syncwarp();
        /* O = alpha O + P V: the rescaled rows seed the accumulators. */
        frag_acc acc[HS / 16];
        for (int nd = 0; nd < HS / 16; nd++)
            wmma::load_matrix_sync(acc[nd], o_w + nd * 16, D::LDO, wmma::mem_row_major);
        accumulate_p_times<H, HS>(acc, p_w, sv);
        for (int nd = 0; nd < HS / 16; nd++)
            wmma::store_matrix_sync(o_w + nd * 16, acc[nd], D::LDO, wmma::mem_row_major);
        __syncwarp();
    }
    if (!live)
        return;
    /* 1/l per row in the warp's score rows (done with), then coalesced writes of out and copy. */
    if (half == 0) {
        s_w[row] = 1.0f / l;
        if (i < t)
            saved[bh * t + i] = m + logf(l);
    }
    __syncwarp();
    float *copy = saved + bnh * t;
    for (int r = 0; r < WR && q0 + r < t; r++) {
        const int64_t at = (bi * t + q0 + r) * c + h * HS;
        for (int d = lane; d < HS; d += 32) {
            const float y = o_w[r * D::LDO + d] * s_w[r];
            out[at + d] = y;
            copy[at + d] = y;
        }
    }
}

/* q, k, v and dout rounded once into (B*NH, tp, HS) halves each (rows t..tp zero), and D (B*NH, T)
 * = rowsum(dout * out), lane-strided then a fixed butterfly, so the same bits every run. One warp
 * per (b*nh + h, row < tp). */
template <typename H, int HS>
__global__ void __launch_bounds__(THREADS8)
    flash_round_kernel(H *q16, H *k16, H *v16, H *do16, float *dd, const float *qkv,
                       const float *dout, const float *o, int t, int tp, int c, int nh,
                       int64_t rows)
{
    const int lane = threadIdx.x % 32;
    for (int64_t w = blockIdx.x * (int64_t)W8 + threadIdx.x / 32; w < rows;
         w += (int64_t)gridDim.x * W8) {
        const int64_t bh = w / tp, bi = bh / nh, h = bh % nh, at16 = w * HS;
        const int i = (int)(w % tp);
        if (i >= t) {
            for (int d = lane; d < HS; d += 32) {
                q16[at16 + d] = k16[at16 + d] = v16[at16 + d] = to_half<H>(0.0f);
                do16[at16 + d] = to_half<H>(0.0f);
            }
            continue;
        }
        const float *src = qkv + (bi * t + i) * 3 * (int64_t)c + h * HS;
        const int64_t at = (bi * t + i) * c + h * HS;
        float s = 0.0f;
        for (int d = lane; d < HS; d += 32) {
            q16[at16 + d] = to_half<H>(src[d]);
            k16[at16 + d] = to_half<H>(src[c + d]);
            v16[at16 + d] = to_half<H>(src[2 * (int64_t)c + d]);
            do16[at16 + d] = to_half<H>(dout[at + d]);
            s += dout[at + d] * o[at + d];
        }
        for (int off = 16; off > 0; off /= 2)
            s += __shfl_xor_sync(0xffffffffu, s, off);
        if (lane == 0)
            dd[bh * t + i] = s;
    }
}

/* dK and dV of 128 keys (block: key block, b*nh + h), over the query tiles at or after the first
 * key tile; warp w's 16 keys (tile kt = 2 * block + w / 4), held in fragments, start at query tile
 * kt. Per query tile a warp computes S^T and dP^T (its keys against the tile), then dV += P^T dout
 * and dK += dS^T q; lane pairs own one key row, half the queries each. Each warp also stores its
 * dS^T rows of every pair (qt, kt) for flash_dq_kernel. */
template <typename H, int HS>
__global__ void __launch_bounds__(THREADS8)
    flash_dkdv_kernel(float *dqkv, H *ds, const H *q16, const H *k16, const H *v16, const H *do16,
                      const float *saved, const float *dd, int t, int tp, int c, int nh, int tiles,
                      float scale)
{
    using D = flash_dims<HS>;
    FLASH_SMEM(smem);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, row = lane / 2, half = lane % 2;
    float *lse = (float *)smem, *dds = lse + TILE;
    float *s_w = dds + TILE + warp * 2 * WR * LDS, *dp_w = s_w + WR * LDS;
    H *p_w = (H *)(smem + 2 * TILE * 4 + D::BS) + warp * 2 * WR * LDP, *ds_w = p_w + WR * LDP;
    H *sq = (H *)(smem + 2 * TILE * 4 + D::BS + D::BP), *sdo = sq + TILE * D::LDH;

    const int nblk = (tiles + 1) / 2, kb = (int)(blockIdx.x % nblk);
    const int64_t bh = blockIdx.x / nblk, bi = bh / nh, h = bh % nh, c3 = 3 * (int64_t)c;
    const int k0 = kb * BIG + warp * WR, wt = k0 / TILE, j = k0 + row;
    const bool live = wt < tiles;
    const int64_t head = bh * tp * HS, ntri = (int64_t)tiles * (tiles + 1) / 2;
    frag_a<H> kf[HS / 16], vf[HS / 16];
    for (int kk = 0; kk < HS / 16; kk++) {
        wmma::load_matrix_sync(kf[kk], k16 + head + (int64_t)k0 * HS + kk * 16, HS);
        wmma::load_matrix_sync(vf[kk], v16 + head + (int64_t)k0 * HS + kk * 16, HS);
    }
    frag_acc dk[HS / 16], dv[HS / 16];
    for (int nd = 0; nd < HS / 16; nd++) {
        wmma::fill_fragment(dk[nd], 0.0f);
        wmma::fill_fragment(dv[nd], 0.0f);
    }
    qdo_prefetch<HS> pf;
    pf.load(q16 + head, do16 + head, 2 * kb * TILE);
    for (int qt = 2 * kb; qt < tiles; qt++) {
        const int q0 = qt * TILE;
        __syncthreads(); /* every warp is done with the previous query tile */
        pf.store(sq);
        for (int e = threadIdx.x; e < TILE; e += THREADS8) {
            lse[e] = q0 + e < t ? saved[bh * t + q0 + e] : 0.0f;
            dds[e] = q0 + e < t ? dd[bh * t + q0 + e] : 0.0f;
        }
        __syncthreads();
        if (qt + 1 < tiles)
            pf.load(q16 + head, do16 + head, q0 + TILE);
        if (!live || qt < wt)
            continue;
        frags_times_tile_t<H, HS>(s_w, kf, sq);   /* S^T = k q^T */
        frags_times_tile_t<H, HS>(dp_w, vf, sdo); /* dP^T = v dout^T */
        __syncwarp();
        for (int col = half; col < TILE; col += 2) {
            float p, dsv;
            p_ds(s_w[row * LDS + col], dp_w[row * LDS + col], q0 + col, j, t, lse[col], dds[col],
                 scale, &p, &dsv);
            p_w[row * LDP + col] = to_half<H>(p);
            ds_w[row * LDP + col] = to_half<H>(dsv);
        }
        __syncwarp();
        /* dS^T rows of pair (qt, wt): this warp's 16 keys of the 64, TILE queries each */
        H *dst = ds + ((bh * ntri + (int64_t)qt * (qt + 1) / 2 + wt) * TILE + k0 % TILE) * TILE;
        for (int e = lane; e < WR * TILE / 8; e += 32)
            *(h8_chunk *)(dst + e / 8 * TILE + e % 8 * 8) =
                *(const h8_chunk *)(ds_w + e / 8 * LDP + e % 8 * 8);
        accumulate_p_times<H, HS>(dv, p_w, sdo);
        accumulate_p_times<H, HS>(dk, ds_w, sq);
    }
    if (!live)
        return;
    float *dst = dqkv + (bi * t + k0) * c3 + h * HS;
    write_rows<HS>(dst + c, c3, s_w, dk, k0, t, lane);
    write_rows<HS>(dst + 2 * (int64_t)c, c3, s_w, dv, k0, t, lane);
}

/* The dQ kernel's next dS^T tile (TILE keys, TILE queries) and K tile (TILE, HS), both already
 * 16-bit, in registers: chunks x, x + THREADS, ... of dS^T's TILE * TILE / 8 then K's. */
template <int HS> struct dsk_prefetch {
    static constexpr int NDS = TILE * TILE / 8, QK = HS / 8, N = (NDS + TILE * QK) / THREADS;
    static_assert(N * THREADS == NDS + TILE * QK && NDS % THREADS == 0, "whole chunks a thread");
    h8_chunk r[N];
    template <typename H> __device__ void load(const H *ds, const H *k)
    {
        for (int n = 0; n < N; n++) {
            const int e = (int)threadIdx.x + n * THREADS, f = e - NDS;
            r[n] = e < NDS ? *(const h8_chunk *)(ds + e / 8 * TILE + e % 8 * 8)
                           : *(const h8_chunk *)(k + f / QK * HS + f % QK * 8);
        }
    }
    /* Into sds (TILE, LDP) and sk (TILE, LDH). */
    template <typename H> __device__ void store(H *sds, H *sk) const
    {
        for (int n = 0; n < N; n++) {
            const int e = (int)threadIdx.x + n * THREADS, f = e - NDS;
            H *dst = e < NDS ? sds + e / 8 * LDP + e % 8 * 8
                             : sk + f / QK * flash_dims<HS>::LDH + f % QK * 8;
            *(h8_chunk *)dst = r[n];
        }
    }
};

/* dQ of one query tile (block: query tile, b*nh + h; later tiles first), 4 warps of 16 queries:
 * dQ += dS k over the key tiles up to the diagonal, in ascending order, from the stored dS^T (a
 * column-major A) and the rounded K, staged in shared memory, the next pair of tiles prefetched
 * into registers. */
template <typename H, int HS>
__global__ void __launch_bounds__(THREADS)
    flash_dq_kernel(float *dqkv, const H *ds, const H *k16, int t, int tp, int c, int nh, int tiles)
{
    using D = flash_dims<HS>;
    FLASH_SMEM(smem);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    float *stage = (float *)smem + warp * WR * D::LDO;
    H *sds = (H *)(smem + D::DQ_STAGE), *sk = sds + TILE * LDP;
    const int qt = tiles - 1 - (int)(blockIdx.x % tiles), q0 = qt * TILE;
    const int64_t bh = blockIdx.x / tiles, bi = bh / nh, h = bh % nh, c3 = 3 * (int64_t)c;
    const int64_t ntri = (int64_t)tiles * (tiles + 1) / 2;
    const H *dsq = ds + (bh * ntri + (int64_t)qt * (qt + 1) / 2) * TILE * TILE;
    const H *kh = k16 + bh * tp * HS;
    frag_acc dq[HS / 16];
    for (int nd = 0; nd < HS / 16; nd++)
        wmma::fill_fragment(dq[nd], 0.0f);
    dsk_prefetch<HS> pf;
    pf.load(dsq, kh);
    for (int kt = 0; kt <= qt; kt++) {
        __syncthreads(); /* every warp is done with the previous tiles */
        pf.store(sds, sk);
        __syncthreads();
        if (kt < qt)
            pf.load(dsq + (int64_t)(kt + 1) * TILE * TILE, kh + (int64_t)(kt + 1) * TILE * HS);
        for (int kb = 0; kb < TILE / 16; kb++) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, H, wmma::col_major> fa;
            wmma::load_matrix_sync(fa, sds + kb * 16 * LDP + warp * WR, LDP);
            for (int nd = 0; nd < HS / 16; nd++) {
                frag_b_row<H> fb;
                wmma::load_matrix_sync(fb, sk + kb * 16 * D::LDH + nd * 16, D::LDH);
                wmma::mma_sync(dq[nd], fa, fb, dq[nd]);
            }
        }
    }
    write_rows<HS>(dqkv + (bi * t + q0 + warp * WR) * c3 + h * HS, c3, stage, dq, q0 + warp * WR, t,
                   lane);
}

#ifndef DDPC_CUDA_EMULATE /* the host side: the checks, launches and entry points */
/* The device's opt-in shared memory per block (sm_80 163 KiB, sm_90 227 KiB), asked once per
 * device; 0 when the question fails (then the fused kernels do not apply). */
static size_t optin_smem(void)
{
    enum { DEVICES = 64 };
    static int cached[DEVICES]; /* bytes + 1; 0: not asked yet */
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= DEVICES)
        return 0;
    if (cached[dev] == 0) {
        int v = 0;
        if (cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess)
            v = 0;
        cached[dev] = v + 1;
    }
    return (size_t)(cached[dev] - 1);
}

/* Raises a kernel's dynamic shared memory limit to `bytes` (past 48 KiB a kernel must ask), once
 * per device. */
template <typename K> static void allow_smem_once(K kernel, size_t bytes, uint64_t *done)
{
    int dev = 0;
    DDPC_CUDA_CHECK(cudaGetDevice(&dev));
    const uint64_t bit = dev < 64 ? (uint64_t)1 << dev : 0;
    if (bit && (*done & bit))
        return;
    DDPC_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    *done |= bit;
}

template <typename H, int HS>
static void forward_hs(float *out, float *saved, const float *qkv, int64_t b, int64_t t, int64_t c,
                       int64_t nh)
{
    using D = flash_dims<HS>;
    static uint64_t done[2];
    const bool vec = ((uintptr_t)qkv & 15) == 0;
    const auto kernel =
        vec ? flash_forward_kernel<H, HS, true> : flash_forward_kernel<H, HS, false>;
    const int tiles = (int)((t + TILE - 1) / TILE);
    const unsigned blocks = (unsigned)(b * nh * ((tiles + 1) / 2));
    allow_smem_once(kernel, D::FWD_BYTES, &done[vec]);
    kernel<<<blocks, THREADS8, D::FWD_BYTES, ddpc__cuda_stream()>>>(
        out, saved, qkv, (int)t, (int)c, (int)nh, tiles, b * nh, 1.0f / sqrtf((float)HS));
    DDPC_CUDA_LAUNCHED();
}

template <typename H, int HS>
static void backward_hs(float *dqkv, const float *dout, const float *qkv, const float *saved,
                        float *ws, int64_t b, int64_t t, int64_t c, int64_t nh)
{
    using D = flash_dims<HS>;
    static uint64_t done_dkdv, done_dq;
    const flash_layout l = flash_plan(b, t, c, nh);
    const int tiles = (int)l.tiles, tp = (int)l.tp;
    const float scale = 1.0f / sqrtf((float)HS);
    float *dd = ws;
    H *q16 = (H *)(ws + l.dd), *k16 = (H *)(ws + l.dd + l.r16);
    H *v16 = (H *)(ws + l.dd + 2 * l.r16), *do16 = (H *)(ws + l.dd + 3 * l.r16);
    H *ds = (H *)(ws + l.dd + 4 * l.r16);
    const int64_t rows = b * nh * l.tp;
    flash_round_kernel<H, HS><<<ddpc__cuda_blocks(rows, W8), THREADS8, 0, ddpc__cuda_stream()>>>(
        q16, k16, v16, do16, dd, qkv, dout, saved + b * nh * t, (int)t, tp, (int)c, (int)nh, rows);
    DDPC_CUDA_LAUNCHED();
    allow_smem_once(flash_dkdv_kernel<H, HS>, D::DKDV_BYTES, &done_dkdv);
    flash_dkdv_kernel<H, HS>
        <<<(unsigned)(b * nh * ((tiles + 1) / 2)), THREADS8, D::DKDV_BYTES, ddpc__cuda_stream()>>>(
            dqkv, ds, q16, k16, v16, do16, saved, dd, (int)t, tp, (int)c, (int)nh, tiles, scale);
    DDPC_CUDA_LAUNCHED();
    allow_smem_once(flash_dq_kernel<H, HS>, D::DQ_BYTES, &done_dq);
    flash_dq_kernel<H, HS>
        <<<(unsigned)(b * nh * tiles), THREADS, D::DQ_BYTES, ddpc__cuda_stream()>>>(
            dqkv, ds, k16, (int)t, tp, (int)c, (int)nh, tiles);
    DDPC_CUDA_LAUNCHED();
}

/* Head dims with kernels whose blocks fit the device's shared memory (sm_80 and sm_90: all;
 * sm_86/89's 99 KiB: none); the block count b * nh * tiles must fit one grid dimension. */
extern "C" bool ddpc__cuda_flash_applies(ddpc_precision prec, int64_t b, int64_t t, int64_t c,
                                         int64_t nh)
{
    if (prec == DDPC_PREC_FP32 || nh <= 0 || c % nh != 0 || t > INT32_MAX / 4)
        return false;
    const int64_t hs = c / nh;
    if (hs != 32 && hs != 64 && hs != 128)
        return false;
    const size_t smem = hs == 32   ? flash_dims<32>::MAX_BYTES
                        : hs == 64 ? flash_dims<64>::MAX_BYTES
                                   : flash_dims<128>::MAX_BYTES;
    return b * nh * ((t + TILE - 1) / TILE) < INT32_MAX && smem <= optin_smem();
}

extern "C" size_t ddpc__cuda_flash_workspace_floats(int64_t b, int64_t t, int64_t c, int64_t nh)
{
    return (size_t)flash_plan(b, t, c, nh).total;
}

/* bf16 or fp16 and the head dim as template arguments. */
#define FLASH_DISPATCH(prec, hs, CALL)                                                             \
    do {                                                                                           \
        const bool bf_ = (prec) == DDPC_PREC_BF16;                                                 \
        if ((hs) == 32)                                                                            \
            bf_ ? CALL(__nv_bfloat16, 32) : CALL(__half, 32);                                      \
        else if ((hs) == 64)                                                                       \
            bf_ ? CALL(__nv_bfloat16, 64) : CALL(__half, 64);                                      \
        else                                                                                       \
            bf_ ? CALL(__nv_bfloat16, 128) : CALL(__half, 128);                                    \
    } while (0)

extern "C" void ddpc__cuda_flash_forward(ddpc_precision prec, float *out, float *saved,
                                         const float *qkv, int64_t b, int64_t t, int64_t c,
                                         int64_t nh)
{
#define FWD(H, HS) forward_hs<H, HS>(out, saved, qkv, b, t, c, nh)
    FLASH_DISPATCH(prec, c / nh, FWD);
#undef FWD
}

extern "C" void ddpc__cuda_flash_backward(ddpc_precision prec, float *dqkv, const float *dout,
                                          const float *qkv, const float *saved, int64_t b,
                                          int64_t t, int64_t c, int64_t nh, float *ws)
{
    DDPC_ASSERT(((uintptr_t)ws & 31) == 0); /* WMMA loads K and V fragments from it */
#define BWD(H, HS) backward_hs<H, HS>(dqkv, dout, qkv, saved, ws, b, t, c, nh)
    FLASH_DISPATCH(prec, c / nh, BWD);
#undef BWD
}
#endif
