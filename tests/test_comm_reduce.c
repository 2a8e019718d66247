// SPDX-License-Identifier: MIT
/* Tests for src/comm/reduce.c: the chunked/vectorised reductions against a scalar reference for
 * every dtype x op x input count x size, the left-to-right order and single rounding of bf16/f16,
 * and the bf16/f16 conversions against brute-force round-to-nearest-even references. */
#include "comm/pg_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/half.h>
#include <ddpc/rng.h>

#include "check.h"

#include <stdint.h>

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ---- scalar reference ---- */

static double ref_load(const void *p, size_t i, ddpc_dtype t)
{
    switch (t) {
    case DDPC_DTYPE_F32:
        return ((const float *)p)[i];
    case DDPC_DTYPE_F64:
        return ((const double *)p)[i];
    case DDPC_DTYPE_BF16:
        return ddpc_bf16_to_f32(((const uint16_t *)p)[i]);
    case DDPC_DTYPE_F16:
        return ddpc_f16_to_f32(((const uint16_t *)p)[i]);
    default:
        return 0;
    }
}

static float ref_fop(float a, float b, ddpc_reduce_op op)
{
    if (op == DDPC_REDUCE_MIN)
        return isnan(b) || b < a ? b : a;
    if (op == DDPC_REDUCE_MAX)
        return isnan(b) || b > a ? b : a;
    return a + b;
}

static double ref_dop(double a, double b, ddpc_reduce_op op)
{
    if (op == DDPC_REDUCE_MIN)
        return isnan(b) || b < a ? b : a;
    if (op == DDPC_REDUCE_MAX)
        return isnan(b) || b > a ? b : a;
    return a + b;
}

static int64_t ref_iop(int64_t a, int64_t b, ddpc_reduce_op op, int wide)
{
    if (op == DDPC_REDUCE_MIN)
        return b < a ? b : a;
    if (op == DDPC_REDUCE_MAX)
        return b > a ? b : a;
    if (wide)
        return (int64_t)((uint64_t)a + (uint64_t)b);
    return (int32_t)(uint32_t)((uint32_t)a + (uint32_t)b);
}

/* Element i of reduce(srcs) written into out (one element of dtype t). */
static void ref_element(void *out, const void *const *srcs, int n, size_t i, ddpc_dtype t,
                        ddpc_reduce_op op)
{
    if (t == DDPC_DTYPE_I32 || t == DDPC_DTYPE_I64) {
        int wide = t == DDPC_DTYPE_I64;
        int64_t acc = wide ? ((const int64_t *)srcs[0])[i] : ((const int32_t *)srcs[0])[i];
        for (int k = 1; k < n; k++) {
            int64_t v = wide ? ((const int64_t *)srcs[k])[i] : ((const int32_t *)srcs[k])[i];
            acc = ref_iop(acc, v, op, wide);
        }
        if (op == DDPC_REDUCE_AVG)
            acc /= n;
        if (wide)
            memcpy(out, &acc, 8);
        else {
            int32_t v = (int32_t)acc;
            memcpy(out, &v, 4);
        }
        return;
    }
    if (t == DDPC_DTYPE_F64) {
        double acc = ref_load(srcs[0], i, t);
        for (int k = 1; k < n; k++)
            acc = ref_dop(acc, ref_load(srcs[k], i, t), op);
        if (op == DDPC_REDUCE_AVG)
            acc /= n;
        memcpy(out, &acc, 8);
        return;
    }
    float acc = (float)ref_load(srcs[0], i, t);
    for (int k = 1; k < n; k++)
        acc = ref_fop(acc, (float)ref_load(srcs[k], i, t), op);
    if (op == DDPC_REDUCE_AVG && n > 1)
        acc /= (float)n;
    if (t == DDPC_DTYPE_F32) {
        memcpy(out, &acc, 4);
    } else {
        uint16_t h = t == DDPC_DTYPE_BF16 ? ddpc_f32_to_bf16(acc) : ddpc_f32_to_f16(acc);
        memcpy(out, &h, 2);
    }
}

static void fill_random(void *p, size_t count, ddpc_dtype t, ddpc_rng *r)
{
    for (size_t i = 0; i < count; i++) {
        float f = (ddpc_rng_uniform(r) - 0.5f) * 200.0f;
        switch (t) {
        case DDPC_DTYPE_F32:
            ((float *)p)[i] = f;
            break;
        case DDPC_DTYPE_F64:
            ((double *)p)[i] = (double)f * 1.000000123;
            break;
        case DDPC_DTYPE_BF16:
            ((uint16_t *)p)[i] = ddpc_f32_to_bf16(f);
            break;
        case DDPC_DTYPE_F16:
            ((uint16_t *)p)[i] = ddpc_f32_to_f16(f);
            break;
        case DDPC_DTYPE_I32:
            ((int32_t *)p)[i] = (int32_t)(uint32_t)ddpc_rng_next(r);
            break;
        default:
            ((int64_t *)p)[i] = (int64_t)ddpc_rng_next(r);
            break;
        }
    }
}

