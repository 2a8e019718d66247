// SPDX-License-Identifier: MIT
/* Token + learned position embedding (GPT-2): y[b, t] = wte[tokens[b, t]] + wpe[t].
 * Invariant: backward splits work by channel ranges, never by token, so rows of dwte that many
 * tokens share are updated by one thread each and need no atomics, in token order. */
#include <ddpc/kernels.h>

#include "kernels/cpu/cpu_impl.h"

void ddpc_embedding_forward(float *y, const int32_t *tokens, const float *wte, const float *wpe,
                            int64_t b, int64_t t, int64_t c)
{
#pragma omp parallel for schedule(static) if (b * t * c >= DDPC__PAR_MIN_WORK)
    for (int64_t i = 0; i < b * t; i++) {
        const float *restrict e = wte + (int64_t)tokens[i] * c;
        float *restrict yi = y + i * c;
        if (wpe) {
            const float *restrict p = wpe + (i % t) * c;
            for (int64_t j = 0; j < c; j++)
                yi[j] = e[j] + p[j];
        } else {
            for (int64_t j = 0; j < c; j++)
                yi[j] = e[j];
        }
    }
}

void ddpc_embedding_backward(float *dwte, float *dwpe, const float *dy, const int32_t *tokens,
                             int64_t b, int64_t t, int64_t c)
{
#pragma omp parallel if (b * t * c >= DDPC__PAR_MIN_WORK)
    {
        int64_t j0, j1;
        ddpc__thread_cols(c, &j0, &j1);
        const int64_t len = j1 - j0;
        for (int64_t i = 0; len > 0 && i < b * t; i++) {
            const float *restrict g = dy + i * c + j0;
            if (dwte) {
                float *restrict e = dwte + (int64_t)tokens[i] * c + j0;
                for (int64_t j = 0; j < len; j++)
                    e[j] += g[j];
            }
            if (dwpe) {
                float *restrict p = dwpe + (i % t) * c + j0;
                for (int64_t j = 0; j < len; j++)
                    p[j] += g[j];
            }
        }
    }
}
