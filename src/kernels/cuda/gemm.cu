// SPDX-License-Identifier: MIT
/* Matrix products on cuBLAS with ddpc_gemm's row-major contract, and the linear layer on them.
 * A row-major (r, c) matrix with leading dimension ld is the column-major (c, r) one, so row-major
 * C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: B goes first, with the same transpose
 * flags, and m and n swap. fp32 runs CUBLAS_COMPUTE_32F (no TF32). bf16 / fp16 round both fp32
 * operands to nearest even into scratch (the rounding kernels.h and the CPU path specify; the
 * _FAST_16BF compute types do not document their rounding) and run cublasGemmEx on the 16-bit
 * copies with fp32 accumulation and fp32 C: autocast's numerics.
 * Invariant: the only device memory touched besides the operands is the BLAS scratch slot (grown
 * once per largest shape) and cuBLAS's preset workspace, so warm calls allocate nothing. */
#include "kernels/cuda/cuda_impl.h"
#include "kernels/cuda/reduce.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#define THREADS 256

/* dst (rows, cols; leading dimension ldd) = src (rows, cols; leading dimension lds) rounded to
 * nearest even. */
template <typename T> static __device__ T round_to(float v);
template <> __device__ __nv_bfloat16 round_to<__nv_bfloat16>(float v)
{
    return __float2bfloat16_rn(v);
}
template <> __device__ __half round_to<__half>(float v)
{
    return __float2half_rn(v);
}

/* Rows by blockIdx.y (strided), columns by x: no division per element. dst is (prows, pcols):
 * src inside (rows, cols), zeros in the padding, so padded products add nothing. */
template <typename T>
static __global__ void round_kernel(T *dst, const float *src, int64_t rows, int64_t cols,
                                    int64_t prows, int64_t pcols, int64_t lds)
{
    for (int64_t r = blockIdx.y; r < prows; r += gridDim.y) {
        const float *s = src + r * lds;
        T *d = dst + r * pcols;
        for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < pcols;
             c += (int64_t)gridDim.x * blockDim.x)
            d[c] = round_to<T>(r < rows && c < cols ? s[c] : 0.0f);
    }
}

/* c (m, n; ldc) *= beta, with beta = 0 writing zeros (BLAS never reads c then): the k = 0 case,
 * which the CPU path also handles itself. */
static __global__ void scale_kernel(float *c, int64_t m, int64_t n, int64_t ldc, float beta)
{
    int64_t total = m * n;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i / n, col = i - r * n;
        float *p = c + r * ldc + col;
        *p = beta == 0.0f ? 0.0f : *p * beta;
    }
}

/* cuBLAS takes int sizes; a product past 2^31 rows or columns is a caller's bug (no model here
 * comes near), so it ends the process saying which size. */
static int int_size(int64_t v, const char *what)
{
    if (v < 0 || v > INT_MAX) {
        fprintf(stderr, "ddpc: CUDA gemm: %s = %lld does not fit cuBLAS's int\n", what,
                (long long)v);
        abort();
    }
    return (int)v;
}

static cublasOperation_t op_of(ddpc_transpose t)
{
    return t == DDPC_TRANS ? CUBLAS_OP_T : CUBLAS_OP_N;
}

template <typename T>
static void round_into(T *dst, int64_t prows, int64_t pcols, const float *src, int64_t rows,
                       int64_t cols, int64_t lds)
{
    int64_t xb = (pcols + THREADS - 1) / THREADS;
    dim3 grid((unsigned)(xb < 1024 ? xb : 1024), (unsigned)(prows < 65535 ? prows : 65535));
    round_kernel<T><<<grid, THREADS, 0, ddpc__cuda_stream()>>>(dst, src, rows, cols, prows, pcols,
                                                               lds);
    DDPC_CUDA_LAUNCHED();
}

/* A product's size rounded up for the tensor cores: to 8 (16-byte bf16 rows), and to 128 for the
 * large sizes. GPT-2's vocabulary of 50257 as m, n or k ran the LM head's products at 70-150
 * TFLOP/s on an H200, against 160-250 for the others (bench/gpu_step_profile.c); llm.c pads it to
 * 50304 for the same reason. */
static int64_t padded(int64_t x)
{
    int64_t mult = x >= 4096 ? 128 : 8;
    return x % 8 == 0 ? x : (x + mult - 1) / mult * mult;
}

/* The 16-bit product: a (ra, ca) and b (rb, cb) as stored (row-major, before op) are rounded into
 * one scratch buffer, packed, with m, n and k padded (padded()) by zeros; when a size was padded or
 * c's rows are not 64-byte aligned, the product goes to a padded scratch c and its (m, n) part is
 * copied back (less than what the unpadded product cost). */
