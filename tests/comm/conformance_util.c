// SPDX-License-Identifier: MIT
/* Inputs and reference reductions of the conformance suite. The reference
 * uses compiler conversions (_Float16) and its own bf16 rounding, not src/comm's code. */
#include "conformance_util.h"

#include <stdio.h>
#include <string.h>

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    return x ^ (x >> 33);
}

/* A cheap multiplicative hash (the big cases fill tens of millions of elements). */
static int64_t value_k(int rank, size_t i, int salt)
{
    uint32_t h = (uint32_t)i * 2654435761u + (uint32_t)rank * 40503u + (uint32_t)salt * 977u;
    return (int64_t)((h ^ (h >> 15)) % 17u) - 8;
}

static uint16_t bf16_round(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static float bf16_value(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Stores v (a double) as dt; floats round to nearest even through f32 as src/comm does. */
static void put(void *buf, size_t i, ddpc_dtype dt, double v)
{
    switch (dt) {
    case DDPC_DTYPE_F32: ((float *)buf)[i] = (float)v; break;
    case DDPC_DTYPE_F64: ((double *)buf)[i] = v; break;
    case DDPC_DTYPE_BF16: ((uint16_t *)buf)[i] = bf16_round((float)v); break;
    case DDPC_DTYPE_F16: {
        _Float16 h = (_Float16)(float)v;
        memcpy((uint16_t *)buf + i, &h, 2);
        break;
    }
    case DDPC_DTYPE_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case DDPC_DTYPE_I64: ((int64_t *)buf)[i] = (int64_t)v; break;
    default: break;
    }
}

double conf_get(const void *buf, size_t i, ddpc_dtype dt)
{
    switch (dt) {
    case DDPC_DTYPE_F32: return ((const float *)buf)[i];
    case DDPC_DTYPE_F64: return ((const double *)buf)[i];
    case DDPC_DTYPE_BF16: return bf16_value(((const uint16_t *)buf)[i]);
    case DDPC_DTYPE_F16: {
        _Float16 h;
        memcpy(&h, (const uint16_t *)buf + i, 2);
        return (double)(float)h;
    }
    case DDPC_DTYPE_I32: return ((const int32_t *)buf)[i];
    case DDPC_DTYPE_I64: return (double)((const int64_t *)buf)[i];
    default: return 0;
    }
}

static bool is_int(ddpc_dtype dt) { return dt == DDPC_DTYPE_I32 || dt == DDPC_DTYPE_I64; }

static int64_t int_value(int rank, size_t i, int salt)
{
    return value_k(rank, i, salt) * 100003 + rank;
}

void conf_fill(void *buf, size_t n, ddpc_dtype dt, int rank, int salt)
{
    for (size_t i = 0; i < n; i++) {
        if (is_int(dt))
            put(buf, i, dt, (double)int_value(rank, i, salt));
        else
            put(buf, i, dt, (double)value_k(rank, i, salt) * 0.25);
    }
}

void conf_fill_random(void *buf, size_t n, ddpc_dtype dt, int rank)
{
    for (size_t i = 0; i < n; i++) {
        double u = (double)(mix(((uint64_t)rank << 40) ^ i ^ 0x5eed) >> 11) * 0x1.0p-53;
        put(buf, i, dt, (u - 0.5) * 3.0);
    }
}

/* Float reduction: exact sum in double; AVG divides in the accumulation type (f64 for f64,
 * f32 otherwise), then the dtype's rounding. */
static double float_ref(ddpc_dtype dt, ddpc_reduce_op op, int world, int salt, size_t idx)
{
    double acc = 0;
    for (int r = 0; r < world; r++) {
        double v = (double)value_k(r, idx, salt) * 0.25;
        if (r == 0 || op == DDPC_REDUCE_SUM || op == DDPC_REDUCE_AVG)
            acc = r == 0 ? v : acc + v;
        else if (op == DDPC_REDUCE_MIN)
            acc = v < acc ? v : acc;
        else
            acc = v > acc ? v : acc;
    }
    if (op == DDPC_REDUCE_AVG)
        acc = dt == DDPC_DTYPE_F64 ? acc / world : (double)((float)acc / (float)world);
    return acc;
}

static int64_t int_ref(ddpc_reduce_op op, int world, int salt, size_t idx)
{
    int64_t acc = 0;
    for (int r = 0; r < world; r++) {
        int64_t v = int_value(r, idx, salt);
        if (r == 0)
            acc = v;
        else if (op == DDPC_REDUCE_SUM || op == DDPC_REDUCE_AVG)
            acc += v;
        else if (op == DDPC_REDUCE_MIN)
            acc = v < acc ? v : acc;
        else
            acc = v > acc ? v : acc;
    }
    return op == DDPC_REDUCE_AVG ? acc / world : acc; /* C division truncates toward zero */
}

void conf_reference_reduce(void *want, size_t n, ddpc_dtype dt, ddpc_reduce_op op, int world,
                           int salt, size_t offset)
{
    for (size_t i = 0; i < n; i++) {
        if (is_int(dt))
            put(want, i, dt, (double)int_ref(op, world, salt, offset + i));
        else
            put(want, i, dt, float_ref(dt, op, world, salt, offset + i));
    }
}

uint64_t conf_hash(const void *buf, size_t bytes)
{
    uint64_t h = 1469598103934665603ULL;
    const unsigned char *p = buf;
    for (size_t i = 0; i < bytes; i++)
        h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}
