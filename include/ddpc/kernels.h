// SPDX-License-Identifier: MIT
/* CPU kernels: math on flat fp32 arrays, row-major, no knowledge of layers or ranks.
 * Conventions: every *_backward ACCUMULATES (+=) into its gradient outputs (dx, dw, db...), so the
 * caller zeroes them once per step, except the two that say they OVERWRITE (gelu and attention
 * backward, whose outputs are always fresh temporaries); a gradient pointer that is NULL is
 * skipped. Kernels are reentrant; they parallelise internally over the one OpenMP pool that
 * OpenBLAS also uses.
 * Shapes are written beside each argument, PyTorch's layout for weights (Linear: (out, in)). */
#ifndef DDPC_KERNELS_H
#define DDPC_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- threads ---------------------------------------------------------------------------- */

/* Sets the compute threads for our kernels and the BLAS (one OpenMP pool). n <= 0 keeps OpenMP's
 * count (OMP_NUM_THREADS when set, else every core) and gives the BLAS the same.
 * Like omp_set_num_threads it applies to the calling thread only; other threads keep the
 * OMP_NUM_THREADS default. */
void ddpc_kernels_set_threads(int n);
int ddpc_kernels_threads(void);
/* "OpenBLAS 0.3.21 (openmp, SkylakeX)"-style description of the BLAS in use. */
const char *ddpc_kernels_blas_info(void);

/* ---- GEMM: the one matrix-multiply interface ------------------------------------------- */

typedef enum { DDPC_NO_TRANS = 0, DDPC_TRANS = 1 } ddpc_transpose;

/* c (m, n) = alpha * op(a) (m, k) @ op(b) (k, n) + beta * c, row-major with leading dimensions.
 * Backed by CBLAS sgemm for fp32. */
void ddpc_gemm_f32(ddpc_transpose ta, ddpc_transpose tb, int64_t m, int64_t n, int64_t k,
                   float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                   float beta, float *c, int64_t ldc);

/* ---- precision of matrix products (PyTorch autocast's rule) ---------------------------- */

/* Under BF16 or FP16 a matrix product rounds both fp32 inputs to that format (round to nearest
 * even), multiplies and accumulates in fp32 and writes fp32: the numerics of autocast's matmuls
 * and of GPU tensor cores. Everything that is not a matrix product stays fp32. */
typedef enum { DDPC_PREC_FP32 = 0, DDPC_PREC_BF16, DDPC_PREC_FP16, DDPC_PREC_COUNT } ddpc_precision;

/* "fp32" / "bf16" / "fp16"; "unknown" outside the enum. */
const char *ddpc_precision_name(ddpc_precision p);
/* The precision named s (as above); false for any other string. */
bool ddpc_precision_from_name(const char *s, ddpc_precision *out);

/* ddpc_gemm_f32's contract at precision p. BF16 runs on oneDNN's bf16 matmul where the CPU has
 * one (AVX-512 BF16, AMX); elsewhere, and always for FP16, the inputs are rounded into per-thread
 * scratch and multiplied by sgemm: a product of two 8-bit (11-bit) mantissas is exact in fp32, so
 * both ways compute the same thing up to summation order. Scratch and oneDNN primitives are made
 * once per shape and thread, so a repeated shape allocates and creates nothing. */
void ddpc_gemm(ddpc_precision prec, ddpc_transpose ta, ddpc_transpose tb, int64_t m, int64_t n,
               int64_t k, float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
               float beta, float *c, int64_t ldc);

/* The same product on oneDNN's matmul primitive, for p FP32 or BF16 (tests and benchmarks use it
 * to compare engines). Returns false, computing nothing, when oneDNN has no matmul for p here. */
bool ddpc_gemm_onednn(ddpc_precision prec, ddpc_transpose ta, ddpc_transpose tb, int64_t m, int64_t n,
                      int64_t k, float alpha, const float *a, int64_t lda, const float *b,
                      int64_t ldb, float beta, float *c, int64_t ldc);

/* What runs precision p's products on this CPU: "OpenBLAS sgemm", "oneDNN 2.6.3 matmul, bf16
 * (avx512_core_amx)" or "inputs rounded to bf16, OpenBLAS sgemm (oneDNN 2.6.3 has no bf16 matmul
 * for avx2)". *native (may be NULL) tells whether the CPU multiplies in p itself. */