static void gemm_16(ddpc_precision prec, ddpc_transpose ta, ddpc_transpose tb, int m, int n, int k,
                    float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                    float beta, float *c, int ldc)
{
    const int64_t mp = padded(m), np = padded(n), kp = padded(k);
    int64_t ra = ta == DDPC_NO_TRANS ? m : k, ca = ta == DDPC_NO_TRANS ? k : m;
    int64_t rb = tb == DDPC_NO_TRANS ? k : n, cb = tb == DDPC_NO_TRANS ? n : k;
    int64_t pra = ta == DDPC_NO_TRANS ? mp : kp, pca = ta == DDPC_NO_TRANS ? kp : mp;
    int64_t prb = tb == DDPC_NO_TRANS ? kp : np, pcb = tb == DDPC_NO_TRANS ? np : kp;
    const bool pad_c = mp != m || np != n || ldc % 16 != 0;
    const int64_t ldcp = pad_c ? np : ldc;
    size_t a_bytes = ((size_t)(pra * pca) * 2 + 255) & ~(size_t)255; /* each part 256-aligned */
    size_t b_bytes = ((size_t)(prb * pcb) * 2 + 255) & ~(size_t)255;
    size_t c_bytes = pad_c ? (size_t)mp * (size_t)np * sizeof(float) : 0;
    char *s = (char *)ddpc__cuda_scratch(DDPC__CUDA_SCRATCH_BLAS, a_bytes + b_bytes + c_bytes);
    cudaDataType_t type;
    if (prec == DDPC_PREC_BF16) {
        round_into((__nv_bfloat16 *)s, pra, pca, a, ra, ca, lda);
        round_into((__nv_bfloat16 *)(s + a_bytes), prb, pcb, b, rb, cb, ldb);
        type = CUDA_R_16BF;
    } else {
        round_into((__half *)s, pra, pca, a, ra, ca, lda);
        round_into((__half *)(s + a_bytes), prb, pcb, b, rb, cb, ldb);
        type = CUDA_R_16F;
    }
    float *cc = pad_c ? (float *)(s + a_bytes + b_bytes) : c;
    const size_t row = (size_t)n * sizeof(float), dpitch = (size_t)ldcp * sizeof(float);
    const size_t spitch = (size_t)ldc * sizeof(float);
    if (pad_c && beta != 0.0f)
        DDPC_CUDA_CHECK(cudaMemcpy2DAsync(cc, dpitch, c, spitch, row, (size_t)m,
                                          cudaMemcpyDeviceToDevice, ddpc__cuda_stream()));
    DDPC_CUBLAS_CHECK(cublasGemmEx(ddpc__cuda_blas(), op_of(tb), op_of(ta), int_size(np, "n"),
                                   int_size(mp, "m"), int_size(kp, "k"), &alpha, s + a_bytes, type,
                                   int_size(pcb, "ldb"), s, type, int_size(pca, "lda"), &beta, cc,
                                   CUDA_R_32F, int_size(ldcp, "ldc"), CUBLAS_COMPUTE_32F,
                                   CUBLAS_GEMM_DEFAULT));
    if (pad_c)
        DDPC_CUDA_CHECK(cudaMemcpy2DAsync(c, spitch, cc, dpitch, row, (size_t)m,
                                          cudaMemcpyDeviceToDevice, ddpc__cuda_stream()));
}

