// SPDX-License-Identifier: MIT
/* Conv2d (NCHW, cross-correlation as in PyTorch) on the device, with the contract of
 * src/kernels/cpu/conv2d.c: im2col over a chunk of nb samples into col (c*r*s, nb*oh*ow), one
 * ddpc__cuda_gemm per chunk, and a permutation between the GEMM's (k, nb, oh*ow) layout and y's
 * (nb, k, oh*ow). Backward accumulates into dx, dw and db without atomics: col2im is a gather in
 * which each input element adds its taps in the CPU's (ri, si) order, and db is a fixed tree.
 * Workspace: col (c*r*s, nb*oh*ow) then t (k, nb*oh*ow), nb = min(n, what fits kChunkFloats), so
 * `ws` sized for a shape serves any call with the same shape and at most as many samples. */
#ifndef DDPC_CUDA_EMULATE /* tests/test_conv_emu.cpp runs the kernels on the host */
#include "kernels/cuda/cuda_impl.h"
#endif

static const int kThreads = 256;
static const int kReduceThreads = 256; /* a power of two: the tree halves it */
/* Workspace floats a chunk may use (64 MiB), unless a single sample needs more. */
static const int64_t kChunkFloats = 1ll << 24;

/* The geometry every kernel below needs, by value. */
typedef struct {
    int64_t c, h, w, k, r, s, stride, pad, oh, ow, crs, ohw;
} geom;

static geom geom_of(const ddpc_conv2d_shape *s)
{
    geom g;
    g.c = s->c;
    g.h = s->h;
    g.w = s->w;
    g.k = s->k;
    g.r = s->r;
    g.s = s->s;
    g.stride = s->stride;
    g.pad = s->pad;
    g.oh = ddpc_conv2d_out_h(s);
    g.ow = ddpc_conv2d_out_w(s);
    g.crs = s->c * s->r * s->s;
    g.ohw = g.oh * g.ow;
    return g;
}

/* col (crs, nb*ohw): row (ci, ri, si), column (i, oy, ox) holds x[i0 + i, ci, iy, ix] with
 * iy = oy*stride - pad + ri, ix = ox*stride - pad + si, or 0 in the padding. */
static __global__ void im2col_kernel(float *col, const float *x, geom g, int64_t i0, int64_t nb)
{
    const int64_t cols = nb * g.ohw, total = g.crs * cols;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t row = e / cols, cj = e % cols;
        const int64_t i = cj / g.ohw, j = cj % g.ohw, oy = j / g.ow, ox = j % g.ow;
        const int64_t ci = row / (g.r * g.s), ri = (row / g.s) % g.r, si = row % g.s;
        const int64_t iy = oy * g.stride - g.pad + ri, ix = ox * g.stride - g.pad + si;
        float v = 0.0f;
        if (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w)
            v = x[(((i0 + i) * g.c + ci) * g.h + iy) * g.w + ix];
        col[e] = v;
    }
}

/* y[i0 + i, kk, j] = t[kk, i, j] (+ b[kk]): the GEMM's (k, nb, ohw) back to NCHW. */
static __global__ void to_nchw_kernel(float *y, const float *t, const float *b, geom g, int64_t i0,
                                      int64_t nb)
{
    const int64_t total = nb * g.k * g.ohw;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t i = e / (g.k * g.ohw), kk = (e / g.ohw) % g.k, j = e % g.ohw;
        const float v = t[(kk * nb + i) * g.ohw + j];
        y[i0 * g.k * g.ohw + e] = b ? __fadd_rn(v, b[kk]) : v;
    }
}

/* t[kk, i, j] = dy[i0 + i, kk, j]: NCHW into the GEMM's (k, nb, ohw). */
static __global__ void from_nchw_kernel(float *t, const float *dy, geom g, int64_t i0, int64_t nb)
{
    const int64_t total = nb * g.k * g.ohw;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t i = e / (g.k * g.ohw), kk = (e / g.ohw) % g.k, j = e % g.ohw;
        t[(kk * nb + i) * g.ohw + j] = dy[i0 * g.k * g.ohw + e];
    }
}

/* dx[i0 + i, ci, iy, ix] += the col entries of every tap (ri, si) that read it, in ascending
 * (ri, si) as src/kernels/cpu/im2col.c's col2im adds them; each tap reads at most one (oy, ox). */
static __global__ void col2im_kernel(float *dx, const float *col, geom g, int64_t i0, int64_t nb)
{
    const int64_t cols = nb * g.ohw, chw = g.c * g.h * g.w, total = nb * chw;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t i = e / chw, ci = (e / (g.h * g.w)) % g.c;
        const int64_t iy = (e / g.w) % g.h, ix = e % g.w;
        float *d = dx + i0 * chw + e;
        float acc = *d;
        for (int64_t ri = 0; ri < g.r; ri++) {
            const int64_t ty = iy + g.pad - ri; /* = oy * stride */
            if (ty < 0 || ty % g.stride != 0 || ty / g.stride >= g.oh)
                continue;
            const int64_t oy = ty / g.stride;
            for (int64_t si = 0; si < g.s; si++) {
                const int64_t tx = ix + g.pad - si;
                if (tx < 0 || tx % g.stride != 0 || tx / g.stride >= g.ow)
                    continue;
                const int64_t row = (ci * g.r + ri) * g.s + si;
                acc = __fadd_rn(acc, col[row * cols + i * g.ohw + oy * g.ow + tx / g.stride]);
            }
        }
        *d = acc;
    }
}