const char *ddpc_kernels_matmul_info(ddpc_precision prec, bool *native);
/* "oneDNN 2.6.3 (openmp), ISA avx2": the library and the instruction set it dispatches to. */
const char *ddpc_kernels_onednn_info(void);
/* Process-wide counts of what low-precision products set up: scratch growths (rounded path and
 * bf16 conversion buffers) and oneDNN primitives created. Flat across warm steps. */
typedef struct {
    uint64_t scratch_grows;
    uint64_t primitives_created;
} ddpc_matmul_setup_counts;
ddpc_matmul_setup_counts ddpc_kernels_matmul_setup_counts(void);
/* Frees the calling thread's low-precision scratch and oneDNN primitives (they are otherwise kept
 * for the thread's lifetime); the next product recreates what it needs. */
void ddpc_kernels_release_thread(void);

/* ---- elementwise and small helpers ------------------------------------------------------ */

void ddpc_fill_f32(float *x, float value, int64_t n);
/* y (n) = a (n) + b (n); y may alias a or b. */
void ddpc_add_f32(float *y, const float *a, const float *b, int64_t n);
/* y (n) += alpha * x (n). */
void ddpc_axpy_f32(float *y, float alpha, const float *x, int64_t n);

/* ---- Linear: y = x @ w^T + b --------------------------------------------------------- */
/* Linear, attention and convolution take the precision `p` of their matrix products (ddpc_gemm);
 * their other arithmetic (bias, softmax, im2col) is fp32 whatever p is. */

/* y (n, out) = x (n, in) @ w (out, in)^T + b (out); b may be NULL. y must not alias x. */
void ddpc_linear_forward(ddpc_precision prec, float *y, const float *x, const float *w, const float *b,
                         int64_t n, int64_t in, int64_t out);
/* y (n, out) = r (n, out) + x (n, in) @ w (out, in)^T + b (out): a linear layer with a residual
 * add fused in (one pass over y). b or r may be NULL; r may alias y, x must not. */
void ddpc_linear_residual_forward(ddpc_precision prec, float *y, const float *x, const float *w, const float *b,
                                  const float *r, int64_t n, int64_t in, int64_t out);
/* dx (n, in) += dy @ w; dw (out, in) += dy^T @ x; db (out) += column sums of dy (n, out). */
void ddpc_linear_backward(ddpc_precision prec, float *dx, float *dw, float *db, const float *dy, const float *x,
                          const float *w, int64_t n, int64_t in, int64_t out);

/* ---- activations ------------------------------------------------------------------------ */

/* y (n) = max(x, 0); y may alias x. */
void ddpc_relu_forward(float *y, const float *x, int64_t n);
/* dx (n) += dy * (y > 0), from the forward OUTPUT y (so forward may run in place). */
void ddpc_relu_backward(float *dx, const float *dy, const float *y, int64_t n);
/* x (n) = y > 0 ? x : 0: ReLU's backward in place, masking a gradient x by the activation y. */
void ddpc_relu_mask(float *x, const float *y, int64_t n);

/* GELU, tanh approximation (Hendrycks & Gimpel 2016; PyTorch approximate='tanh').
 * y (n) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); y must not alias x. */
void ddpc_gelu_forward(float *y, const float *x, int64_t n);
/* dx (n) = dy (n) * gelu'(x (n)): OVERWRITES dx, which may alias dy (in place). */
void ddpc_gelu_backward(float *dx, const float *dy, const float *x, int64_t n);

/* ---- LayerNorm over the last dimension (Ba et al. 2016), eps = 1e-5 as in PyTorch --------- */

/* y, x (rows, c); w, b (c); saves mean (rows) and rstd (rows) for backward. */
void ddpc_layernorm_forward(float *y, float *mean, float *rstd, const float *x, const float *w,
                            const float *b, int64_t rows, int64_t c);
/* dx (rows, c) += ...; dw (c) += ...; db (c) += ... */
void ddpc_layernorm_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                             const float *w, const float *mean, const float *rstd,
                             int64_t rows, int64_t c);

/* ---- token + learned position embedding ------------------------------------------------- */

/* y (b, t, c) = wte[tokens[b, t]] (v, c) + wpe[t] (t_max >= t, c). Tokens must be in [0, v). */
void ddpc_embedding_forward(float *y, const int32_t *tokens, const float *wte, const float *wpe,
                            int64_t b, int64_t t, int64_t c);
