// SPDX-License-Identifier: MIT
/* Private to kernels/cuda: the one stream and cuBLAS handle every kernel uses, error checking, and
 * the functions table.cu puts into the CUDA kernel table (each named ddpc__cuda_<member>, with the
 * meaning of the ddpc_kernel_table member of that name, on device memory).
 * Invariants: everything runs in order on ddpc__cuda_stream(); no kernel allocates after its first
 * call for a shape (workspaces come from the caller or grow once); float reductions use a fixed
 * order (no float atomics), so a rerun gives the same bits. */
#ifndef DDPC_KERNELS_CUDA_IMPL_H
#define DDPC_KERNELS_CUDA_IMPL_H

#include <ddpc/device.h>

#include "kernels/backend_impl.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The stream and cuBLAS handle of the current device (made by ddpc__cuda_open). */
cudaStream_t ddpc__cuda_stream(void);
cublasHandle_t ddpc__cuda_blas(void);
/* The ordinal of the process's GPU (ddpc__cuda_open's), made current in the calling thread: no
 * CUDA call once it is, so kernels key what they cache per device on it. */
int ddpc__cuda_device(void);
/* The cuBLASLt handle, and the workspace (*bytes long) it shares with the cuBLAS handle. */
cublasLtHandle_t ddpc__cuda_blas_lt(void);
void *ddpc__cuda_blas_workspace(size_t *bytes);
/* Aborts with the file, line and CUDA's message: a failed launch or copy is a bug or a lost
 * device, never user input. */
void ddpc__cuda_check(cudaError_t e, const char *what, const char *file, int line);
void ddpc__cublas_check(cublasStatus_t s, const char *what, const char *file, int line);
#define DDPC_CUDA_CHECK(call) ddpc__cuda_check((call), #call, __FILE__, __LINE__)
#define DDPC_CUBLAS_CHECK(call) ddpc__cublas_check((call), #call, __FILE__, __LINE__)
/* After a launch: the launch's own error (bad configuration). */
#define DDPC_CUDA_LAUNCHED() ddpc__cuda_check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
/* Blocks of `threads` covering n elements, capped for grid-stride loops. */
static inline unsigned ddpc__cuda_blocks(int64_t n, int threads)
{
    int64_t b = (n + threads - 1) / threads;
    return (unsigned)(b < 1 ? 1 : b > 65535 * 16 ? 65535 * 16 : b);
}
/* Device scratch owned by kernels/cuda, grown (never shrunk) to at least `bytes`; slot picks one of
 * a few independent buffers. Growth counts as an allocation (alloc_count). */
void *ddpc__cuda_scratch(int slot, size_t bytes);
enum { DDPC__CUDA_SCRATCH_BLAS, DDPC__CUDA_SCRATCH_REDUCE,
       DDPC__CUDA_SCRATCH_MISC, DDPC__CUDA_SCRATCH_S2S, DDPC__CUDA_SCRATCH_COUNT };

/* device.cu implements ddpc_backend_cuda_built, ddpc_cuda_devices and backend_impl.h's
 * ddpc__backend_cuda_open / ddpc__backend_cuda_describe: picks GPU local_rank mod visible, makes
 * it current, creates the stream and cuBLAS handle, returns ddpc__cuda_table with .device set. */
extern const ddpc_kernel_table ddpc__cuda_table;

