// SPDX-License-Identifier: MIT
/* Inputs and the reference of `ddpc bench <collective> --check`. Rank r's element i is
 * ((7 i + 13 r) mod 17) - 8, a small integer that every dtype holds exactly; the reference is
 * computed here in double, independently of src/comm's reduction kernels and conversions, and
 * compared element by element (exactly, except a floating-point avg, which may round once). */
#include "cli/bench_coll.h"

#include <math.h>
#include <string.h>

static double input_value(int rank, size_t i)
{
    return (double)((long)((i * 7u + (size_t)rank * 13u) % 17u) - 8);
}

/* bf16 and f16 bit patterns of an integer of magnitude < 2048 that the format holds exactly
 * (every value written here: the inputs and the -99 sentinel). */
static uint16_t half_bits(double v, bool bf16)
{
    if (v == 0.0)
        return 0;
    uint16_t sign = v < 0 ? 0x8000u : 0;
    double m = fabs(v);
    int e = 0;
    while (m >= 2.0) {
        m *= 0.5;
        e++;
    }
    /* m in [1, 2): mantissa bits after the leading one */
    int mant_bits = bf16 ? 7 : 10, bias = bf16 ? 127 : 15;
    uint16_t mant = (uint16_t)((m - 1.0) * (double)(1u << mant_bits));
    return (uint16_t)(sign | (uint16_t)((e + bias) << mant_bits) | mant);
}

static double bf16_value(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* IEEE binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits; subnormals, inf and NaN. */
static double f16_value(uint16_t h)
{
    int e = (h >> 10) & 0x1f;
    double mant = h & 0x3ff, v;
    if (e == 0)
        v = ldexp(mant, -24);
    else if (e == 31)
        v = mant == 0 ? INFINITY : NAN;
    else
        v = ldexp(1024.0 + mant, e - 25);
    return (h & 0x8000u) ? -v : v;
}

static void put(void *buf, ddpc_dtype t, size_t i, double v)
{
    switch (t) {
    case DDPC_DTYPE_F32:
        ((float *)buf)[i] = (float)v;
        break;
    case DDPC_DTYPE_F64:
        ((double *)buf)[i] = v;
        break;
    case DDPC_DTYPE_BF16:
        ((uint16_t *)buf)[i] = half_bits(v, true);
        break;
    case DDPC_DTYPE_F16:
        ((uint16_t *)buf)[i] = half_bits(v, false);
        break;
    case DDPC_DTYPE_I32:
        ((int32_t *)buf)[i] = (int32_t)v;
        break;
    default:
        ((int64_t *)buf)[i] = (int64_t)v;
        break;
    }
}

static double get(const void *buf, ddpc_dtype t, size_t i)
{
    switch (t) {
    case DDPC_DTYPE_F32:
        return ((const float *)buf)[i];
    case DDPC_DTYPE_F64:
        return ((const double *)buf)[i];
    case DDPC_DTYPE_BF16:
        return bf16_value(((const uint16_t *)buf)[i]);
    case DDPC_DTYPE_F16:
        return f16_value(((const uint16_t *)buf)[i]);
    case DDPC_DTYPE_I32:
        return ((const int32_t *)buf)[i];
    default:
        return (double)((const int64_t *)buf)[i];
    }
}

static bool is_int(ddpc_dtype t)
{
    return t == DDPC_DTYPE_I32 || t == DDPC_DTYPE_I64;
}

/* The reduction over ranks 0..world-1 of element i; avg of integers truncates toward zero. */
static double reduce_ref(ddpc_reduce_op op, ddpc_dtype t, int world, size_t i)
{
    double acc = input_value(0, i);
    for (int r = 1; r < world; r++) {
        double v = input_value(r, i);
        if (op == DDPC_REDUCE_MIN)
            acc = v < acc ? v : acc;
        else if (op == DDPC_REDUCE_MAX)
            acc = v > acc ? v : acc;
        else
            acc += v;
    }
    if (op == DDPC_REDUCE_AVG)
        acc = is_int(t) ? trunc(acc / world) : acc / world;
    return acc;
}

/* Relative tolerance: 0 where the result is exact; a floating-point avg rounds its quotient
 * once in its accumulation type and once more to bf16/f16 (allow twice the unit roundoff). */
static double tolerance(const ddpc__bench_options *o)
{
    if (o->op != DDPC_REDUCE_AVG || is_int(o->dtype) || o->coll == DDPC__BENCH_BROADCAST ||
        o->coll == DDPC__BENCH_ALL_GATHER)
        return 0.0;
    switch (o->dtype) {
    case DDPC_DTYPE_F64:
        return ldexp(1.0, -52);
    case DDPC_DTYPE_BF16:
        return ldexp(1.0, -8);
    case DDPC_DTYPE_F16:
        return ldexp(1.0, -10);
    default:
        return ldexp(1.0, -23);
    }
}

static double expected(const ddpc__bench_options *o, const ddpc__bench_shape *s, size_t i)
{
    switch (o->coll) {
    case DDPC__BENCH_ALL_REDUCE:
        return reduce_ref(o->op, o->dtype, s->world, i);
    case DDPC__BENCH_BROADCAST:
        return input_value(o->root, i);
    case DDPC__BENCH_ALL_GATHER:
        return input_value((int)(i / s->per), i % s->per);
    default:
        return reduce_ref(o->op, o->dtype, s->world, (size_t)s->rank * s->per + i);
    }
}

void ddpc__bench_fill(const ddpc__bench_options *o, const ddpc__bench_shape *s, void *send,
                      void *recv)
{
    for (size_t i = 0; i < s->n_send; i++)
        put(send, o->dtype, i, input_value(s->rank, i));
    bool root = o->coll == DDPC__BENCH_BROADCAST && s->rank == o->root;
    for (size_t i = 0; i < s->n_recv; i++)
        put(recv, o->dtype, i, root ? input_value(s->rank, i) : -99.0);
}

int64_t ddpc__bench_count_wrong(const ddpc__bench_options *o, const ddpc__bench_shape *s,
                                const void *recv)
{
    double tol = tolerance(o);
    int64_t wrong = 0;
    for (size_t i = 0; i < s->n_recv; i++) {
        double want = expected(o, s, i), got = get(recv, o->dtype, i);
        double scale = fabs(want) > 1.0 ? fabs(want) : 1.0;
        wrong += !(fabs(got - want) <= tol * scale);
    }
    return wrong;
}
