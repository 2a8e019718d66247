// SPDX-License-Identifier: MIT
/* The CUDA table's f32 <-> bf16/f16 conversions (DDP's compressed gradient buckets) against the
 * CPU table's, bit for bit: every one of the 65536 16-bit patterns widened, and f32 patterns
 * narrowed (a strided sweep of all 2^32 bit patterns, plus the rounding ties, the f16 subnormal
 * and overflow edges, infinities and NaN payloads). Any difference fails, printing the first few
 * inputs with both results. Skips (exit 77) without a GPU. */
#include "backend_testutil.h"

#include <string.h>

static const ddpc_kernel_table *gpu;
static const ddpc_kernel_table *cpu;

/* Counts the elements where a and b (n of `size` bytes) differ and prints the first few, with
 * the input bits. */
static size_t report(const char *what, const void *in, size_t in_size, const void *a, const void *b,
                     size_t size, size_t n)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char *x = (const unsigned char *)a + i * size;
        const unsigned char *y = (const unsigned char *)b + i * size;
        if (memcmp(x, y, size) == 0)
            continue;
        if (bad++ < 5) {
            uint32_t iv = 0, av = 0, bv = 0;
            memcpy(&iv, (const unsigned char *)in + i * in_size, in_size);
            memcpy(&av, y, size);
            memcpy(&bv, x, size);
            printf("  %s: input 0x%08x: cpu 0x%08x, gpu 0x%08x\n", what, iv, av, bv);
        }
    }
    printf("  %-34s %zu values, %zu differ\n", what, n, bad);
    return bad;
}

/* src (n f32) narrowed on both tables; returns the number of differences. */
static size_t narrow(const float *src, size_t n, int bf16)
{
    uint16_t *ref = ddpc_malloc(n * 2), *got = ddpc_malloc(n * 2);
    float *d_src = bt_up(gpu, src, (int64_t)n);
    uint16_t *d_dst = gpu->alloc(n * 2);
    if (!ref || !got || !d_dst)
        abort();
    cpu->f32_to_half_array(ref, src, n, bf16);
    gpu->f32_to_half_array(d_dst, d_src, n, bf16);
    gpu->to_host(got, d_dst, n * 2);
    size_t bad = report(bf16 ? "f32 -> bf16" : "f32 -> f16", src, 4, got, ref, 2, n);
    gpu->free(d_src);
    gpu->free(d_dst);
    ddpc_free(ref);
    ddpc_free(got);
    return bad;
}

static void test_widen_every_pattern(void)
{
    enum { N = 65536 };
    uint16_t *h = ddpc_malloc(N * 2);
    float *ref = tu_alloc(N), *got = tu_alloc(N);
    for (uint32_t i = 0; i < N; i++)
        h[i] = (uint16_t)i;
    uint16_t *d_h = bt_up_bytes(gpu, h, N * 2);
    float *d_out = bt_poison(gpu, N);
    for (int bf16 = 0; bf16 <= 1; bf16++) {
        cpu->half_to_f32_array(ref, h, N, bf16);
        gpu->half_to_f32_array(d_out, d_h, N, bf16);
        gpu->to_host(got, d_out, N * sizeof(float));
        CHECK_EQ_INT(report(bf16 ? "bf16 -> f32" : "f16 -> f32", h, 2, got, ref, 4, N), 0);
    }
    gpu->free(d_h);
    gpu->free(d_out);
    ddpc_free(h);
    ddpc_free(ref);
    ddpc_free(got);
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void test_narrow_sweep(void)
{
    /* Every 4099th bit pattern (prime, so every low-bit residue is visited), both signs. */
    const size_t stride = 4099, n = (size_t)(0x100000000ull / stride) + 1;
    float *src = tu_alloc((int64_t)n);
    for (size_t i = 0; i < n; i++)
        src[i] = from_bits((uint32_t)((uint64_t)i * stride));
    for (int bf16 = 0; bf16 <= 1; bf16++)
        CHECK_EQ_INT(narrow(src, n, bf16), 0);
    ddpc_free(src);
}

static void test_narrow_edges(void)
{
    /* Around each interesting pattern, +-64 ulps: bf16 ties (low 16 bits 0x8000), f16's ties (low
     * 13 bits 0x1000), the f16 subnormal and normal boundaries, its overflow at 65520, f32
     * subnormals, infinity and NaNs (quiet and signalling, with payloads). */
    const uint32_t centre[] = {0x3f808000u, 0x3f818000u, 0x3f801000u, 0x3f803000u, 0x38800000u,
                               0x38000000u, 0x33800000u, 0x33000000u, 0x477fe000u, 0x477ff000u,
                               0x477fefffu, 0x00000040u, 0x00800000u, 0x7f800000u, 0x7f800040u,
                               0x7fc00000u, 0x7fbfffc0u, 0x7f7fffffu};
    enum { SPAN = 64 };
    size_t nc = sizeof centre / sizeof centre[0], n = nc * 2 * (2 * SPAN + 1);
    float *src = tu_alloc((int64_t)n);
    size_t k = 0;
    for (size_t c = 0; c < nc; c++)
        for (uint32_t sign = 0; sign <= 1; sign++)
            for (int d = -SPAN; d <= SPAN; d++)
                src[k++] = from_bits((uint32_t)(centre[c] + (uint32_t)d) ^ (sign << 31));
    for (int bf16 = 0; bf16 <= 1; bf16++)
        CHECK_EQ_INT(narrow(src, n, bf16), 0);
    ddpc_free(src);
}

/* A bucket-sized random gradient (odd length, so no vector width divides it), narrowed and
 * widened back on the device: the CPU's round trip. */
static void test_round_trip(void)
{
    const int64_t n = 1000003;
    float *g = tu_rand(n, -3.0f, 3.0f, 7);
    for (int64_t i = 0; i < n; i += 97)
        g[i] *= 1e-6f; /* f16 subnormals */
    for (int bf16 = 0; bf16 <= 1; bf16++) {
        float *d_g = bt_up(gpu, g, n);
        uint16_t *d_h = gpu->alloc((size_t)n * 2), *h = ddpc_malloc((size_t)n * 2);
        float *back = tu_alloc(n), *got = tu_alloc(n);
        gpu->f32_to_half_array(d_h, d_g, (size_t)n, bf16);
        gpu->half_to_f32_array(d_g, d_h, (size_t)n, bf16);
        gpu->to_host(got, d_g, (size_t)n * sizeof(float));
        cpu->f32_to_half_array(h, g, (size_t)n, bf16);
        cpu->half_to_f32_array(back, h, (size_t)n, bf16);
        CHECK_EQ_INT(
            report(bf16 ? "bf16 round trip" : "f16 round trip", g, 4, got, back, 4, (size_t)n), 0);
        gpu->free(d_g);
        gpu->free(d_h);
        ddpc_free(h);
        ddpc_free(back);
        ddpc_free(got);
    }
    ddpc_free(g);
}

int main(void)
{
    gpu = bt_cuda_or_skip();
    cpu = ddpc_kernel_table_cpu();
    RUN_TEST(test_widen_every_pattern);
    RUN_TEST(test_narrow_sweep);
    RUN_TEST(test_narrow_edges);
    RUN_TEST(test_round_trip);
    return check_summary();
}