/* memory.cu */
void *ddpc__cuda_alloc(size_t bytes);
void ddpc__cuda_free(void *p);
void ddpc__cuda_to_device(void *dst, const void *src, size_t bytes);
void ddpc__cuda_to_host(void *dst, const void *src, size_t bytes);
void ddpc__cuda_copy(void *dst, const void *src, size_t bytes);
void ddpc__cuda_copy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                       size_t height);
void ddpc__cuda_synchronize(void);
uint64_t ddpc__cuda_alloc_count(void);
size_t ddpc__cuda_memory_total(void);
size_t ddpc__cuda_memory_free(void);
void ddpc__cuda_count_alloc(void);
/* marks.cu */
void *ddpc__cuda_marks_create(int n);
void ddpc__cuda_marks_destroy(void *marks);
void ddpc__cuda_mark(void *marks, int i);
bool ddpc__cuda_mark_seconds(void *marks, int a, int b, double *seconds);
/* memory_vmm.cu (free and to_host too: they tell reserved ranges apart) */
void *ddpc__cuda_reserve(size_t bytes);
ddpc_status ddpc__cuda_release(void *p, size_t bytes);
ddpc_status ddpc__cuda_back(void *p, size_t bytes);
const char *ddpc__cuda_release_note(void);
size_t ddpc__cuda_backed_bytes(void);
/* The one door for the host to wait for the device: synchronizes `st` and counts the wait
 * (host_waits), so no read-back goes uncounted; `site` (file:line) is printed per wait when
 * DDPC_TRACE_HOST_WAITS is set. A throttle is the other kind of wait: the host is a whole batch
 * ring ahead of the device, whose queue is never empty meanwhile (host_throttles). */
void ddpc__cuda_wait_at(cudaStream_t st, const char *site);
void ddpc__cuda_wait_event_at(cudaEvent_t ev, const char *site);
void ddpc__cuda_throttle(cudaEvent_t ev);
uint64_t ddpc__cuda_host_waits(void);
uint64_t ddpc__cuda_host_throttles(void);
#define DDPC__CUDA_SITE2(f, l) f ":" #l
#define DDPC__CUDA_SITE(f, l) DDPC__CUDA_SITE2(f, l)
#define ddpc__cuda_wait(st) ddpc__cuda_wait_at((st), DDPC__CUDA_SITE(__FILE__, __LINE__))
#define ddpc__cuda_wait_event(ev) \
    ddpc__cuda_wait_event_at((ev), DDPC__CUDA_SITE(__FILE__, __LINE__))

/* candidates.cu: whether DDPC_CUDA_CANDIDATES turns on the candidate kernel `name`, and the list
 * as given (NULL when unset or empty); read once. */
bool ddpc__cuda_candidate(const char *name);
const char *ddpc__cuda_candidates(void);

/* elementwise.cu */
void ddpc__cuda_fill_f32(float *x, float value, int64_t n);
void ddpc__cuda_add_f32(float *y, const float *a, const float *b, int64_t n);
void ddpc__cuda_axpy_f32(float *y, float alpha, const float *x, int64_t n);
void ddpc__cuda_relu_forward(float *y, const float *x, int64_t n);
void ddpc__cuda_relu_backward(float *dx, const float *dy, const float *y, int64_t n);
void ddpc__cuda_gelu_forward(float *y, const float *x, int64_t n);
void ddpc__cuda_gelu_backward(float *dx, const float *dy, const float *x, int64_t n);
/* y (n) 16-bit (prec) = gelu_forward's values rounded to nearest even. */
void ddpc__cuda_gelu_forward_16(ddpc_precision prec, void *y, const float *x, int64_t n);

/* relu_mask.cu */
void ddpc__cuda_relu_mask(float *x, const float *y, int64_t n);

/* The compute type of fp32 products: CUBLAS_COMPUTE_32F, or its FAST_TF32 once allow_tf32(true)
 * (gemm.cu; attention.cu's fp32 products take it too). */
void ddpc__cuda_allow_tf32(bool on);
cublasComputeType_t ddpc__cuda_fp32_compute(void);
/* gemm.cu (cuBLAS: fp32 as ddpc__cuda_fp32_compute says, TF32 off by default; bf16/fp16 as fp32
 * inputs rounded to bf16/fp16 on the tensor cores, fp32 accumulation and output: autocast's
 * numerics) */
