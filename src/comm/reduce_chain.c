// SPDX-License-Identifier: MIT
/* A rank-order reduction split across hosts: host 0 starts the running value from its ranks'
 * inputs, every next host continues it with its own ranks' inputs, and the last one finishes it
 * (AVG divides, bf16/f16 round once). Invariant: the chain performs exactly the operations of
 * ddpc__reduce_many over all inputs in rank order, one element at a time, so its bits equal the
 * shm backend's: the running value stays in the accumulation type (f32 for bf16/f16) between
 * hosts, and only the finish divides and rounds. */
#include "comm/pg_impl.h"

#include <ddpc/half.h>

#include <string.h>

enum { CHUNK = 1024 }; /* f32 elements per pass of the 16-bit path: stays in L1 */

size_t ddpc__reduce_acc_size(ddpc_dtype dtype)
{
    return dtype == DDPC_DTYPE_BF16 || dtype == DDPC_DTYPE_F16 ? 4 : ddpc_dtype_size(dtype);
}

/* The 16-bit path: widen each input and fold it into the f32 running value, as reduce.c's
 * half_many does between widening and rounding. */
static void half_chain(float *acc, const float *acc_in, const void *const *srcs, int n,
                       size_t count, ddpc_reduce_op op, int bf16)
{
    float tmp[CHUNK];
    for (size_t base = 0; base < count; base += CHUNK) {
        size_t m = count - base < CHUNK ? count - base : CHUNK;
        float *a = acc + base;
        int k = 0;
        if (acc_in) {
            if (a != acc_in + base)
                memcpy(a, acc_in + base, m * sizeof *a);
        } else {
            ddpc_half_to_f32_array(a, (const uint16_t *)srcs[0] + base, m, bf16);
            k = 1;
        }
        for (; k < n; k++) {
            ddpc_half_to_f32_array(tmp, (const uint16_t *)srcs[k] + base, m, bf16);
            ddpc__reduce_into(a, tmp, m, DDPC_DTYPE_F32, op);
        }
    }
}

void ddpc__reduce_chain(void *acc, const void *acc_in, const void *const *srcs, int n, size_t count,
                        ddpc_dtype dtype, ddpc_reduce_op op)
{
    if (count == 0)
        return;
    if (op == DDPC_REDUCE_AVG)
        op = DDPC_REDUCE_SUM; /* only the finish knows the world size */
    if (dtype == DDPC_DTYPE_BF16 || dtype == DDPC_DTYPE_F16) {
        half_chain(acc, acc_in, srcs, n, count, op, dtype == DDPC_DTYPE_BF16);
        return;
    }
    if (!acc_in) {
        ddpc__reduce_many(acc, srcs, n, count, dtype, op);
        return;
    }
    if (acc != acc_in)
        memcpy(acc, acc_in, count * ddpc_dtype_size(dtype));
    for (int k = 0; k < n; k++)
        ddpc__reduce_into(acc, srcs[k], count, dtype, op);
}

#define DIVIDE(T)                                                                                  \
    do {                                                                                           \
        const T *a = acc;                                                                          \
        T *d = dst;                                                                                \
        for (size_t i = 0; i < count; i++)                                                         \
            d[i] = (T)(a[i] / (T)world);                                                           \
    } while (0)

void ddpc__reduce_finish(void *dst, const void *acc, size_t count, ddpc_dtype dtype,
                         ddpc_reduce_op op, int world)
{
    bool avg = op == DDPC_REDUCE_AVG && world > 1; /* AVG of one value is the value */
    switch (dtype) {
    case DDPC_DTYPE_BF16:
    case DDPC_DTYPE_F16: {
        int bf16 = dtype == DDPC_DTYPE_BF16;
        float tmp[CHUNK];
        for (size_t base = 0; base < count; base += CHUNK) {
            size_t m = count - base < CHUNK ? count - base : CHUNK;
            const float *a = (const float *)acc + base;
            if (avg) {
                for (size_t i = 0; i < m; i++)
                    tmp[i] = (float)(a[i] / (float)world);
                a = tmp;
            }
            ddpc_f32_to_half_array((uint16_t *)dst + base, a, m, bf16);
        }
        return;
    }
    default:
        break;
    }
    if (!avg) {
        if (dst != acc)
            memmove(dst, acc, count * ddpc_dtype_size(dtype));
        return;
    }
    switch (dtype) {
    case DDPC_DTYPE_F32:
        DIVIDE(float);
        break;
    case DDPC_DTYPE_F64:
        DIVIDE(double);
        break;
    case DDPC_DTYPE_I32:
        DIVIDE(int32_t);
        break;
    default:
        DIVIDE(int64_t);
        break;
    }
}
