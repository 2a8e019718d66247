// SPDX-License-Identifier: MIT
/* src/kernels/cuda/attention.cu's device code (the fp32 path: permutes and the causal softmax row
 * kernels, whose block reductions span several warps) on the host (tests/cuda_emu.h) against the
 * CPU table's fp32 attention. The host side's sequence runs with a double-accumulating host GEMM in
 * place of cuBLAS's strided-batched one: out and att within 1e-5, dqkv within 1e-4. T = 1, 17, 70
 * (blocks of 32 and 128 threads) and 300 (rows longer than the 256-thread block), a grid smaller
 * than the rows (the row loops go round). */
#include "cuda_emu.h"

#include "../src/kernels/cuda/attention.cu"

#include "emu_testutil.h"

#include "check.h"

/* c (m, n) = alpha op(a) op(b) for `batch` matrices sa, sb, sc floats apart, row-major. */
static void host_bgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                       const float *a, int64_t lda, int64_t sa, const float *b, int64_t ldb,
                       int64_t sb, float *c, int64_t ldc, int64_t sc, int64_t batch)
{
    for (int64_t z = 0; z < batch; z++)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double s = 0.0;
                for (int64_t p = 0; p < k; p++)
                    s += (double)(ta ? a[z * sa + p * lda + i] : a[z * sa + i * lda + p]) *
                         (tb ? b[z * sb + j * ldb + p] : b[z * sb + p * ldb + j]);
                c[z * sc + i * ldc + j] = (float)(alpha * s);
            }
}

static int64_t region64(int64_t floats)
{
    return (floats + 63) / 64 * 64;
}

static void emu_permute(float *heads, float *packed, int64_t b, int64_t t, int64_t nh, int64_t hs,
                        int parts, int64_t stride, bool to_heads)
{
    emu_launch(3, 256, 0, [&] {
        permute_kernel(heads, packed, b, t, (int)nh, (int)hs, parts, stride, to_heads);
    });
}

static void check_attention(int64_t b, int64_t t, int64_t c, int64_t nh, unsigned row_blocks)
{
    const int64_t hs = c / nh, r = region64(b * t * c), bh = b * nh, rows = bh * t;
    const int64_t th = t * hs, tt = t * t, nqkv = b * t * 3 * c, nout = b * t * c;
    const unsigned threads = (unsigned)ddpc__row_threads(t, 256);
    const unsigned blocks = row_blocks ? row_blocks : (unsigned)rows;
    printf(" attention b %lld t %lld c %lld nh %lld: %u blocks of %u threads\n", (long long)b,
           (long long)t, (long long)c, (long long)nh, blocks, threads);
    const std::vector<float> qkv = emu_rand(nqkv, 1.0f, 1 + (uint64_t)t),
                             dout = emu_rand(nout, 1.0f, 2 + (uint64_t)t);
    const ddpc_kernel_table *cpu = emu_cpu();
    std::vector<float> out(nout), att(cpu->attention_saved_floats(DDPC_PREC_FP32, b, t, c, nh)),
        dqkv(nqkv), ws(cpu->attention_workspace_floats(DDPC_PREC_FP32, b, t, c, nh) + 1);
    cpu->attention_forward(DDPC_PREC_FP32, out.data(), att.data(), qkv.data(), b, t, c, nh,
                           ws.data());
    cpu->attention_backward(DDPC_PREC_FP32, dqkv.data(), dout.data(), qkv.data(), att.data(), b, t,
                            c, nh, ws.data());

    const float scale = 1.0f / sqrtf((float)hs);
    std::vector<float> ews = emu_poison(7 * r + region64(rows * t));
    std::vector<float> eout = emu_poison(nout), eatt = emu_poison(rows * t),
                       edqkv = emu_poison(nqkv);
    float *q = ews.data(), *k = q + r, *v = q + 2 * r, *y = q, *dy = q + 3 * r;
    float *dq = q + 4 * r, *dk = q + 5 * r, *dv = q + 6 * r, *datt = q + 7 * r;
    emu_permute(q, (float *)qkv.data(), b, t, nh, hs, 3, r, true);
    host_bgemm(false, true, t, t, hs, scale, q, hs, th, k, hs, th, eatt.data(), t, tt, bh);
    emu_launch(blocks, threads, 0, [&] { causal_softmax_kernel(eatt.data(), rows, t); });
    host_bgemm(false, false, t, hs, t, 1.0f, eatt.data(), t, tt, v, hs, th, y, hs, th, bh);
    emu_permute(y, eout.data(), b, t, nh, hs, 1, r, false);
    CHECK(emu_rel_err("att", eatt.data(), att.data(), rows * t) <= 1e-5);
    CHECK(emu_rel_err("out", eout.data(), out.data(), nout) <= 1e-5);

    emu_permute(q, (float *)qkv.data(), b, t, nh, hs, 3, r, true);
    emu_permute(dy, (float *)dout.data(), b, t, nh, hs, 1, r, true);
    host_bgemm(false, true, t, t, hs, 1.0f, dy, hs, th, v, hs, th, datt, t, tt, bh);
    host_bgemm(true, false, t, hs, t, 1.0f, eatt.data(), t, tt, dy, hs, th, dv, hs, th, bh);
    emu_launch(blocks, threads, 0,
               [&] { causal_softmax_backward_kernel(datt, eatt.data(), rows, t, scale); });
    host_bgemm(false, false, t, hs, t, 1.0f, datt, t, tt, k, hs, th, dq, hs, th, bh);
    host_bgemm(true, false, t, hs, t, 1.0f, datt, t, tt, q, hs, th, dk, hs, th, bh);
    emu_permute(dq, edqkv.data(), b, t, nh, hs, 3, r, false);
    CHECK(emu_rel_err("dqkv", edqkv.data(), dqkv.data(), nqkv) <= 1e-4);
}

static void test_attention(void)
{
    check_attention(2, 1, 8, 2, 0);
    check_attention(2, 17, 12, 3, 0); /* 32 threads */
    check_attention(1, 70, 16, 2, 0); /* 128 threads: 4 warps */
    check_attention(1, 300, 8, 1, 5); /* rows longer than 256 threads, 5 blocks for 300 rows */
}

static void test_no_emulator_faults(void)
{
    CHECK_EQ_INT(emu_failures, 0);
}

int main(void)
{
    RUN_TEST(test_attention);
    RUN_TEST(test_no_emulator_faults);
    return check_summary();
}