void ddpc__cuda_gemm(ddpc_precision prec, ddpc_transpose ta, ddpc_transpose tb, int64_t m,
                     int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                     const float *b, int64_t ldb, float beta, float *c, int64_t ldc);
/* Row-major c (m, n) = alpha op(a) (m, k) op(b) (k, n) for `batch` matrices sa, sb, sc elements
 * apart (one cublasGemmStridedBatchedEx; the sizes must fit cuBLAS's int). in16: a and b hold
 * 16-bit values of prec's type (bf16 / fp16), rounded by the caller, multiplied with fp32
 * accumulation: ddpc__cuda_gemm's numerics. Otherwise a and b are fp32: fp32 as
 * ddpc__cuda_fp32_compute says, bf16/fp16 rounded by cuBLAS's _FAST_16BF / _FAST_16F compute
 * types (attention.cu's products). c is fp32, overwritten (beta 0). */
void ddpc__cuda_gemm_batched(ddpc_precision prec, bool in16, bool ta, bool tb, int64_t m,
                             int64_t n, int64_t k, float alpha, const void *a, int64_t lda,
                             int64_t sa, const void *b, int64_t ldb, int64_t sb, float *c,
                             int64_t ldc, int64_t sc, int64_t batch);
void ddpc__cuda_linear_forward(ddpc_precision prec, float *y, const float *x, const float *w,
                               const float *b, int64_t n, int64_t in, int64_t out);
void ddpc__cuda_linear_residual_forward(ddpc_precision prec, float *y, const float *x,
                                        const float *w, const float *b, const float *r, int64_t n,
                                        int64_t in, int64_t out);
void ddpc__cuda_linear_backward(ddpc_precision prec, float *dx, float *dw, float *db,
                                const float *dy, const float *x, const float *w, int64_t n,
                                int64_t in, int64_t out);
/* The 16-bit LM head's products, on gemm_16's padded shapes and rounded operands:
 * y (padded(n), padded(out)) 16-bit (prec) = x (n, in) @ w (out, in)^T, the padding zeros (y's
 * row stride padded(out)); and linear_backward's dx (n, in) += dy @ w, dw (out, in) += dy^T @ x
 * from such a 16-bit dy (padded(n), padded(out)), zero in its padding. padded() is
 * ddpc__cuda_gemm_padded. */
int64_t ddpc__cuda_gemm_padded(int64_t x);
/* The BLAS scratch (bytes) linear_forward at 16 bits, no bias, takes for these sizes. */
size_t ddpc__cuda_linear_forward_scratch(int64_t n, int64_t in, int64_t out);
void ddpc__cuda_linear_forward_16out(ddpc_precision prec, void *y, const float *x, const float *w,
                                     int64_t n, int64_t in, int64_t out);
void ddpc__cuda_linear_backward_16in(ddpc_precision prec, float *dx, float *dw, const void *dy,
                                     const float *x, const float *w, int64_t n, int64_t in,
                                     int64_t out);
/* linear_residual_forward (r may be NULL) and linear_backward with x a 16-bit copy (n, in) packed,
 * as the rounding of an fp32 x leaves it: n and in unchanged by padded(), bf16 / fp16, n, in and
 * out positive. */
void ddpc__cuda_linear_forward_x16(ddpc_precision prec, float *y, const void *x16, const float *w,
                                   const float *b, const float *r, int64_t n, int64_t in,
                                   int64_t out);
void ddpc__cuda_linear_backward_x16(ddpc_precision prec, float *dx, float *dw, float *db,
                                    const float *dy, const void *x16, const float *w, int64_t n,
                                    int64_t in, int64_t out);
/* round.cu: dst (prows, pcols) 16-bit = src (rows, cols; lds) rounded to nearest even, zero past
 * rows and cols; pcols a multiple of 4 (asserted). */
void ddpc__cuda_round4(ddpc_precision prec, void *dst, int64_t prows, int64_t pcols,
                       const float *src, int64_t rows, int64_t cols, int64_t lds);
