// SPDX-License-Identifier: MIT
/* The CUDA table's fused cross-entropy (forward and backward in one kernel) on a GPU: the same
 * bits as the unfused kernels it replaces in training (forward_into, then backward_from onto
 * zeroed dlogits), dlogits and sums alike, in place and not; within 1e-5 of the CPU table's fused
 * member (the CPU sums a row serially, the GPU in a tree); no host wait and, on a repeat of a
 * shape, no device allocation; every row ignored gives zeros. GPT-2's padded 50304-wide rows, its
 * raw 50257 (rows at every 16-byte offset), rows too wide for shared memory (the fallback kernel)
 * and a small width, ignored and out-of-range targets, dloss 1 and an fp16 loss scale. Skips
 * (exit 77) without a GPU; device outputs start as NaN. */
#include "backend_testutil.h"

static const ddpc_kernel_table *gpu;
static const ddpc_kernel_table *cpu;

enum { N = 11, IGNORE = -100 };

/* Targets: ignored (ignore_index, v, negative) at rows 1, 2, 3 and 8, the rest valid. */
static void make_targets(int32_t *tg, int64_t v, bool none)
{
    for (int i = 0; i < N; i++)
        tg[i] = none ? IGNORE : (int32_t)((i * 7919 + 13) % v);
    if (!none) {
        tg[1] = IGNORE;
        tg[2] = (int32_t)v;
        tg[3] = -3;
        tg[8] = IGNORE;
        tg[4] = (int32_t)v - 1;
        tg[5] = 0;
    }
}

static double *sums_down(const double *d)
{
    static double h[2];
    gpu->to_host(h, d, sizeof h);
    return h;
}

static void check_fused(int64_t v, float dloss, bool none)
{
    printf(" fused n %d v %lld dloss %g%s\n", N, (long long)v, (double)dloss,
           none ? " all ignored" : "");
    int32_t tg[N];
    make_targets(tg, v, none);
    float *logits = tu_rand(N * v, -8.0f, 8.0f, 61);
    int32_t *d_tg = bt_up_bytes(gpu, tg, sizeof tg);
    double *d_sums = gpu->alloc(2 * sizeof(double));
    double *d_ref_sums = gpu->alloc(2 * sizeof(double));
    if (!d_sums || !d_ref_sums)
        abort();

    /* The unfused kernels as the models ran them. */
    float *d_probs = bt_up(gpu, logits, N * v), *d_ref_d = bt_up(gpu, logits, N * v);
    float *d_ref_l = bt_poison(gpu, N);
    gpu->cross_entropy_forward_into(d_ref_sums, d_probs, d_ref_l, d_probs, d_tg, N, v, IGNORE);
    gpu->fill_f32(d_ref_d, 0.0f, N * v);
    gpu->cross_entropy_backward_from(d_ref_d, d_probs, d_tg, N, v, IGNORE, d_ref_sums, dloss);
    float *ref_d = bt_down(gpu, d_ref_d, N * v), *ref_l = bt_down(gpu, d_ref_l, N);
    double ref_sums[2];
    memcpy(ref_sums, sums_down(d_ref_sums), sizeof ref_sums);

    /* The CPU's fused member. */
    float *cd = tu_alloc(N * v), *cl = tu_alloc(N);
    double csums[2];
    cpu->cross_entropy_fused(csums, cd, cl, logits, tg, N, v, IGNORE, dloss);

    for (int in_place = 0; in_place < 2; in_place++) {
        float *d_x = bt_up(gpu, logits, N * v);
        float *d_d = in_place ? d_x : bt_poison(gpu, N * v), *d_l = bt_poison(gpu, N);
        gpu->fill_f32((float *)d_sums, NAN, 4);
        uint64_t waits = gpu->host_waits();
        gpu->cross_entropy_fused(d_sums, d_d, d_l, d_x, d_tg, N, v, IGNORE, dloss);
        CHECK_EQ_INT(gpu->host_waits(), waits);
        float *h_d = bt_down(gpu, d_d, N * v), *h_l = bt_down(gpu, d_l, N);
        double *h_s = sums_down(d_sums);
        int64_t bad = 0;
        for (int64_t i = 0; i < N * v; i++)
            if (memcmp(&h_d[i], &ref_d[i], sizeof(float)) != 0 && bad++ == 0)
                printf("  %s: dlogits[%lld] %.9g, unfused %.9g\n", in_place ? "in place" : "apart",
                       (long long)i, (double)h_d[i], (double)ref_d[i]);
        printf("  %s: %lld dlogits differ from the unfused kernels'; sums %.17g %.0f (unfused "
               "%.17g %.0f)\n",
               in_place ? "in place" : "apart", (long long)bad, h_s[0], h_s[1], ref_sums[0],
               ref_sums[1]);
        CHECK_EQ_INT(bad, 0);
        CHECK(memcmp(h_l, ref_l, N * sizeof(float)) == 0);
        CHECK(memcmp(h_s, ref_sums, sizeof ref_sums) == 0);
        CHECK(h_s[1] == csums[1]);
        CHECK(csums[0] == 0.0 ? h_s[0] == 0.0 : fabs(h_s[0] - csums[0]) <= 1e-5 * fabs(csums[0]));
        CHECK(bt_err(gpu, "fused dlogits vs the CPU's", d_d, cd, N * v) <= 1e-5);
        CHECK(bt_err(gpu, "fused row losses vs the CPU's", d_l, cl, N) <= 1e-5);
        if (none)
            CHECK(tu_max_abs(h_d, N * v) == 0.0);

        /* A repeat of the shape allocates nothing on the device. */
        uint64_t allocs = gpu->alloc_count();
        gpu->to_device(d_x, logits, (size_t)(N * v) * sizeof(float));
        gpu->cross_entropy_fused(d_sums, d_d, NULL, d_x, d_tg, N, v, IGNORE, dloss);
        CHECK_EQ_INT(gpu->alloc_count(), allocs);
        CHECK(memcmp(sums_down(d_sums), ref_sums, sizeof ref_sums) == 0);

        if (!in_place)
            gpu->free(d_d);
        gpu->free(d_x);
        gpu->free(d_l);
        ddpc_free(h_d);
        ddpc_free(h_l);
    }
    gpu->free(d_tg);
    gpu->free(d_sums);
    gpu->free(d_ref_sums);
    gpu->free(d_probs);
    gpu->free(d_ref_d);
    gpu->free(d_ref_l);
    float *host[] = {logits, ref_d, ref_l, cd, cl};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++)
        ddpc_free(host[i]);
}

static void test_fused_gpt2_vocab(void)
{
    check_fused(50304, 1.0f, false);
    check_fused(50304, 32768.0f / 3.0f, false);
}

/* GPT-2's raw 50257: rows start at every offset from 16 bytes (the staged kernel's head and
 * tail); 60000 floats pass sm_90's 227 KiB of shared memory a block: the fallback kernel. */
static void test_fused_unaligned_and_wide(void)
{
    check_fused(50257, 1.0f, false);
    check_fused(60000, 1.0f, false);
}

static void test_fused_small(void)
{
    check_fused(13, 1.0f, false);
    check_fused(13, 1.0f, true);
}

int main(void)
{
    gpu = bt_cuda_or_skip();
    cpu = ddpc_kernel_table_cpu();
    RUN_TEST(test_fused_gpt2_vocab);
    RUN_TEST(test_fused_unaligned_and_wide);
    RUN_TEST(test_fused_small);
    return check_summary();
}