/* dwte (v, c) += scatter of dy (b, t, c) by token; dwpe (t, c) += sum over batch of dy. */
void ddpc_embedding_backward(float *dwte, float *dwpe, const float *dy, const int32_t *tokens,
                             int64_t b, int64_t t, int64_t c);

/* ---- causal multi-head self-attention (Vaswani et al. 2017; GPT-2 layout) ------------------ */

/* Floats of scratch that forward and backward need, passed as `ws`: one (t, t) matrix per thread
 * slot, slots = max(ddpc_kernels_threads(), cores) when queried, so query again after raising the
 * thread count above the core count. Forward does not touch ws (it may be NULL there). */
size_t ddpc_attention_workspace_floats(int64_t b, int64_t t, int64_t c, int64_t nh);
/* qkv (b, t, 3c) holds q | k | v, each split into nh heads of c/nh; out (b, t, c) is the heads'
 * outputs concatenated; att (b, nh, t, t) saves the softmax probabilities (zero above the
 * diagonal). Scale 1/sqrt(c/nh). */
void ddpc_attention_forward(ddpc_precision prec, float *out, float *att, const float *qkv, int64_t b, int64_t t,
                            int64_t c, int64_t nh, float *ws);
/* dqkv (b, t, 3c) = gradient of out w.r.t. qkv, given dout (b, t, c), qkv and att from forward:
 * OVERWRITES every element of dqkv (no zeroing needed). dqkv must not alias the inputs. */
void ddpc_attention_backward(ddpc_precision prec, float *dqkv, const float *dout, const float *qkv, const float *att,
                             int64_t b, int64_t t, int64_t c, int64_t nh, float *ws);

/* ---- multi-head attention with key padding, optional causality, tq != tk (torch MHA core) ---- */

/* Shape of one masked attention: queries (b, tq) against keys/values (b, tk), width c split into nh
 * heads of c/nh. Rows of q are ldq floats apart, rows of k and v ldk (so q, k, v may be column
 * ranges of a packed qkv (ld 3c) or kv (ld 2c) buffer); batch rows bsq and bsk apart (0: tq * ldq
 * and tk * ldk, i.e. packed; larger for a key/value cache of more positions than tk). causal:
 * query i sees keys j <= i only (needs tq == tk). */
typedef struct {
    int64_t b, tq, tk, c, nh;
    int64_t ldq, ldk;
    int64_t bsq, bsk;
    bool causal;
} ddpc_mha_shape;

/* The batch strides of q and of k/v that s means (its bsq, bsk, or packed where they are 0). */
static inline int64_t ddpc_mha_q_batch_stride(const ddpc_mha_shape *s)
{
    return s->bsq ? s->bsq : s->tq * s->ldq;
}
static inline int64_t ddpc_mha_kv_batch_stride(const ddpc_mha_shape *s)
{
    return s->bsk ? s->bsk : s->tk * s->ldk;
}

/* Floats of scratch that forward and backward take, passed as `ws`: here backward's one (tq, tk)
 * matrix per thread slot, slots = max(ddpc_kernels_threads(), cores) when queried (forward takes
 * none on the CPU; a device's table may, device.h). */
size_t ddpc_mha_workspace_floats(const ddpc_mha_shape *s);
/* out (b, tq, c) = concat over heads of softmax(q k^T / sqrt(c/nh) + mask) v, where key j of batch
 * row i is masked when key_pad[i, j] != 0 (key_pad (b, tk), NULL: none; PyTorch's
 * key_padding_mask) or, if causal, when j > the query. att (b, nh, tq, tk) saves the probabilities,
 * exactly 0 at masked keys; a query whose keys are all masked gets an all-zero row and output 0
 * (PyTorch gives NaN there). q (b, tq, ldq), k and v (b, tk, ldk). out must not alias the inputs.
 * ws (ddpc_mha_workspace_floats) is unused here and may be NULL. */
void ddpc_mha_forward(ddpc_precision prec, float *out, float *att, const float *q, const float *k,
                      const float *v, const uint8_t *key_pad, const ddpc_mha_shape *s, float *ws);
/* dq (b, tq, ldq), dk and dv (b, tk, ldk), laid out as q, k and v: OVERWRITES their first c columns
 * (no zeroing needed), from dout (b, tq, c) and forward's att. They must not alias the inputs. */