/* gemm_lt.cu: column-major d (m, n; ldd) fp32 = op(a) op(b) [+ c] + bias (m) broadcast over d's
 * columns, a and b 16-bit (type), fp32 accumulation, through cuBLASLt's bias epilogue with the
 * descriptors and algorithm cached per shape and alignment; c (m, n; ldd) may be NULL or d.
 * False, having run nothing, where cuBLASLt offers no algorithm for it (the caller then seeds
 * and adds). */
bool ddpc__cuda_lt_bias_gemm(cudaDataType_t type, cublasOperation_t opa, cublasOperation_t opb,
                             int m, int n, int k, const void *a, int lda, const void *b, int ldb,
                             const float *bias, const float *c, float *d, int ldd);

/* layernorm.cu, embedding.cu */
void ddpc__cuda_layernorm_forward(float *y, float *mean, float *rstd, const float *x,
                                  const float *w, const float *b, int64_t rows, int64_t c);
/* y (rows, c) 16-bit (prec) = layernorm_forward's y rounded to nearest even; mean, rstd as it. */
void ddpc__cuda_layernorm_forward_16(ddpc_precision prec, void *y, float *mean, float *rstd,
                                     const float *x, const float *w, const float *b, int64_t rows,
                                     int64_t c);
void ddpc__cuda_layernorm_backward(float *dx, float *dw, float *db, const float *dy,
                                   const float *x, const float *w, const float *mean,
                                   const float *rstd, int64_t rows, int64_t c);
void ddpc__cuda_embedding_forward(float *y, const int32_t *tokens, const float *wte,
                                  const float *wpe, int64_t b, int64_t t, int64_t c);
void ddpc__cuda_embedding_backward(float *dwte, float *dwpe, const float *dy,
                                   const int32_t *tokens, int64_t b, int64_t t, int64_t c);

/* seq2seq's members. mha.cu (each product one batched GEMM over every (batch, head); the
 * workspace, forward's too, holds the head-major operands), loss_smooth.cu (the row losses in
 * DDPC__CUDA_SCRATCH_S2S where the caller keeps none, and the returning forward's sums there),
 * positional.cu (backward's scaled dy in DDPC__CUDA_SCRATCH_S2S, then embedding.cu's backward). */
size_t ddpc__cuda_mha_workspace_floats(const ddpc_mha_shape *s);
void ddpc__cuda_mha_forward(ddpc_precision prec, float *out, float *att, const float *q,
                            const float *k, const float *v, const uint8_t *key_pad,
                            const ddpc_mha_shape *s, float *ws);
void ddpc__cuda_mha_backward(ddpc_precision prec, float *dq, float *dk, float *dv,
                             const float *dout, const float *q, const float *k, const float *v,
                             const float *att, const ddpc_mha_shape *s, float *ws);
void ddpc__cuda_pad_mask(uint8_t *mask, const int32_t *tokens, int64_t n, int32_t pad);
float ddpc__cuda_cross_entropy_smooth_forward(float *probs, float *losses, const float *logits,
                                              const int32_t *targets, int64_t n, int64_t v,
                                              int32_t ignore_index, float eps, int64_t *n_valid);
void ddpc__cuda_cross_entropy_smooth_backward(float *dlogits, const float *probs,
                                              const int32_t *targets, int64_t n, int64_t v,
                                              int32_t ignore_index, float eps, int64_t n_valid,
                                              float dloss);
void ddpc__cuda_cross_entropy_smooth_forward_into(double *sums, float *probs, float *losses,
                                                  const float *logits, const int32_t *targets,
                                                  int64_t n, int64_t v, int32_t ignore_index,
                                                  float eps);
void ddpc__cuda_cross_entropy_smooth_backward_from(float *dlogits, const float *probs,
                                                   const int32_t *targets, int64_t n, int64_t v,
                                                   int32_t ignore_index, float eps,
                                                   const double *sums, float dloss);
