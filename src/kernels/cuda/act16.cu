// SPDX-License-Identifier: MIT
/* 16-bit activations for linear inputs at bf16/fp16: LayerNorm and GELU write their
 * outputs only in bf16/fp16, and the linear layers take that copy as their rounded x, so the
 * fp32 output is neither written nor read back and rounded. The 16-bit copy lives in the caller's
 * fp32-sized buffer from its first 256-byte boundary on, the alignment of the BLAS scratch the
 * rounding would have used (cuBLAS(Lt) picks algorithms by alignment, so the same bits).
 * Invariant: each 16-bit value is round-to-nearest-even of the fp32 path's value. */
#include "kernels/cuda/cuda_impl.h"

#include <limits.h>

/* Where the 16-bit copy starts in its fp32-sized buffer. */
static void *at16(const float *buf)
{
    return (void *)(((uintptr_t)buf + 255) & ~(uintptr_t)255);
}

extern "C" bool ddpc__cuda_act16_applies(ddpc_precision prec, int64_t rows, int64_t cols)
{
    if (prec != DDPC_PREC_BF16 && prec != DDPC_PREC_FP16)
        return false;
    /* rows * cols >= 128: the copy (2 bytes each) and up to 252 bytes to the boundary fit in the
     * 4 bytes each of the buffer; no padding: x_operand's layout is the buffer's, packed. */
    return rows > 0 && cols > 0 && rows <= INT_MAX && cols <= INT_MAX && rows * cols >= 128 &&
           ddpc__cuda_gemm_padded(rows) == rows && ddpc__cuda_gemm_padded(cols) == cols;
}

extern "C" void ddpc__cuda_layernorm_forward16(ddpc_precision prec, float *y16, float *mean,
                                               float *rstd, const float *x, const float *w,
                                               const float *b, int64_t rows, int64_t c)
{
    ddpc__cuda_layernorm_forward_16(prec, at16(y16), mean, rstd, x, w, b, rows, c);
}

extern "C" void ddpc__cuda_gelu_forward16(ddpc_precision prec, float *y16, const float *x,
                                          int64_t n)
{
    ddpc__cuda_gelu_forward_16(prec, at16(y16), x, n);
}

extern "C" void ddpc__cuda_linear_forward16(ddpc_precision prec, float *y, const float *x16,
                                            const float *w, const float *b, const float *r,
                                            int64_t n, int64_t in, int64_t out)
{
    ddpc__cuda_linear_forward_x16(prec, y, at16(x16), w, b, r, n, in, out);
}

extern "C" void ddpc__cuda_linear_backward16(ddpc_precision prec, float *dx, float *dw, float *db,
                                             const float *dy, const float *x16, const float *w,
                                             int64_t n, int64_t in, int64_t out)
{
    ddpc__cuda_linear_backward_x16(prec, dx, dw, db, dy, at16(x16), w, n, in, out);
}
