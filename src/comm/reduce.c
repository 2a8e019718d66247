// SPDX-License-Identifier: MIT
/* Reduction kernels shared by the backends (16-bit floats convert through core/half.c).
 * Invariant: a reduction of n inputs is evaluated strictly left to right, srcs[0] op srcs[1] op
 * ... op srcs[n-1], element by element, so every rank that reduces the same inputs gets the same
 * bits. bf16/f16 accumulate in f32 and round once (nearest even). Integer SUM wraps around in its
 * type and AVG is that sum divided by n, truncated toward zero (NCCL's semantics). MIN/MAX
 * propagate NaN. Work runs in L1-sized chunks so n inputs cost one pass over dst. */
#include "comm/pg_impl.h"
#include "core/simd_dispatch.h"

#include <ddpc/half.h>

#include <string.h>

enum { CHUNK = 1024 }; /* elements per pass: 4 KiB of f32 stays in L1 across the n inputs */

/* ---- element-wise kernels: d = a op b (bin) and d = d op b (acc), AVG accumulates as SUM ---- */

/* a[i] is the running value, b[i] the next input; MIN/MAX take a NaN input over anything. */
#define FLOAT_OPS                                                                                  \
    case DDPC_REDUCE_SUM:                                                                          \
    case DDPC_REDUCE_AVG:                                                                          \
        LOOP(a[i] + b[i]);                                                                         \
        break;                                                                                     \
    case DDPC_REDUCE_MIN:                                                                          \
        LOOP((b[i] < a[i] || b[i] != b[i]) ? b[i] : a[i]);                                         \
        break;                                                                                     \
    default:                                                                                       \
        LOOP((b[i] > a[i] || b[i] != b[i]) ? b[i] : a[i]);                                         \
        break;

#define INT_OPS(T, U)                                                                              \
    case DDPC_REDUCE_SUM:                                                                          \
    case DDPC_REDUCE_AVG:                                                                          \
        LOOP((T)((U)a[i] + (U)b[i]));                                                              \
        break;                                                                                     \
    case DDPC_REDUCE_MIN:                                                                          \
        LOOP(b[i] < a[i] ? b[i] : a[i]);                                                           \
        break;                                                                                     \
    default:                                                                                       \
        LOOP(b[i] > a[i] ? b[i] : a[i]);                                                           \
        break;

#define DEFINE_KERNELS(SFX, T, OPS)                                                                \
    static void SFX##_bin(T *restrict d, const T *restrict a, const T *restrict b, size_t m,       \
                          ddpc_reduce_op op)                                                       \
    {                                                                                              \
        switch (op) {                                                                              \
            OPS                                                                                    \
        }                                                                                          \
    }                                                                                              \
    static void SFX##_acc(T *restrict d, const T *restrict b, size_t m, ddpc_reduce_op op)         \
    {                                                                                              \
        const T *a = d;                                                                            \
        switch (op) {                                                                              \
            OPS                                                                                    \
        }                                                                                          \
    }                                                                                              \
    static void SFX##_div(T *restrict d, size_t m, int n)                                          \
    {                                                                                              \
        for (size_t i = 0; i < m; i++)                                                             \
            d[i] = (T)(d[i] / (T)n);                                                               \
    }                                                                                              \
    static void SFX##_many(T *dst, const void *const *srcs, int n, size_t count,                   \
                           ddpc_reduce_op op)                                                      \
    {                                                                                              \
        for (size_t base = 0; base < count; base += CHUNK) {                                       \
            size_t m = count - base < CHUNK ? count - base : CHUNK;                                \
            T *d = dst + base;                                                                     \
            const T *s0 = (const T *)srcs[0] + base, *s1 = (const T *)srcs[1] + base;              \
            if (d == s0)                                                                           \
                SFX##_acc(d, s1, m, op);                                                           \
            else                                                                                   \
                SFX##_bin(d, s0, s1, m, op);                                                       \
            for (int k = 2; k < n; k++)                                                            \
                SFX##_acc(d, (const T *)srcs[k] + base, m, op);                                    \
            if (op == DDPC_REDUCE_AVG)                                                             \
                SFX##_div(d, m, n);                                                                \
        }                                                                                          \
    }