static void check_many_case(ddpc_dtype t, ddpc_reduce_op op, int n, size_t count, int in_place,
                            ddpc_rng *r)
{
    size_t es = ddpc_dtype_size(t);
    void *srcs[5];
    for (int k = 0; k < n; k++) {
        srcs[k] = ddpc_malloc(count * es + 1);
        fill_random(srcs[k], count, t, r);
    }
    void *want = ddpc_malloc(count * es + 1);
    for (size_t i = 0; i < count; i++) {
        if (n == 1)
            memcpy((char *)want + i * es, (char *)srcs[0] + i * es, es);
        else
            ref_element((char *)want + i * es, (const void *const *)srcs, n, i, t, op);
    }
    void *dst = in_place ? srcs[0] : ddpc_malloc(count * es + 1);
    ddpc__reduce_many(dst, (const void *const *)srcs, n, count, t, op);
    int bad = count ? memcmp(dst, want, count * es) != 0 : 0;
    if (bad)
        fprintf(stderr, "mismatch: %s %s n=%d count=%zu in_place=%d\n", ddpc_dtype_name(t),
                ddpc_reduce_op_name(op), n, count, in_place);
    CHECK(!bad);
    if (!in_place)
        ddpc_free(dst);
    ddpc_free(want);
    for (int k = 0; k < n; k++)
        ddpc_free(srcs[k]);
}

static void test_reduce_many_matches_reference(void)
{
    static const size_t counts[] = {0, 1, 7, 31, 1023, 1024, 1025, 4099};
    ddpc_rng r = ddpc_rng_make(3, 0);
    for (int t = 0; t < DDPC_DTYPE_COUNT; t++)
        for (int op = 0; op < DDPC_REDUCE_COUNT; op++)
            for (int n = 1; n <= 5; n++)
                for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
                    for (int ip = 0; ip < 2; ip++)
                        check_many_case((ddpc_dtype)t, (ddpc_reduce_op)op, n, counts[c], ip, &r);
}

static void test_order_and_single_rounding(void)
{
    /* f32: (1e8 + 1) - 1e8 is 0 left to right; any other order could give 1. */
    float a[1] = {1e8f}, b[1] = {1.0f}, c[1] = {-1e8f}, out[1];
    const void *s3[3] = {a, b, c};
    ddpc__reduce_many(out, s3, 3, 1, DDPC_DTYPE_F32, DDPC_REDUCE_SUM);
    CHECK(out[0] == 0.0f);
    /* bf16: 1 + 3 * 2^-9 is 0.75 ulp above 1: rounding once gives 1 + 2^-7, every step gives 1. */
    uint16_t one = ddpc_f32_to_bf16(1.0f), tiny = ddpc_f32_to_bf16(0x1p-9f), h[1];
    uint16_t v0[1] = {one}, v1[1] = {tiny}, v2[1] = {tiny}, v3[1] = {tiny};
    const void *s4[4] = {v0, v1, v2, v3};
    ddpc__reduce_many(h, s4, 4, 1, DDPC_DTYPE_BF16, DDPC_REDUCE_SUM);
    CHECK_EQ_INT(h[0], 0x3f81);
    /* f16 the same way: ulp at 1 is 2^-10. */
    uint16_t f0[1] = {ddpc_f32_to_f16(1.0f)}, ft[1] = {ddpc_f32_to_f16(0x1p-12f)};
    const void *sf[4] = {f0, ft, ft, ft};
    ddpc__reduce_many(h, sf, 4, 1, DDPC_DTYPE_F16, DDPC_REDUCE_SUM);
    CHECK_EQ_INT(h[0], 0x3c01);
}

static void test_integer_semantics(void)
{
    int32_t a[2] = {-7, INT32_MAX}, b[2] = {0, 1}, out[2];
    const void *s[2] = {a, b};
    ddpc__reduce_many(out, s, 2, 2, DDPC_DTYPE_I32, DDPC_REDUCE_AVG);
    CHECK_EQ_INT(out[0], -3); /* truncates toward zero */
    ddpc__reduce_many(out, s, 2, 2, DDPC_DTYPE_I32, DDPC_REDUCE_SUM);
    CHECK_EQ_INT(out[1], INT32_MIN); /* wraps */
    int64_t x[1] = {5}, y[1] = {-9};
    ddpc__reduce_into(x, y, 1, DDPC_DTYPE_I64, DDPC_REDUCE_AVG); /* AVG acts as SUM pairwise */
    CHECK_EQ_INT(x[0], -4);
    ddpc__reduce_into(x, y, 1, DDPC_DTYPE_I64, DDPC_REDUCE_MIN);
    CHECK_EQ_INT(x[0], -9);
}

