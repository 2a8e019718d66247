// SPDX-License-Identifier: MIT
/* Matrix products on cuBLAS with ddpc_gemm's row-major contract, and the linear layer on them. A
 * row-major (r, c) matrix with leading dimension ld is the column-major (c, r) one, so row-major C
 * = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: B goes first, with the same transpose
 * flags, and m and n swap. fp32 runs CUBLAS_COMPUTE_32F (TF32 only after allow_tf32). bf16 / fp16
 * round both fp32 operands to nearest even into scratch (round.cu: the rounding kernels.h and the
 * CPU path specify; the _FAST_16BF compute types do not document their rounding) and run
 * cublasGemmEx on the 16-bit copies with fp32 accumulation and fp32 C: autocast's numerics. At 16
 * bits the linear layer saves passes: backward rounds dy once for both of its products, and
 * forward with a bias adds it in cuBLASLt's epilogue (gemm_lt.cu), a residual read as its C,
 * instead of seeding y for beta = 1. The
 * LM head's 16-bit path (head16.cu) writes its product in 16 bits and reads its dy as it is; the
 * 16-bit activations' path (act16.cu) gives the linear layer an x already rounded, as
 * round_operand would have left it, which then goes into the same products unrounded again.
 * ddpc__cuda_gemm_batched runs a batch of equal products as one strided-batched call (the
 * attentions' per-head products), on fp32 operands or on 16-bit ones its caller rounded.
 * Invariant: the only device memory touched besides the operands is the BLAS scratch slot (grown
 * once per largest shape) and the preset cuBLAS(Lt) workspace, so warm calls allocate nothing. */
#include "kernels/cuda/cuda_impl.h"
#include "kernels/cuda/reduce.cuh"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#define THREADS 256

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

/* A product's size rounded up for the tensor cores: to 8 (16-byte bf16 rows), and to 128 for the
 * large sizes. GPT-2's vocabulary of 50257 as m, n or k ran the LM head's products at 70-150
 * TFLOP/s on an H200, against 160-250 for the others (bench/gpu_step_profile.c); llm.c pads it to
 * 50304 for the same reason. */
static int64_t padded(int64_t x)
{
    int64_t mult = x >= 4096 ? 128 : 8;
    return x % 8 == 0 ? x : (x + mult - 1) / mult * mult;
}

/* A 16-bit copy of one fp32 operand as stored (rows, cols; leading dimension ld), before any
 * transpose: each size padded (padded()) with zeros and the copy packed (leading dimension pcols),
 * at p in the BLAS scratch. Rounding is a step of its own, so one rounded copy can feed several
 * products (linear_backward's dy feeds both of its products). */
typedef struct {
    const float *src;
    int64_t rows, cols, ld;
    int64_t prows, pcols;
    void *p;
} rounded;

static rounded operand(const float *src, int64_t rows, int64_t cols, int64_t ld)
{
    return rounded{src, rows, cols, ld, padded(rows), padded(cols), nullptr};
}

/* op(x) (r, c) as stored: (r, c) untransposed, (c, r) transposed. */
static rounded operand_op(ddpc_transpose t, const float *src, int64_t r, int64_t c, int64_t ld)
{
    return t == DDPC_NO_TRANS ? operand(src, r, c, ld) : operand(src, c, r, ld);
}

/* Each part of the scratch starts 256-byte aligned (cudaMalloc's alignment). */
static size_t rounded_bytes(const rounded *o)
{
    return ((size_t)(o->prows * o->pcols) * 2 + 255) & ~(size_t)255;
}

/* round.cu's kernel, four elements a thread: padded() keeps pcols a multiple of 8. */
static void round_operand(ddpc_precision prec, rounded *o, char *at)
{
    o->p = at;
    ddpc__cuda_round4(prec, at, o->prows, o->pcols, o->src, o->rows, o->cols, o->ld);
}

static cudaDataType_t type_of(ddpc_precision prec)
{
    return prec == DDPC_PREC_BF16 ? CUDA_R_16BF : CUDA_R_16F;
}

/* When a size was padded or c's rows are not 64-byte aligned, the product goes to a padded
 * scratch c of these bytes and its (m, n) part is copied back (less than what the unpadded product
 * cost); 0 when it goes to c itself. */
static size_t c_pad_bytes(int m, int n, int ldc)
{
    const int64_t mp = padded(m), np = padded(n);
    return mp != m || np != n || ldc % 16 != 0 ? (size_t)mp * (size_t)np * sizeof(float) : 0;
}

