// SPDX-License-Identifier: MIT
/* Candidate "flash2" (candidates.cu) of the fused causal attention: attention_flash.cu's algorithm
 * and rounding points, in 8-warp blocks of 128 rows. Forward keeps each warp's Q in fragments and
 * prefetches the next K/V tile into registers; backward rounds q, k, v, dout to 16 bits once,
 * the dK/dV kernel keeps K and V in fragments and stores each tile pair's dS (16-bit, the rounding
 * point dQ uses), and dQ = dS K reads it: 5 tile products per tile pair instead of 7. Invariant:
 * every output element sees the same operands in the same order as attention_flash.cu (the same
 * bits in the emulator); no float atomics. Off unless DDPC_CUDA_CANDIDATES names flash2. */
#include "kernels/cuda/attention_flash.cuh"

/* 8-warp blocks own BIG = 128 rows: warp w rows 16w.., in the 64-row tile 2 * block + w / 4. */
enum { W8 = 8, THREADS8 = W8 * 32, BIG = 2 * TILE };

/* 16 bytes moved as one: 8 halves. */
struct alignas(16) f2_chunk {
    uint32_t x, y, z, w;
};

/* The backward's workspace, in floats from ws, each region 64-float aligned: D (B*NH, T), then
 * q, k, v and dout rounded (B*NH, tp, HS) halves each, rows t..tp zero, then dS^T of each causal
 * tile pair (B*NH, ntri, TILE keys, TILE queries) halves, pair (qt, kt) at qt (qt + 1) / 2 + kt. */
struct flash2_layout {
    int64_t tiles, tp, ntri, dd, r16, ds, total;
};

static inline int64_t flash2_region(int64_t floats)
{
    return (floats + 63) / 64 * 64;
}

static inline flash2_layout flash2_plan(int64_t b, int64_t t, int64_t c, int64_t nh)
{
    flash2_layout l;
    l.tiles = (t + TILE - 1) / TILE;
    l.tp = (t + BIG - 1) / BIG * BIG;
    l.ntri = l.tiles * (l.tiles + 1) / 2;
    l.dd = flash2_region(b * nh * t);
    l.r16 = flash2_region(b * nh * l.tp * (c / nh) / 2);
    l.ds = flash2_region(b * nh * l.ntri * TILE * TILE / 2);
    l.total = l.dd + 4 * l.r16 + l.ds;
    return l;
}

template <int HS> struct flash2_dims {
    using D = flash_dims<HS>;
    /* forward: O, S (floats), then P, K, V (halves); Q is staged in K and V (128 rows) */
    static constexpr size_t FO = (size_t)W8 * WR * D::LDO * 4, FS = (size_t)W8 * WR * LDS * 4;
    static constexpr size_t FP = (size_t)W8 * WR * LDP * 2, FKV = 2 * (size_t)TILE * D::LDH * 2;
    static constexpr size_t FWD_BYTES = FO + FS + FP + FKV;
    /* dK/dV: lse, D, per warp S and dP (floats, adjacent), per warp P^T and dS^T, then Q, dout */
    static constexpr size_t BS = (size_t)W8 * 2 * WR * LDS * 4, BP = (size_t)W8 * 2 * WR * LDP * 2;
    static constexpr size_t DKDV_BYTES = 2 * TILE * 4 + BS + BP + 2 * (size_t)TILE * D::LDH * 2;
    /* dQ: each warp's staging rows, then the dS^T and K tiles */
    static constexpr size_t DQ_STAGE = (size_t)WARPS * WR * D::LDO * 4;
    static constexpr size_t DQ_BYTES =
        DQ_STAGE + (size_t)TILE * LDP * 2 + (size_t)TILE * D::LDH * 2;
    /* the forward's K/V prefetch (float4s) and the backward's Q/dout prefetch (chunks) */
    static constexpr int FPF = 2 * TILE * HS / 4 / THREADS8, BPF = 2 * TILE * HS / 8 / THREADS8;
    static_assert(FPF * THREADS8 == 2 * TILE * HS / 4 && BPF * THREADS8 == 2 * TILE * HS / 8,
                  "the prefetch divides among the threads");
    static_assert(WR * D::LDO <= 2 * WR * LDS, "a warp's staging fits in its S and dP rows");
};

/* s (WR, LDS) floats = a warp's WR rows, held as fragments a[HS/16], times b^T (TILE rows of width
 * HS, ld LDH): rows_times_tile_t's products in its order, with the rows loaded once. */
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

