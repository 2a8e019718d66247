// SPDX-License-Identifier: MIT
/* LayerNorm over the last dimension (Ba et al. 2016) on the GPU, with kernels/cpu/layernorm.c's
 * formulas: eps 1e-5, biased two-pass variance, rstd = 1 / sqrt(var + eps); w or b may be NULL
 * (ones / zeros). One warp per row for the row kernels; dw and db are fixed-order column sums
 * (reduce.cuh), so reruns give the same bits.
 * Invariant: backward uses forward's saved mean and rstd (rows), never recomputed statistics. */
#ifndef DDPC_CUDA_EMULATE /* tests/test_layernorm_emu.cpp runs the kernels on the host */
#include "kernels/cuda/cuda_impl.h"
#endif
#include "kernels/cuda/reduce.cuh"

#define LN_EPS 1e-5f
#define THREADS 256
#define ROWS_PER_BLOCK (THREADS / 32)

/* Warp `w` of the grid walks rows w, w + warps, ...; lanes stride the row's columns. */
#define FOR_ROW_OF_WARP(i, rows)                                                                   \
    for (int64_t i = (int64_t)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32; i < (rows);          \
         i += (int64_t)gridDim.x * ROWS_PER_BLOCK)

static __global__ void forward_kernel(float *y, float *mean, float *rstd, const float *x,
                                      const float *w, const float *b, int64_t rows, int64_t c)
{
    int lane = threadIdx.x % 32;
    FOR_ROW_OF_WARP(i, rows)
    {
        const float *xi = x + i * c;
        float *yi = y + i * c;
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
            yi[j] = (xi[j] - m) * r * (w ? w[j] : 1.0f) + (b ? b[j] : 0.0f);
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

/* Pass 1 of dw, db: pw, pb (chunks, c) = per-chunk sums over rows of dy * xhat and dy. */
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

/* Pass 2: dw, db (c) += the chunks' partials, added in chunk order. */
static __global__ void params_final_kernel(float *dw, float *db, const float *pw, const float *pb,
                                           int64_t chunks, int64_t c)
{
    int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= c)
        return;
    float aw = 0.0f, ab = 0.0f;
    for (int64_t ch = 0; ch < chunks; ch++) {
        aw += pw[ch * c + j];
        ab += pb[ch * c + j];
    }
    if (dw)
        dw[j] += aw;
    if (db)
        db[j] += ab;
}

#ifndef DDPC_CUDA_EMULATE /* the host side: launches */
extern "C" void ddpc__cuda_layernorm_forward(float *y, float *mean, float *rstd, const float *x,
                                             const float *w, const float *b, int64_t rows,
                                             int64_t c)
{
    if (rows <= 0 || c <= 0)
        return;
    forward_kernel<<<ddpc__cuda_blocks(rows, ROWS_PER_BLOCK), THREADS, 0, ddpc__cuda_stream()>>>(
        y, mean, rstd, x, w, b, rows, c);
    DDPC_CUDA_LAUNCHED();
}

extern "C" void ddpc__cuda_layernorm_backward(float *dx, float *dw, float *db, const float *dy,
                                              const float *x, const float *w, const float *mean,
                                              const float *rstd, int64_t rows, int64_t c)
{
    if (rows <= 0 || c <= 0)
        return;
    if (dw || db) {
        int64_t chunks, per;
        ddpc__row_chunks(rows, &chunks, &per);
        float *pw = (float *)ddpc__cuda_scratch(DDPC__CUDA_SCRATCH_REDUCE,
                                                2 * (size_t)(chunks * c) * sizeof(float));
        float *pb = pw + chunks * c;
        unsigned col_blocks = (unsigned)((c + THREADS - 1) / THREADS);
        params_partial_kernel<<<dim3(col_blocks, (unsigned)chunks), THREADS, 0,
                                ddpc__cuda_stream()>>>(pw, pb, dy, x, mean, rstd, rows, c, per);
        DDPC_CUDA_LAUNCHED();
        params_final_kernel<<<col_blocks, THREADS, 0, ddpc__cuda_stream()>>>(dw, db, pw, pb, chunks,
                                                                             c);
        DDPC_CUDA_LAUNCHED();
    }
    if (dx) {
        dx_kernel<<<ddpc__cuda_blocks(rows, ROWS_PER_BLOCK), THREADS, 0, ddpc__cuda_stream()>>>(
            dx, dy, x, w, mean, rstd, rows, c);
        DDPC_CUDA_LAUNCHED();
    }
}
#endif
