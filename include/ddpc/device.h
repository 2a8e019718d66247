// SPDX-License-Identifier: MIT
/* The kernel table: one per device, filled by kernels/cpu (the functions of kernels.h) and, in a
 * build with CUDA, by kernels/cuda (cuBLAS/cuBLASLt products and ddpc's own CUDA kernels). Models,
 * the optimizer and the engine call a table, never a device's functions, so one model file runs on
 * every device.
 * Contract: every member has the meaning, shapes, accumulate/overwrite rule and aliasing rule of
 * the kernels.h function of the same name; array arguments live in the table's memory (device
 * memory for CUDA), EXCEPT those marked "host" below. Members that return a value (a loss, a
 * count, a norm) wait for the device; the CUDA table's *_into members and grad_norm_clip leave
 * theirs in device memory instead. The CUDA table runs everything in order on one stream
 * (ddpc_kernel_table.stream), so a host read after `to_host` sees every earlier kernel's result. */
#ifndef DDPC_DEVICE_H
#define DDPC_DEVICE_H

#include <ddpc/kernels.h>
#include <ddpc/status.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { DDPC_DEVICE_CPU = 0, DDPC_DEVICE_CUDA, DDPC_DEVICE_AUTO, DDPC_DEVICE_COUNT } ddpc_device_kind;

/* "cpu" / "cuda" / "auto"; "unknown" outside the enum. */
const char *ddpc_device_kind_name(ddpc_device_kind k);
/* The kind named s; false for any other string. */
bool ddpc_device_kind_from_name(const char *s, ddpc_device_kind *out);

/* AdamW's per-step scalars, computed by the optimizer as torch does (optim/adamw.c). Element i:
 * p *= (mask[i] ? decay : 1); m = fma(g, a1, m * b1); v = fma(a2 * g, g, v * b2);
 * p += neg_step * m / (sqrt(v) / bc2_sqrt + eps). */
typedef struct {
    float b1, b2, a1, a2, eps, neg_step, bc2_sqrt, decay;
} ddpc_adamw_coef;

/* SGD's per-step scalars (optim/sgd.c): d = g (+ p * wd where mask[i] or no mask); with momentum,
 * buf = first ? d : fma(d, keep, buf * momentum), d = nesterov ? fma(buf, momentum, d) : buf;
 * p = fma(d, neg_lr, p). */
typedef struct {
    float wd, momentum, keep, neg_lr;
    bool nesterov, first;
} ddpc_sgd_coef;

/* The elementwise losses of elementwise_loss_into (nn.h's ddpc_loss names them for models). */
typedef enum {
    DDPC_ELEMENTWISE_MSE,
    DDPC_ELEMENTWISE_L1,
    DDPC_ELEMENTWISE_SMOOTH_L1,
    DDPC_ELEMENTWISE_BCE_LOGITS
} ddpc_elementwise_loss;