/* The block's share of the K and V rows k0.. (fp32, row stride ld; rows at or past t are zero)
 * in registers, so the next tile's loads run under this tile's products. Thread x holds float4s
 * x, x + THREADS8, ... of K's TILE * HS / 4 then V's. */
template <int HS> struct kv_prefetch {
    static constexpr int Q = HS / 4, N = flash2_dims<HS>::FPF;
    float4 r[N];
    __device__ void load(const float *k, const float *v, int64_t ld, int k0, int t)
    {
        for (int n = 0; n < N; n++) {
            const int e = (int)threadIdx.x + n * THREADS8, which = e / (TILE * Q);
            const int row = e % (TILE * Q) / Q, d = e % Q * 4, i = k0 + row;
            r[n] = i < t ? *(const float4 *)((which ? v : k) + (int64_t)i * ld + d)
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
    static constexpr int Q = HS / 8, N = flash2_dims<HS>::BPF;
    f2_chunk r[N];
    template <typename H> __device__ void load(const H *q, const H *dout, int q0)
    {
        for (int n = 0; n < N; n++) {
            const int e = (int)threadIdx.x + n * THREADS8, which = e / (TILE * Q);
            const int row = e % (TILE * Q) / Q, d = e % Q * 8;
            r[n] = *(const f2_chunk *)((which ? dout : q) + (int64_t)(q0 + row) * HS + d);
        }
    }
    /* Into sq (TILE, LDH) and the dout tile right after it. */
    template <typename H> __device__ void store(H *sq) const
    {
        for (int n = 0; n < N; n++) {
            const int e = (int)threadIdx.x + n * THREADS8, which = e / (TILE * Q);
            const int row = e % (TILE * Q) / Q, d = e % Q * 8;
            *(f2_chunk *)(sq + (which * TILE + row) * flash_dims<HS>::LDH + d) = r[n];
        }
    }
};

/* Forward. Block (128-query block, b*nh + h), the later blocks first; attention_flash.cu's
 * forward per warp, whose 16 rows see the key tiles up to their own 64-row tile (the block's
 * later tile is skipped by the warps of its earlier one, as the 4-warp kernel never sees it).
 * Needs qkv 16-byte aligned (the host checks). */
template <typename H, int HS>
__global__ void __launch_bounds__(THREADS8)
    flash2_forward_kernel(float *out, float *saved, const float *qkv, int t, int c, int nh,
                          int tiles, int64_t bnh, float scale)
{
    using D = flash_dims<HS>;
    using F = flash2_dims<HS>;
    FLASH_SMEM(smem);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, row = lane / 2, half = lane % 2;
    float *o_w = (float *)smem + warp * WR * D::LDO;
    float *s_w = (float *)(smem + F::FO) + warp * WR * LDS;
    H *p_w = (H *)(smem + F::FO + F::FS) + warp * WR * LDP;
    H *sk = (H *)(smem + F::FO + F::FS + F::FP), *sv = sk + TILE * D::LDH;

    const int nblk = (tiles + 1) / 2, qb = nblk - 1 - (int)(blockIdx.x % nblk);
    const int64_t bh = blockIdx.x / nblk, bi = bh / nh, h = bh % nh, c3 = 3 * (int64_t)c;
    const int q0 = qb * BIG + warp * WR, wt = q0 / TILE, i = q0 + row;
    const int last = 2 * qb + 1 < tiles ? 2 * qb + 1 : tiles - 1;
    const bool live = wt < tiles; /* the last block's second tile may not exist */
    const float *base = qkv + bi * t * c3 + h * HS;
    /* The block's 128 query rows, rounded (rows at or past t zero), staged in the K and V tiles */
    for (int e = threadIdx.x; e < BIG * HS / 4; e += THREADS8) {
        const int r = e / (HS / 4), d = e % (HS / 4) * 4, iq = qb * BIG + r;
        const float4 v = iq < t ? *(const float4 *)(base + (int64_t)iq * c3 + d)
                                : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
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
    kv_prefetch<HS> pf;
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
        /* attention_flash.cu's online softmax, operation for operation */
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
 * = rowsum(dout * out) as flash_rowdot_kernel sums it (lane-strided, a fixed butterfly). One warp
 * per (b*nh + h, row < tp). */
template <typename H, int HS>
__global__ void __launch_bounds__(THREADS8)
    flash2_round_kernel(H *q16, H *k16, H *v16, H *do16, float *dd, const float *qkv,
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
 * key tile; warp w's 16 keys (tile kt = 2 * block + w / 4) start at query tile kt, as in
 * attention_flash.cu's dK/dV kernel, whose per-warp work this repeats with K and V held in
 * fragments. Each warp also stores its dS^T rows of every pair (qt, kt) for flash2_dq_kernel. */
template <typename H, int HS>
__global__ void __launch_bounds__(THREADS8)
    flash2_dkdv_kernel(float *dqkv, H *ds, const H *q16, const H *k16, const H *v16, const H *do16,
                       const float *saved, const float *dd, int t, int tp, int c, int nh, int tiles,
                       float scale)
{
    using D = flash_dims<HS>;
    using F = flash2_dims<HS>;
    FLASH_SMEM(smem);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, row = lane / 2, half = lane % 2;
    float *lse = (float *)smem, *dds = lse + TILE;
    float *s_w = dds + TILE + warp * 2 * WR * LDS, *dp_w = s_w + WR * LDS;
    H *p_w = (H *)(smem + 2 * TILE * 4 + F::BS) + warp * 2 * WR * LDP, *ds_w = p_w + WR * LDP;
    H *sq = (H *)(smem + 2 * TILE * 4 + F::BS + F::BP), *sdo = sq + TILE * D::LDH;

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
            *(f2_chunk *)(dst + e / 8 * TILE + e % 8 * 8) =
                *(const f2_chunk *)(ds_w + e / 8 * LDP + e % 8 * 8);
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
    f2_chunk r[N];
    template <typename H> __device__ void load(const H *ds, const H *k)
    {
        for (int n = 0; n < N; n++) {
            const int e = (int)threadIdx.x + n * THREADS, f = e - NDS;
            r[n] = e < NDS ? *(const f2_chunk *)(ds + e / 8 * TILE + e % 8 * 8)
                           : *(const f2_chunk *)(k + f / QK * HS + f % QK * 8);
        }
    }
    /* Into sds (TILE, LDP) and sk (TILE, LDH). */
    template <typename H> __device__ void store(H *sds, H *sk) const
    {
        for (int n = 0; n < N; n++) {
            const int e = (int)threadIdx.x + n * THREADS, f = e - NDS;
            H *dst = e < NDS ? sds + e / 8 * LDP + e % 8 * 8
                             : sk + f / QK * flash_dims<HS>::LDH + f % QK * 8;
            *(f2_chunk *)dst = r[n];
        }
    }
};

/* dQ of one query tile (block: query tile, b*nh + h; later tiles first), 4 warps of 16 queries:
 * dQ += dS k over the key tiles up to the diagonal, in attention_flash.cu's dQ kernel's order,
 * from the stored dS^T (a column-major A) and the rounded K, staged in shared memory, the next
 * pair of tiles prefetched into registers. */
template <typename H, int HS>
__global__ void __launch_bounds__(THREADS) flash2_dq_kernel(float *dqkv, const H *ds, const H *k16,
                                                            int t, int tp, int c, int nh, int tiles)
{
    using D = flash_dims<HS>;
    FLASH_SMEM(smem);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    float *stage = (float *)smem + warp * WR * D::LDO;
    H *sds = (H *)(smem + flash2_dims<HS>::DQ_STAGE), *sk = sds + TILE * LDP;
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
 * device; 0 when the question fails (then flash2 stands aside). */
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

/* Raises a kernel's dynamic shared memory limit to `bytes`, once per device. */
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
static bool forward2_hs(float *out, float *saved, const float *qkv, int64_t b, int64_t t, int64_t c,
                        int64_t nh)
{
    using F = flash2_dims<HS>;
    if (F::FWD_BYTES > optin_smem() || ((uintptr_t)qkv & 15) != 0)
        return false;
    static uint64_t done;
    const int tiles = (int)((t + TILE - 1) / TILE);
    const unsigned blocks = (unsigned)(b * nh * ((tiles + 1) / 2));
    allow_smem_once(flash2_forward_kernel<H, HS>, F::FWD_BYTES, &done);
    flash2_forward_kernel<H, HS><<<blocks, THREADS8, F::FWD_BYTES, ddpc__cuda_stream()>>>(
        out, saved, qkv, (int)t, (int)c, (int)nh, tiles, b * nh, 1.0f / sqrtf((float)HS));
    DDPC_CUDA_LAUNCHED();
    return true;
}

template <typename H, int HS>
static bool backward2_hs(float *dqkv, const float *dout, const float *qkv, const float *saved,
                         float *ws, int64_t b, int64_t t, int64_t c, int64_t nh)
{
    using F = flash2_dims<HS>;
    if (F::DKDV_BYTES > optin_smem())
        return false;
    static uint64_t done_dkdv, done_dq;
    const flash2_layout l = flash2_plan(b, t, c, nh);
    const int tiles = (int)l.tiles, tp = (int)l.tp;
    const float scale = 1.0f / sqrtf((float)HS);
    float *dd = ws;
    H *q16 = (H *)(ws + l.dd), *k16 = (H *)(ws + l.dd + l.r16);
    H *v16 = (H *)(ws + l.dd + 2 * l.r16), *do16 = (H *)(ws + l.dd + 3 * l.r16);
    H *ds = (H *)(ws + l.dd + 4 * l.r16);
    const int64_t rows = b * nh * l.tp;
    flash2_round_kernel<H, HS><<<ddpc__cuda_blocks(rows, W8), THREADS8, 0, ddpc__cuda_stream()>>>(
        q16, k16, v16, do16, dd, qkv, dout, saved + b * nh * t, (int)t, tp, (int)c, (int)nh, rows);
    DDPC_CUDA_LAUNCHED();
    allow_smem_once(flash2_dkdv_kernel<H, HS>, F::DKDV_BYTES, &done_dkdv);
    flash2_dkdv_kernel<H, HS>
        <<<(unsigned)(b * nh * ((tiles + 1) / 2)), THREADS8, F::DKDV_BYTES, ddpc__cuda_stream()>>>(
            dqkv, ds, q16, k16, v16, do16, saved, dd, (int)t, tp, (int)c, (int)nh, tiles, scale);
    DDPC_CUDA_LAUNCHED();
    allow_smem_once(flash2_dq_kernel<H, HS>, F::DQ_BYTES, &done_dq);
    flash2_dq_kernel<H, HS>
        <<<(unsigned)(b * nh * tiles), THREADS, F::DQ_BYTES, ddpc__cuda_stream()>>>(
            dqkv, ds, k16, (int)t, tp, (int)c, (int)nh, tiles);
    DDPC_CUDA_LAUNCHED();
    return true;
}

extern "C" bool ddpc__cuda_flash2_on(ddpc_precision prec, int64_t b, int64_t t, int64_t c,
                                     int64_t nh)
{
    return ddpc__cuda_candidate("flash2") && ddpc__cuda_flash_applies(prec, b, t, c, nh);
}

extern "C" size_t ddpc__cuda_flash2_workspace_floats(int64_t b, int64_t t, int64_t c, int64_t nh)
{
    return (size_t)flash2_plan(b, t, c, nh).total;
}

/* bf16 or fp16 and the head dim as template arguments; the result says whether it ran. */
#define FLASH2_DISPATCH(prec, hs, CALL)                                                            \
    ((prec) == DDPC_PREC_BF16 ? ((hs) == 32   ? CALL(__nv_bfloat16, 32)                            \
                                 : (hs) == 64 ? CALL(__nv_bfloat16, 64)                            \
                                              : CALL(__nv_bfloat16, 128))                          \
                              : ((hs) == 32   ? CALL(__half, 32)                                   \
                                 : (hs) == 64 ? CALL(__half, 64)                                   \
                                              : CALL(__half, 128)))

extern "C" bool ddpc__cuda_flash2_forward(ddpc_precision prec, float *out, float *saved,
                                          const float *qkv, int64_t b, int64_t t, int64_t c,
                                          int64_t nh)
{
    if (!ddpc__cuda_flash2_on(prec, b, t, c, nh))
        return false;
#define FWD(H, HS) forward2_hs<H, HS>(out, saved, qkv, b, t, c, nh)
    return FLASH2_DISPATCH(prec, c / nh, FWD);
#undef FWD
}

extern "C" bool ddpc__cuda_flash2_backward(ddpc_precision prec, float *dqkv, const float *dout,
                                           const float *qkv, const float *saved, int64_t b,
                                           int64_t t, int64_t c, int64_t nh, float *ws)
{
    if (!ddpc__cuda_flash2_on(prec, b, t, c, nh))
        return false;
#define BWD(H, HS) backward2_hs<H, HS>(dqkv, dout, qkv, saved, ws, b, t, c, nh)
    return FLASH2_DISPATCH(prec, c / nh, BWD);
#undef BWD
}
#endif
