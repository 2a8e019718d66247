// SPDX-License-Identifier: MIT
/* im2col / col2im for one NCHW image (Chellapilla et al. 2006): row (ci, ri, si) of col holds the
 * input pixels that kernel tap (ri, si) of channel ci sees at every output position (oy, ox).
 * Invariant: col2im is the exact adjoint of im2col (padding taps are dropped), so conv backward
 * through it is the transpose of forward; valid ox ranges are computed once per tap. */
#include "kernels/cpu/cpu_impl.h"

/* Output columns [*lo, *hi) whose input column ox * stride - pad + si lies inside [0, w). */
static void valid_range(int64_t si, int64_t w, int64_t ow, int64_t stride, int64_t pad, int64_t *lo,
                        int64_t *hi)
{
    int64_t first = pad - si; /* smallest ox * stride that is in range */
    int64_t l = first <= 0 ? 0 : (first + stride - 1) / stride;
    int64_t last = w - 1 + pad - si; /* largest ox * stride that is in range */
    int64_t h = last < 0 ? 0 : last / stride + 1;
    *lo = l < ow ? l : ow;
    *hi = h < ow ? h : ow;
    if (*hi < *lo)
        *hi = *lo;
}

/* Rows are ~10-30 floats: GCC would turn the copy loops into memcpy/memset calls costing more than
 * the copies, so that transformation is switched off here. */
#if defined(__GNUC__) && !defined(__clang__)
#define NO_LIBCALLS __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define NO_LIBCALLS
#endif

NO_LIBCALLS void ddpc__im2col(float *restrict col, const float *restrict x, const ddpc_conv2d_shape *s)
{
    const int64_t oh = ddpc_conv2d_out_h(s), ow = ddpc_conv2d_out_w(s);
    const int64_t st = s->stride, pad = s->pad;
    for (int64_t ci = 0; ci < s->c; ci++) {
        const float *xc = x + ci * s->h * s->w;
        for (int64_t ri = 0; ri < s->r; ri++) {
            for (int64_t si = 0; si < s->s; si++) {
                float *restrict row = col + ((ci * s->r + ri) * s->s + si) * oh * ow;
                int64_t lo, hi;
                valid_range(si, s->w, ow, st, pad, &lo, &hi);
                for (int64_t oy = 0; oy < oh; oy++) {
                    float *restrict out = row + oy * ow;
                    int64_t iy = oy * st - pad + ri;
                    if (iy < 0 || iy >= s->h) {
                        for (int64_t ox = 0; ox < ow; ox++)
                            out[ox] = 0.0f;
                        continue;
                    }
                    int64_t base = iy * s->w - pad + si; /* + ox * st, >= 0 on [lo, hi) */
                    for (int64_t ox = 0; ox < lo; ox++)
                        out[ox] = 0.0f;
                    if (st == 1 && hi > lo) { /* rows are short: a loop beats memcpy's call */
                        const float *restrict in = xc + base + lo;
                        for (int64_t ox = 0; ox < hi - lo; ox++)
                            out[lo + ox] = in[ox];
                    } else
                        for (int64_t ox = lo; ox < hi; ox++)
                            out[ox] = xc[base + ox * st];
                    for (int64_t ox = hi; ox < ow; ox++)
                        out[ox] = 0.0f;
                }
            }
        }
    }
}

void ddpc__col2im(float *restrict x, const float *restrict col, const ddpc_conv2d_shape *s)
{
    const int64_t oh = ddpc_conv2d_out_h(s), ow = ddpc_conv2d_out_w(s);
    const int64_t st = s->stride, pad = s->pad;
    for (int64_t ci = 0; ci < s->c; ci++) {
        float *xc = x + ci * s->h * s->w;
        for (int64_t ri = 0; ri < s->r; ri++) {
            for (int64_t si = 0; si < s->s; si++) {
                const float *restrict row = col + ((ci * s->r + ri) * s->s + si) * oh * ow;
                int64_t lo, hi;
                valid_range(si, s->w, ow, st, pad, &lo, &hi);
                for (int64_t oy = 0; oy < oh; oy++) {
                    int64_t iy = oy * st - pad + ri;
                    if (iy < 0 || iy >= s->h)
                        continue;
                    const float *restrict in = row + oy * ow;
                    int64_t base = iy * s->w - pad + si;
                    if (st == 1 && hi > lo) {
                        float *restrict out = xc + base + lo;
                        for (int64_t ox = 0; ox < hi - lo; ox++)
                            out[ox] += in[lo + ox];
                    } else if (st != 1) {
                        for (int64_t ox = lo; ox < hi; ox++)
                            xc[base + ox * st] += in[ox];
                    }
                }
            }
        }
    }
}