typedef struct ddpc_kernel_table {
    const char *name;   /* "cpu" | "cuda" */
    ddpc_device_kind kind;
    int device;         /* the GPU's ordinal among the visible ones; 0 on the CPU */

    /* ---- memory: the table's own (64-byte aligned, zeroed); NULL on failure ---- */
    void *(*alloc)(size_t bytes);
    void (*free)(void *p);
    void (*to_device)(void *dst, const void *host_src, size_t bytes);
    void (*to_host)(void *host_dst, const void *src, size_t bytes); /* waits for the device */
    void (*copy)(void *dst, const void *src, size_t bytes);          /* within the table's memory */
    /* A batch's `count` host arrays src[i] (bytes[i] each; borrowed during the call only) into
     * the table's dst[i], for the kernels launched after it: through slot's (0 or 1) pinned
     * staging on a copy stream, overlapping the work already queued. dst's of one slot may be
     * rewritten while the other slot's batch computes, so a caller alternates two sets of
     * buffers. NULL in the CPU table (to_device is a plain copy there). */
    void (*stage_in)(int slot, void *const *dst, const void *const *src, const size_t *bytes,
                     int count);
    void (*synchronize)(void);
    /* Device allocations made since the process started (flat across warm steps). */
    uint64_t (*alloc_count)(void);
    /* Times the host has waited for the device since the process started (every read-back and
     * synchronize; 0 on the CPU, which never waits), so a training step can be held to a number. */
    uint64_t (*host_waits)(void);
    /* Times the host waited only because it was a full batch ring ahead of the device, whose
     * queue held work all the while (stage_in's pinned slots); not in host_waits. 0 on the CPU. */
    uint64_t (*host_throttles)(void);
    /* The device's memory in bytes (cudaMemGetInfo's total); 0 on the CPU, whose limit is the
     * host's. */
    size_t (*memory_total)(void);
    /* The device's free memory in bytes (cudaMemGetInfo's free: every process on it counted); 0 on
     * the CPU. */
    size_t (*memory_free)(void);
    /* Device time (the step's phases on a GPU, docs/observability.md): a ring of n marks on the
     * compute stream (CUDA events), NULL members on the CPU. marks_create gives NULL when it
     * cannot; mark(ms, i) records mark i where the stream now is (again, for a used one: it
     * moves); mark_seconds(ms, a, b, &s) gives the device time from mark a to a later mark b and
     * true once the device has passed b, else false at once: it never waits. */
    void *(*marks_create)(int n);
    void (*marks_destroy)(void *marks);
    void (*mark)(void *marks, int i);
    bool (*mark_seconds)(void *marks, int a, int b, double *seconds);

    /* ---- releasable memory (ZeRO-2/3's flat buffers) ----
     * reserve: as alloc (zeroed, 64-byte aligned, all of it backed), freed with free.
     * release(p, bytes): the range reads as zeros from now on; the whole pages (CPU: madvise) or
     * granules (CUDA with virtual memory management: 2 MiB, unmapped) inside it give their memory
     * back and its partial ends are zeroed. back(p, bytes): a released range must be backed again
     * before a kernel, copy or collective touches it (to_host alone reads it as zeros without):
     * zeroed memory is mapped under it. Both return DDPC_OK, or the failure named by
     * ddpc_errorf (back: DDPC_ENOMEM when the device is out of memory; either: the driver's
     * refusal to map or unmap, after which the range is not to be used again). On the CPU back
     * does nothing (a released page faults back in zeroed on its next touch); on memory not from
     * reserve, or a GPU without virtual memory management, release only zeroes (release_note,
     * NULL where absent, then says why, after the first reserve; else it returns NULL). */
    void *(*reserve)(size_t bytes);
    ddpc_status (*release)(void *p, size_t bytes);
    ddpc_status (*back)(void *p, size_t bytes);
    const char *(*release_note)(void);
    /* Bytes backed of every reserved range alive; 0 on the CPU (ddpc_pages_resident measures host
     * pages) and on a GPU without virtual memory management. */
    size_t (*backed_bytes)(void);

    /* ---- elementwise ---- */
    void (*fill_f32)(float *x, float value, int64_t n);
    void (*add_f32)(float *y, const float *a, const float *b, int64_t n);
    void (*axpy_f32)(float *y, float alpha, const float *x, int64_t n);

    /* ---- products ---- */
    /* torch.backends.cuda.matmul.allow_tf32 for the process's device: on, every fp32 product
     * (precision fp32; the 16-bit ones are unchanged) may run on the tensor cores as TF32, fp32
     * inputs rounded to 10 mantissa bits, fp32 accumulation; off (the default) keeps true fp32.
     * NULL on the CPU, whose products stay fp32 (as PyTorch's). */
    void (*allow_tf32)(bool on);
    void (*gemm)(ddpc_precision prec, ddpc_transpose ta, ddpc_transpose tb, int64_t m, int64_t n,
                 int64_t k, float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                 float beta, float *c, int64_t ldc);
    void (*linear_forward)(ddpc_precision prec, float *y, const float *x, const float *w,
                           const float *b, int64_t n, int64_t in, int64_t out);
    void (*linear_residual_forward)(ddpc_precision prec, float *y, const float *x, const float *w,
                                    const float *b, const float *r, int64_t n, int64_t in,
                                    int64_t out);
    void (*linear_backward)(ddpc_precision prec, float *dx, float *dw, float *db, const float *dy,
                            const float *x, const float *w, int64_t n, int64_t in, int64_t out);

    /* ---- activations, normalisation, embeddings ---- */
    void (*relu_forward)(float *y, const float *x, int64_t n);
    void (*relu_backward)(float *dx, const float *dy, const float *y, int64_t n);
    void (*relu_mask)(float *x, const float *y, int64_t n);
    void (*gelu_forward)(float *y, const float *x, int64_t n);
    void (*gelu_backward)(float *dx, const float *dy, const float *x, int64_t n);
    void (*layernorm_forward)(float *y, float *mean, float *rstd, const float *x, const float *w,
                              const float *b, int64_t rows, int64_t c);
    void (*layernorm_backward)(float *dx, float *dw, float *db, const float *dy, const float *x,
                               const float *w, const float *mean, const float *rstd, int64_t rows,
                               int64_t c);
    void (*embedding_forward)(float *y, const int32_t *tokens, const float *wte, const float *wpe,
                              int64_t b, int64_t t, int64_t c);
    void (*embedding_backward)(float *dwte, float *dwpe, const float *dy, const int32_t *tokens,
                               int64_t b, int64_t t, int64_t c);

    /* ---- causal self-attention (GPT) ----
     * att is what forward saves for backward, attention_saved_floats floats: the CPU's softmax
     * probabilities (b, nh, t, t) as in kernels.h; the CUDA table's fused kernels (bf16/fp16,
     * head dim 32, 64 or 128) keep each row's logsumexp (b, nh, t) and a copy of out (b, t, c).
     * ws is attention_workspace_floats floats; both depend on the precision on CUDA. */
    size_t (*attention_saved_floats)(ddpc_precision prec, int64_t b, int64_t t, int64_t c,
                                     int64_t nh);
    size_t (*attention_workspace_floats)(ddpc_precision prec, int64_t b, int64_t t, int64_t c,
                                         int64_t nh);
    void (*attention_forward)(ddpc_precision prec, float *out, float *att, const float *qkv,
                              int64_t b, int64_t t, int64_t c, int64_t nh, float *ws);
    void (*attention_backward)(ddpc_precision prec, float *dqkv, const float *dout,
                               const float *qkv, const float *att, int64_t b, int64_t t, int64_t c,
                               int64_t nh, float *ws);

    /* ---- the encoder-decoder Transformer (seq2seq): kernels.h's functions of the same names
     * (ddpc_mha_*, ddpc_cross_entropy_smooth_*, ddpc_embedding_scaled_*,
     * ddpc_sinusoidal_positions); the attention's shape `s` is host. mha_workspace_floats sizes
     * the ws of mha_forward and mha_backward for every shape up to s (b, tq, tk at their largest,
     * c and nh as used, any precision); the CPU's forward ignores it, the GPU's needs it.
     * cross_entropy_smooth_forward's n_valid is host and its value waits for the device.
     * pad_mask: mask (n) = tokens (n) == pad, a key padding mask. copy2d: cudaMemcpy2D's
     * contract within the table's memory (height rows of width bytes, the rows dpitch and spitch
     * bytes apart), e.g. a key/value cache's row appended per step. ---- */
    size_t (*mha_workspace_floats)(const ddpc_mha_shape *s);
    void (*mha_forward)(ddpc_precision prec, float *out, float *att, const float *q, const float *k,
                        const float *v, const uint8_t *key_pad, const ddpc_mha_shape *s,
                        float *ws);
    void (*mha_backward)(ddpc_precision prec, float *dq, float *dk, float *dv, const float *dout,
                         const float *q, const float *k, const float *v, const float *att,
                         const ddpc_mha_shape *s, float *ws);
    float (*cross_entropy_smooth_forward)(float *probs, float *losses, const float *logits,
                                          const int32_t *targets, int64_t n, int64_t v,
                                          int32_t ignore_index, float eps, int64_t *n_valid);
    void (*cross_entropy_smooth_backward)(float *dlogits, const float *probs,
                                          const int32_t *targets, int64_t n, int64_t v,
                                          int32_t ignore_index, float eps, int64_t n_valid,
                                          float dloss);
    /* The smoothed loss without the wait, for a caller that reads it later (the engine, at
     * logged steps): NULL in the CPU table, whose values are at hand. sums (2) are doubles in the
     * table's memory as cross_entropy_forward_into's: {the row losses' sum, the valid rows}
     * (cross_entropy_smooth_forward returns sums[0] / sums[1] as a float); backward_from takes
     * n_valid from sums[1]. */
    void (*cross_entropy_smooth_forward_into)(double *sums, float *probs, float *losses,
                                              const float *logits, const int32_t *targets,
                                              int64_t n, int64_t v, int32_t ignore_index,
                                              float eps);
    void (*cross_entropy_smooth_backward_from)(float *dlogits, const float *probs,
                                               const int32_t *targets, int64_t n, int64_t v,
                                               int32_t ignore_index, float eps, const double *sums,
                                               float dloss);
    void (*sinusoidal_positions)(float *pe, int64_t t, int64_t c);
    void (*embedding_scaled_forward)(float *y, const int32_t *tokens, const float *w, float scale,
                                     const float *pe, int64_t b, int64_t t, int64_t c);
    void (*embedding_scaled_backward)(float *dw, const float *dy, const int32_t *tokens,
                                      float scale, int64_t b, int64_t t, int64_t c);
    void (*pad_mask)(uint8_t *mask, const int32_t *tokens, int64_t n, int32_t pad);
    void (*copy2d)(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                   size_t height);

    /* ---- convolution, pooling, batch norm (CNN) ---- */
    size_t (*conv2d_workspace_floats)(const ddpc_conv2d_shape *s);
    void (*conv2d_forward)(ddpc_precision prec, float *y, const float *x, const float *w,
                           const float *b, const ddpc_conv2d_shape *s, float *ws);
    void (*conv2d_backward)(ddpc_precision prec, float *dx, float *dw, float *db, const float *dy,
                            const float *x, const float *w, const ddpc_conv2d_shape *s, float *ws);
    void (*maxpool2d_forward)(float *y, int32_t *idx, const float *x, int64_t n, int64_t c,
                              int64_t h, int64_t w, int64_t k, int64_t stride);
    void (*maxpool2d_backward)(float *dx, const float *dy, const int32_t *idx, int64_t n,
                               int64_t c, int64_t h, int64_t w, int64_t k, int64_t stride);
    /* BatchNorm: `sums` are doubles in the table's memory like everything else (ranks add them
     * up on a group over that memory), so a training step never waits for them; batchnorm_sums
     * also writes the count n * hw into sums[2c], and `count` of backward_input is host. */
    void (*batchnorm_sums)(double *sums, const float *x, int64_t n, int64_t c, int64_t hw);
    void (*batchnorm_stats)(float *mean, float *invstd, float *running_mean, float *running_var,
                            const double *sums, int64_t c, float momentum, float eps);
    void (*batchnorm_eval_stats)(float *mean, float *invstd, const float *running_mean,
                                 const float *running_var, int64_t c, float eps);
    void (*batchnorm_apply)(float *y, const float *x, const float *mean, const float *invstd,
                            const float *w, const float *b, int64_t n, int64_t c, int64_t hw);
    void (*batchnorm_backward_sums)(double *sums, const float *dy, const float *x,
                                    const float *mean, const float *invstd, int64_t n, int64_t c,
                                    int64_t hw);
    void (*batchnorm_backward_params)(float *dw, float *db, const double *sums, int64_t c);
    void (*batchnorm_backward_input)(float *dx, const float *dy, const float *x, const float *mean,
                                     const float *invstd, const float *w, const double *sums,
                                     double count, int64_t n, int64_t c, int64_t hw);

    /* ---- dropout (the same counter-based masks on every device) ---- */
    void (*dropout_forward)(float *y, const float *x, int64_t n, float p, uint64_t seed,
                            uint64_t stream);
    void (*dropout_backward)(float *dx, const float *dy, int64_t n, float p, uint64_t seed,
                             uint64_t stream);

    /* ---- losses and scores (n_valid: host; the returned values wait for the device) ---- */
    float (*cross_entropy_forward)(float *probs, float *losses, const float *logits,
                                   const int32_t *targets, int64_t n, int64_t v,
                                   int32_t ignore_index, int64_t *n_valid);
    void (*cross_entropy_backward)(float *dlogits, const float *probs, const int32_t *targets,
                                   int64_t n, int64_t v, int32_t ignore_index, int64_t n_valid,
                                   float dloss);
    int64_t (*argmax_correct)(const float *scores, const int32_t *targets, int64_t n, int64_t v,
                              int32_t ignore_index);
    /* The same three without the wait, for a caller that reads the values later (the engine, at
     * logged steps): NULL in the CPU table, whose values are at hand. `sums` (2) and `correct` (1)
     * are doubles in the table's memory: sums = {the loss sum over valid rows, the valid rows}
     * (cross_entropy_forward returns sums[0] / sums[1] as a float, 0 without valid rows);
     * cross_entropy_backward_from takes n_valid from sums[1]; *correct = argmax_correct. */
    void (*cross_entropy_forward_into)(double *sums, float *probs, float *losses,
                                       const float *logits, const int32_t *targets, int64_t n,
                                       int64_t v, int32_t ignore_index);
    void (*cross_entropy_backward_from)(float *dlogits, const float *probs,
                                        const int32_t *targets, int64_t n, int64_t v,
                                        int32_t ignore_index, const double *sums, float dloss);
    /* Both at once for a training step whose dloss is known before its forward: sums as
     * cross_entropy_forward_into's, dlogits (n, v) = dloss / sums[1] * (softmax - onehot) on valid
     * rows, 0 elsewhere, the same bits as forward then backward onto zeroed dlogits (the
     * backward's g computed as it computes it). dlogits may be logits. */
    void (*cross_entropy_fused)(double *sums, float *dlogits, float *losses, const float *logits,
                                const int32_t *targets, int64_t n, int64_t v,
                                int32_t ignore_index, float dloss);
    /* cross_entropy_backward over its input, for a model that keeps no (n, v) gradient buffer:
     * probs (n, v) become dloss / count * (probs - onehot) on valid rows, 0 elsewhere (all 0
     * without valid rows), count = sums[1] (as cross_entropy_backward_from's) when sums is not
     * NULL, else n_valid; the same bits as cross_entropy_backward onto zeroed dlogits. */
    void (*cross_entropy_backward_inplace)(float *probs, const int32_t *targets, int64_t n,
                                           int64_t v, int32_t ignore_index, int64_t n_valid,
                                           const double *sums, float dloss);
    void (*argmax_correct_into)(double *correct, const float *scores, const int32_t *targets,
                                int64_t n, int64_t v, int32_t ignore_index);
    /* x (n, classes) = softmax of each row, in place. */
    void (*softmax_rows)(float *x, int64_t n, int64_t classes);
    /* A language model's head and its loss with 16-bit logits, autocast's and llm.c's numerics,
     * for a training step at bf16/fp16 whose dloss is known before its forward: NULL in the CPU
     * table. head16_forward: logits = x (n, c) @ w (v, c)^T with x and w rounded as
     * linear_forward rounds them, written in `prec`'s 16 bits over `logits` (`bytes` of the
     * table's memory, a row stride the member picks), then cross_entropy_fused's gradient over
     * them, rounded to 16 bits: the bits of cross_entropy_fused on the rounded logits widened to
     * fp32 with its dlogits rounded to 16 bits; losses (n) its row losses (may be NULL);
     * sums (3) = {the loss sum, the valid rows, argmax_correct on the same logits}. False, having
     * run nothing, where it does not apply (another precision, `bytes` too few, a row too
     * wide): the caller then runs linear_forward and the fp32 members.
     * head16_backward: dx (n, c) += dlogits @ w, dw (v, c) += dlogits^T @ x (linear_backward's
     * accumulate contract, w and x rounded as it rounds them) from a head16_forward's logits. */
    bool (*head16_forward)(ddpc_precision prec, double *sums, void *logits, size_t bytes,
                           float *losses, const float *x, const float *w, const int32_t *targets,
                           int64_t n, int64_t c, int64_t v, int32_t ignore_index, float dloss);
    void (*head16_backward)(ddpc_precision prec, float *dx, float *dw, const void *dlogits,
                            const float *x, const float *w, int64_t n, int64_t c, int64_t v);
    /* 16-bit activations for a linear layer's input (x rounded as linear_forward rounds it,
     * computed once by its producer instead of written in fp32, read back and rounded): NULL in
     * the CPU table. act16_applies: whether the members below take a (rows, cols) x at `prec`;
     * false where they do not (another precision, shapes the table cannot keep packed), the
     * caller then keeps fp32 outputs and the fp32 members. A caller asks before the producer
     * runs and has the consumers, forward and backward, follow that answer.
     * An x16 argument is a buffer of rows * cols floats (fp32's size) holding the 16-bit copy in
     * a layout of the table's, written by layernorm_forward16 or gelu_forward16 and read by
     * linear_forward16 and linear_backward16 of the same shape; its values are `prec`'s round to
     * nearest even of layernorm_forward's / gelu_forward's fp32 y, bit for bit (mean and rstd as
     * layernorm_forward's). linear_forward16: linear_residual_forward (r may be NULL) on that x;
     * linear_backward16: linear_backward on it (dy and w rounded as it rounds them). Both give
     * the bits of their fp32 members on the fp32 x whose rounding x16 holds. */
    bool (*act16_applies)(ddpc_precision prec, int64_t rows, int64_t cols);
    void (*layernorm_forward16)(ddpc_precision prec, float *y16, float *mean, float *rstd,
                                const float *x, const float *w, const float *b, int64_t rows,
                                int64_t c);
    void (*gelu_forward16)(ddpc_precision prec, float *y16, const float *x, int64_t n);
    void (*linear_forward16)(ddpc_precision prec, float *y, const float *x16, const float *w,
                             const float *b, const float *r, int64_t n, int64_t in, int64_t out);
    void (*linear_backward16)(ddpc_precision prec, float *dx, float *dw, float *db, const float *dy,
                              const float *x16, const float *w, int64_t n, int64_t in, int64_t out);
    /* Elementwise losses on float targets (regression, multi-label), reduction='mean': values
     * returned to the host (on a device a wait); sum_abs and sum_sq are host. */
    float (*mse_forward)(const float *pred, const float *target, int64_t n);
    void (*mse_backward)(float *dpred, const float *pred, const float *target, int64_t n,
                         float dloss);
    float (*l1_forward)(const float *pred, const float *target, int64_t n);
    void (*l1_backward)(float *dpred, const float *pred, const float *target, int64_t n,
                        float dloss);
    float (*smooth_l1_forward)(const float *pred, const float *target, int64_t n, float beta);
    void (*smooth_l1_backward)(float *dpred, const float *pred, const float *target, int64_t n,
                               float beta, float dloss);
    float (*bce_logits_forward)(float *probs, const float *logits, const float *target, int64_t n);
    void (*bce_logits_backward)(float *dlogits, const float *probs, const float *target,
                                int64_t n, float dloss);
    int64_t (*multilabel_correct)(const float *probs, const float *target, int64_t n);
    void (*regression_errors)(const float *pred, const float *target, int64_t n, double *sum_abs,
                              double *sum_sq);
    /* The forward of `loss` left on the device for a later read, laid out as cross-entropy's sums:
     * sums (3) = {the sum of the n elements' loss terms, n, label hits for bce_logits (as
     * multilabel_correct counts them on the probabilities) or 0}; bce_logits writes probs as its
     * forward does. NULL in the CPU table, whose values are read at once anyway. */
    void (*elementwise_loss_into)(double *sums, ddpc_elementwise_loss loss, float beta,
                                  float *probs, const float *pred, const float *target, int64_t n);

    /* ---- optimizer and gradient arithmetic on flat ranges: NULL in the CPU table, where the
     * optimizer's own vectorised host loops (optim/) run; mask (n) may be NULL (decay everywhere) */
    void (*adamw_update)(float *params, const float *grads, float *m, float *v,
                         const uint8_t *mask, int64_t n, const ddpc_adamw_coef *k);
    void (*sgd_update)(float *params, const float *grads, float *buf, const uint8_t *mask,
                       int64_t n, const ddpc_sgd_coef *k);
    /* Sum of squares in double (ddpc_grad_sumsq's order is the CPU's; the CUDA sum is a fixed
     * tree, so repeated runs give the same bits). */
    double (*sumsq)(const float *g, int64_t n);
    /* g *= 1/scale; returns whether any element is not finite (ddpc_grad_unscale). */
    bool (*unscale)(float *g, int64_t n, float scale);
    /* g *= s. */
    void (*scale)(float *g, int64_t n, float s);
    /* Norm and clipping without the wait (NULL in the CPU table): norm[0] = sumsq(g, n) (the same
     * tree), norm[1] += norm[0] (NaN or inf from the first step whose sum was: a later read
     * checks every step at once), then, when max_norm > 0, g *= ddpc_grad_clip_coef(
     * sqrt(norm[0]), max_norm) computed on the device, where that is not 1. norm (2) is doubles in
     * the table's memory. */
    void (*grad_norm_clip)(double *norm, float *g, int64_t n, float max_norm);

    /* ---- 16-bit storage (DDP's compressed gradient buckets): ddpc/half.h's array functions,
     * bit for bit (round to nearest even, NaN kept quiet, f16 subnormals), on the table's
     * memory; bf16 selects bfloat16, otherwise IEEE binary16 ---- */
    void (*f32_to_half_array)(uint16_t *dst, const float *src, size_t n, int bf16);
    void (*half_to_f32_array)(float *dst, const uint16_t *src, size_t n, int bf16);
} ddpc_kernel_table;

