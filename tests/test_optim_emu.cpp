// SPDX-License-Identifier: MIT
/* src/kernels/cuda/optim.cu's device code on the host (tests/cuda_emu.h) against the CPU, bit for
 * bit where the file claims it (AdamW, SGD, unscale, scale, the clipping coefficient given a
 * norm), within 1e-12 for the sums of squares (a different, fixed order in double). The AdamW and
 * SGD kernels run inside the real optimizer: a kernel table that is the CPU's but for its kind
 * and its adamw_update/sgd_update members (the emulated kernels) takes ddpc_optim's device path,
 * coefficients included. Odd sizes, decay masks with runs, grids smaller than the data (the
 * grid-stride loops go round), NaN and inf in gradients, clipping on and off. */
#include "cuda_emu.h"

#include "../src/kernels/cuda/optim.cu"

#include <ddpc/optim.h>

#include "emu_testutil.h"

#include "check.h"

/* Blocks the element kernels are launched with: the host side's grid, or 2 to make the
 * grid-stride loops go round. */
static unsigned g_small_grid;

static unsigned elem_grid(int64_t n)
{
    return g_small_grid ? 2 : emu_grid(n, kThreads);
}

static void emu_adamw(float *params, const float *grads, float *m, float *v, const uint8_t *mask,
                      int64_t n, const ddpc_adamw_coef *k)
{
    emu_launch(elem_grid(n), kThreads, 0, [&] { adamw_kernel(params, grads, m, v, mask, n, *k); });
}

static void emu_sgd(float *params, const float *grads, float *buf, const uint8_t *mask, int64_t n,
                    const ddpc_sgd_coef *k)
{
    emu_launch(elem_grid(n), kThreads, 0, [&] { sgd_kernel(params, grads, buf, mask, n, *k); });
}

/* The CPU's table with the emulated updates, posing as a device so ddpc_optim uses them. */
static ddpc_kernel_table emu_table(void)
{
    ddpc_kernel_table t = *emu_cpu();
    t.name = "cuda-emulated";
    t.kind = DDPC_DEVICE_CUDA;
    t.adamw_update = emu_adamw;
    t.sgd_update = emu_sgd;
    return t;
}

/* Four steps of cfg on the CPU and through the emulated kernels, params and state compared bit
 * for bit after each. n = 1037 with a mask of runs 0..299 decay, 300..700 not, then every third. */
static void check_optimizer(const ddpc_optim_config *cfg, const char *what, bool with_mask)
{
    const int64_t n = 1037;
    printf(" %s, mask %s, %s grid\n", what, with_mask ? "yes" : "no",
           g_small_grid ? "2-block" : "host's");
    std::vector<uint8_t> mask((size_t)n);
    for (int64_t i = 0; i < n; i++)
        mask[(size_t)i] = i < 300 ? 1 : i <= 700 ? 0 : i % 3 == 0;
    const uint8_t *mk = with_mask ? mask.data() : NULL;
    const ddpc_kernel_table table = emu_table();
    ddpc_optim *cpu = NULL, *dev = NULL;
    CHECK(ddpc_optim_create(&cpu, cfg, (size_t)n) == DDPC_OK);
    CHECK(ddpc_optim_create_on(&dev, cfg, (size_t)n, &table) == DDPC_OK);
    if (!cpu || !dev)
        return;
    std::vector<float> p_cpu = emu_rand(n, 1.0f, 3), p_dev = p_cpu;
    const float lrs[4] = {1e-3f, 3e-2f, 0.1f, 7e-4f};
    for (int step = 0; step < 4; step++) {
        std::vector<float> g = emu_rand(n, step == 2 ? 40.0f : 0.5f, 10 + (uint64_t)step);
        ddpc_optim_step(cpu, p_cpu.data(), g.data(), mk, lrs[step]);
        ddpc_optim_step(dev, p_dev.data(), g.data(), mk, lrs[step]);
        CHECK(emu_same_bits("params", p_dev.data(), p_cpu.data(), n, 4));
        ddpc_optim_to_host(dev);
        for (size_t s = 0; s < ddpc_optim_num_state(cpu); s++) {
            const char *name = NULL;
            const float *a = ddpc_optim_state(dev, s, &name), *b = ddpc_optim_state(cpu, s, NULL);
            CHECK(emu_same_bits(name, a, b, n, 4));
        }
    }
    ddpc_optim_destroy(cpu);
    ddpc_optim_destroy(dev);
}

