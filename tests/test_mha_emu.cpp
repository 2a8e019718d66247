// SPDX-License-Identifier: MIT
/* src/kernels/cuda/mha.cu's device code (the masked softmax row kernels, whose block reductions
 * span several warps, and the pad mask) on the host (tests/cuda_emu.h) against the CPU table's
 * fp32 mha: the host side's own products (mha_scores, mha_values, mha_dp, mha_grads: their shapes,
 * leading dimensions and offsets) run with a double-accumulating host GEMM in place of
 * ddpc__cuda_gemm, which checks the leading dimensions cuBLAS would refuse.
 * Self-attention with padding, causal self-attention, cross-attention
 * (tq != tk) on a packed kv, one query against a key/value cache of more positions (batch
 * strides), a row whose keys are all masked, and rows longer than the 256-thread block: out and
 * att within 1e-5, dq, dk, dv within 1e-4; the pad mask bit for bit. */
#include "cuda_emu.h"

#include "../src/kernels/cuda/mha.cu"

#include "emu_testutil.h"

#include "check.h"

/* ddpc__cuda_gemm's contract on the host: c (m, n) = alpha op(a) op(b) + beta c, row-major with
 * leading dimensions, accumulated in double; beta 0 never reads c (it may hold poison). The
 * leading dimensions must be what cuBLAS takes for the row-major operands as stored (a (m, k),
 * or (k, m) transposed; b (k, n), or (n, k); c (m, n)): a row at least as long as its columns. */
static int gemm_calls;
static void host_gemm(ddpc_precision prec, ddpc_transpose ta, ddpc_transpose tb, int64_t m,
                      int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                      const float *b, int64_t ldb, float beta, float *c, int64_t ldc)
{
    gemm_calls++;
    CHECK_EQ_INT(prec, DDPC_PREC_FP32);
    CHECK(lda >= (ta == DDPC_TRANS ? m : k) && ldb >= (tb == DDPC_TRANS ? k : n) && ldc >= n);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0.0;
            for (int64_t p = 0; p < k; p++)
                s += (double)(ta == DDPC_TRANS ? a[p * lda + i] : a[i * lda + p]) *
                     (tb == DDPC_TRANS ? b[j * ldb + p] : b[p * ldb + j]);
            const double prior = beta != 0.0f ? (double)beta * c[i * ldc + j] : 0.0;
            c[i * ldc + j] = (float)(alpha * s + prior);
        }
}