/* db[kk] += sum over samples and positions of dy (n, k, ohw): block kk, a fixed tree in double. */
static __global__ void bias_backward_kernel(float *db, const float *dy, int64_t n, int64_t k,
                                            int64_t ohw)
{
    __shared__ double part[kReduceThreads];
    const int64_t kk = blockIdx.x;
    const int t = threadIdx.x;
    double acc = 0.0;
    for (int64_t e = t; e < n * ohw; e += kReduceThreads)
        acc += dy[((e / ohw) * k + kk) * ohw + e % ohw];
    part[t] = acc;
    __syncthreads();
    for (int h = kReduceThreads / 2; h > 0; h >>= 1) {
        if (t < h)
            part[t] += part[t + h];
        __syncthreads();
    }
    if (t == 0)
        db[kk] = __fadd_rn(db[kk], (float)part[0]);
}

#ifndef DDPC_CUDA_EMULATE /* the host side: launches */
/* Samples per chunk: as many as fit kChunkFloats of workspace, at least 1, at most n. */
static int64_t chunk_samples(const geom *g, int64_t n)
{
    const int64_t per = (g->crs + g->k) * g->ohw;
    int64_t nb = per > 0 ? kChunkFloats / per : n;
    if (nb > n)
        nb = n;
    return nb < 1 ? 1 : nb;
}

extern "C" size_t ddpc__cuda_conv2d_workspace_floats(const ddpc_conv2d_shape *s)
{
    const geom g = geom_of(s);
    return (size_t)((g.crs + g.k) * chunk_samples(&g, s->n) * g.ohw);
}

extern "C" void ddpc__cuda_conv2d_forward(ddpc_precision prec, float *y, const float *x,
                                          const float *w, const float *b,
                                          const ddpc_conv2d_shape *s, float *ws)
{
    const geom g = geom_of(s);
    if (s->n <= 0 || g.k <= 0 || g.ohw <= 0)
        return;
    cudaStream_t st = ddpc__cuda_stream();
    const int64_t nb_max = chunk_samples(&g, s->n);
    for (int64_t i0 = 0; i0 < s->n; i0 += nb_max) {
        const int64_t nb = s->n - i0 < nb_max ? s->n - i0 : nb_max, cols = nb * g.ohw;
        float *col = ws, *t = ws + g.crs * cols;
        im2col_kernel<<<ddpc__cuda_blocks(g.crs * cols, kThreads), kThreads, 0, st>>>(col, x, g,
                                                                                     i0, nb);
        DDPC_CUDA_LAUNCHED();
        /* t (k, nb*ohw) = w (k, crs) @ col (crs, nb*ohw) */
        ddpc__cuda_gemm(prec, DDPC_NO_TRANS, DDPC_NO_TRANS, g.k, cols, g.crs, 1.0f, w, g.crs, col,
                        cols, 0.0f, t, cols);
        to_nchw_kernel<<<ddpc__cuda_blocks(g.k * cols, kThreads), kThreads, 0, st>>>(y, t, b, g,
                                                                                    i0, nb);
        DDPC_CUDA_LAUNCHED();
    }
}

extern "C" void ddpc__cuda_conv2d_backward(ddpc_precision prec, float *dx, float *dw, float *db,
                                           const float *dy, const float *x, const float *w,
                                           const ddpc_conv2d_shape *s, float *ws)
{
    const geom g = geom_of(s);
    if (s->n <= 0 || g.k <= 0 || g.ohw <= 0)
        return;
    cudaStream_t st = ddpc__cuda_stream();
    if (db) {
        bias_backward_kernel<<<(unsigned)g.k, kReduceThreads, 0, st>>>(db, dy, s->n, g.k, g.ohw);
        DDPC_CUDA_LAUNCHED();
    }
    if (!dx && !dw)
        return;
    const int64_t nb_max = chunk_samples(&g, s->n);
    for (int64_t i0 = 0; i0 < s->n; i0 += nb_max) {
        const int64_t nb = s->n - i0 < nb_max ? s->n - i0 : nb_max, cols = nb * g.ohw;
        float *col = ws, *t = ws + g.crs * cols;
        from_nchw_kernel<<<ddpc__cuda_blocks(g.k * cols, kThreads), kThreads, 0, st>>>(t, dy, g,
                                                                                      i0, nb);
        DDPC_CUDA_LAUNCHED();
        if (dw) {
            im2col_kernel<<<ddpc__cuda_blocks(g.crs * cols, kThreads), kThreads, 0, st>>>(
                col, x, g, i0, nb);
            DDPC_CUDA_LAUNCHED();
            /* dw (k, crs) += t (k, nb*ohw) @ col^T (nb*ohw, crs) */
            ddpc__cuda_gemm(prec, DDPC_NO_TRANS, DDPC_TRANS, g.k, g.crs, cols, 1.0f, t, cols, col,
                            cols, 1.0f, dw, g.crs);
        }
        if (dx) {
            /* col (crs, nb*ohw) = w^T (crs, k) @ t (k, nb*ohw), then gathered into dx */
            ddpc__cuda_gemm(prec, DDPC_TRANS, DDPC_NO_TRANS, g.crs, cols, g.k, 1.0f, w, g.crs, t,
                            cols, 0.0f, col, cols);
            col2im_kernel<<<ddpc__cuda_blocks(nb * g.c * g.h * g.w, kThreads), kThreads, 0, st>>>(
                dx, col, g, i0, nb);
            DDPC_CUDA_LAUNCHED();
        }
    }
}
#endif
