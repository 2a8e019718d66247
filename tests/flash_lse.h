// SPDX-License-Identifier: MIT
/* The fused attention's saved logsumexps against the CPU attention's probabilities: one reference
 * for test_cuda_flash (on a GPU) and test_attention_flash_emu (in the emulator). */
#ifndef DDPC_TESTS_FLASH_LSE_H
#define DDPC_TESTS_FLASH_LSE_H

#include <ddpc/half.h>
#include <ddpc/kernels.h>

#include <math.h>
#include <stdint.h>

/* The value the tensor cores multiply: x rounded to prec's 16 bits (fp32: x). */
static inline double flash_rounded(ddpc_precision prec, float x)
{
    if (prec == DDPC_PREC_BF16)
        return ddpc_bf16_to_f32(ddpc_f32_to_bf16(x));
    if (prec == DDPC_PREC_FP16)
        return ddpc_f16_to_f32(ddpc_f32_to_f16(x));
    return x;
}

/* max |exp(s(i, 0) - lse(i)) - P_cpu(i, 0)| over every head and row, s from the rounded q, k;
 * att: the CPU attention's probabilities (b * nh, t, t). */
static inline double flash_lse_err(ddpc_precision prec, const float *lse, const float *att,
                                   const float *qkv, int64_t b, int64_t t, int64_t c, int64_t nh)
{
    const int64_t hs = c / nh;
    double e = 0.0;
    for (int64_t bh = 0; bh < b * nh; bh++)
        for (int64_t i = 0; i < t; i++) {
            const int64_t bi = bh / nh, h = bh % nh;
            const float *q = qkv + (bi * t + i) * 3 * c + h * hs;
            const float *k = qkv + bi * t * 3 * c + c + h * hs;
            double s = 0.0;
            for (int64_t d = 0; d < hs; d++)
                s += flash_rounded(prec, q[d]) * flash_rounded(prec, k[d]);
            const double p0 = exp(s / sqrt((double)hs) - lse[bh * t + i]);
            e = fmax(e, isfinite(p0) ? fabs(p0 - att[(bh * t + i) * t]) : INFINITY);
        }
    return e;
}

#endif