static void test_nan_propagates_through_min_max(void)
{
    float a[9], b[9], out[9];
    for (int i = 0; i < 9; i++) {
        a[i] = (float)i;
        b[i] = i == 4 ? NAN : -1.0f;
    }
    a[8] = NAN;
    const void *s[2] = {a, b};
    for (int op = DDPC_REDUCE_MIN; op <= DDPC_REDUCE_MAX; op++) {
        ddpc__reduce_many(out, s, 2, 9, DDPC_DTYPE_F32, (ddpc_reduce_op)op);
        CHECK(isnan(out[4]));
        CHECK(isnan(out[8]));
        CHECK(out[1] == (op == DDPC_REDUCE_MIN ? -1.0f : 1.0f));
    }
}

/* ---- conversions ---- */

/* Nearest of the two candidates lo/hi (bit patterns, decoded by `dec`) to x, ties to even. */
static uint16_t ref_nearest(double x, uint16_t lo, uint16_t hi, float (*dec)(uint16_t))
{
    double dl = fabs(x - dec(lo)), dh = fabs(dec(hi) - x);
    if (dl < dh)
        return lo;
    if (dh < dl)
        return hi;
    return (lo & 1) ? hi : lo;
}

static void test_bf16_conversion(void)
{
    int bad = 0; /* every bf16 value decodes exactly and survives a round trip */
    for (uint32_t h = 0; h < 65536 && !bad; h++) {
        float f = ddpc_bf16_to_f32((uint16_t)h);
        uint16_t back = ddpc_f32_to_bf16(f);
        bad = bits(f) != h << 16 ||
              (isnan(f) ? !isnan(ddpc_bf16_to_f32(back)) || (back & 0x8000) != (h & 0x8000)
                        : back != h);
        if (bad)
            fprintf(stderr, "bf16 %04x -> %a -> %04x\n", (unsigned)h, (double)f, back);
    }
    CHECK_EQ_INT(bad, 0);
    ddpc_rng r = ddpc_rng_make(5, 1);
    for (int i = 0; i < 200000; i++) {
        uint32_t u = (uint32_t)ddpc_rng_next(&r);
        float f = from_bits(u);
        if (isnan(f) || (u & 0x7fffffffu) >= 0x7f7f8000u)
            continue;
        uint16_t lo = (uint16_t)(u >> 16), got = ddpc_f32_to_bf16(f);
        uint16_t want = ref_nearest(f, lo, (uint16_t)(lo + 1), ddpc_bf16_to_f32);
        if (got != want) {
            fprintf(stderr, "f32 %08x\n", u);
            CHECK_EQ_INT(got, want);
            return;
        }
    }
    CHECK_EQ_INT(ddpc_f32_to_bf16(from_bits(0x7f7fffffu)), 0x7f80); /* FLT_MAX overflows */
    CHECK_EQ_INT(ddpc_f32_to_bf16(-INFINITY), 0xff80);
    CHECK(isnan(ddpc_bf16_to_f32(ddpc_f32_to_bf16(from_bits(0x7f800001u))))); /* low payload */
    CHECK_EQ_INT(ddpc_f32_to_bf16(from_bits(0x3f808000u)), 0x3f80); /* tie to even (down) */
    CHECK_EQ_INT(ddpc_f32_to_bf16(from_bits(0x3f818000u)), 0x3f82); /* tie to even (up) */
}

static double f16_value(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}

static void test_f16_decode_all(void)
{
    for (uint32_t h = 0; h < 65536; h++) {
        float f = ddpc_f16_to_f32((uint16_t)h);
        int e = (h >> 10) & 31;
        if (e == 31) {
            uint16_t back = ddpc_f32_to_f16(f);
            if (!((h & 1023) ? isnan(f) : isinf(f)) || (signbit(f) != 0) != ((h & 0x8000) != 0) ||
                back != (h & 1023 ? (h | 0x200) : h)) {
                fprintf(stderr, "f16 %04x decodes to %a, back to %04x\n", (unsigned)h, (double)f,
                        back);
                CHECK(0);
                return;
            }
            continue;
        }
        if ((double)f != f16_value((uint16_t)h) || (signbit(f) != 0) != ((h & 0x8000) != 0) ||
            ddpc_f32_to_f16(f) != h) {
            fprintf(stderr, "f16 %04x decodes to %a\n", (unsigned)h, (double)f);
            CHECK_EQ_INT(ddpc_f32_to_f16(f), h);
            return;
        }
    }
}