void ddpc_mha_backward(ddpc_precision prec, float *dq, float *dk, float *dv, const float *dout,
                       const float *q, const float *k, const float *v, const float *att,
                       const ddpc_mha_shape *s, float *ws);

/* mask (n) = 1 where tokens (n) == pad, else 0: a key_pad for ddpc_mha_forward. */
void ddpc_pad_mask(uint8_t *mask, const int32_t *tokens, int64_t n, int32_t pad);

/* ---- Transformer embeddings (Vaswani et al. 2017, sections 3.4 and 3.5) ------------------- */

/* pe (t, c): pe[p, 2i] = sin(p / 10000^(2i/c)), pe[p, 2i+1] = cos(p / 10000^(2i/c)), computed in
 * double (the PyTorch tutorial's PositionalEncoding, rounded once to fp32). */
void ddpc_sinusoidal_positions(float *pe, int64_t t, int64_t c);
/* y (b, t, c) = scale * w[tokens[b, t]] (v, c) + pe[t] (t_max >= t, c); pe may be NULL. Tokens must
 * be in [0, v). */
void ddpc_embedding_scaled_forward(float *y, const int32_t *tokens, const float *w, float scale,
                                   const float *pe, int64_t b, int64_t t, int64_t c);
/* dw (v, c) += scale * dy (b, t, c) scattered by token. */
void ddpc_embedding_scaled_backward(float *dw, const float *dy, const int32_t *tokens, float scale,
                                    int64_t b, int64_t t, int64_t c);

/* ---- Conv2d via im2col + GEMM, NCHW ----------------------------------------------------- */

typedef struct {
    int64_t n, c, h, w; /* input (n, c, h, w) */
    int64_t k, r, s;    /* weight (k, c, r, s), bias (k) */
    int64_t stride, pad;
} ddpc_conv2d_shape;

static inline int64_t ddpc_conv2d_out_h(const ddpc_conv2d_shape *s) { return (s->h + 2 * s->pad - s->r) / s->stride + 1; }
static inline int64_t ddpc_conv2d_out_w(const ddpc_conv2d_shape *s) { return (s->w + 2 * s->pad - s->s) / s->stride + 1; }
/* Floats of scratch forward and backward need, passed as `ws`: per thread slot one im2col matrix
 * (c*r*s, oh*ow) and one dw partial (k, c*r*s); slots = max(ddpc_kernels_threads(), cores) when
 * queried, so query again after raising the thread count above the core count. */
size_t ddpc_conv2d_workspace_floats(const ddpc_conv2d_shape *s);
/* y (n, k, oh, ow) = conv(x (n, c, h, w), w (k, c, r, s)) + b (k); b may be NULL. */
void ddpc_conv2d_forward(ddpc_precision prec, float *y, const float *x, const float *w, const float *b,
                         const ddpc_conv2d_shape *s, float *ws);
/* dx (n, c, h, w) += ...; dw (k, c, r, s) += ...; db (k) += ... (each may be NULL). */
void ddpc_conv2d_backward(ddpc_precision prec, float *dx, float *dw, float *db, const float *dy, const float *x,
                          const float *w, const ddpc_conv2d_shape *s, float *ws);

/* ---- BatchNorm over (n, c, hw) per channel (Ioffe & Szegedy 2015; torch BatchNorm1d/2d) ---- */
/* Training statistics pass through double sums so that ranks can add theirs up (SyncBatchNorm)
 * before they become mean/invstd: sums (2c + 1) = [sum x per channel | sum x^2 | count]. */
void ddpc_batchnorm_sums(double *sums, const float *x, int64_t n, int64_t c, int64_t hw);
/* mean, invstd (c) from sums (biased variance, 1/sqrt(var + eps)); with running_mean/var (c)
 * non-NULL, also running = (1 - momentum) * running + momentum * batch value, the variance
 * unbiased (count / (count - 1)), as torch does. */
void ddpc_batchnorm_stats(float *mean, float *invstd, float *running_mean, float *running_var,
                          const double *sums, int64_t c, float momentum, float eps);
/* Evaluation: mean = running_mean, invstd = 1/sqrt(running_var + eps), each (c). */
void ddpc_batchnorm_eval_stats(float *mean, float *invstd, const float *running_mean,
                               const float *running_var, int64_t c, float eps);
