/* MaxPool2d without padding, NCHW, as PyTorch's nn.MaxPool2d(k, stride).
 * Invariant: idx holds each maximum's flat position inside its own (h, w) plane, the first one on
 * ties (strict '>'), so backward routes each dy to exactly one input and planes are independent. */
#include <ddpc/kernels.h>

#include "kernels/cpu/cpu_impl.h"

void ddpc_maxpool2d_forward(float *y, int32_t *idx, const float *x, int64_t n, int64_t c,
                            int64_t h, int64_t w, int64_t k, int64_t stride)
{
    const int64_t oh = (h - k) / stride + 1, ow = (w - k) / stride + 1;
#pragma omp parallel for schedule(static) if (n * c * h * w >= DDPC__PAR_MIN_WORK)
    for (int64_t p = 0; p < n * c; p++) {
        const float *restrict xp = x + p * h * w;
        float *restrict yp = y + p * oh * ow;
        int32_t *restrict ip = idx + p * oh * ow;
        for (int64_t oy = 0; oy < oh; oy++) {
            for (int64_t ox = 0; ox < ow; ox++) {
                int64_t best = oy * stride * w + ox * stride;
                float mx = xp[best];
                for (int64_t dy = 0; dy < k; dy++) {
                    const float *row = xp + (oy * stride + dy) * w + ox * stride;
                    for (int64_t dx = 0; dx < k; dx++) {
                        if (row[dx] > mx) {
                            mx = row[dx];
                            best = (oy * stride + dy) * w + ox * stride + dx;
                        }
                    }
                }
                yp[oy * ow + ox] = mx;
                ip[oy * ow + ox] = (int32_t)best;
            }
        }
    }
}

void ddpc_maxpool2d_backward(float *dx, const float *dy, const int32_t *idx, int64_t n, int64_t c,
                             int64_t h, int64_t w, int64_t k, int64_t stride)
{
    const int64_t oh = (h - k) / stride + 1, ow = (w - k) / stride + 1;
#pragma omp parallel for schedule(static) if (n * c * h * w >= DDPC__PAR_MIN_WORK)
    for (int64_t p = 0; p < n * c; p++) {
        float *restrict dxp = dx + p * h * w;
        const float *restrict dyp = dy + p * oh * ow;
        const int32_t *restrict ip = idx + p * oh * ow;
        for (int64_t j = 0; j < oh * ow; j++)
            dxp[ip[j]] += dyp[j];
    }
}