void ddpc__cuda_sinusoidal_positions(float *pe, int64_t t, int64_t c);
void ddpc__cuda_embedding_scaled_forward(float *y, const int32_t *tokens, const float *w,
                                         float scale, const float *pe, int64_t b, int64_t t,
                                         int64_t c);
void ddpc__cuda_embedding_scaled_backward(float *dw, const float *dy, const int32_t *tokens,
                                          float scale, int64_t b, int64_t t, int64_t c);

/* attention.cu */
size_t ddpc__cuda_attention_saved_floats(ddpc_precision prec, int64_t b, int64_t t, int64_t c,
                                         int64_t nh);
size_t ddpc__cuda_attention_workspace_floats(ddpc_precision prec, int64_t b, int64_t t, int64_t c,
                                             int64_t nh);
void ddpc__cuda_attention_forward(ddpc_precision prec, float *out, float *att, const float *qkv,
                                  int64_t b, int64_t t, int64_t c, int64_t nh, float *ws);
void ddpc__cuda_attention_backward(ddpc_precision prec, float *dqkv, const float *dout,
                                   const float *qkv, const float *att, int64_t b, int64_t t,
                                   int64_t c, int64_t nh, float *ws);
/* attention_flash.cu: the fused kernels, where ddpc__cuda_flash_applies (bf16/fp16, head dim 32,
 * 64 or 128, a device whose shared memory holds their blocks); saved
 * (ddpc__cuda_attention_saved_floats) plays att's part; ws, 32-byte aligned, holds
 * ddpc__cuda_flash_workspace_floats: D (B, NH, T), q, k, v and dout at 16 bits and the dS of
 * each causal tile pair. */
bool ddpc__cuda_flash_applies(ddpc_precision prec, int64_t b, int64_t t, int64_t c, int64_t nh);
size_t ddpc__cuda_flash_workspace_floats(int64_t b, int64_t t, int64_t c, int64_t nh);
void ddpc__cuda_flash_forward(ddpc_precision prec, float *out, float *saved, const float *qkv,
                              int64_t b, int64_t t, int64_t c, int64_t nh);
void ddpc__cuda_flash_backward(ddpc_precision prec, float *dqkv, const float *dout,
                               const float *qkv, const float *saved, int64_t b, int64_t t,
                               int64_t c, int64_t nh, float *ws);

/* conv.cu, pool.cu, batchnorm.cu */
size_t ddpc__cuda_conv2d_workspace_floats(const ddpc_conv2d_shape *s);
void ddpc__cuda_conv2d_forward(ddpc_precision prec, float *y, const float *x, const float *w,
                               const float *b, const ddpc_conv2d_shape *s, float *ws);
void ddpc__cuda_conv2d_backward(ddpc_precision prec, float *dx, float *dw, float *db,
                                const float *dy, const float *x, const float *w,
                                const ddpc_conv2d_shape *s, float *ws);
void ddpc__cuda_maxpool2d_forward(float *y, int32_t *idx, const float *x, int64_t n, int64_t c,
                                  int64_t h, int64_t w, int64_t k, int64_t stride);
void ddpc__cuda_maxpool2d_backward(float *dx, const float *dy, const int32_t *idx, int64_t n,
                                   int64_t c, int64_t h, int64_t w, int64_t k, int64_t stride);
void ddpc__cuda_batchnorm_sums(double *sums, const float *x, int64_t n, int64_t c, int64_t hw);
void ddpc__cuda_batchnorm_stats(float *mean, float *invstd, float *running_mean,
                                float *running_var, const double *sums, int64_t c,
                                float momentum, float eps);
void ddpc__cuda_batchnorm_eval_stats(float *mean, float *invstd, const float *running_mean,
                                     const float *running_var, int64_t c, float eps);