/* y (n, c, hw) = (x - mean) * invstd * w + b; w, b (c) may be NULL (ones / zeros); y may be x. */
void ddpc_batchnorm_apply(float *y, const float *x, const float *mean, const float *invstd,
                          const float *w, const float *b, int64_t n, int64_t c, int64_t hw);
/* sums (2c) = [sum dy per channel | sum dy * xhat], xhat = (x - mean) * invstd: the local halves
 * of the backward that SyncBatchNorm adds up across ranks. */
void ddpc_batchnorm_backward_sums(double *sums, const float *dy, const float *x,
                                  const float *mean, const float *invstd, int64_t n, int64_t c,
                                  int64_t hw);
/* dw (c) += sum dy * xhat, db (c) += sum dy, from this rank's sums (either may be NULL). */
void ddpc_batchnorm_backward_params(float *dw, float *db, const double *sums, int64_t c);
/* dx (n, c, hw) = w * invstd * (dy - sum dy / count - xhat * sum (dy xhat) / count), with the
 * sums over every sample normalised together (count of them); dx may be dy. */
void ddpc_batchnorm_backward_input(float *dx, const float *dy, const float *x, const float *mean,
                                   const float *invstd, const float *w, const double *sums,
                                   double count, int64_t n, int64_t c, int64_t hw);

/* ---- MaxPool2d, no padding -------------------------------------------------------------- */

/* y (n, c, oh, ow) with oh = (h - k) / stride + 1; idx (n, c, oh, ow) saves each max's flat
 * position within its (h, w) plane. Ties pick the first maximum, as PyTorch does. */
void ddpc_maxpool2d_forward(float *y, int32_t *idx, const float *x, int64_t n, int64_t c,
                            int64_t h, int64_t w, int64_t k, int64_t stride);
/* dx (n, c, h, w) += dy (n, c, oh, ow) routed through idx. */
void ddpc_maxpool2d_backward(float *dx, const float *dy, const int32_t *idx, int64_t n, int64_t c,
                             int64_t h, int64_t w, int64_t k, int64_t stride);

/* ---- Dropout (inverted; the mask is recomputed from the counter-based RNG, never stored) ---- */

/* y (n) = x * keep / (1 - p), keep_i = uniform(seed, stream, i) >= p; p in [0, 1). y may alias x. */
void ddpc_dropout_forward(float *y, const float *x, int64_t n, float p, uint64_t seed,
                          uint64_t stream);
/* dx (n) += dy * keep / (1 - p) with the same (seed, stream). */
void ddpc_dropout_backward(float *dx, const float *dy, int64_t n, float p, uint64_t seed,
                           uint64_t stream);

/* ---- softmax cross-entropy, mean over targets != ignore_index (PyTorch's default reduction) -- */

/* probs (n, v) = softmax(logits (n, v)); losses (n) = -log probs[target] (0 where ignored).
 * Returns the mean loss over valid rows (0 if none) and stores their count in *n_valid.
 * probs may alias logits. Targets outside [0, v) other than ignore_index are treated as ignored. */
float ddpc_cross_entropy_forward(float *probs, float *losses, const float *logits,
                                 const int32_t *targets, int64_t n, int64_t v,
                                 int32_t ignore_index, int64_t *n_valid);
/* dlogits (n, v) += dloss / n_valid * (probs - onehot(target)) on valid rows. */
void ddpc_cross_entropy_backward(float *dlogits, const float *probs, const int32_t *targets,
                                 int64_t n, int64_t v, int32_t ignore_index, int64_t n_valid,
                                 float dloss);
/* The same gradient written over probs (n, v) instead: dloss / n_valid * (probs - onehot(target))
 * on valid rows, 0 on the others (all 0 when n_valid <= 0); the same bits as backward onto zeroed
 * dlogits, without an (n, v) buffer for them. */
void ddpc_cross_entropy_backward_inplace(float *probs, const int32_t *targets, int64_t n,
                                         int64_t v, int32_t ignore_index, int64_t n_valid,
                                         float dloss);