/* The product step of the 16-bit path: c (m, n; ldc) = alpha op(a) op(b) + beta c at the padded
 * sizes, a and b rounded (round_operand) with shapes matching op's, cpad c_pad_bytes(m, n, ldc)
 * of scratch. */
static void gemm_rounded(ddpc_precision prec, ddpc_transpose ta, ddpc_transpose tb, int m, int n,
                         int k, float alpha, const rounded *a, const rounded *b, float beta,
                         float *c, int ldc, void *cpad)
{
    const int64_t mp = padded(m), np = padded(n), kp = padded(k);
    const int64_t pra = ta == DDPC_NO_TRANS ? mp : kp, pca = ta == DDPC_NO_TRANS ? kp : mp;
    const int64_t prb = tb == DDPC_NO_TRANS ? kp : np, pcb = tb == DDPC_NO_TRANS ? np : kp;
    if (a->prows != pra || a->pcols != pca || b->prows != prb || b->pcols != pcb) {
        fprintf(stderr,
                "ddpc: CUDA gemm: rounded operands (%lld, %lld) and (%lld, %lld) do not "
                "fit the product %d x %d x %d\n",
                (long long)a->prows, (long long)a->pcols, (long long)b->prows, (long long)b->pcols,
                m, n, k);
        abort();
    }
    const bool pad_c = c_pad_bytes(m, n, ldc) != 0;
    const int64_t ldcp = pad_c ? np : ldc;
    const cudaDataType_t type = type_of(prec);
    float *cc = pad_c ? (float *)cpad : c;
    const size_t row = (size_t)n * sizeof(float), dpitch = (size_t)ldcp * sizeof(float);
    const size_t spitch = (size_t)ldc * sizeof(float);
    if (pad_c && beta != 0.0f)
        DDPC_CUDA_CHECK(cudaMemcpy2DAsync(cc, dpitch, c, spitch, row, (size_t)m,
                                          cudaMemcpyDeviceToDevice, ddpc__cuda_stream()));
    DDPC_CUBLAS_CHECK(cublasGemmEx(ddpc__cuda_blas(), op_of(tb), op_of(ta), int_size(np, "n"),
                                   int_size(mp, "m"), int_size(kp, "k"), &alpha, b->p, type,
                                   int_size(b->pcols, "ldb"), a->p, type, int_size(a->pcols, "lda"),
                                   &beta, cc, CUDA_R_32F, int_size(ldcp, "ldc"), CUBLAS_COMPUTE_32F,
                                   CUBLAS_GEMM_DEFAULT));
    if (pad_c)
        DDPC_CUDA_CHECK(cudaMemcpy2DAsync(c, spitch, cc, dpitch, row, (size_t)m,
                                          cudaMemcpyDeviceToDevice, ddpc__cuda_stream()));
}

/* The scratch bytes an operand takes: none when it comes rounded already (p set). */
static size_t scratch_bytes(const rounded *o)
{
    return o->p ? 0 : rounded_bytes(o);
}

/* The 16-bit product on ra and rb, those not rounded yet rounded into one scratch buffer (a, then
 * b, then the padded c). */
static void gemm_16r(ddpc_precision prec, ddpc_transpose ta, ddpc_transpose tb, int m, int n, int k,
                     float alpha, rounded ra, rounded rb, float beta, float *c, int ldc)
{
    const size_t a_bytes = scratch_bytes(&ra), b_bytes = scratch_bytes(&rb);
    char *s = (char *)ddpc__cuda_scratch(DDPC__CUDA_SCRATCH_BLAS,
                                         a_bytes + b_bytes + c_pad_bytes(m, n, ldc));
    if (!ra.p)
        round_operand(prec, &ra, s);
    if (!rb.p)
        round_operand(prec, &rb, s + a_bytes);
    gemm_rounded(prec, ta, tb, m, n, k, alpha, &ra, &rb, beta, c, ldc, s + a_bytes + b_bytes);
}

/* The 16-bit product: a and b rounded, then the product on them. */
static void gemm_16(ddpc_precision prec, ddpc_transpose ta, ddpc_transpose tb, int m, int n, int k,
                    float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                    float beta, float *c, int ldc)
{
    gemm_16r(prec, ta, tb, m, n, k, alpha, operand_op(ta, a, m, k, lda),
             operand_op(tb, b, k, n, ldb), beta, c, ldc);
}

