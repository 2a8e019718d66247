// SPDX-License-Identifier: MIT
/* Conv2d (NCHW, cross-correlation as in PyTorch) by im2col + sgemm, one OpenMP job per sample.
 * Workspace: per thread slot (ddpc__kernel_slots) one column matrix (c*r*s, oh*ow) and one
 * private dw partial (k, c*r*s); partials are summed in slot order, so results are deterministic
 * for a given thread count. A 1x1 stride-1 unpadded conv skips im2col: x is already the columns. */
#include <ddpc/kernels.h>

#include <omp.h>

#include "kernels/cpu/cpu_impl.h"

static int64_t col_floats(const ddpc_conv2d_shape *s)
{
    return s->c * s->r * s->s * ddpc_conv2d_out_h(s) * ddpc_conv2d_out_w(s);
}

static int is_pointwise(const ddpc_conv2d_shape *s)
{
    return s->r == 1 && s->s == 1 && s->stride == 1 && s->pad == 0;
}

/* Split samples across threads? Not with fewer samples than threads (then the BLAS threads each
 * GEMM instead) nor for tiny convolutions. */
static int parallel_over_samples(const ddpc_conv2d_shape *s)
{
    int64_t macs = s->n * s->k * s->c * s->r * s->s * ddpc_conv2d_out_h(s) * ddpc_conv2d_out_w(s);
    return s->n >= omp_get_max_threads() && macs >= DDPC__PAR_MIN_MACS;
}

size_t ddpc_conv2d_workspace_floats(const ddpc_conv2d_shape *s)
{
    int64_t per_slot = col_floats(s) + s->k * s->c * s->r * s->s;
    return (size_t)ddpc__kernel_slots() * (size_t)per_slot;
}

void ddpc_conv2d_forward(ddpc_precision prec, float *y, const float *x, const float *w,
                         const float *b, const ddpc_conv2d_shape *s, float *ws)
{
    const int64_t crs = s->c * s->r * s->s, ohw = ddpc_conv2d_out_h(s) * ddpc_conv2d_out_w(s);
    const int64_t slot_floats = col_floats(s) + s->k * crs;
#pragma omp parallel for schedule(static) if (parallel_over_samples(s))
    for (int64_t i = 0; i < s->n; i++) {
        const float *xi = x + i * s->c * s->h * s->w;
        float *yi = y + i * s->k * ohw;
        const float *col = xi;
        if (!is_pointwise(s)) {
            float *buf = ws + (int64_t)omp_get_thread_num() * slot_floats;
            ddpc__im2col(buf, xi, s);
            col = buf;
        }
        if (b)
            for (int64_t k = 0; k < s->k; k++)
                for (int64_t j = 0; j < ohw; j++)
                    yi[k * ohw + j] = b[k];
        /* y_i (k, oh*ow) = w (k, crs) @ col (crs, oh*ow) [+ bias already in y_i] */
        ddpc_gemm(prec, DDPC_NO_TRANS, DDPC_NO_TRANS, s->k, ohw, crs, 1.0f, w, crs, col, ohw,
                  b ? 1.0f : 0.0f, yi, ohw);
    }
}

/* db (k) += sum over samples and positions of dy (n, k, oh*ow). */
static void bias_backward(float *db, const float *dy, int64_t n, int64_t k, int64_t ohw)
{
#pragma omp parallel for schedule(static) if (n * k * ohw >= DDPC__PAR_MIN_WORK)
    for (int64_t ki = 0; ki < k; ki++) {
        float acc = 0.0f;
        for (int64_t i = 0; i < n; i++) {
            const float *restrict g = dy + (i * k + ki) * ohw;
#pragma omp simd reduction(+ : acc)
            for (int64_t j = 0; j < ohw; j++)
                acc += g[j];
        }
        db[ki] += acc;
    }
}

/* Sample i's share: dw_part (k, crs) += dy_i @ col_i^T; dx_i += col2im(w^T @ dy_i). */
static void sample_backward(ddpc_precision prec, float *dx_i, float *dw_part, const float *dy_i,
                            const float *x_i, const float *w, const ddpc_conv2d_shape *s,
                            float *col)
{
    const int64_t crs = s->c * s->r * s->s, ohw = ddpc_conv2d_out_h(s) * ddpc_conv2d_out_w(s);
    if (dw_part) {
        const float *cols = x_i;
        if (!is_pointwise(s)) {
            ddpc__im2col(col, x_i, s);
            cols = col;
        }
        ddpc_gemm(prec, DDPC_NO_TRANS, DDPC_TRANS, s->k, crs, ohw, 1.0f, dy_i, ohw, cols, ohw, 1.0f,
                  dw_part, crs);
    }
    if (dx_i) {
        if (is_pointwise(s)) { /* dx_i (c, hw) += w^T (c, k) @ dy_i (k, hw) directly */
            ddpc_gemm(prec, DDPC_TRANS, DDPC_NO_TRANS, crs, ohw, s->k, 1.0f, w, crs, dy_i, ohw,
                      1.0f, dx_i, ohw);
            return;
        }
        ddpc_gemm(prec, DDPC_TRANS, DDPC_NO_TRANS, crs, ohw, s->k, 1.0f, w, crs, dy_i, ohw, 0.0f,
                  col, ohw);
        ddpc__col2im(dx_i, col, s);
    }
}

void ddpc_conv2d_backward(ddpc_precision prec, float *dx, float *dw, float *db, const float *dy,
                          const float *x, const float *w, const ddpc_conv2d_shape *s, float *ws)
{
    const int64_t crs = s->c * s->r * s->s, ohw = ddpc_conv2d_out_h(s) * ddpc_conv2d_out_w(s);
    const int64_t slot_floats = col_floats(s) + s->k * crs, chw = s->c * s->h * s->w;
    if (db)
        bias_backward(db, dy, s->n, s->k, ohw);
    if (!dx && !dw)
        return;
    int used = 1;
#pragma omp parallel if (parallel_over_samples(s))
    {
        int tid = omp_get_thread_num();
        float *col = ws + (int64_t)tid * slot_floats;
        /* Slot 0 accumulates straight into dw; the others into zeroed partials added below. */
        float *part = !dw ? NULL : tid == 0 ? dw : col + col_floats(s);
        if (part && tid != 0)
            for (int64_t j = 0; j < s->k * crs; j++)
                part[j] = 0.0f;
#pragma omp single
        used = omp_get_num_threads();
#pragma omp for schedule(static)
        for (int64_t i = 0; i < s->n; i++)
            sample_backward(prec, dx ? dx + i * chw : NULL, part, dy + i * s->k * ohw, x + i * chw,
                            w, s, col);
    }
    for (int t = 1; dw && t < used; t++)
        ddpc_axpy_f32(dw, 1.0f, ws + (int64_t)t * slot_floats + col_floats(s), s->k * crs);
}