/* Forward and backward in one sweep, for a training step whose dloss is known before its forward
 * (llm.c's fused classifier): sums (2) = {the sum of row losses in double, the valid rows}, losses
 * (n) as forward's (may be NULL), dlogits (n, v) = dloss / sums[1] * (softmax - onehot(target)) on
 * valid rows and 0 on the others (all 0 without valid rows). The same bits as forward into probs,
 * then backward onto zeroed dlogits. dlogits may alias logits. */
void ddpc_cross_entropy_fused(double *sums, float *dlogits, float *losses, const float *logits,
                              const int32_t *targets, int64_t n, int64_t v, int32_t ignore_index,
                              float dloss);
/* Label-smoothed softmax cross-entropy (Szegedy et al. 2016), PyTorch's
 * CrossEntropyLoss(ignore_index, label_smoothing=eps): row loss = (1 - eps) (-log p[target])
 * + eps/v sum_j (-log p_j), mean over valid rows; eps = 0 is ddpc_cross_entropy_forward. Arguments
 * and aliasing as there. */
float ddpc_cross_entropy_smooth_forward(float *probs, float *losses, const float *logits,
                                        const int32_t *targets, int64_t n, int64_t v,
                                        int32_t ignore_index, float eps, int64_t *n_valid);
/* dlogits (n, v) += dloss / n_valid * (probs - (1 - eps) onehot(target) - eps/v) on valid rows. */
void ddpc_cross_entropy_smooth_backward(float *dlogits, const float *probs, const int32_t *targets,
                                        int64_t n, int64_t v, int32_t ignore_index, float eps,
                                        int64_t n_valid, float dloss);
/* ---- elementwise losses on float targets, mean over all n elements (torch reduction='mean') ---
 * pred, target, probs, logits and the gradients are (n) arrays: a batch's (rows, outputs) flattened.
 * Each forward returns the mean loss, summed in double in element order (0 for n = 0); each
 * backward ACCUMULATES dloss / n times the derivative w.r.t. pred (or logits), as torch's does. */

/* torch MSELoss: mean (pred - target)^2; backward += dloss * 2 (pred - target) / n. */
float ddpc_mse_forward(const float *pred, const float *target, int64_t n);
void ddpc_mse_backward(float *dpred, const float *pred, const float *target, int64_t n, float dloss);
/* torch L1Loss: mean |pred - target|; backward += dloss * sign(pred - target) / n (0 at a tie). */
float ddpc_l1_forward(const float *pred, const float *target, int64_t n);
void ddpc_l1_backward(float *dpred, const float *pred, const float *target, int64_t n, float dloss);
/* torch SmoothL1Loss(beta) (Girshick 2015, Fast R-CNN): 0.5 d^2 / beta where |d| < beta, else
 * |d| - 0.5 beta, d = pred - target; backward += dloss * clamp(d / beta, -1, 1) / n. beta <= 0 is
 * L1 (torch takes beta = 0 as L1Loss and refuses a negative beta; callers check that). */
float ddpc_smooth_l1_forward(const float *pred, const float *target, int64_t n, float beta);
void ddpc_smooth_l1_backward(float *dpred, const float *pred, const float *target, int64_t n,
                             float beta, float dloss);
/* torch BCEWithLogitsLoss on logits and targets in [0, 1] (multi-label {0, 1}, or probabilities):
 * mean of max(x, 0) - x y + log(1 + exp(-|x|)), the form that never overflows. Also writes
 * probs (n) = sigmoid(logits); probs may alias logits. */
float ddpc_bce_logits_forward(float *probs, const float *logits, const float *target, int64_t n);
/* dlogits (n) += dloss * (probs - target) / n, from forward's probs. */
void ddpc_bce_logits_backward(float *dlogits, const float *probs, const float *target, int64_t n,
                              float dloss);
/* Multi-label hits: elements whose decision probs > 0.5 agrees with target > 0.5. */
int64_t ddpc_multilabel_correct(const float *probs, const float *target, int64_t n);
/* *sum_abs = sum |pred - target|, *sum_sq = sum (pred - target)^2 over n elements, in double (a
 * regression's MAE and RMSE). */
void ddpc_regression_errors(const float *pred, const float *target, int64_t n, double *sum_abs,
                            double *sum_sq);

/* Number of rows whose argmax of scores (n, v) equals target (ignored rows never count). */
int64_t ddpc_argmax_correct(const float *scores, const int32_t *targets, int64_t n, int64_t v,
                            int32_t ignore_index);

#ifdef __cplusplus
}
#endif
#endif