#define LOOP(EXPR)                                                                                 \
    for (size_t i = 0; i < m; i++)                                                                 \
        d[i] = (EXPR);

DEFINE_KERNELS(f32, float, FLOAT_OPS)
DEFINE_KERNELS(f64, double, FLOAT_OPS)
DEFINE_KERNELS(i32, int32_t, INT_OPS(int32_t, uint32_t))
DEFINE_KERNELS(i64, int64_t, INT_OPS(int64_t, uint64_t))
#undef LOOP

/* bf16/f16: widen each chunk to f32, reduce there in order, divide for AVG, round once. */
static void half_many(uint16_t *dst, const void *const *srcs, int n, size_t count,
                      ddpc_reduce_op op, bool bf16)
{
    float acc[CHUNK], tmp[CHUNK];
    for (size_t base = 0; base < count; base += CHUNK) {
        size_t m = count - base < CHUNK ? count - base : CHUNK;
        for (int k = 0; k < n; k++) {
            const uint16_t *s = (const uint16_t *)srcs[k] + base;
            float *into = k == 0 ? acc : tmp;
            if (bf16)
                ddpc_half_to_f32_array(into, s, m, 1);
            else
                ddpc_half_to_f32_array(into, s, m, 0);
            if (k > 0)
                f32_acc(acc, tmp, m, op);
        }
        if (op == DDPC_REDUCE_AVG)
            f32_div(acc, m, n);
        if (bf16)
            ddpc_f32_to_half_array(dst + base, acc, m, 1);
        else
            ddpc_f32_to_half_array(dst + base, acc, m, 0);
    }
}

void DDPC_SIMD(ddpc__reduce_many)(void *dst, const void *const *srcs, int n, size_t count,
                                  ddpc_dtype dtype, ddpc_reduce_op op)
{
    if (n <= 0 || count == 0)
        return;
    if (n == 1) { /* a single input, AVG included, is the value itself */
        if (dst != srcs[0])
            memmove(dst, srcs[0], count * ddpc_dtype_size(dtype));
        return;
    }
    switch (dtype) {
    case DDPC_DTYPE_F32:
        f32_many(dst, srcs, n, count, op);
        break;
    case DDPC_DTYPE_F64:
        f64_many(dst, srcs, n, count, op);
        break;
    case DDPC_DTYPE_BF16:
    case DDPC_DTYPE_F16:
        half_many(dst, srcs, n, count, op, dtype == DDPC_DTYPE_BF16);
        break;
    case DDPC_DTYPE_I32:
        i32_many(dst, srcs, n, count, op);
        break;
    default:
        i64_many(dst, srcs, n, count, op);
        break;
    }
}
DDPC_SIMD_DISPATCH_VOID(ddpc__reduce_many,
                        (void *dst, const void *const *srcs, int n, size_t count, ddpc_dtype dtype,
                         ddpc_reduce_op op),
                        (dst, srcs, n, count, dtype, op))

/* AVG acts as SUM here: a pairwise step cannot know n; whoever finishes divides. bf16/f16 round
 * after every call, so reductions of many inputs should use ddpc__reduce_many. */
void DDPC_SIMD(ddpc__reduce_into)(void *dst, const void *src, size_t count, ddpc_dtype dtype,
                                  ddpc_reduce_op op)
{
    if (op == DDPC_REDUCE_AVG)
        op = DDPC_REDUCE_SUM;
    const void *srcs[2] = {dst, src};
    ddpc__reduce_many(dst, srcs, 2, count, dtype, op);
}
DDPC_SIMD_DISPATCH_VOID(ddpc__reduce_into,
                        (void *dst, const void *src, size_t count, ddpc_dtype dtype,
                         ddpc_reduce_op op),
                        (dst, src, count, dtype, op))