void ddpc__cuda_batchnorm_apply(float *y, const float *x, const float *mean, const float *invstd,
                                const float *w, const float *b, int64_t n, int64_t c, int64_t hw);
void ddpc__cuda_batchnorm_backward_sums(double *sums, const float *dy, const float *x,
                                        const float *mean, const float *invstd, int64_t n,
                                        int64_t c, int64_t hw);
void ddpc__cuda_batchnorm_backward_params(float *dw, float *db, const double *sums, int64_t c);
void ddpc__cuda_batchnorm_backward_input(float *dx, const float *dy, const float *x,
                                         const float *mean, const float *invstd, const float *w,
                                         const double *sums, double count, int64_t n, int64_t c,
                                         int64_t hw);

/* dropout.cu */
void ddpc__cuda_dropout_forward(float *y, const float *x, int64_t n, float p, uint64_t seed,
                                uint64_t stream);
void ddpc__cuda_dropout_backward(float *dx, const float *dy, int64_t n, float p, uint64_t seed,
                                 uint64_t stream);

/* loss.cu */
float ddpc__cuda_cross_entropy_forward(float *probs, float *losses, const float *logits,
                                       const int32_t *targets, int64_t n, int64_t v,
                                       int32_t ignore_index, int64_t *n_valid);
void ddpc__cuda_cross_entropy_backward(float *dlogits, const float *probs, const int32_t *targets,
                                       int64_t n, int64_t v, int32_t ignore_index,
                                       int64_t n_valid, float dloss);
int64_t ddpc__cuda_argmax_correct(const float *scores, const int32_t *targets, int64_t n,
                                  int64_t v, int32_t ignore_index);
void ddpc__cuda_softmax_rows(float *x, int64_t n, int64_t classes);
void ddpc__cuda_cross_entropy_forward_into(double *sums, float *probs, float *losses,
                                           const float *logits, const int32_t *targets, int64_t n,
                                           int64_t v, int32_t ignore_index);
void ddpc__cuda_cross_entropy_backward_from(float *dlogits, const float *probs,
                                            const int32_t *targets, int64_t n, int64_t v,
                                            int32_t ignore_index, const double *sums, float dloss);
void ddpc__cuda_cross_entropy_backward_inplace(float *probs, const int32_t *targets, int64_t n,
                                               int64_t v, int32_t ignore_index, int64_t n_valid,
                                               const double *sums, float dloss);
void ddpc__cuda_cross_entropy_fused(double *sums, float *dlogits, float *losses,
                                    const float *logits, const int32_t *targets, int64_t n,
                                    int64_t v, int32_t ignore_index, float dloss);
void ddpc__cuda_argmax_correct_into(double *correct, const float *scores, const int32_t *targets,
                                    int64_t n, int64_t v, int32_t ignore_index);
/* The LM head's loss over 16-bit logits (rows, ld) written by ddpc__cuda_linear_forward_16out
 * (rows >= n >= 1, those past n and the columns past v zeroed): cross_entropy_fused's gradient
 * over v of each row's ld columns, rounded to 16 bits in place, losses (n) (may be NULL), sums
 * (3) = {loss sum, valid rows, argmax hits}. Only where ddpc__cuda_ce16_applies: prec bf16/fp16,
 * ld a multiple of 8 and >= v, a row of ld within the device's shared memory. */
bool ddpc__cuda_ce16_applies(ddpc_precision prec, int64_t v, int64_t ld);
void ddpc__cuda_ce16_fused(ddpc_precision prec, double *sums, void *logits, float *losses,
                           const int32_t *targets, int64_t n, int64_t rows, int64_t v, int64_t ld,
                           int32_t ignore_index, float dloss);
/* regression_loss.cu: the elementwise losses (device.h's mse_forward ... elementwise_loss_into). */
float ddpc__cuda_mse_forward(const float *pred, const float *target, int64_t n);
void ddpc__cuda_mse_backward(float *dpred, const float *pred, const float *target, int64_t n,
                             float dloss);