/* x (rows, cols) as an operand: rounded from fp32 x, or x16 when given, a 16-bit copy laid out as
 * round_operand leaves it, which needs sizes that padded() keeps (act16.cu's check). */
static rounded x_operand(const float *x, const void *x16, int64_t rows, int64_t cols)
{
    rounded r = operand(x, rows, cols, cols);
    if (x16 && (r.prows != rows || r.pcols != cols)) {
        fprintf(stderr, "ddpc: CUDA gemm: a 16-bit x (%lld, %lld) needs padding\n", (long long)rows,
                (long long)cols);
        abort();
    }
    if (x16)
        r.p = (void *)x16;
    return r;
}

/* allow_tf32's setting: the process's, read by every fp32 product after it. */
static bool g_tf32 = false;

extern "C" void ddpc__cuda_allow_tf32(bool on)
{
    g_tf32 = on;
}

extern "C" cublasComputeType_t ddpc__cuda_fp32_compute(void)
{
    return g_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
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
                                   ddpc__cuda_fp32_compute(), CUBLAS_GEMM_DEFAULT));
}

extern "C" void ddpc__cuda_gemm_batched(ddpc_precision prec, bool in16, bool ta, bool tb,
                                        int64_t m, int64_t n, int64_t k, float alpha,
                                        const void *a, int64_t lda, int64_t sa, const void *b,
                                        int64_t ldb, int64_t sb, float *c, int64_t ldc, int64_t sc,
                                        int64_t batch)
{
    const float beta = 0.0f;
    const bool half = prec == DDPC_PREC_BF16 || prec == DDPC_PREC_FP16;
    if (in16 && !half) {
        fprintf(stderr, "ddpc: CUDA batched gemm: 16-bit operands at precision %d\n", (int)prec);
        abort();
    }
    /* 16-bit operands (rounded by the caller) multiply exactly in fp32 (CUBLAS_COMPUTE_32F);
     * fp32 ones at bf16/fp16 are rounded by the _FAST_16 compute types in their own way. */
    const cublasComputeType_t ct = in16                     ? CUBLAS_COMPUTE_32F
                                   : prec == DDPC_PREC_BF16 ? CUBLAS_COMPUTE_32F_FAST_16BF
                                   : prec == DDPC_PREC_FP16 ? CUBLAS_COMPUTE_32F_FAST_16F
                                                            : ddpc__cuda_fp32_compute();
    const cudaDataType_t ab = in16 ? type_of(prec) : CUDA_R_32F;
    DDPC_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        ddpc__cuda_blas(), op_of(tb ? DDPC_TRANS : DDPC_NO_TRANS),
        op_of(ta ? DDPC_TRANS : DDPC_NO_TRANS), int_size(n, "n"), int_size(m, "m"),
        int_size(k, "k"), &alpha, b, ab, int_size(ldb, "ldb"), (long long)sb, a, ab,
        int_size(lda, "lda"), (long long)sa, &beta, c, CUDA_R_32F, int_size(ldc, "ldc"),
        (long long)sc, int_size(batch, "batch"), ct, CUBLAS_GEMM_DEFAULT));
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

/* The 16-bit linear forward with a bias: y (n, out) = x @ w^T + b with b added in cuBLASLt's
 * epilogue (beta = 0), so y is written once instead of seeded, read and written again; with a
 * residual r, y = (x @ w^T + r) + b, r read as cuBLASLt's C (beta = 1) where y needs no padded
 * scratch. The same padded sizes and rounded operands as gemm_16's (NO_TRANS,
 * TRANS) product; the bias is copied into scratch, zero-padded, when out is padded (the epilogue
 * reads one per padded row) or b is not 16-byte aligned.
 * False, having run nothing, where cuBLASLt has no algorithm for the shape or r needs scratch. */
