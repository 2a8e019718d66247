// SPDX-License-Identifier: MIT
/* The LM head and its cross-entropy with 16-bit logits in a bf16/fp16 training step (autocast's
 * and llm.c's numerics): one product writes the logits in bf16/fp16 at the padded vocabulary's row
 * stride over the memory of the model's fp32 logits, one row kernel turns them into the loss's
 * 16-bit gradient in place, and the backward's two products read that gradient as it is.
 * Invariant: the bits are the fp32 path's with the logits rounded to 16 bits after the product;
 * where it does not apply, nothing runs and the caller takes the fp32 path. */
#include "kernels/cuda/cuda_impl.h"

extern "C" bool ddpc__cuda_head16_forward(ddpc_precision prec, double *sums, void *logits,
                                          size_t bytes, float *losses, const float *x,
                                          const float *w, const int32_t *targets, int64_t n,
                                          int64_t c, int64_t v, int32_t ignore_index, float dloss)
{
    if (n <= 0 || c <= 0 || v <= 0)
        return false;
    /* The product's padded shape: rows past n and columns past v come out 0 (zero operands). */
    const int64_t rows = ddpc__cuda_gemm_padded(n), ld = ddpc__cuda_gemm_padded(v);
    if ((uintptr_t)logits % 16 != 0 || (double)rows * (double)ld * 2.0 > (double)bytes ||
        !ddpc__cuda_ce16_applies(prec, v, ld))
        return false;
    /* Evaluation keeps fp32 logits (linear_forward), whose product takes more BLAS scratch than
     * this path's where v or n needs padding (y through a padded fp32 c, 4 bytes a logit: 3.3 GB
     * for GPT-2's 50257 at B 16): grown now, in the first training step, as the fp32 path would
     * have, so that no evaluation allocates device memory after warm-up. */
    (void)ddpc__cuda_scratch(DDPC__CUDA_SCRATCH_BLAS, ddpc__cuda_linear_forward_scratch(n, c, v));
    ddpc__cuda_linear_forward_16out(prec, logits, x, w, n, c, v);
    ddpc__cuda_ce16_fused(prec, sums, logits, losses, targets, n, rows, v, ld, ignore_index, dloss);
    return true;
}

extern "C" void ddpc__cuda_head16_backward(ddpc_precision prec, float *dx, float *dw,
                                           const void *dlogits, const float *x, const float *w,
                                           int64_t n, int64_t c, int64_t v)
{
    ddpc__cuda_linear_backward_16in(prec, dx, dw, dlogits, x, w, n, c, v);
}
