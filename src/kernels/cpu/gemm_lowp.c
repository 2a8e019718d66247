// SPDX-License-Identifier: MIT
/* ddpc_gemm: matrix products at a precision (autocast's rule: low-precision inputs, fp32
 * accumulation and output). bf16 goes to oneDNN's matmul where the CPU multiplies bf16 itself;
 * otherwise both operands are rounded into the calling thread's scratch and multiplied by sgemm.
 * Invariant: the rounded path and oneDNN compute the same products (a product of two bf16 or two
 * fp16 values is exact in fp32), so a CPU without bf16 runs the same numerics more slowly, never
 * fp32 numerics. The scratch only grows, so repeated shapes allocate nothing. */
#include <ddpc/half.h>
#include <ddpc/kernels.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_impl.h"

static const char *const precision_names[DDPC_PREC_COUNT] = {"fp32", "bf16", "fp16"};

const char *ddpc_precision_name(ddpc_precision p)
{
    return (unsigned)p < DDPC_PREC_COUNT ? precision_names[p] : "unknown";
}

bool ddpc_precision_from_name(const char *s, ddpc_precision *out)
{
    for (int p = 0; s && p < DDPC_PREC_COUNT; p++)
        if (strcmp(s, precision_names[p]) == 0) {
            *out = (ddpc_precision)p;
            return true;
        }
    return false;
}

static _Atomic uint64_t scratch_grows, primitives_created;

void ddpc__count_scratch_grow(void)
{
    atomic_fetch_add_explicit(&scratch_grows, 1, memory_order_relaxed);
}

void ddpc__count_primitive(void)
{
    atomic_fetch_add_explicit(&primitives_created, 1, memory_order_relaxed);
}

ddpc_matmul_setup_counts ddpc_kernels_matmul_setup_counts(void)
{
    return (ddpc_matmul_setup_counts){
        .scratch_grows = atomic_load_explicit(&scratch_grows, memory_order_relaxed),
        .primitives_created = atomic_load_explicit(&primitives_created, memory_order_relaxed)};
}

static _Thread_local float *tl_scratch;
static _Thread_local size_t tl_scratch_floats;

/* The calling thread's scratch of at least n floats. Kernels have no error path, and a product
 * whose operands fit in memory twice is the least a low-precision run needs: running out here is
 * reported and ends the process rather than computing something else. */
static float *scratch(size_t n)
{
    if (n > tl_scratch_floats) {
        float *p = realloc(tl_scratch, n * sizeof *p);
        if (!p) {
            fprintf(stderr, "ddpc: out of memory for %zu floats of low-precision GEMM scratch\n",
                    n);
            abort();
        }
        tl_scratch = p;
        tl_scratch_floats = n;
        ddpc__count_scratch_grow();
    }
    return tl_scratch;
}

void ddpc_kernels_release_thread(void)
{
    free(tl_scratch);
    tl_scratch = NULL;
    tl_scratch_floats = 0;
    ddpc__onednn_release_thread();
}

/* dst (rows, cols) = x (rows, cols; leading dimension ld) rounded to bf16 or fp16. Large blocks
 * are split over the threads (the sgemm that follows uses them all anyway); inside a parallel
 * region (attention heads, convolution samples) the caller already owns one thread each. */
static void round_block(float *dst, const float *x, int64_t rows, int64_t cols, int64_t ld, int bf16)
{
#pragma omp parallel for schedule(static) if (rows * cols >= 4 * DDPC__PAR_MIN_WORK && !omp_in_parallel())
    for (int64_t r = 0; r < rows; r++)
        ddpc_round_half_array(dst + r * cols, x + r * ld, (size_t)cols, bf16);
}

void ddpc_gemm(ddpc_precision p, ddpc_transpose ta, ddpc_transpose tb, int64_t m, int64_t n,
               int64_t k, float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
               float beta, float *c, int64_t ldc)
{
    if (p == DDPC_PREC_FP32 || m <= 0 || n <= 0 || k <= 0) {
        ddpc_gemm_f32(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    if (p == DDPC_PREC_BF16 && ddpc__onednn_has_bf16() &&
        ddpc_gemm_onednn(p, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))
        return;
    /* Stored shapes of a and b: op() only changes how sgemm reads them. */
    int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    float *ra = scratch((size_t)(ar * ac + br * bc)), *rb = ra + ar * ac;
    int bf16 = p == DDPC_PREC_BF16;
    round_block(ra, a, ar, ac, lda, bf16);
    round_block(rb, b, br, bc, ldb, bf16);
    ddpc_gemm_f32(ta, tb, m, n, k, alpha, ra, ac, rb, bc, beta, c, ldc);
}

const char *ddpc_kernels_matmul_info(ddpc_precision p, bool *native)
{
    static _Thread_local char info[192];
    bool nat = false;
    if (p == DDPC_PREC_FP32) {
        snprintf(info, sizeof info, "fp32 OpenBLAS sgemm");
        nat = true;
    } else if (p == DDPC_PREC_BF16 && ddpc__onednn_has_bf16()) {
        snprintf(info, sizeof info, "bf16 oneDNN matmul, fp32 accumulation (%s)",
                 ddpc__onednn_isa());
        nat = true;
    } else if (p == DDPC_PREC_BF16) {
        snprintf(info, sizeof info,
                 "bf16-rounded inputs on OpenBLAS sgemm, fp32 accumulation "
                 "(oneDNN has no bf16 matmul for %s: same numerics, not faster)",
                 ddpc__onednn_isa());
    } else if (p == DDPC_PREC_FP16) {
        snprintf(info, sizeof info,
                 "fp16-rounded inputs on OpenBLAS sgemm, fp32 accumulation "
                 "(fp16 products as on GPUs; no CPU speed-up)");
    } else {
        snprintf(info, sizeof info, "unknown precision %d", (int)p);
    }
    if (native)
        *native = nat;
    return info;
}