static bool linear_bias_16(ddpc_precision prec, float *y, rounded rx, const float *w,
                           const float *b, const float *r, int n, int in, int out)
{
    const size_t c_bytes = c_pad_bytes(n, out, out);
    if (r && c_bytes)
        return false;
    rounded rw = operand(w, out, in, in);
    const int64_t np = padded(out);
    const size_t x_bytes = scratch_bytes(&rx), w_bytes = rounded_bytes(&rw);
    /* A bias view at any 4-byte offset of the parameter buffer would narrow cuBLASLt's choice. */
    const bool copy_b = np != out || (uintptr_t)b % 16 != 0;
    const size_t b_bytes = copy_b ? ((size_t)np * sizeof(float) + 255) & ~(size_t)255 : 0;
    char *s =
        (char *)ddpc__cuda_scratch(DDPC__CUDA_SCRATCH_BLAS, x_bytes + w_bytes + b_bytes + c_bytes);
    if (!rx.p)
        round_operand(prec, &rx, s);
    round_operand(prec, &rw, s + x_bytes);
    const float *bias = b;
    if (b_bytes) {
        float *bp = (float *)(s + x_bytes + w_bytes);
        if (np > out)
            DDPC_CUDA_CHECK(cudaMemsetAsync(bp + out, 0, (size_t)(np - out) * sizeof(float),
                                            ddpc__cuda_stream()));
        DDPC_CUDA_CHECK(cudaMemcpyAsync(bp, b, (size_t)out * sizeof(float),
                                        cudaMemcpyDeviceToDevice, ddpc__cuda_stream()));
        bias = bp;
    }
    float *d = c_bytes ? (float *)(s + x_bytes + w_bytes + b_bytes) : y;
    const int64_t ldd = c_bytes ? np : out;
    /* Column-major: y^T (out, n) = w_r^T (out, in) x_r^T (in, n), the bias along y^T's rows. */
    const int pn = int_size(np, "out"), pm = int_size(rx.prows, "n"), pk = int_size(rx.pcols, "in");
    if (!ddpc__cuda_lt_bias_gemm(type_of(prec), CUBLAS_OP_T, CUBLAS_OP_N, pn, pm, pk, rw.p, pk,
                                 rx.p, pk, bias, r, d, int_size(ldd, "ldc")))
        return false; /* the rounding is redone by the fallback: cuBLASLt has no such shape */
    if (c_bytes)
        DDPC_CUDA_CHECK(cudaMemcpy2DAsync(
            y, (size_t)out * sizeof(float), d, (size_t)ldd * sizeof(float),
            (size_t)out * sizeof(float), (size_t)n, cudaMemcpyDeviceToDevice, ddpc__cuda_stream()));
    return true;
}

/* linear_residual_forward on fp32 x, or on x16 (x_operand's) when given. */
static void residual_forward(ddpc_precision prec, float *y, const float *x, const void *x16,
                             const float *w, const float *b, const float *r, int64_t n, int64_t in,
                             int64_t out)
{
    if (n <= 0 || out <= 0)
        return;
    const bool half = prec == DDPC_PREC_BF16 || prec == DDPC_PREC_FP16;
    if (half && b && in > 0 &&
        linear_bias_16(prec, y, x_operand(x, x16, n, in), w, b, r, int_size(n, "m"),
                       int_size(in, "k"), int_size(out, "n")))
        return;
    float beta = 0.0f;
    if (b || r) {
        /* Seed y with bias (+ residual) so the product adds onto it (beta = 1): fp32, no bias,
         * or a shape linear_bias_16 declines. */
        if (b || r != y) {
            seed_kernel<<<ddpc__cuda_blocks(n * out, THREADS), THREADS, 0, ddpc__cuda_stream()>>>(
                y, r, b, n, out);
            DDPC_CUDA_LAUNCHED();
        }
        beta = 1.0f;
    }
    if (x16) /* a 16-bit x is for bf16 / fp16 with in > 0 (act16.cu) */
        gemm_16r(prec, DDPC_NO_TRANS, DDPC_TRANS, int_size(n, "m"), int_size(out, "n"),
                 int_size(in, "k"), 1.0f, x_operand(x, x16, n, in), operand(w, out, in, in), beta,
                 y, int_size(out, "ldc"));
    else
        ddpc__cuda_gemm(prec, DDPC_NO_TRANS, DDPC_TRANS, n, out, in, 1.0f, x, in, w, in, beta, y,
                        out);
}

extern "C" void ddpc__cuda_linear_residual_forward(ddpc_precision prec, float *y, const float *x,
                                                   const float *w, const float *b, const float *r,
                                                   int64_t n, int64_t in, int64_t out)
{
    residual_forward(prec, y, x, nullptr, w, b, r, n, in, out);
}

