// SPDX-License-Identifier: MIT
/* MaxPool2d without padding, NCHW, as PyTorch's nn.MaxPool2d(k, stride).
 * Invariant: idx holds each maximum's flat position inside its own (h, w) plane, the first one on
 * ties (strict '>'), so backward routes each dy to exactly one input and planes are independent. */
#include <ddpc/kernels.h>

#include "kernels/cpu/cpu_impl.h"

/* One (h, w) plane, any k and stride. */
static void pool_plane(float *restrict yp, int32_t *restrict ip, const float *restrict xp,
                       int64_t w, int64_t oh, int64_t ow, int64_t k, int64_t stride)
{
    for (int64_t oy = 0; oy < oh; oy++) {
        for (int64_t ox = 0; ox < ow; ox++) {
            int64_t best = oy * stride * w + ox * stride;
            float mx = xp[best];
            for (int64_t dy = 0; dy < k; dy++) {
                int64_t base = (oy * stride + dy) * w + ox * stride;
                for (int64_t dx = 0; dx < k; dx++) {
                    if (xp[base + dx] > mx) {
                        mx = xp[base + dx];
                        best = base + dx;
                    }
                }
            }
            yp[oy * ow + ox] = mx;
            ip[oy * ow + ox] = (int32_t)best;
        }
    }
}

/* One plane with k = stride = 2 (the common case), branch-free so unpredictable maxima cost
 * nothing; candidates are visited in the generic order, so ties still pick the first. */
static void pool_plane_2x2(float *restrict yp, int32_t *restrict ip, const float *restrict xp,
                           int64_t w, int64_t oh, int64_t ow)
{
    for (int64_t oy = 0; oy < oh; oy++) {
        const float *r0 = xp + 2 * oy * w, *r1 = r0 + w;
        int32_t base = (int32_t)(2 * oy * w);
        for (int64_t ox = 0; ox < ow; ox++) {
            float a = r0[2 * ox], b = r0[2 * ox + 1], c = r1[2 * ox], d = r1[2 * ox + 1];
            int32_t at = base + (int32_t)(2 * ox);
            int gb = b > a;
            float m = ddpc__select(gb, b, a);
            int32_t mi = gb ? at + 1 : at;
            int gc = c > m;
            m = ddpc__select(gc, c, m);
            mi = gc ? at + (int32_t)w : mi;
            int gd = d > m;
            m = ddpc__select(gd, d, m);
            mi = gd ? at + (int32_t)w + 1 : mi;
            yp[oy * ow + ox] = m;
            ip[oy * ow + ox] = mi;
        }
    }
}

void ddpc_maxpool2d_forward(float *y, int32_t *idx, const float *x, int64_t n, int64_t c, int64_t h,
                            int64_t w, int64_t k, int64_t stride)
{
    const int64_t oh = (h - k) / stride + 1, ow = (w - k) / stride + 1;
#pragma omp parallel for schedule(static) if (n * c * h * w >= DDPC__PAR_MIN_WORK)
    for (int64_t p = 0; p < n * c; p++) {
        if (k == 2 && stride == 2)
            pool_plane_2x2(y + p * oh * ow, idx + p * oh * ow, x + p * h * w, w, oh, ow);
        else
            pool_plane(y + p * oh * ow, idx + p * oh * ow, x + p * h * w, w, oh, ow, k, stride);
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