static void test_adamw(void)
{
    ddpc_optim_config c = ddpc_optim_config_default();
    c.type = DDPC_OPTIM_ADAMW;
    c.weight_decay = 0.1f;
    c.beta2 = 0.95f;
    for (int small = 0; small <= 1; small++) {
        g_small_grid = (unsigned)small;
        check_optimizer(&c, "AdamW wd 0.1", true);
        check_optimizer(&c, "AdamW wd 0.1", false);
    }
    g_small_grid = 0;
}

static void test_sgd(void)
{
    ddpc_optim_config c = ddpc_optim_config_default();
    check_optimizer(&c, "SGD plain", false);
    c.momentum = 0.9f;
    c.weight_decay = 1e-2f;
    c.dampening = 0.1f;
    g_small_grid = 1;
    check_optimizer(&c, "SGD momentum, dampening, wd", true);
    g_small_grid = 0;
    c.dampening = 0.0f;
    c.nesterov = true;
    check_optimizer(&c, "SGD Nesterov, wd", true);
}

/* sumsq as the host side launches it: `blocks` partials, then the final tree. */
static double emu_sumsq(const float *g, int64_t n, unsigned blocks)
{
    std::vector<double> part(blocks + 1, NAN);
    emu_launch(blocks, kSumThreads, 0, [&] { sumsq_partial_kernel(part.data(), g, n); });
    emu_launch(1, kSumThreads, 0, [&] { sumsq_final_kernel(part.data(), (int)blocks); });
    return part[blocks];
}

static unsigned sum_blocks(int64_t n)
{
    int64_t want = (n + kSumThreads - 1) / kSumThreads;
    return (unsigned)(want < 1 ? 1 : want < kSumBlocks ? want : kSumBlocks);
}

static void test_sumsq(void)
{
    const int64_t sizes[3] = {3, 1000, 20001};
    for (int i = 0; i < 3; i++) {
        const int64_t n = sizes[i];
        const std::vector<float> g = emu_rand(n, 3.0f, 20 + (uint64_t)i);
        const double ref = ddpc_grad_sumsq(g.data(), (size_t)n);
        /* the host side's grid, and 7 blocks: what a grid capped at kSumBlocks does */
        for (unsigned blocks : {sum_blocks(n), 7u}) {
            const double a = emu_sumsq(g.data(), n, blocks);
            printf(" sumsq n %lld, %u blocks: %.17g vs CPU %.17g\n", (long long)n, blocks, a, ref);
            CHECK(fabs(a - ref) <= 1e-12 * ref);
        }
    }
}

/* grad_norm_clip as the host side launches it; norm (2) as on the device. */
static void emu_norm_clip(double *norm, float *g, int64_t n, float max_norm)
{
    const unsigned blocks = sum_blocks(n);
    std::vector<double> part(blocks + 1, NAN);
    emu_launch(blocks, kSumThreads, 0, [&] { sumsq_partial_kernel(part.data(), g, n); });
    emu_launch(1, kSumThreads, 0, [&] { norm_final_kernel(norm, part.data(), (int)blocks); });
    if (max_norm > 0.0f)
        emu_launch(emu_grid(n, kThreads), kThreads, 0, [&] { clip_kernel(g, n, norm, max_norm); });
}

/* One clip: norm[0] near the CPU's sum, norm[1] accumulated, and g scaled by exactly the host's
 * coefficient for that norm (ddpc_grad_clip_coef), or left alone. */