extern "C" void ddpc__cuda_linear_forward_x16(ddpc_precision prec, float *y, const void *x16,
                                              const float *w, const float *b, const float *r,
                                              int64_t n, int64_t in, int64_t out)
{
    residual_forward(prec, y, nullptr, x16, w, b, r, n, in, out);
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

/* The scratch bytes backward_rounded takes: w's and x's rounded copies and one padded c. */
static size_t backward_scratch(int n, int in, int out)
{
    rounded rw = operand(nullptr, out, in, in), rx = operand(nullptr, n, in, in);
    const size_t cx = c_pad_bytes(n, in, in), cw = c_pad_bytes(out, in, in);
    return rounded_bytes(&rw) + rounded_bytes(&rx) + (cx > cw ? cx : cw);
}

/* The 16-bit dx and dw products from a rounded dy (n, out; padded(n), padded(out)): w and x (when
 * not rounded already) rounded at s (backward_scratch bytes), then dx's product reading dy
 * untransposed and dw's transposed, both from the one copy. */
static void backward_rounded(ddpc_precision prec, float *dx, float *dw, const rounded *rdy,
                             rounded rx, const float *w, int n, int in, int out, char *s)
{
    rounded rw = operand(w, out, in, in);
    const size_t w_bytes = rounded_bytes(&rw), x_bytes = scratch_bytes(&rx);
    round_operand(prec, &rw, s);
    if (!rx.p)
        round_operand(prec, &rx, s + w_bytes);
    char *cpad = s + w_bytes + x_bytes; /* each product's, in turn (stream order) */
    /* dx (n, in) += dy (n, out) @ w (out, in) */
    gemm_rounded(prec, DDPC_NO_TRANS, DDPC_NO_TRANS, n, in, out, 1.0f, rdy, &rw, 1.0f, dx, in,
                 cpad);
    /* dw (out, in) += dy^T (out, n) @ x (n, in) */
    gemm_rounded(prec, DDPC_TRANS, DDPC_NO_TRANS, out, in, n, 1.0f, rdy, &rx, 1.0f, dw, in, cpad);
}

/* The 16-bit dx and dw products from one rounding of dy (and of w and x): dx's product reads dy
 * (n, out) untransposed, dw's transposed, and both pad it to (padded(n), padded(out)), so the one
 * copy is what gemm_16 would make for each. The same rounded operands and the same cuBLAS calls as
 * two gemm_16 calls: the same bits, with dy read and rounded once instead of twice. */
static void linear_backward_16(ddpc_precision prec, float *dx, float *dw, const float *dy,
                               rounded rx, const float *w, int n, int in, int out)
{
    rounded rdy = operand(dy, n, out, out);
    const size_t dy_bytes = rounded_bytes(&rdy);
    char *s = (char *)ddpc__cuda_scratch(DDPC__CUDA_SCRATCH_BLAS,
                                         dy_bytes + backward_scratch(n, in, out));
    round_operand(prec, &rdy, s);
    backward_rounded(prec, dx, dw, &rdy, rx, w, n, in, out, s + dy_bytes);
}

extern "C" int64_t ddpc__cuda_gemm_padded(int64_t x)
{
    return padded(x);
}

/* The BLAS scratch bytes linear_forward takes at 16 bits without a bias or residual: gemm_16's for
 * its (NO_TRANS, TRANS) product, x and w rounded and y through a padded c where it needs one. */
extern "C" size_t ddpc__cuda_linear_forward_scratch(int64_t n, int64_t in, int64_t out)
{
    const rounded rx = operand(nullptr, n, in, in), rw = operand(nullptr, out, in, in);
    return rounded_bytes(&rx) + rounded_bytes(&rw) +
           c_pad_bytes(int_size(n, "m"), int_size(out, "n"), int_size(out, "ldc"));
}

/* gemm_16's (NO_TRANS, TRANS) product on the same rounded operands and padded sizes, its C
 * written in 16 bits over the whole padded (padded(n), padded(out)) instead of into an fp32
 * scratch and copied out: the LM head's logits, which its loss reads in 16 bits. */
extern "C" void ddpc__cuda_linear_forward_16out(ddpc_precision prec, void *y, const float *x,
                                                const float *w, int64_t n, int64_t in, int64_t out)
{
    rounded rx = operand(x, int_size(n, "m"), int_size(in, "k"), in);
    rounded rw = operand(w, int_size(out, "n"), in, in);
    const size_t x_bytes = rounded_bytes(&rx);
    char *s = (char *)ddpc__cuda_scratch(DDPC__CUDA_SCRATCH_BLAS, x_bytes + rounded_bytes(&rw));
    round_operand(prec, &rx, s);
    round_operand(prec, &rw, s + x_bytes);
    const cudaDataType_t type = type_of(prec);
    const float one = 1.0f, zero = 0.0f;
    const int np = int_size(rw.prows, "out"), kp = int_size(rx.pcols, "in");
    /* Column-major, w first as gemm_rounded passes it: y^T (np, mp) = w_r^T-op x_r^T. */
    DDPC_CUBLAS_CHECK(cublasGemmEx(
        ddpc__cuda_blas(), CUBLAS_OP_T, CUBLAS_OP_N, np, int_size(rx.prows, "n"), kp, &one, rw.p,
        type, kp, rx.p, type, kp, &zero, y, type, np, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* linear_backward_16 from a dy already 16 bits, as linear_backward_16's rounding leaves it:
 * (padded(n), padded(out)), zero in the padding. */
extern "C" void ddpc__cuda_linear_backward_16in(ddpc_precision prec, float *dx, float *dw,
                                                const void *dy, const float *x, const float *w,
                                                int64_t n, int64_t in, int64_t out)
{
    const int rows = int_size(n, "m"), ii = int_size(in, "n"), io = int_size(out, "k");
    rounded rdy = operand(nullptr, rows, io, io);
    rdy.p = (void *)dy;
    char *s = (char *)ddpc__cuda_scratch(DDPC__CUDA_SCRATCH_BLAS, backward_scratch(rows, ii, io));
    backward_rounded(prec, dx, dw, &rdy, operand(x, rows, ii, ii), w, rows, ii, io, s);
}

extern "C" void ddpc__cuda_linear_backward(ddpc_precision prec, float *dx, float *dw, float *db,
                                           const float *dy, const float *x, const float *w,
                                           int64_t n, int64_t in, int64_t out)
{
    const bool half = prec == DDPC_PREC_BF16 || prec == DDPC_PREC_FP16;
    if (half && dx && dw && n > 0 && in > 0 && out > 0) {
        linear_backward_16(prec, dx, dw, dy, operand(x, n, in, in), w, int_size(n, "m"),
                           int_size(in, "n"), int_size(out, "k"));
    } else {
        if (dx) /* dx (n, in) += dy (n, out) @ w (out, in) */
            ddpc__cuda_gemm(prec, DDPC_NO_TRANS, DDPC_NO_TRANS, n, in, out, 1.0f, dy, out, w, in,
                            1.0f, dx, in);
        if (dw) /* dw (out, in) += dy^T (out, n) @ x (n, in) */
            ddpc__cuda_gemm(prec, DDPC_TRANS, DDPC_NO_TRANS, out, in, n, 1.0f, dy, out, x, in, 1.0f,
                            dw, in);
    }
    if (db && n > 0 && out > 0)
        bias_backward(db, dy, n, out);
}

/* linear_backward with x a 16-bit copy (x_operand's), bf16 / fp16: its dw product reads x16 where
 * linear_backward's reads x's rounding, everything else as there. */
extern "C" void ddpc__cuda_linear_backward_x16(ddpc_precision prec, float *dx, float *dw, float *db,
                                               const float *dy, const void *x16, const float *w,
                                               int64_t n, int64_t in, int64_t out)
{
    if (n <= 0 || in <= 0 || out <= 0)
        return;
    const int rows = int_size(n, "m"), ii = int_size(in, "n"), io = int_size(out, "k");
    const rounded rx = x_operand(nullptr, x16, n, in);
    if (dx && dw) {
        linear_backward_16(prec, dx, dw, dy, rx, w, rows, ii, io);
    } else {
        if (dx) /* dx (n, in) += dy (n, out) @ w (out, in) */
            gemm_16(prec, DDPC_NO_TRANS, DDPC_NO_TRANS, rows, ii, io, 1.0f, dy, out, w, in, 1.0f,
                    dx, ii);
        if (dw) /* dw (out, in) += dy^T (out, n) @ x (n, in) */
            gemm_16r(prec, DDPC_TRANS, DDPC_NO_TRANS, io, ii, rows, 1.0f,
                     operand_op(DDPC_TRANS, dy, io, rows, out), rx, 1.0f, dw, ii);
    }
    if (db)
        bias_backward(db, dy, n, out);
}
