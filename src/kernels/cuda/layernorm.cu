// SPDX-License-Identifier: MIT
/* LayerNorm over the last dimension (Ba et al. 2016) on the GPU, with kernels/cpu/layernorm.c's
 * formulas: eps 1e-5, biased two-pass variance, rstd = 1 / sqrt(var + eps); w or b may be NULL
 * (ones / zeros). One warp per row. Rows of up to 1024 floats whose pointers are 16-byte aligned
 * take the fast kernels (each lane holds its float4s of the row in registers: one pass over
 * memory, and backward folds dw, db into the same pass); other rows take the scalar kernels.
 * Invariants: backward uses forward's saved mean and rstd (rows), never recomputed statistics;
 * dw and db are fixed-order sums (reduce.cuh's row chunks), so reruns give the same bits. The
 * forward kernels also write y in 16 bits (act16.cu's): the fp32 y's arithmetic, each
 * value then rounded to nearest even, so y16 = round(y) bit for bit. */
#ifndef DDPC_CUDA_EMULATE /* tests/test_layernorm_emu.cpp runs the kernels on the host */
#include "kernels/cuda/cuda_impl.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif
#include "kernels/cuda/reduce.cuh"

#define LN_EPS 1e-5f
#define THREADS 256
#define ROWS_PER_BLOCK (THREADS / 32)
#define VEC_MAX 8       /* float4s per lane on the fast path: rows of up to 32 * 4 * 8 floats */
#define BWD_THREADS 128 /* the fast backward's block: one row chunk, its rows dealt to 4 warps */
#define BWD_WARPS (BWD_THREADS / 32)
#define SUM_GROUPS 16 /* warps of params_sum_kernel, each adding every 16th chunk */

#ifdef DDPC_CUDA_EMULATE
#define UNROLL
#else
#define UNROLL _Pragma("unroll")
#endif

/* Warp `w` of the grid walks rows w, w + warps, ...; lanes stride the row's columns. */
#define FOR_ROW_OF_WARP(i, rows)                                                                   \
    for (int64_t i = (int64_t)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32; i < (rows);          \
         i += (int64_t)gridDim.x * ROWS_PER_BLOCK)

/* y's element j = v in y's type: fp32 as computed, 16 bits rounded to nearest even. */
static __device__ void put(float *y, int64_t j, float v)
{
    y[j] = v;
}
static __device__ void put(__nv_bfloat16 *y, int64_t j, float v)
{
    y[j] = __float2bfloat16_rn(v);
}
static __device__ void put(__half *y, int64_t j, float v)
{
    y[j] = __float2half_rn(v);
}
/* Two 16-bit values rounded from a and b, a in the low half (the lower address, little-endian). */
static __device__ unsigned pack2(__nv_bfloat16 *, float a, float b)
{
    return (unsigned)__bfloat16_as_ushort(__float2bfloat16_rn(a)) |
           (unsigned)__bfloat16_as_ushort(__float2bfloat16_rn(b)) << 16;
}
static __device__ unsigned pack2(__half *, float a, float b)
{
    return (unsigned)__half_as_ushort(__float2half_rn(a)) |
           (unsigned)__half_as_ushort(__float2half_rn(b)) << 16;
}
/* y's elements 4q .. 4q + 3 = v in one store: 16 bytes at fp32, 8 (y 8-byte aligned) at 16 bits. */
static __device__ void put4(float *y, int64_t q, float4 v)
{
    reinterpret_cast<float4 *>(y)[q] = v;
}
template <typename Y> static __device__ void put4(Y *y, int64_t q, float4 v)
{
    reinterpret_cast<uint2 *>(y)[q] = make_uint2(pack2(y, v.x, v.y), pack2(y, v.z, v.w));
}

