// SPDX-License-Identifier: MIT
/* The CUDA table's releasable memory on a real GPU (memory_vmm.cu): a reserved buffer is backed in
 * full; a release of a range not aligned to granules unmaps exactly the whole granules inside it
 * (backed_bytes drops by them, cudaMemGetInfo's free memory rises by about as much), zeroes its
 * partial ends and leaves every byte outside it as it was; a released range reads as zeros through
 * to_host; back maps it again (zeroed), after which a kernel can write it; free gives everything
 * back. Fails when the GPU or driver gives nothing back (no virtual memory management): ZeRO-2/3
 * would then save nothing on it. Skips (exit 77) without a GPU. */
#include "backend_testutil.h"

static const ddpc_kernel_table *gpu;

/* Every float of d (n) equals want(i); the first difference printed. */
static bool all_as(const float *h, size_t n, float (*want)(size_t i, void *ctx), void *ctx)
{
    for (size_t i = 0; i < n; i++)
        if (h[i] != want(i, ctx)) {
            printf("  float %zu is %g, not %g\n", i, h[i], want(i, ctx));
            return false;
        }
    return true;
}

typedef struct {
    size_t lo, hi;     /* released floats */
    size_t b_lo, b_hi; /* written with 7 after backing */
    bool ones;
} expect;

static float pattern(size_t i, void *ctx)
{
    const expect *e = ctx;
    if (e->ones)
        return 1.0f;
    if (i >= e->b_lo && i < e->b_hi)
        return 7.0f;
    if (i >= e->lo && i < e->hi)
        return 0.0f;
    return (float)(i % 1000 + 1);
}

static void test_reserve_release_back(void)
{
    size_t before = gpu->backed_bytes();
    void *one = gpu->reserve(1);
    size_t granule = gpu->backed_bytes() - before;
    gpu->free(one);
    const char *note = gpu->release_note ? gpu->release_note() : NULL;
    printf("  granule %zu bytes; release note: %s\n", granule, note ? note : "(none)");
    CHECK(granule > 0); /* 0: no virtual memory management, release only zeroes */
    CHECK(note == NULL); /* it gives memory back, so it has nothing to excuse */
    if (granule == 0)
        return;
    size_t gf = granule / sizeof(float), n = 24 * gf + 1001; /* 25 granules */
    float *h = ddpc_malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        h[i] = (float)(i % 1000 + 1);
    float *d = gpu->reserve(n * sizeof(float));
    CHECK(d != NULL);
    CHECK_EQ_INT(gpu->backed_bytes() - before, 25 * granule);
    gpu->to_device(d, h, n * sizeof(float));
    expect e = {.lo = gf + 17, .hi = 20 * gf + 5, .b_lo = SIZE_MAX, .b_hi = SIZE_MAX};

    gpu->synchronize();
    size_t free0 = gpu->memory_free();
    /* whole granules 2 to 19 */
    CHECK_EQ_INT(gpu->release(d + e.lo, (e.hi - e.lo) * sizeof(float)), DDPC_OK);
    size_t free1 = gpu->memory_free();
    printf("  release of 18 granules: backed %zu -> %zu bytes, free memory %zu -> %zu bytes\n",
           25 * granule, gpu->backed_bytes() - before, free0, free1);
    CHECK_EQ_INT(gpu->backed_bytes() - before, 7 * granule);
    CHECK(free1 >= free0 + 17 * granule); /* a granule of slack for the driver's own */
    gpu->to_host(h, d, n * sizeof(float));
    CHECK(all_as(h, n, pattern, &e));

    /* Back two granules' worth inside the released range and write them with a kernel. */
    e.b_lo = e.lo + 3 * gf, e.b_hi = e.lo + 5 * gf;
    CHECK_EQ_INT(gpu->back(d + e.b_lo, (e.b_hi - e.b_lo) * sizeof(float)), DDPC_OK);
    CHECK_EQ_INT(gpu->backed_bytes() - before, 10 * granule); /* 3 granules touched */
    gpu->fill_f32(d + e.b_lo, 7.0f, (int64_t)(e.b_hi - e.b_lo));
    gpu->to_host(h, d, n * sizeof(float));
    CHECK(all_as(h, n, pattern, &e));

    /* Back everything: nothing changes but the memory; then a kernel writes all of it. */
    CHECK_EQ_INT(gpu->back(d, n * sizeof(float)), DDPC_OK);
    gpu->synchronize();
    size_t free2 = gpu->memory_free();
    printf("  back of the rest: backed %zu bytes, free memory %zu bytes\n",
           gpu->backed_bytes() - before, free2);
    CHECK_EQ_INT(gpu->backed_bytes() - before, 25 * granule);
    CHECK(free2 + 14 * granule <= free1);
    gpu->to_host(h, d, n * sizeof(float));
    CHECK(all_as(h, n, pattern, &e));
    gpu->fill_f32(d, 1.0f, (int64_t)n);
    gpu->to_host(h, d, n * sizeof(float));
    e.ones = true;
    CHECK(all_as(h, n, pattern, &e));

    gpu->free(d);
    size_t free3 = gpu->memory_free();
    printf("  free: backed %zu bytes, free memory %zu bytes\n", gpu->backed_bytes() - before,
           free3);
    CHECK_EQ_INT(gpu->backed_bytes(), before);
    CHECK(free3 >= free2 + 24 * granule);
    ddpc_free(h);
}

/* release and back on memory alloc made (not reserved): the range reads as zeros, stays there. */
static void test_plain_alloc_zeroes(void)
{
    enum { N = 5000 };
    float h[N];
    for (int i = 0; i < N; i++)
        h[i] = (float)(i + 1);
    float *d = bt_up(gpu, h, N);
    CHECK_EQ_INT(gpu->release(d + 100, 3000 * sizeof(float)), DDPC_OK);
    CHECK_EQ_INT(gpu->back(d + 100, 3000 * sizeof(float)), DDPC_OK);
    gpu->to_host(h, d, sizeof h);
    for (int i = 0; i < N; i++)
        if (h[i] != (i >= 100 && i < 3100 ? 0.0f : (float)(i + 1))) {
            printf("  float %d is %g\n", i, h[i]);
            CHECK(false);
            break;
        }
    gpu->free(d);
}

int main(void)
{
    gpu = bt_cuda_or_skip();
    RUN_TEST(test_reserve_release_back);
    RUN_TEST(test_plain_alloc_zeroes);
    return check_summary();
}