extern "C" void ddpc__cuda_gemm(ddpc_precision prec, ddpc_transpose ta, ddpc_transpose tb,
                                int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                                int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                                int64_t ldc)
{
    if (m <= 0 || n <= 0)
        return;
    if (k <= 0) {
        if (beta != 1.0f) {
            scale_kernel<<<ddpc__cuda_blocks(m * n, THREADS), THREADS, 0, ddpc__cuda_stream()>>>(
                c, m, n, ldc, beta);
            DDPC_CUDA_LAUNCHED();
        }
        return;
    }
    int im = int_size(m, "m"), in = int_size(n, "n"), ik = int_size(k, "k");
    int ic = int_size(ldc, "ldc");
    if (prec == DDPC_PREC_BF16 || prec == DDPC_PREC_FP16) {
        gemm_16(prec, ta, tb, im, in, ik, alpha, a, lda, b, ldb, beta, c, ic);
        return;
    }
    DDPC_CUBLAS_CHECK(cublasGemmEx(ddpc__cuda_blas(), op_of(tb), op_of(ta), in, im, ik, &alpha, b,
                                   CUDA_R_32F, int_size(ldb, "ldb"), a, CUDA_R_32F,
                                   int_size(lda, "lda"), &beta, c, CUDA_R_32F, ic,
                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* y (n, out) = b (out) broadcast, plus r (n, out) when given (r may be y): linear.c's seed_rows. */
static __global__ void seed_kernel(float *y, const float *r, const float *b, int64_t n, int64_t out)
{
    int64_t total = n * out;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t j = i % out;
        if (r && b)
            y[i] = r[i] + b[j];
        else if (r)
            y[i] = r[i];
        else
            y[i] = b[j];
    }
}

extern "C" void ddpc__cuda_linear_residual_forward(ddpc_precision prec, float *y, const float *x,
                                                   const float *w, const float *b, const float *r,
                                                   int64_t n, int64_t in, int64_t out)
{
    if (n <= 0 || out <= 0)
        return;
    float beta = 0.0f;
    if (b || r) {
        /* Seed y with bias (+ residual) so the product adds onto it (beta = 1). */
        if (b || r != y) {
            seed_kernel<<<ddpc__cuda_blocks(n * out, THREADS), THREADS, 0, ddpc__cuda_stream()>>>(
                y, r, b, n, out);
            DDPC_CUDA_LAUNCHED();
        }
        beta = 1.0f;
    }
    ddpc__cuda_gemm(prec, DDPC_NO_TRANS, DDPC_TRANS, n, out, in, 1.0f, x, in, w, in, beta, y, out);
}

extern "C" void ddpc__cuda_linear_forward(ddpc_precision prec, float *y, const float *x,
                                          const float *w, const float *b, int64_t n, int64_t in,
                                          int64_t out)
{
    ddpc__cuda_linear_residual_forward(prec, y, x, w, b, NULL, n, in, out);
}

/* The bias gradient's column sums in a fixed order, no atomics: rows split into `chunks` runs of
 * `per` rows; pass 1 writes each (chunk, column) partial sum in row order, pass 2 adds the chunks
 * in order into db (reduce.cuh's chunking). */
static __global__ void colsum_partial_kernel(float *part, const float *dy, int64_t n, int64_t out,
                                             int64_t per)
{
    int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int64_t chunk = blockIdx.y;
    if (j >= out)
        return;
    int64_t i0 = chunk * per, i1 = i0 + per < n ? i0 + per : n;
    float acc = 0.0f;
    for (int64_t i = i0; i < i1; i++)
        acc += dy[i * out + j];
    part[chunk * out + j] = acc;
}

static __global__ void colsum_final_kernel(float *db, const float *part, int64_t chunks,
                                           int64_t out)
{
    int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= out)
        return;
    float acc = 0.0f;
    for (int64_t ch = 0; ch < chunks; ch++)
        acc += part[ch * out + j];
    db[j] += acc;
}

static void bias_backward(float *db, const float *dy, int64_t n, int64_t out)
{
    int64_t chunks, per;
    ddpc__row_chunks(n, &chunks, &per);
    float *part = (float *)ddpc__cuda_scratch(DDPC__CUDA_SCRATCH_REDUCE,
                                              (size_t)(chunks * out) * sizeof(float));
    dim3 grid((unsigned)((out + THREADS - 1) / THREADS), (unsigned)chunks);
    colsum_partial_kernel<<<grid, THREADS, 0, ddpc__cuda_stream()>>>(part, dy, n, out, per);
    DDPC_CUDA_LAUNCHED();
    colsum_final_kernel<<<(unsigned)((out + THREADS - 1) / THREADS), THREADS, 0,
                          ddpc__cuda_stream()>>>(db, part, chunks, out);
    DDPC_CUDA_LAUNCHED();
}

extern "C" void ddpc__cuda_linear_backward(ddpc_precision prec, float *dx, float *dw, float *db,
                                           const float *dy, const float *x, const float *w,
                                           int64_t n, int64_t in, int64_t out)
{
    if (dx) /* dx (n, in) += dy (n, out) @ w (out, in) */
        ddpc__cuda_gemm(prec, DDPC_NO_TRANS, DDPC_NO_TRANS, n, in, out, 1.0f, dy, out, w, in, 1.0f,
                        dx, in);
    if (dw) /* dw (out, in) += dy^T (out, n) @ x (n, in) */
        ddpc__cuda_gemm(prec, DDPC_TRANS, DDPC_NO_TRANS, out, in, n, 1.0f, dy, out, x, in, 1.0f, dw,
                        in);
    if (db && n > 0 && out > 0)
        bias_backward(db, dy, n, out);
}