static void test_f16_encode_rounding(void)
{
    ddpc_rng r = ddpc_rng_make(6, 2);
    for (int i = 0; i < 300000; i++) {
        /* magnitudes from below the smallest subnormal to beyond the largest finite */
        double mag = ldexp(ddpc_rng_uniform(&r), (int)(ddpc_rng_next(&r) % 46) - 30);
        float f = (float)(i & 1 ? -mag : mag);
        double a = fabs((double)f);
        uint16_t want;
        if (a >= 65520.0) {
            want = 0x7c00;
        } else {
            uint16_t lo = 0; /* largest positive f16 <= a, by bisection over ordered patterns */
            for (int bit = 14; bit >= 0; bit--) {
                uint16_t cand = (uint16_t)(lo | (1u << bit));
                if (cand < 0x7c00 && f16_value(cand) <= a)
                    lo = cand;
            }
            want =
                f16_value(lo) == a ? lo : ref_nearest(a, lo, (uint16_t)(lo + 1), ddpc_f16_to_f32);
        }
        want |= signbit(f) ? 0x8000 : 0;
        uint16_t got = ddpc_f32_to_f16(f);
        if (got != want) {
            fprintf(stderr, "f=%a\n", (double)f);
            CHECK_EQ_INT(got, want);
            return;
        }
    }
    CHECK_EQ_INT(ddpc_f32_to_f16(65504.0f), 0x7bff);
    CHECK_EQ_INT(ddpc_f32_to_f16(65519.99f), 0x7bff);
    CHECK_EQ_INT(ddpc_f32_to_f16(65520.0f), 0x7c00);
    CHECK_EQ_INT(ddpc_f32_to_f16(0x1p-25f), 0x0000);     /* tie to even: 0 */
    CHECK_EQ_INT(ddpc_f32_to_f16(0x1.8p-25f), 0x0001);   /* above the tie */
    CHECK_EQ_INT(ddpc_f32_to_f16(0x1.ff8p-15f), 0x03ff); /* largest subnormal */
    CHECK_EQ_INT(ddpc_f32_to_f16(0x1.ffcp-15f), 0x0400); /* tie rounds up into the normals */
    CHECK_EQ_INT(ddpc_f32_to_f16(-0.0f), 0x8000);
}

/* The vectorised conversions inside the bf16/f16 reductions (F16C, compiler-vectorised loops)
 * agree with the scalar ones on every 16-bit pattern, NaN and infinities included. */
static void check_half_vector_path(ddpc_dtype t)
{
    enum { N = 65536 };
    uint16_t *a = ddpc_malloc(N * 2), *b = ddpc_malloc(N * 2), *out = ddpc_malloc(N * 2);
    ddpc_rng r = ddpc_rng_make(8, (uint64_t)t);
    for (int i = 0; i < N; i++) {
        a[i] = (uint16_t)i;
        b[i] = (uint16_t)ddpc_rng_next(&r);
    }
    bool bf = t == DDPC_DTYPE_BF16;
    float (*dec)(uint16_t) = bf ? ddpc_bf16_to_f32 : ddpc_f16_to_f32;
    uint16_t (*enc)(float) = bf ? ddpc_f32_to_bf16 : ddpc_f32_to_f16;
    const void *s[2] = {a, b};
    ddpc__reduce_many(out, s, 2, N, t, DDPC_REDUCE_SUM);
    int bad = 0;
    for (int i = 0; i < N && bad < 5; i++) {
        uint16_t want = enc(dec(a[i]) + dec(b[i]));
        if (out[i] != want && !(isnan(dec(want)) && isnan(dec(out[i])))) {
            fprintf(stderr, "%s %04x + %04x: got %04x want %04x\n", ddpc_dtype_name(t), a[i], b[i],
                    out[i], want);
            bad++;
        }
    }
    CHECK_EQ_INT(bad, 0);
    ddpc_free(a);
    ddpc_free(b);
    ddpc_free(out);
}

static void test_half_vector_paths_match_scalar(void)
{
    check_half_vector_path(DDPC_DTYPE_F16);
    check_half_vector_path(DDPC_DTYPE_BF16);
}

int main(void)
{
    RUN_TEST(test_reduce_many_matches_reference);
    RUN_TEST(test_order_and_single_rounding);
    RUN_TEST(test_integer_semantics);
    RUN_TEST(test_nan_propagates_through_min_max);
    RUN_TEST(test_bf16_conversion);
    RUN_TEST(test_f16_decode_all);
    RUN_TEST(test_f16_encode_rounding);
    RUN_TEST(test_half_vector_paths_match_scalar);
    return check_summary();
}