static void check_clip(int64_t n, float amp, float max_norm, int64_t nan_at)
{
    std::vector<float> g = emu_rand(n, amp, 30 + (uint64_t)n);
    if (nan_at >= 0)
        g[(size_t)nan_at] = nan_at % 2 ? INFINITY : NAN;
    std::vector<float> orig = g;
    double norm[2] = {NAN, 0.25};
    emu_norm_clip(norm, g.data(), n, max_norm);
    const double ref = ddpc_grad_sumsq(orig.data(), (size_t)n);
    printf(" clip n %lld max_norm %g: sumsq %.17g vs CPU %.17g\n", (long long)n, max_norm, norm[0],
           ref);
    if (nan_at >= 0)
        CHECK(!isfinite(norm[0]) && !isfinite(norm[1]));
    else
        CHECK(fabs(norm[0] - ref) <= 1e-12 * ref && norm[1] == 0.25 + norm[0]);
    const float coef = max_norm > 0.0f ? ddpc_grad_clip_coef(sqrt(norm[0]), max_norm) : 1.0f;
    std::vector<float> want = orig;
    if (coef != 1.0f)
        for (int64_t i = 0; i < n; i++)
            want[(size_t)i] = orig[(size_t)i] * coef;
    CHECK(emu_same_bits("clipped g", g.data(), want.data(), n, 4));
    if (nan_at < 0 && max_norm > 0.0f) { /* and the CPU's own clip, within an ulp of coef */
        std::vector<float> cpu = orig;
        ddpc_grad_clip_scale(cpu.data(), (size_t)n, sqrt(ref), max_norm);
        CHECK(emu_rel_err("clip vs CPU", g.data(), cpu.data(), n) <= 1e-6);
    }
}

static void test_grad_norm_clip(void)
{
    check_clip(5000, 1.0f, 1.0f, -1);   /* clipped */
    check_clip(777, 0.01f, 1.0f, -1);   /* norm below max: untouched */
    check_clip(5000, 1.0f, 0.0f, -1);   /* no clipping asked */
    check_clip(3001, 1.0f, 1.0f, 2900); /* NaN: untouched, the running sum poisoned */
    check_clip(3001, 1.0f, 1.0f, 1001); /* inf */
}

/* unscale's flag and values against ddpc_grad_unscale; scale against g * s. */
static void check_unscale(int64_t n, float scale, int64_t bad_at, unsigned blocks)
{
    std::vector<float> g = emu_rand(n, 100.0f, 40 + (uint64_t)n);
    if (bad_at >= 0)
        g[(size_t)bad_at] = bad_at % 2 ? -INFINITY : NAN;
    std::vector<float> cpu = g;
    const float inv = (float)(1.0 / (double)scale); /* as the host side computes it */
    int bad = 0;
    emu_launch(blocks, kThreads, 0, [&] { unscale_kernel(g.data(), n, inv, &bad); });
    const bool ref = ddpc_grad_unscale(cpu.data(), (size_t)n, scale);
    printf(" unscale n %lld scale %g bad at %lld, %u blocks: flag %d (CPU %d)\n", (long long)n,
           scale, (long long)bad_at, blocks, bad, (int)ref);
    CHECK_EQ_INT(bad != 0, ref);
    CHECK(emu_same_bits("unscaled", g.data(), cpu.data(), n, 4));
}

static void test_unscale_and_scale(void)
{
    check_unscale(3001, 65536.0f, -1, emu_grid(3001, kThreads));
    check_unscale(3001, 1024.0f, 2999, emu_grid(3001, kThreads)); /* in the last block */
    check_unscale(3001, 3.0f, 1200, 2);                           /* on a grid-stride lap */
    check_unscale(3001, 1.0f, 7, 3);                              /* inv 1: values kept */
    const int64_t n = 1001;
    std::vector<float> g = emu_rand(n, 5.0f, 50), want = g;
    for (int64_t i = 0; i < n; i++)
        want[(size_t)i] = g[(size_t)i] * 0.37f;
    emu_launch(2, kThreads, 0, [&] { scale_kernel(g.data(), n, 0.37f); });
    CHECK(emu_same_bits("scaled", g.data(), want.data(), n, 4));
}

static void test_no_emulator_faults(void)
{
    CHECK_EQ_INT(emu_failures, 0); /* full-warp shuffles, barriers every thread meets */
}

int main(void)
{
    RUN_TEST(test_adamw);
    RUN_TEST(test_sgd);
    RUN_TEST(test_sumsq);
    RUN_TEST(test_grad_norm_clip);
    RUN_TEST(test_unscale_and_scale);
    RUN_TEST(test_no_emulator_faults);
    return check_summary();
}
