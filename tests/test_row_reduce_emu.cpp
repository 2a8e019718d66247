// SPDX-License-Identifier: MIT
/* src/kernels/cuda/row_reduce.cuh and reduce.cuh on the host (tests/cuda_emu.h): block sums, maxima
 * and first-maximum argmax for blocks of 1, 3, 5 and 32 warps (a warp count that is not a power
 * of two pads with the identity), against the host: max and argmax exactly (ties to the lowest
 * index), sums within 1e-5 of the sum of magnitudes, a NaN carried by the sum; two calls in a
 * row reusing the shared slots; and a rerun gives the same bits. reduce.cuh's row chunking is
 * checked for the bounds it promises. */
#include "cuda_emu.h"

#include "../src/kernels/cuda/reduce.cuh"
#include "../src/kernels/cuda/row_reduce.cuh"

#include "emu_testutil.h"

#include "check.h"

/* Every thread reduces its own value; thread 0 stores the results. */
static void run_block(unsigned threads, const float *v, float *sum, float *mx, float *am_v,
                      int *am_i, float *sum2)
{
    emu_launch(1, threads, 0, [&] {
        __shared__ float sh[32];
        __shared__ float sv[32];
        __shared__ int si[32];
        const float x = v[threadIdx.x];
        const float s = ddpc__block_reduce(x, ddpc__sum_op(), 0.0f, sh);
        const float m = ddpc__block_reduce(x, ddpc__max_op(), -INFINITY, sh); /* sh reused */
        float bv = x;
        int bi = (int)threadIdx.x;
        ddpc__block_argmax(&bv, &bi, sv, si);
        const float s2 = ddpc__block_reduce(x * 2.0f, ddpc__sum_op(), 0.0f, sh);
        if (threadIdx.x == 0) {
            *sum = s;
            *mx = m;
            *am_v = bv;
            *am_i = bi;
            *sum2 = s2;
        }
        /* every thread got the same results */
        if (s != *sum && threadIdx.x != 0 && !(isnan(s) && isnan(*sum)))
            emu_fail("block_reduce: threads disagree");
    });
}

static void check_block(unsigned threads, uint64_t seed, bool ties, bool with_nan)
{
    std::vector<float> v = emu_rand(threads, 10.0f, seed);
    if (ties) /* the maximum several times, the first not in warp 0 */
        for (unsigned i = 0; i < threads; i++)
            if (i % 37 == 33 || i == threads - 1)
                v[i] = 50.0f;
    if (with_nan)
        v[threads / 2] = NAN;
    float sum = NAN, mx = NAN, av = NAN, sum2 = NAN;
    int ai = -1;
    run_block(threads, v.data(), &sum, &mx, &av, &ai, &sum2);
    double ref = 0.0, ref2 = 0.0, mag = 1.0;
    float rmx = -INFINITY, rav = -INFINITY;
    int rai = INT32_MAX;
    for (unsigned i = 0; i < threads; i++) {
        ref += v[i];
        ref2 += 2.0 * v[i];
        mag += fabs(v[i]);
        rmx = v[i] > rmx ? v[i] : rmx;
    }
    for (unsigned i = 0; i < threads; i++) /* the first maximum (NaN never wins a > test) */
        if (v[i] > rav) {
            rav = v[i];
            rai = (int)i;
        }
    printf(" %u threads%s%s: sum %.9g (%.9g), max %g (%g), argmax %d (%d)\n", threads,
           ties ? ", ties" : "", with_nan ? ", a NaN" : "", sum, ref, mx, rmx, ai, rai);
    if (with_nan) {
        CHECK(isnan(sum));
        /* the butterfly combines in a tree, so a NaN may win or lose a `b > a` comparison
         * depending on its place: only the non-NaN maximum or NaN are acceptable */
        CHECK(isnan(mx) || mx == rmx);
        return;
    }
    CHECK(fabs(sum - ref) <= 1e-5 * mag); /* relative to the sum of magnitudes */
    CHECK(fabs(sum2 - ref2) <= 2e-5 * mag);
    CHECK(mx == rmx);
    CHECK(av == rav && ai == rai);
    float again = NAN, d1, d2, d3;
    int d4;
    run_block(threads, v.data(), &again, &d1, &d2, &d4, &d3);
    CHECK(memcmp(&again, &sum, sizeof sum) == 0);
}

static void test_block_reductions(void)
{
    for (unsigned threads : {32u, 96u, 160u, 1024u}) {
        check_block(threads, threads, false, false);
        check_block(threads, threads + 1, true, false);
        check_block(threads, threads + 2, false, true);
    }
}

static void test_row_chunks(void)
{
    for (int64_t n : {1ll, 31ll, 32ll, 33ll, 1000ll, 32768ll, 32769ll, 1000001ll}) {
        int64_t chunks, per;
        ddpc__row_chunks(n, &chunks, &per);
        CHECK(chunks >= 1 && chunks <= 1024 && per >= 1);
        CHECK(chunks * per >= n && (chunks - 1) * per < n); /* covers n, no empty chunk */
    }
}

static void test_no_emulator_faults(void)
{
    CHECK_EQ_INT(emu_failures, 0);
}

int main(void)
{
    RUN_TEST(test_block_reductions);
    RUN_TEST(test_row_chunks);
    RUN_TEST(test_no_emulator_faults);
    return check_summary();
}