template <typename Y>
static __global__ void forward_kernel(Y *y, float *mean, float *rstd, const float *x,
                                      const float *w, const float *b, int64_t rows, int64_t c)
{
    int lane = threadIdx.x % 32;
    FOR_ROW_OF_WARP(i, rows)
    {
        const float *xi = x + i * c;
        Y *yi = y + i * c;
        float s = 0.0f;
        for (int64_t j = lane; j < c; j += 32)
            s += xi[j];
        float m = ddpc__warp_sum(s) / (float)c;
        float v = 0.0f; /* two-pass variance: no cancellation for rows with a large mean */
        for (int64_t j = lane; j < c; j += 32) {
            float d = xi[j] - m;
            v += d * d;
        }
        float r = 1.0f / sqrtf(ddpc__warp_sum(v) / (float)c + LN_EPS);
        for (int64_t j = lane; j < c; j += 32)
            put(yi, j, (xi[j] - m) * r * (w ? w[j] : 1.0f) + (b ? b[j] : 0.0f));
        if (lane == 0 && mean)
            mean[i] = m;
        if (lane == 0 && rstd)
            rstd[i] = r;
    }
}

/* forward_kernel for c % 4 == 0, c <= 128 * V, 16-byte aligned x, y, w, b: lane l holds the row's
 * float4s l, l + 32, ..., l + 32 * (V - 1) (those below c / 4) in registers, so x is read once. */
template <int V, typename Y>
static __global__ void __launch_bounds__(THREADS)
    forward_vec_kernel(Y *y, float *mean, float *rstd, const float *x, const float *w,
                       const float *b, int64_t rows, int64_t c)
{
    const int lane = threadIdx.x % 32;
    const int64_t c4 = c / 4;
    FOR_ROW_OF_WARP(i, rows)
    {
        const float4 *xi = (const float4 *)(x + i * c);
        float v[4 * V];
        float s = 0.0f;
        UNROLL
        for (int k = 0; k < V; k++) {
            const int64_t j = lane + 32 * k;
            const float4 t = j < c4 ? xi[j] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            v[4 * k] = t.x, v[4 * k + 1] = t.y, v[4 * k + 2] = t.z, v[4 * k + 3] = t.w;
            s += t.x + t.y + t.z + t.w;
        }
        const float m = ddpc__warp_sum(s) / (float)c;
        float q = 0.0f; /* two-pass variance, from the registers */
        UNROLL
        for (int k = 0; k < V; k++) {
            if (lane + 32 * k >= c4)
                continue;
            UNROLL
            for (int e = 0; e < 4; e++) {
                const float d = v[4 * k + e] - m;
                q += d * d;
            }
        }
        const float r = 1.0f / sqrtf(ddpc__warp_sum(q) / (float)c + LN_EPS);
        Y *yi = y + i * c;
        UNROLL
        for (int k = 0; k < V; k++) {
            const int64_t j = lane + 32 * k;
            if (j >= c4)
                continue;
            const float4 wt = w ? ((const float4 *)w)[j] : make_float4(1.0f, 1.0f, 1.0f, 1.0f);
            const float4 bt = b ? ((const float4 *)b)[j] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            put4(yi, j,
                 make_float4((v[4 * k] - m) * r * wt.x + bt.x, (v[4 * k + 1] - m) * r * wt.y + bt.y,
                             (v[4 * k + 2] - m) * r * wt.z + bt.z,
                             (v[4 * k + 3] - m) * r * wt.w + bt.w));
        }
        if (lane == 0 && mean)
            mean[i] = m;
        if (lane == 0 && rstd)
            rstd[i] = r;
    }
}

/* dx += rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * w, as the CPU; dx must not
 * alias dy or x. */
static __global__ void dx_kernel(float *dx, const float *dy, const float *x, const float *w,
                                 const float *mean, const float *rstd, int64_t rows, int64_t c)
{
    int lane = threadIdx.x % 32;
    FOR_ROW_OF_WARP(i, rows)
    {
        const float *xi = x + i * c, *gi = dy + i * c;
        float *dxi = dx + i * c;
        float m = mean[i], r = rstd[i];
        float sg = 0.0f, sgx = 0.0f;
        for (int64_t j = lane; j < c; j += 32) {
            float g = gi[j] * (w ? w[j] : 1.0f);
            sg += g;
            sgx += g * (xi[j] - m) * r;
        }
        sg = ddpc__warp_sum(sg) / (float)c;
        sgx = ddpc__warp_sum(sgx) / (float)c;
        for (int64_t j = lane; j < c; j += 32) {
            float g = gi[j] * (w ? w[j] : 1.0f);
            dxi[j] += r * (g - sg - (xi[j] - m) * r * sgx);
        }
    }
}

/* Pass 1 of dw, db for the scalar path: pw, pb (chunks, c) = per-chunk sums over rows of dy * xhat
 * and dy. */
