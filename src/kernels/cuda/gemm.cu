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
#include <string.h>

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

/* Rows by blockIdx.y (strided), columns by x: no division per element. */
template <typename T>
static __global__ void round_kernel(T *dst, const float *src, int64_t rows, int64_t cols,
                                    int64_t ldd, int64_t lds)
{
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const float *s = src + r * lds;
        T *d = dst + r * ldd;
        for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < cols;
             c += (int64_t)gridDim.x * blockDim.x)
            d[c] = round_to<T>(s[c]);
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
static void round_into(T *dst, int64_t ldd, const float *src, int64_t rows, int64_t cols,
                       int64_t lds)
{
    int64_t xb = (cols + THREADS - 1) / THREADS;
    dim3 grid((unsigned)(xb < 1024 ? xb : 1024), (unsigned)(rows < 65535 ? rows : 65535));
    round_kernel<T><<<grid, THREADS, 0, ddpc__cuda_stream()>>>(dst, src, rows, cols, ldd, lds);
    DDPC_CUDA_LAUNCHED();
}

/* cols rounded up to a multiple of `mult`: the leading dimension of a scratch copy. Rows that
 * start on 128-byte (bf16/fp16) or 64-byte (fp32) boundaries keep cuBLAS on its fast kernels; an
 * odd leading dimension such as GPT-2's vocabulary of 50257 made the LM head's products run at a
 * sixth of the rate of the others (measured on an H200). */
static int64_t padded(int64_t cols, int64_t mult)
{
    return (cols + mult - 1) / mult * mult;
}

/* The 16-bit product: a (ra, ca) and b (rb, cb) as stored (row-major, before op) are rounded into
 * one scratch buffer with padded leading dimensions; a c whose rows are not 64-byte aligned is
 * computed in a padded scratch copy and copied back (the copies cost less than the slow GEMM). */
static void gemm_16(ddpc_precision prec, ddpc_transpose ta, ddpc_transpose tb, int m, int n, int k,
                    float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                    float beta, float *c, int ldc)
{
    int64_t ra = ta == DDPC_NO_TRANS ? m : k, ca = ta == DDPC_NO_TRANS ? k : m;
    int64_t rb = tb == DDPC_NO_TRANS ? k : n, cb = tb == DDPC_NO_TRANS ? n : k;
    int64_t lda16 = padded(ca, 64), ldb16 = padded(cb, 64);
    bool pad_c = ldc % 16 != 0;
    int64_t ldcp = pad_c ? padded(n, 16) : ldc;
    size_t a_bytes = ((size_t)(ra * lda16) * 2 + 255) & ~(size_t)255; /* each part 256-aligned */
    size_t b_bytes = ((size_t)(rb * ldb16) * 2 + 255) & ~(size_t)255;
    size_t c_bytes = pad_c ? (size_t)m * (size_t)ldcp * sizeof(float) : 0;
    char *s = (char *)ddpc__cuda_scratch(DDPC__CUDA_SCRATCH_BLAS, a_bytes + b_bytes + c_bytes);
    cudaDataType_t type;
    if (prec == DDPC_PREC_BF16) {
        round_into((__nv_bfloat16 *)s, lda16, a, ra, ca, lda);
        round_into((__nv_bfloat16 *)(s + a_bytes), ldb16, b, rb, cb, ldb);
        type = CUDA_R_16BF;
    } else {
        round_into((__half *)s, lda16, a, ra, ca, lda);
        round_into((__half *)(s + a_bytes), ldb16, b, rb, cb, ldb);
        type = CUDA_R_16F;
    }
    float *cc = pad_c ? (float *)(s + a_bytes + b_bytes) : c;
    const size_t row = (size_t)n * sizeof(float), dpitch = (size_t)ldcp * sizeof(float);
    const size_t spitch = (size_t)ldc * sizeof(float);
    if (pad_c && beta != 0.0f)
        DDPC_CUDA_CHECK(cudaMemcpy2DAsync(cc, dpitch, c, spitch, row, (size_t)m,
                                          cudaMemcpyDeviceToDevice, ddpc__cuda_stream()));
    DDPC_CUBLAS_CHECK(cublasGemmEx(ddpc__cuda_blas(), op_of(tb), op_of(ta), n, m, k, &alpha,
                                   s + a_bytes, type, int_size(ldb16, "ldb"), s, type,
                                   int_size(lda16, "lda"), &beta, cc, CUDA_R_32F,
                                   int_size(ldcp, "ldc"), CUBLAS_COMPUTE_32F,
                                   CUBLAS_GEMM_DEFAULT));
    if (pad_c)
        DDPC_CUDA_CHECK(cudaMemcpy2DAsync(c, spitch, cc, dpitch, row, (size_t)m,
                                          cudaMemcpyDeviceToDevice, ddpc__cuda_stream()));
}

/* DDPC_CUDA_GEMM16=fast (a benchmark experiment, read once): bf16/fp16 products hand the fp32
 * operands to cuBLAS's _FAST_16BF/_FAST_16F compute types instead of rounding them into scratch
 * first, as the attention's batched products always do. */
static bool fast_16(void)
{
    static int fast = -1;
    if (fast < 0) {
        const char *v = getenv("DDPC_CUDA_GEMM16");
        fast = v && strcmp(v, "fast") == 0;
    }
    return fast == 1;
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
    if ((prec == DDPC_PREC_BF16 || prec == DDPC_PREC_FP16) && !fast_16()) {
        gemm_16(prec, ta, tb, im, in, ik, alpha, a, lda, b, ldb, beta, c, ic);
        return;
    }
    const cublasComputeType_t ct = prec == DDPC_PREC_BF16   ? CUBLAS_COMPUTE_32F_FAST_16BF
                                   : prec == DDPC_PREC_FP16 ? CUBLAS_COMPUTE_32F_FAST_16F
                                                            : CUBLAS_COMPUTE_32F;
    DDPC_CUBLAS_CHECK(cublasGemmEx(ddpc__cuda_blas(), op_of(tb), op_of(ta), in, im, ik, &alpha, b,
                                   CUDA_R_32F, int_size(ldb, "ldb"), a, CUDA_R_32F,
                                   int_size(lda, "lda"), &beta, c, CUDA_R_32F, ic, ct,
                                   CUBLAS_GEMM_DEFAULT));
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
