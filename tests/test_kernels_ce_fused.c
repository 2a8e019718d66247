// SPDX-License-Identifier: MIT
/* ddpc_cross_entropy_fused against the unfused pair it replaces in training, bit for bit:
 * forward (probs over the logits, as the models run it) then backward onto zeroed dlogits, with
 * ignore_index and out-of-range targets, every row ignored, v = 13 and GPT-2's padded 50304, the
 * row losses kept or not, in place and not, threaded (n v past the fork threshold) and serial,
 * dloss 1 and an fp16 loss scale. Outputs start as NaN so an element left unwritten shows. */
#include "kernels_testutil.h"

#include <math.h>

enum { IGNORE = -100 };

/* Targets for n rows: every 5th ignore_index, every 7th v (out of range), every 11th negative. */
static int32_t *make_targets(int64_t n, int64_t v, bool none)
{
    int32_t *t = ddpc_malloc((size_t)n * sizeof(int32_t));
    for (int64_t i = 0; i < n; i++)
        t[i] = none || i % 5 == 1 ? IGNORE
               : i % 7 == 2       ? (int32_t)v
               : i % 11 == 3      ? -3
                                  : (int32_t)((i * 7919 + 13) % v);
    return t;
}

static float *nan_alloc(int64_t n)
{
    float *p = tu_alloc(n);
    for (int64_t i = 0; i < n; i++)
        p[i] = NAN;
    return p;
}

/* One shape: the unfused reference once, then the fused member in every aliasing/loss mode. */
static void check_shape(int64_t n, int64_t v, float dloss, bool none, uint64_t seed)
{
    printf(" n %lld v %lld dloss %g%s\n", (long long)n, (long long)v, (double)dloss,
           none ? " all ignored" : "");
    int32_t *tg = make_targets(n, v, none);
    float *logits = tu_rand(n * v, -8.0f, 8.0f, seed);
    /* The models' unfused order: probs over the logits, dlogits zeroed, backward. */
    float *ref_p = tu_alloc(n * v), *ref_d = tu_alloc(n * v), *ref_l = nan_alloc(n);
    memcpy(ref_p, logits, (size_t)(n * v) * sizeof(float));
    int64_t nv = -1;
    float mean = ddpc_cross_entropy_forward(ref_p, ref_l, ref_p, tg, n, v, IGNORE, &nv);
    memset(ref_d, 0, (size_t)(n * v) * sizeof(float));
    ddpc_cross_entropy_backward(ref_d, ref_p, tg, n, v, IGNORE, nv, dloss);

    for (int mode = 0; mode < 4; mode++) {
        bool in_place = mode & 1, keep_losses = mode & 2;
        float *x = tu_alloc(n * v), *d = in_place ? x : nan_alloc(n * v);
        float *l = keep_losses ? nan_alloc(n) : NULL;
        memcpy(x, logits, (size_t)(n * v) * sizeof(float));
        double sums[2] = {NAN, NAN};
        ddpc_cross_entropy_fused(sums, d, l, x, tg, n, v, IGNORE, dloss);
        CHECK(sums[1] == (double)nv);
        float fmean = sums[1] > 0 ? (float)(sums[0] / sums[1]) : 0.0f;
        if (memcmp(&fmean, &mean, sizeof mean) != 0)
            printf("  mode %d: mean %.9g, unfused %.9g\n", mode, (double)fmean, (double)mean);
        CHECK(memcmp(&fmean, &mean, sizeof mean) == 0);
        if (nv == 0)
            CHECK(sums[0] == 0.0);
        int64_t bad = 0, first = -1;
        for (int64_t i = 0; i < n * v; i++)
            if (memcmp(&d[i], &ref_d[i], sizeof(float)) != 0 && bad++ == 0)
                first = i;
        if (bad)
            printf("  mode %d: %lld dlogits differ, first at %lld: %.9g vs %.9g\n", mode,
                   (long long)bad, (long long)first, (double)d[first], (double)ref_d[first]);
        CHECK_EQ_INT(bad, 0);
        if (l)
            CHECK(memcmp(l, ref_l, (size_t)n * sizeof(float)) == 0);
        if (!in_place)
            ddpc_free(d);
        ddpc_free(x);
        ddpc_free(l);
    }
    ddpc_free(tg);
    ddpc_free(logits);
    ddpc_free(ref_p);
    ddpc_free(ref_d);
    ddpc_free(ref_l);
}

static void test_fused_small(void)
{
    check_shape(23, 13, 1.0f, false, 1);
    check_shape(1, 1, 1.0f, false, 2);
    check_shape(9, 13, 0.75f, true, 3);
}

static void test_fused_threaded(void)
{
    /* n v past DDPC__PAR_MIN_WORK, so the row loop forks when the losses are kept. */
    check_shape(300, 257, 1.0f, false, 4);
    check_shape(300, 257, 65536.0f / 3.0f, false, 5); /* an fp16 scale over 3 micro-batches */
}

static void test_fused_gpt2_vocab(void)
{
    check_shape(6, 50304, 1.0f, false, 6);
    check_shape(5, 50304, 32768.0f, false, 7);
}

int main(void)
{
    RUN_TEST(test_fused_small);
    RUN_TEST(test_fused_threaded);
    RUN_TEST(test_fused_gpt2_vocab);
    return check_summary();
}