static __global__ void params_partial_kernel(float *pw, float *pb, const float *dy, const float *x,
                                             const float *mean, const float *rstd, int64_t rows,
                                             int64_t c, int64_t per)
{
    int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int64_t chunk = blockIdx.y;
    if (j >= c)
        return;
    int64_t i0 = chunk * per, i1 = i0 + per < rows ? i0 + per : rows;
    float aw = 0.0f, ab = 0.0f;
    for (int64_t i = i0; i < i1; i++) {
        float g = dy[i * c + j];
        aw += g * (x[i * c + j] - mean[i]) * rstd[i];
        ab += g;
    }
    pw[chunk * c + j] = aw;
    pb[chunk * c + j] = ab;
}

/* The fast backward (the shapes and alignment of forward_vec_kernel, dx and dy aligned too): block
 * `ch` takes row chunk ch (rows ch * per .. + per), its warp w the rows w, w + 4, ... of it. One
 * read of dy and x per row gives dx (when asked for) and, with pw non-NULL, adds dy * xhat and dy
 * into the warp's own sums in shared memory (registers would halve the warps an SM holds); the
 * block then adds its 4 warps' sums, in warp order, into pw, pb (chunks, c). */
template <int V>
static __global__ void __launch_bounds__(BWD_THREADS)
    backward_vec_kernel(float *dx, float *pw, float *pb, const float *dy, const float *x,
                        const float *w, const float *mean, const float *rstd, int64_t rows,
                        int64_t c, int64_t per)
{
    __shared__ float4 acc[BWD_WARPS][2][32 * V]; /* [warp][dw, db][float4 column], lane-owned */
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int64_t c4 = c / 4, i0 = (int64_t)blockIdx.x * per;
    const int64_t i1 = i0 + per < rows ? i0 + per : rows;
    const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (pw)
        for (int k = 0; k < V; k++)
            acc[warp][0][32 * k + lane] = acc[warp][1][32 * k + lane] = zero;
    for (int64_t i = i0 + warp; i < i1; i += BWD_WARPS) {
        const float4 *xi = (const float4 *)(x + i * c), *gi = (const float4 *)(dy + i * c);
        const float m = mean[i], r = rstd[i];
        float d[4 * V], g[4 * V]; /* x - mean, dy * w; g is 0 past the row's end */
        float sg = 0.0f, sgx = 0.0f;
        UNROLL
        for (int k = 0; k < V; k++) {
            const int64_t j = lane + 32 * k;
            const float4 xt = j < c4 ? xi[j] : zero, gt = j < c4 ? gi[j] : zero;
            const float4 wt =
                w && j < c4 ? ((const float4 *)w)[j] : make_float4(1.0f, 1.0f, 1.0f, 1.0f);
            const float gv[4] = {gt.x, gt.y, gt.z, gt.w}, xv[4] = {xt.x, xt.y, xt.z, xt.w};
            const float wv[4] = {wt.x, wt.y, wt.z, wt.w};
            UNROLL
            for (int e = 0; e < 4; e++) {
                d[4 * k + e] = xv[e] - m;
                g[4 * k + e] = gv[e] * wv[e];
                sg += g[4 * k + e];
                sgx += g[4 * k + e] * d[4 * k + e] * r;
            }
            if (pw && j < c4) {
                float4 tw = acc[warp][0][32 * k + lane], tb = acc[warp][1][32 * k + lane];
                tw.x += gt.x * d[4 * k] * r, tw.y += gt.y * d[4 * k + 1] * r;
                tw.z += gt.z * d[4 * k + 2] * r, tw.w += gt.w * d[4 * k + 3] * r;
                tb.x += gt.x, tb.y += gt.y, tb.z += gt.z, tb.w += gt.w;
                acc[warp][0][32 * k + lane] = tw;
                acc[warp][1][32 * k + lane] = tb;
            }
        }
        if (!dx)
            continue;
        sg = ddpc__warp_sum(sg) / (float)c;
        sgx = ddpc__warp_sum(sgx) / (float)c;
        float4 *dxi = (float4 *)(dx + i * c);
        UNROLL
        for (int k = 0; k < V; k++) {
            const int64_t j = lane + 32 * k;
            if (j >= c4)
                continue;
            float4 o = dxi[j];
            o.x += r * (g[4 * k] - sg - d[4 * k] * r * sgx);
            o.y += r * (g[4 * k + 1] - sg - d[4 * k + 1] * r * sgx);
            o.z += r * (g[4 * k + 2] - sg - d[4 * k + 2] * r * sgx);
            o.w += r * (g[4 * k + 3] - sg - d[4 * k + 3] * r * sgx);
            dxi[j] = o;
        }
    }
    if (!pw) /* the same for the whole block: no thread waits at the barrier below */
        return;
    __syncthreads();
    float4 *pwi = (float4 *)(pw + (int64_t)blockIdx.x * c),
           *pbi = (float4 *)(pb + (int64_t)blockIdx.x * c);
    for (int64_t j = threadIdx.x; j < c4; j += BWD_THREADS) {
        float4 tw = acc[0][0][j], tb = acc[0][1][j];
        for (int v = 1; v < BWD_WARPS; v++) {
            const float4 uw = acc[v][0][j], ub = acc[v][1][j];
            tw.x += uw.x, tw.y += uw.y, tw.z += uw.z, tw.w += uw.w;
            tb.x += ub.x, tb.y += ub.y, tb.z += ub.z, tb.w += ub.w;
        }
        pwi[j] = tw;
        pbi[j] = tb;
    }
}