/* The CPU's table (always there). */
const ddpc_kernel_table *ddpc_kernel_table_cpu(void);

/* Whether this build has CUDA (compiled with it), and the number of GPUs this process sees
 * (CUDA_VISIBLE_DEVICES honoured; 0 without a driver or GPU, never an error). *why (may be NULL)
 * gets a short reason when it is 0: "this build has no CUDA", "no CUDA driver (...)", ... */
bool ddpc_cuda_built(void);
int ddpc_cuda_devices(char *why, size_t cap);
/* For `ddpc env`: the CUDA runtime this build carries (cudaRuntimeGetVersion: 13000 is 13.0) and
 * the cuBLAS it loaded (major * 10000 + minor * 100 + patch); 0 in a build without CUDA or when
 * the library cannot say. Need no driver or GPU; never fail. */
int ddpc_cuda_runtime_version(void);
int ddpc_cublas_version(void);

/* The table for `kind` as the guides choose it: cpu; cuda = GPU (local_rank mod visible GPUs),
 * made current for this process; auto = cuda when a GPU is visible, else cpu. DDPC_EINVAL with
 * one line saying why for cuda without a GPU or in a build without CUDA. */
ddpc_status ddpc_device_select(ddpc_device_kind kind, int local_rank, const ddpc_kernel_table **out);

/* The pinned host <-> GPU copy bandwidth of the selected GPU (ddpc_device_select first), in GB/s
 * (1e9 bytes): the median of `reps` copies of `bytes` each way, after one untimed copy each way.
 * Allocates and frees its own pinned and device buffers. DDPC_EUNSUPPORTED in a build without
 * CUDA; DDPC_EIO naming CUDA's reason when a copy or allocation fails. */
ddpc_status ddpc_cuda_copy_bandwidth(size_t bytes, int reps, double *h2d_gbps, double *d2h_gbps);

/* "NVIDIA H100 80GB HBM3 (GPU 0 of 1, 79.1 GiB, sm_90)" for a CUDA table; "cpu" otherwise. */
const char *ddpc_device_describe(const ddpc_kernel_table *b);

#ifdef __cplusplus
}
#endif
#endif
