// SPDX-License-Identifier: MIT
/* Fused causal attention at bf16/fp16 (FlashAttention-2, Dao 2023): tiles of 64 queries against
 * tiles of 64 keys in shared memory, Q K^T and P V on the tensor cores (WMMA 16x16x16, fp32
 * accumulation), an online fp32 softmax, and only each row's logsumexp saved for backward, which
 * recomputes the probabilities. tests/test_attention_flash_ref.c runs this algorithm on the CPU.
 * Invariants: the tensor cores' operands are the CPU kernel's rounding points (q, k, v, P, dout,
 * dS); no float atomics: D = rowsum(dout * out), then dK/dV per key tile and dQ per query tile,
 * each output element written once in a fixed order, so a rerun gives the same bits. */
#include "kernels/cuda/attention_flash.cuh"

/* dst (TILE, LDH) = rows r0.. of src (row stride ld floats), HS wide, rounded; rows at or past t
 * are zero (so padded rows multiply to 0, never NaN). The whole block calls it; 16-byte loads
 * where src and ld allow them (the GPT's arena is 64-byte aligned), else one float at a time. */
template <typename H, int HS>
__device__ void load_rows(H *dst, const float *src, int64_t ld, int r0, int t)
{
    constexpr int LDH = flash_dims<HS>::LDH, Q = HS / 4;
    if (((uintptr_t)src & 15) == 0 && (ld & 3) == 0) {
        for (int e = threadIdx.x; e < TILE * Q; e += THREADS) {
            const int r = e / Q, d = e % Q * 4, i = r0 + r;
            const float4 v = i < t ? *(const float4 *)(src + (int64_t)i * ld + d)
                                   : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            H *o = dst + r * LDH + d;
            o[0] = to_half<H>(v.x);
            o[1] = to_half<H>(v.y);
            o[2] = to_half<H>(v.z);
            o[3] = to_half<H>(v.w);
        }
        return;
    }
    for (int e = threadIdx.x; e < TILE * HS; e += THREADS) {
        const int r = e / HS, d = e % HS, i = r0 + r;
        dst[r * LDH + d] = to_half<H>(i < t ? src[(int64_t)i * ld + d] : 0.0f);
    }
}

/* Forward. Block (query tile, b*nh + h); the later query tiles, which see more keys, start first.
 * out (B, T, C); saved = lse (B, NH, T) then a copy of out (B, T, C). Each lane pair owns one
 * row of its warp's 16 (lane / 2), every other column each (lane % 2: the pair reads adjacent
 * words, which halves shared-memory bank conflicts). */