/* The emulated forward and backward (mha.cu's host side with host products) against the CPU's. */
static void check_mha(const char *what, ddpc_mha_shape s, bool pad, unsigned row_blocks)
{
    const int64_t hs = s.c / s.nh, jobs = s.b * s.nh, rows = jobs * s.tq, tt = s.tq * s.tk;
    const int64_t sq = ddpc_mha_q_batch_stride(&s), sk = ddpc_mha_kv_batch_stride(&s);
    const int64_t nq = s.b * sq, nk = s.b * sk;
    const int64_t nout = s.b * s.tq * s.c;
    const unsigned threads = (unsigned)ddpc__row_threads(s.tk, 256);
    const unsigned blocks = row_blocks ? row_blocks : (unsigned)rows;
    printf(" %s: b %lld tq %lld tk %lld c %lld nh %lld%s, %u blocks of %u threads\n", what,
           (long long)s.b, (long long)s.tq, (long long)s.tk, (long long)s.c, (long long)s.nh,
           s.causal ? " causal" : "", blocks, threads);
    const std::vector<float> q = emu_rand(nq, 1.0f, 1 + (uint64_t)s.tk),
                             kv = emu_rand(nk, 1.0f, 2 + (uint64_t)s.tk),
                             dout = emu_rand(nout, 1.0f, 3 + (uint64_t)s.tk);
    /* Keys padded at the end of each batch row (row 0 keeps all; the last row, with `pad` and
     * b > 2, has every key masked). */
    std::vector<int32_t> tok((size_t)(s.b * s.tk));
    for (int64_t bi = 0; bi < s.b; bi++)
        for (int64_t j = 0; j < s.tk; j++) {
            const int64_t keep = bi == 0 ? s.tk : bi == s.b - 1 && s.b > 2 ? 0 : s.tk - bi;
            tok[(size_t)(bi * s.tk + j)] = pad && j >= keep ? 0 : 5;
        }
    std::vector<uint8_t> mask((size_t)(s.b * s.tk)), emask((size_t)(s.b * s.tk), 0xff);
    ddpc_pad_mask(mask.data(), tok.data(), s.b * s.tk, 0);
    emu_launch(3, 64, 0, [&] { pad_mask_kernel(emask.data(), tok.data(), s.b * s.tk, 0); });
    CHECK(emu_same_bits("pad mask", emask.data(), mask.data(), s.b * s.tk, 1));
    const uint8_t *kp = pad ? mask.data() : nullptr;

    const ddpc_kernel_table *cpu = emu_cpu();
    const float *k = kv.data(), *v = kv.data() + s.c;
    std::vector<float> out(nout), att((size_t)(rows * s.tk)), dq(nq), dkv(nk);
    std::vector<float> ws(cpu->mha_workspace_floats(&s));
    cpu->mha_forward(DDPC_PREC_FP32, out.data(), att.data(), q.data(), k, v, kp, &s);
    cpu->mha_backward(DDPC_PREC_FP32, dq.data(), dkv.data(), dkv.data() + s.c, dout.data(),
                      q.data(), k, v, att.data(), &s, ws.data());

    const float scale = 1.0f / sqrtf((float)hs);
    std::vector<float> eout = emu_poison(nout), eatt = emu_poison(rows * s.tk);
    gemm_calls = 0;
    mha_scores(host_gemm, DDPC_PREC_FP32, &s, eatt.data(), q.data(), k, scale);
    emu_launch(blocks, threads, 0,
               [&] { mha_softmax_kernel(eatt.data(), kp, rows, s.nh, s.tq, s.tk, s.causal); });
    mha_values(host_gemm, DDPC_PREC_FP32, &s, eout.data(), eatt.data(), v);
    CHECK_EQ_INT(gemm_calls, 2 * jobs);
    CHECK(emu_rel_err("att", eatt.data(), att.data(), rows * s.tk) <= 1e-5);
    CHECK(emu_rel_err("out", eout.data(), out.data(), nout) <= 1e-5);

    /* Backward writes only the first c columns of each row of dq, dk, dv: the rest stay 0. */
    std::vector<float> ews = emu_poison(jobs * tt), edq(dq.size(), 0.0f), edkv(dkv.size(), 0.0f);
    mha_dp(host_gemm, DDPC_PREC_FP32, &s, ews.data(), dout.data(), v);
    emu_launch(blocks, threads, 0,
               [&] { mha_softmax_backward_kernel(ews.data(), eatt.data(), rows, s.tk, scale); });
    mha_grads(host_gemm, DDPC_PREC_FP32, &s, edq.data(), edkv.data(), edkv.data() + s.c,
              ews.data(), eatt.data(), q.data(), k, dout.data());
    CHECK_EQ_INT(gemm_calls, 6 * jobs);
    CHECK(emu_rel_err("dq", edq.data(), dq.data(), nq) <= 1e-4);
    CHECK(emu_rel_err("dk | dv", edkv.data(), dkv.data(), nk) <= 1e-4);
}

/* A shape, every field named (C++ wants them all in a designated initializer). */
static ddpc_mha_shape shape(int64_t b, int64_t tq, int64_t tk, int64_t c, int64_t nh, int64_t ldq,
                            int64_t ldk, int64_t bsq, int64_t bsk, bool causal)
{
    ddpc_mha_shape s;
    s.b = b, s.tq = tq, s.tk = tk, s.c = c, s.nh = nh, s.ldq = ldq, s.ldk = ldk;
    s.bsq = bsq, s.bsk = bsk, s.causal = causal;
    return s;
}

static void test_mha(void)
{
    check_mha("encoder self-attention, padded", shape(3, 7, 7, 8, 2, 24, 24, 0, 0, false), true, 0);
    check_mha("decoder causal self-attention", shape(3, 7, 7, 8, 2, 24, 24, 0, 0, true), true, 4);
    check_mha("cross-attention", shape(2, 5, 9, 12, 3, 12, 24, 0, 0, false), true, 0);
    /* Search: one query each against the first 4 of 6 cached positions, k | v packed per row. */
    check_mha("cached step", shape(4, 1, 4, 8, 2, 24, 16, 24, 96, false), true, 0);
    check_mha("rows longer than the block", shape(1, 3, 300, 4, 1, 4, 8, 0, 0, false), false, 2);
}

static void test_no_emulator_faults(void)
{
    CHECK_EQ_INT(emu_failures, 0);
}

int main(void)
{
    RUN_TEST(test_mha);
    RUN_TEST(test_no_emulator_faults);
    return check_summary();
}