/* Pass 2 of dw, db (either path): dw, db (c) += the chunks' partials pw, pb (chunks, c). Block b
 * takes columns 32b .. 32b + 31; warp g of it adds chunks g, g + 16, ... in order, then warp 0 adds
 * the 16 warps' sums in order. */
static __global__ void __launch_bounds__(32 * SUM_GROUPS)
    params_sum_kernel(float *dw, float *db, const float *pw, const float *pb, int64_t chunks,
                      int64_t c)
{
    __shared__ float sw[SUM_GROUPS][32], sb[SUM_GROUPS][32];
    const int lane = threadIdx.x % 32, grp = threadIdx.x / 32;
    const int64_t j = (int64_t)blockIdx.x * 32 + lane;
    float aw = 0.0f, ab = 0.0f;
    if (j < c)
        for (int64_t ch = grp; ch < chunks; ch += SUM_GROUPS) {
            aw += pw[ch * c + j];
            ab += pb[ch * c + j];
        }
    sw[grp][lane] = aw;
    sb[grp][lane] = ab;
    __syncthreads();
    if (grp != 0 || j >= c)
        return;
    aw = sw[0][lane];
    ab = sb[0][lane];
    for (int k = 1; k < SUM_GROUPS; k++) {
        aw += sw[k][lane];
        ab += sb[k][lane];
    }
    if (dw)
        dw[j] += aw;
    if (db)
        db[j] += ab;
}

/* The host side's choices, shared with tests/test_layernorm_emu.cpp. */

/* float4s per lane for rows of c floats at these pointers (NULL ones ignored): the fast kernels'
 * V, or 0 for the scalar kernels (c not a multiple of 4, over 128 * VEC_MAX, or a pointer not
 * 16-byte aligned). It depends on the call alone, so a rerun takes the same path. */
static int ln_vec(int64_t c, const void *p0, const void *p1, const void *p2, const void *p3)
{
    const void *p[4] = {p0, p1, p2, p3};
    if (c % 4 != 0 || c > 128 * VEC_MAX)
        return 0;
    for (int k = 0; k < 4; k++)
        if ((uintptr_t)p[k] % 16 != 0)
            return 0;
    return (int)((c + 127) / 128);
}

template <typename Y>
using ln_forward_fn = void (*)(Y *, float *, float *, const float *, const float *, const float *,
                               int64_t, int64_t);
typedef void (*ln_backward_fn)(float *, float *, float *, const float *, const float *,
                               const float *, const float *, const float *, int64_t, int64_t,
                               int64_t);