template <typename H, int HS>
__global__ void __launch_bounds__(THREADS)
    flash_forward_kernel(float *out, float *saved, const float *qkv, int t, int c, int nh,
                         int tiles, int64_t bnh, float scale)
{
    using D = flash_dims<HS>;
    FLASH_SMEM(smem);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, row = lane / 2, half = lane % 2;
    float *o_w = (float *)smem + warp * WR * D::LDO;
    float *s_w = (float *)(smem + D::WARP_O_BYTES) + warp * WR * LDS;
    H *sq = (H *)(smem + D::WARP_O_BYTES + D::WARP_S_BYTES);
    H *sk = sq + TILE * D::LDH, *sv = sk + TILE * D::LDH;
    H *p_w = sv + TILE * D::LDH + warp * WR * LDP;

    const int qt = tiles - 1 - (int)(blockIdx.x % tiles);
    const int64_t bh = blockIdx.x / tiles, bi = bh / nh, h = bh % nh;
    const int q0 = qt * TILE, i = q0 + warp * WR + row;
    const float *base = qkv + bi * t * 3 * (int64_t)c + h * HS;
    load_rows<H, HS>(sq, base, 3 * (int64_t)c, q0, t);
    for (int e = lane; e < WR * HS; e += 32)
        o_w[e / HS * D::LDO + e % HS] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    for (int kt = 0; kt <= qt; kt++) { /* causal: key tiles up to the diagonal */
        const int k0 = kt * TILE;
        __syncthreads(); /* every warp is done with the previous K and V */
        load_rows<H, HS>(sk, base + c, 3 * (int64_t)c, k0, t);
        load_rows<H, HS>(sv, base + 2 * (int64_t)c, 3 * (int64_t)c, k0, t);
        __syncthreads();
        rows_times_tile_t<H, HS>(s_w, sq + warp * WR * D::LDH, sk);
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
    /* 1/l per row in the warp's score rows (done with), then coalesced writes of out and copy. */
    if (half == 0) {
        s_w[row] = 1.0f / l;
        if (i < t)
            saved[bh * t + i] = m + logf(l);
    }
    __syncwarp();
    float *copy = saved + bnh * t;
    for (int r = 0; r < WR && q0 + warp * WR + r < t; r++) {
        const int64_t at = (bi * t + q0 + warp * WR + r) * c + h * HS;
        for (int d = lane; d < HS; d += 32) {
            const float y = o_w[r * D::LDO + d] * s_w[r];
            out[at + d] = y;
            copy[at + d] = y;
        }
    }
}

/* dd (B*NH, T) = rowsum(dout * out) per head and position: one warp per (b, t, h), a fixed
 * butterfly, so the same bits every run. */
__global__ void flash_rowdot_kernel(float *dd, const float *dout, const float *o, int64_t rows,
                                    int t, int nh, int hs)
{
    const int lane = threadIdx.x % 32;
    for (int64_t w = blockIdx.x * (int64_t)WARPS + threadIdx.x / 32; w < rows;
         w += (int64_t)gridDim.x * WARPS) {
        const int64_t bt = w / nh, h = w % nh, bi = bt / t, i = bt % t;
        const int64_t at = bt * nh * hs + h * hs;
        float s = 0.0f;
        for (int d = lane; d < hs; d += 32)
            s += dout[at + d] * o[at + d];
        for (int off = 16; off > 0; off /= 2)
            s += __shfl_xor_sync(0xffffffffu, s, off);
        if (lane == 0)
            dd[(bi * nh + h) * t + i] = s;
    }
}

/* The backward's shared memory: lse and D of the current query tile, then per warp its S and dP
 * rows, the Q/dout/K/V tiles and per warp its P and dS rows (halves). */
template <typename H, int HS> struct bwd_smem {
    float *lse, *dd, *s_w, *dp_w;
    H *sq, *sdo, *sk, *sv, *p_w, *ds_w;
    __device__ bwd_smem(unsigned char *smem, int warp)
    {
        using D = flash_dims<HS>;
        lse = (float *)smem;
        dd = lse + TILE;
        s_w = dd + TILE + warp * 2 * WR * LDS; /* S then dP: adjacent, the staging area */
        dp_w = s_w + WR * LDS;
        sq = (H *)(smem + 2 * TILE * 4 + 2 * D::WARP_S_BYTES);
        sdo = sq + TILE * D::LDH;
        sk = sdo + TILE * D::LDH;
        sv = sk + TILE * D::LDH;
        p_w = sv + TILE * D::LDH + warp * 2 * WR * LDP;
        ds_w = p_w + WR * LDP;
    }
};

/* lse and D of query rows q0.. (0 past t: those rows are masked anyway). The block calls it. */
__device__ void load_row_stats(float *lse, float *dd, const float *saved_lse, const float *ddh,
                               int q0, int t)
{
    for (int e = threadIdx.x; e < TILE; e += THREADS) {
        lse[e] = q0 + e < t ? saved_lse[q0 + e] : 0.0f;
        dd[e] = q0 + e < t ? ddh[q0 + e] : 0.0f;
    }
}

/* dK and dV of one key tile (block: key tile, b*nh + h), over the query tiles at or after it.
 * Each warp owns 16 keys: it computes S^T and dP^T (its keys against the query tile), then
 * dV += P^T dout and dK += dS^T q. Lane pairs own one key row, half the queries each. */
template <typename H, int HS>
__global__ void __launch_bounds__(THREADS)
    flash_dkdv_kernel(float *dqkv, const float *dout, const float *qkv, const float *saved,
                      const float *dd, int t, int c, int nh, int tiles, float scale)
{
    FLASH_SMEM(smem);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, row = lane / 2, half = lane % 2;
    bwd_smem<H, HS> sm(smem, warp);
    const int kt = (int)(blockIdx.x % tiles), k0 = kt * TILE, j = k0 + warp * WR + row;
    const int64_t bh = blockIdx.x / tiles, bi = bh / nh, h = bh % nh, c3 = 3 * (int64_t)c;
    const float *base = qkv + bi * t * c3 + h * HS, *dobase = dout + bi * t * (int64_t)c + h * HS;
    load_rows<H, HS>(sm.sk, base + c, c3, k0, t);
    load_rows<H, HS>(sm.sv, base + 2 * (int64_t)c, c3, k0, t);
    frag_acc dk[HS / 16], dv[HS / 16];
    for (int nd = 0; nd < HS / 16; nd++) {
        wmma::fill_fragment(dk[nd], 0.0f);
        wmma::fill_fragment(dv[nd], 0.0f);
    }
    for (int qt = kt; qt < tiles; qt++) {
        const int q0 = qt * TILE;
        __syncthreads(); /* every warp is done with the previous query tile */
        load_rows<H, HS>(sm.sq, base, c3, q0, t);
        load_rows<H, HS>(sm.sdo, dobase, c, q0, t);
        load_row_stats(sm.lse, sm.dd, saved + bh * t, dd + bh * t, q0, t);
        __syncthreads();
        const int kr = warp * WR * flash_dims<HS>::LDH;
        rows_times_tile_t<H, HS>(sm.s_w, sm.sk + kr, sm.sq);   /* S^T = k q^T */
        rows_times_tile_t<H, HS>(sm.dp_w, sm.sv + kr, sm.sdo); /* dP^T = v dout^T */
        __syncwarp();
        for (int col = half; col < TILE; col += 2) {
            float p, ds;
            p_ds(sm.s_w[row * LDS + col], sm.dp_w[row * LDS + col], q0 + col, j, t, sm.lse[col],
                 sm.dd[col], scale, &p, &ds);
            sm.p_w[row * LDP + col] = to_half<H>(p);
            sm.ds_w[row * LDP + col] = to_half<H>(ds);
        }
        __syncwarp();
        accumulate_p_times<H, HS>(dv, sm.p_w, sm.sdo);
        accumulate_p_times<H, HS>(dk, sm.ds_w, sm.sq);
    }
    float *dst = dqkv + (bi * t + k0 + warp * WR) * c3 + h * HS;
    write_rows<HS>(dst + c, c3, sm.s_w, dk, k0 + warp * WR, t, lane);
    write_rows<HS>(dst + 2 * (int64_t)c, c3, sm.s_w, dv, k0 + warp * WR, t, lane);
}

/* dQ of one query tile (block: query tile, b*nh + h; later tiles first), over the key tiles up
 * to the diagonal: dQ += dS k. Each warp owns 16 queries; lane pairs one query, half the keys. */
template <typename H, int HS>
__global__ void __launch_bounds__(THREADS)
    flash_dq_kernel(float *dqkv, const float *dout, const float *qkv, const float *saved,
                    const float *dd, int t, int c, int nh, int tiles, float scale)
{
    FLASH_SMEM(smem);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, row = lane / 2, half = lane % 2;
    bwd_smem<H, HS> sm(smem, warp);
    const int qt = tiles - 1 - (int)(blockIdx.x % tiles), q0 = qt * TILE;
    const int64_t bh = blockIdx.x / tiles, bi = bh / nh, h = bh % nh, c3 = 3 * (int64_t)c;
    const float *base = qkv + bi * t * c3 + h * HS, *dobase = dout + bi * t * (int64_t)c + h * HS;
    load_rows<H, HS>(sm.sq, base, c3, q0, t);
    load_rows<H, HS>(sm.sdo, dobase, c, q0, t);
    load_row_stats(sm.lse, sm.dd, saved + bh * t, dd + bh * t, q0, t);
    frag_acc dq[HS / 16];
    for (int nd = 0; nd < HS / 16; nd++)
        wmma::fill_fragment(dq[nd], 0.0f);
    const int r = warp * WR + row, i = q0 + r;
    for (int kt = 0; kt <= qt; kt++) {
        const int k0 = kt * TILE;
        __syncthreads(); /* every warp is done with the previous K and V */
        load_rows<H, HS>(sm.sk, base + c, c3, k0, t);
        load_rows<H, HS>(sm.sv, base + 2 * (int64_t)c, c3, k0, t);
        __syncthreads();
        const int qr = warp * WR * flash_dims<HS>::LDH;
        rows_times_tile_t<H, HS>(sm.s_w, sm.sq + qr, sm.sk);   /* S = q k^T */
        rows_times_tile_t<H, HS>(sm.dp_w, sm.sdo + qr, sm.sv); /* dP = dout v^T */
        __syncwarp();
        for (int col = half; col < TILE; col += 2) {
            float p, ds;
            p_ds(sm.s_w[row * LDS + col], sm.dp_w[row * LDS + col], i, k0 + col, t, sm.lse[r],
                 sm.dd[r], scale, &p, &ds);
            sm.ds_w[row * LDP + col] = to_half<H>(ds);
        }
        __syncwarp();
        accumulate_p_times<H, HS>(dq, sm.ds_w, sm.sk);
    }
    write_rows<HS>(dqkv + (bi * t + q0 + warp * WR) * c3 + h * HS, c3, sm.s_w, dq, q0 + warp * WR,
                   t, lane);
}

#ifndef DDPC_CUDA_EMULATE /* the host side: launches and the table's entry points */
/* Kernels beyond 48 KiB of shared memory must ask for it (sm_80 allows 163 KiB, sm_90 227). */
template <typename K> static void allow_smem(K kernel, size_t bytes)
{
    DDPC_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

template <typename H, int HS>
static void forward_hs(float *out, float *saved, const float *qkv, int64_t b, int64_t t, int64_t c,
                       int64_t nh)
{
    using D = flash_dims<HS>;
    const int tiles = (int)((t + TILE - 1) / TILE);
    const unsigned blocks = (unsigned)(b * nh * tiles);
    allow_smem(flash_forward_kernel<H, HS>, D::FWD_BYTES);
    flash_forward_kernel<H, HS><<<blocks, THREADS, D::FWD_BYTES, ddpc__cuda_stream()>>>(
        out, saved, qkv, (int)t, (int)c, (int)nh, tiles, b * nh, 1.0f / sqrtf((float)HS));
    DDPC_CUDA_LAUNCHED();
}

template <typename H, int HS>
static void backward_hs(float *dqkv, const float *dout, const float *qkv, const float *saved,
                        float *dd, int64_t b, int64_t t, int64_t c, int64_t nh)
{
    using D = flash_dims<HS>;
    const int tiles = (int)((t + TILE - 1) / TILE);
    const unsigned blocks = (unsigned)(b * nh * tiles);
    const float scale = 1.0f / sqrtf((float)HS);
    const int64_t rows = b * t * nh;
    flash_rowdot_kernel<<<ddpc__cuda_blocks(rows, WARPS), THREADS, 0, ddpc__cuda_stream()>>>(
        dd, dout, saved + b * nh * t, rows, (int)t, (int)nh, HS);
    DDPC_CUDA_LAUNCHED();
    allow_smem(flash_dkdv_kernel<H, HS>, D::BWD_BYTES);
    flash_dkdv_kernel<H, HS><<<blocks, THREADS, D::BWD_BYTES, ddpc__cuda_stream()>>>(
        dqkv, dout, qkv, saved, dd, (int)t, (int)c, (int)nh, tiles, scale);
    DDPC_CUDA_LAUNCHED();
    allow_smem(flash_dq_kernel<H, HS>, D::BWD_BYTES);
    flash_dq_kernel<H, HS><<<blocks, THREADS, D::BWD_BYTES, ddpc__cuda_stream()>>>(
        dqkv, dout, qkv, saved, dd, (int)t, (int)c, (int)nh, tiles, scale);
    DDPC_CUDA_LAUNCHED();
}

/* Head dims with kernels; the block count b * nh * tiles must fit one grid dimension. */
extern "C" bool ddpc__cuda_flash_applies(ddpc_precision prec, int64_t b, int64_t t, int64_t c,
                                         int64_t nh)
{
    if (prec == DDPC_PREC_FP32 || nh <= 0 || c % nh != 0 || t > INT32_MAX / 4)
        return false;
    const int64_t hs = c / nh;
    return (hs == 32 || hs == 64 || hs == 128) && b * nh * ((t + TILE - 1) / TILE) < INT32_MAX;
}

/* The head dim as a template argument, bf16 or fp16 as the element type. */
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
#define BWD(H, HS) backward_hs<H, HS>(dqkv, dout, qkv, saved, ws, b, t, c, nh)
    FLASH_DISPATCH(prec, c / nh, BWD);
#undef BWD
}
#endif
