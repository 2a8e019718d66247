// SPDX-License-Identifier: MIT
/* Transformer input embeddings (Vaswani et al. 2017, 3.4-3.5): token embeddings scaled by a
 * constant (sqrt(d_model)) plus fixed sinusoidal positions. Invariant: as in embedding.c, backward
 * splits work by channel ranges, never by token, so rows many tokens share need no atomics and are
 * summed in token order (the same bits for every thread count). */
#include <ddpc/kernels.h>

#include <math.h>

#include "kernels/cpu/cpu_impl.h"

void ddpc_sinusoidal_positions(float *pe, int64_t t, int64_t c)
{
    for (int64_t p = 0; p < t; p++)
        for (int64_t i = 0; i < c; i += 2) {
            double angle = (double)p * exp((double)i * (-log(10000.0) / (double)c));
            pe[p * c + i] = (float)sin(angle);
            if (i + 1 < c)
                pe[p * c + i + 1] = (float)cos(angle);
        }
}

void ddpc_embedding_scaled_forward(float *y, const int32_t *tokens, const float *w, float scale,
                                   const float *pe, int64_t b, int64_t t, int64_t c)
{
#pragma omp parallel for schedule(static) if (b * t * c >= DDPC__PAR_MIN_WORK)
    for (int64_t i = 0; i < b * t; i++) {
        const float *restrict e = w + (int64_t)tokens[i] * c;
        float *restrict yi = y + i * c;
        if (pe) {
            const float *restrict p = pe + (i % t) * c;
            for (int64_t j = 0; j < c; j++)
                yi[j] = scale * e[j] + p[j];
        } else {
            for (int64_t j = 0; j < c; j++)
                yi[j] = scale * e[j];
        }
    }
}

void ddpc_embedding_scaled_backward(float *dw, const float *dy, const int32_t *tokens, float scale,
                                    int64_t b, int64_t t, int64_t c)
{
#pragma omp parallel if (b * t * c >= DDPC__PAR_MIN_WORK)
    {
        int64_t j0, j1;
        ddpc__thread_cols(c, &j0, &j1);
        const int64_t len = j1 - j0;
        for (int64_t i = 0; len > 0 && i < b * t; i++) {
            const float *restrict g = dy + i * c + j0;
            float *restrict e = dw + (int64_t)tokens[i] * c + j0;
            for (int64_t j = 0; j < len; j++)
                e[j] += scale * g[j];
        }
    }
}