/* Forward's kernel writing y as Y, for ln_vec's V (0: the scalar kernel). */
template <typename Y> static ln_forward_fn<Y> ln_forward_kernel(int vec)
{
    switch (vec) {
    case 1:
        return forward_vec_kernel<1, Y>;
    case 2:
        return forward_vec_kernel<2, Y>;
    case 3:
        return forward_vec_kernel<3, Y>;
    case 4:
        return forward_vec_kernel<4, Y>;
    case 5:
        return forward_vec_kernel<5, Y>;
    case 6:
        return forward_vec_kernel<6, Y>;
    case 7:
        return forward_vec_kernel<7, Y>;
    case 8:
        return forward_vec_kernel<8, Y>;
    default:
        return forward_kernel<Y>;
    }
}
/* Indexed by ln_vec's V. */
static const ln_backward_fn ln_backward_vec[VEC_MAX + 1] = {
    NULL,
    backward_vec_kernel<1>,
    backward_vec_kernel<2>,
    backward_vec_kernel<3>,
    backward_vec_kernel<4>,
    backward_vec_kernel<5>,
    backward_vec_kernel<6>,
    backward_vec_kernel<7>,
    backward_vec_kernel<8>,
};

#ifndef DDPC_CUDA_EMULATE /* the host side: launches */
template <typename Y>
static void forward_as(Y *y, float *mean, float *rstd, const float *x, const float *w,
                       const float *b, int64_t rows, int64_t c)
{
    const unsigned blocks = ddpc__cuda_blocks(rows, ROWS_PER_BLOCK);
    ln_forward_kernel<Y>(ln_vec(c, y, x, w, b))<<<blocks, THREADS, 0, ddpc__cuda_stream()>>>(
        y, mean, rstd, x, w, b, rows, c);
    DDPC_CUDA_LAUNCHED();
}

extern "C" void ddpc__cuda_layernorm_forward(float *y, float *mean, float *rstd, const float *x,
                                             const float *w, const float *b, int64_t rows,
                                             int64_t c)
{
    if (rows <= 0 || c <= 0)
        return;
    forward_as(y, mean, rstd, x, w, b, rows, c);
}

extern "C" void ddpc__cuda_layernorm_forward_16(ddpc_precision prec, void *y, float *mean,
                                                float *rstd, const float *x, const float *w,
                                                const float *b, int64_t rows, int64_t c)
{
    if (rows <= 0 || c <= 0)
        return;
    if (prec == DDPC_PREC_BF16)
        forward_as((__nv_bfloat16 *)y, mean, rstd, x, w, b, rows, c);
    else
        forward_as((__half *)y, mean, rstd, x, w, b, rows, c);
}

extern "C" void ddpc__cuda_layernorm_backward(float *dx, float *dw, float *db, const float *dy,
                                              const float *x, const float *w, const float *mean,
                                              const float *rstd, int64_t rows, int64_t c)
{
    if (rows <= 0 || c <= 0 || (!dx && !dw && !db))
        return;
    int64_t chunks, per;
    ddpc__row_chunks(rows, &chunks, &per);
    float *pw = NULL, *pb = NULL;
    if (dw || db) {
        pw = (float *)ddpc__cuda_scratch(DDPC__CUDA_SCRATCH_REDUCE,
                                         2 * (size_t)(chunks * c) * sizeof(float));
        pb = pw + chunks * c;
    }
    const int vec = ln_vec(c, dx, dy, x, w);
    if (vec) {
        ln_backward_vec[vec]<<<(unsigned)chunks, BWD_THREADS, 0, ddpc__cuda_stream()>>>(
            dx, pw, pb, dy, x, w, mean, rstd, rows, c, per);
        DDPC_CUDA_LAUNCHED();
    } else {
        if (pw) {
            unsigned col_blocks = (unsigned)((c + THREADS - 1) / THREADS);
            params_partial_kernel<<<dim3(col_blocks, (unsigned)chunks), THREADS, 0,
                                    ddpc__cuda_stream()>>>(pw, pb, dy, x, mean, rstd, rows, c, per);
            DDPC_CUDA_LAUNCHED();
        }
        if (dx) {
            dx_kernel<<<ddpc__cuda_blocks(rows, ROWS_PER_BLOCK), THREADS, 0, ddpc__cuda_stream()>>>(
                dx, dy, x, w, mean, rstd, rows, c);
            DDPC_CUDA_LAUNCHED();
        }
    }
    if (pw) {
        params_sum_kernel<<<(unsigned)((c + 31) / 32), 32 * SUM_GROUPS, 0, ddpc__cuda_stream()>>>(
            dw, db, pw, pb, chunks, c);
        DDPC_CUDA_LAUNCHED();
    }
}
#endif