float ddpc__cuda_l1_forward(const float *pred, const float *target, int64_t n);
void ddpc__cuda_l1_backward(float *dpred, const float *pred, const float *target, int64_t n,
                            float dloss);
float ddpc__cuda_smooth_l1_forward(const float *pred, const float *target, int64_t n, float beta);
void ddpc__cuda_smooth_l1_backward(float *dpred, const float *pred, const float *target, int64_t n,
                                   float beta, float dloss);
float ddpc__cuda_bce_logits_forward(float *probs, const float *logits, const float *target,
                                    int64_t n);
void ddpc__cuda_bce_logits_backward(float *dlogits, const float *probs, const float *target,
                                    int64_t n, float dloss);
int64_t ddpc__cuda_multilabel_correct(const float *probs, const float *target, int64_t n);
void ddpc__cuda_regression_errors(const float *pred, const float *target, int64_t n,
                                  double *sum_abs, double *sum_sq);
void ddpc__cuda_elementwise_loss_into(double *sums, ddpc_elementwise_loss loss, float beta,
                                      float *probs, const float *pred, const float *target,
                                      int64_t n);
/* act16.cu: the table's act16_applies, layernorm_forward16, gelu_forward16, linear_forward16 and
 * linear_backward16 (device.h). */
bool ddpc__cuda_act16_applies(ddpc_precision prec, int64_t rows, int64_t cols);
void ddpc__cuda_layernorm_forward16(ddpc_precision prec, float *y16, float *mean, float *rstd,
                                    const float *x, const float *w, const float *b, int64_t rows,
                                    int64_t c);
void ddpc__cuda_gelu_forward16(ddpc_precision prec, float *y16, const float *x, int64_t n);
void ddpc__cuda_linear_forward16(ddpc_precision prec, float *y, const float *x16, const float *w,
                                 const float *b, const float *r, int64_t n, int64_t in,
                                 int64_t out);
void ddpc__cuda_linear_backward16(ddpc_precision prec, float *dx, float *dw, float *db,
                                  const float *dy, const float *x16, const float *w, int64_t n,
                                  int64_t in, int64_t out);
/* head16.cu: the table's head16_forward and head16_backward (device.h). */
bool ddpc__cuda_head16_forward(ddpc_precision prec, double *sums, void *logits, size_t bytes,
                               float *losses, const float *x, const float *w,
                               const int32_t *targets, int64_t n, int64_t c, int64_t v,
                               int32_t ignore_index, float dloss);
void ddpc__cuda_head16_backward(ddpc_precision prec, float *dx, float *dw, const void *dlogits,
                                const float *x, const float *w, int64_t n, int64_t c, int64_t v);

/* optim.cu */
void ddpc__cuda_adamw_update(float *params, const float *grads, float *m, float *v,
                             const uint8_t *mask, int64_t n, const ddpc_adamw_coef *k);
void ddpc__cuda_sgd_update(float *params, const float *grads, float *buf, const uint8_t *mask,
                           int64_t n, const ddpc_sgd_coef *k);
double ddpc__cuda_sumsq(const float *g, int64_t n);
bool ddpc__cuda_unscale(float *g, int64_t n, float scale);
void ddpc__cuda_scale(float *g, int64_t n, float s);
void ddpc__cuda_grad_norm_clip(double *norm, float *g, int64_t n, float max_norm);

/* stage.cu */
void ddpc__cuda_stage_in(int slot, void *const *dst, const void *const *src, const size_t *bytes,
                         int count);

/* half.cu */
void ddpc__cuda_f32_to_half_array(uint16_t *dst, const float *src, size_t n, int bf16);
void ddpc__cuda_half_to_f32_array(float *dst, const uint16_t *src, size_t n, int bf16);

#ifdef __cplusplus
}
#endif
#endif
