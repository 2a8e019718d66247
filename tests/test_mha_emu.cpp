// SPDX-License-Identifier: MIT
/* src/kernels/cuda/mha.cu on the host (tests/cuda_emu.h) against the CPU table's mha: its host
 * sequences (mha_forward_on, mha_backward_on: which permutes, softmax kernels and batched
 * products, with which sizes, leading dimensions, strides and offsets in the workspace) on an
 * emulated device whose launches run the real kernels (row loops going round a capped grid, block
 * reductions spanning several warps) and whose batched GEMM accumulates in double after checking
 * the arguments as cuBLAS would. The workspace starts as NaN, so a read of an element nothing
 * wrote shows. Self-attention with padding, causal self-attention, cross-attention (tq != tk) on
 * a packed kv, one query against a key/value cache of more positions (batch strides), a row whose
 * keys are all masked, and rows longer than the 256-thread block: at fp32 out and att within
 * 1e-5, dq, dk, dv within 1e-4; at bf16 and fp16 the 16-bit operands the kernels write (q, k, v,
 * dout permuted; P; dS) are ddpc/half.h's rounding bit for bit, and the results are within
 * 1e-3 of the CPU's at that precision; the pad mask bit for bit. */
#include "cuda_emu.h"

#include "../src/kernels/cuda/mha.cu"

#include "emu_testutil.h"

#include "check.h"

/* A 16-bit element's value (bf16 or fp16 bits). */
static float half_value(uint16_t h, bool bf16)
{
    return bf16 ? ddpc_bf16_to_f32(h) : ddpc_f16_to_f32(h);
}

/* mha.cu's device, emulated: launches run the kernels here (at most `cap` blocks per row loop
 * when cap is set), and gemm is ddpc__cuda_gemm_batched's contract on the host. */
struct emu_mha_dev {
    ddpc_precision prec;
    unsigned cap;
    int gemms = 0, launches = 0;

    unsigned grid(int64_t rows) const { return cap && rows > (int64_t)cap ? cap : (unsigned)rows; }
    template <typename... P, typename... A>
    void launch(void (*kernel)(P...), unsigned blocks, unsigned operands, unsigned threads,
                A... args)
    {
        launches++;
        emu_launch2(blocks, operands, threads, 0, [&] { kernel(args...); });
    }
    /* Element i of an operand: fp32, or 16 bits of prec's type where in16. */
    float at(const void *x, int64_t i, bool in16) const
    {
        return in16 ? half_value(((const uint16_t *)x)[i], prec == DDPC_PREC_BF16)
                    : ((const float *)x)[i];
    }
    /* Row-major c (m, n) = alpha op(a) op(b) per batch; beta 0 never reads c. cuBLAS's rules
     * (column-major, b first): a leading dimension at least the stored row's length, sizes and
     * strides within int and long long, batches of c that do not overlap. */
    void gemm(ddpc_precision p, bool in16, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
              float alpha, const void *a, int64_t lda, int64_t sa, const void *b, int64_t ldb,
              int64_t sb, float *c, int64_t ldc, int64_t sc, int64_t batch)
    {
        gemms++;
        CHECK_EQ_INT(p, prec);
        CHECK_EQ_INT(in16, prec == DDPC_PREC_BF16 || prec == DDPC_PREC_FP16);
        CHECK(m > 0 && n > 0 && k > 0 && batch > 0 && m <= INT32_MAX && n <= INT32_MAX &&
              k <= INT32_MAX && batch <= INT32_MAX);
        CHECK(lda >= (ta ? m : k) && ldb >= (tb ? k : n) && ldc >= n);
        CHECK(sa >= 0 && sb >= 0 && sc >= (m - 1) * ldc + n);
        for (int64_t e = 0; e < batch; e++)
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < n; j++) {
                    double s = 0.0;
                    for (int64_t q = 0; q < k; q++)
                        s += (double)at(a, e * sa + (ta ? q * lda + i : i * lda + q), in16) *
                             at(b, e * sb + (tb ? j * ldb + q : q * ldb + j), in16);
                    c[e * sc + i * ldc + j] = (float)(alpha * s);
                }
    }
};

/* Whether heads (b*nh, t, ldh) of 16 bits hold x's (b, t, ld; batch rows bs apart) first c
 * columns, head by head, rounded as ddpc/half.h rounds. */
static bool same_heads(const char *what, const float *ws, int64_t at, const float *x, int64_t t,
                       int64_t ld, int64_t bs, const ddpc_mha_shape *s, int64_t ldh, bool bf16)
{
    const uint16_t *h = (const uint16_t *)(ws + at);
    const int64_t hs = s->c / s->nh;
    for (int64_t bi = 0; bi < s->b; bi++)
        for (int64_t ti = 0; ti < t; ti++)
            for (int64_t col = 0; col < s->c; col++) {
                const float v = x[bi * bs + ti * ld + col];
                const uint16_t want = bf16 ? ddpc_f32_to_bf16(v) : ddpc_f32_to_f16(v);
                const int64_t e = ((bi * s->nh + col / hs) * t + ti) * ldh + col % hs;
                if (h[e] != want) {
                    fprintf(stderr, "  %s: (%lld, %lld, %lld) is 0x%x, not 0x%x\n", what,
                            (long long)bi, (long long)ti, (long long)col, h[e], want);
                    return false;
                }
            }
    return true;
}

/* Whether rows (n of ldp) of 16 bits at ws + at hold x (n rows of tk) rounded. */
static bool same_rows(const char *what, const float *ws, int64_t at, const float *x, int64_t n,
                      int64_t tk, int64_t ldp, bool bf16)
{
    const uint16_t *h = (const uint16_t *)(ws + at);
    for (int64_t r = 0; r < n; r++)
        for (int64_t j = 0; j < tk; j++) {
            const float v = x[r * tk + j];
            const uint16_t want = bf16 ? ddpc_f32_to_bf16(v) : ddpc_f32_to_f16(v);
            if (h[r * ldp + j] != want) {
                fprintf(stderr, "  %s: (%lld, %lld) is 0x%x, not 0x%x\n", what, (long long)r,
                        (long long)j, h[r * ldp + j], want);
                return false;
            }
        }
    return true;
}

/* Tolerances against the CPU at each precision: fp32 as the GPU test's. At 16 bits both sides
 * multiply the same rounded operands, so they differ as at fp32 unless an operand computed in
 * fp32 (P, dS) rounds the other way where the two differ in its last bits, moving a product by an
 * ulp of that operand (2^-8 of it at bf16); these cases measure below 2e-7. */
struct tolerance {
    double fwd, bwd;
};
static tolerance tolerance_of(ddpc_precision prec)
{
    return prec == DDPC_PREC_FP32 ? tolerance{1e-5, 1e-4} : tolerance{1e-3, 1e-3};
}

/* The emulated forward and backward (mha.cu's host sequences) against the CPU's. */
static void check_mha(const char *what, ddpc_mha_shape s, bool pad, unsigned row_blocks,
                      ddpc_precision prec)
{
    const int64_t jobs = s.b * s.nh, rows = jobs * s.tq;
    const int64_t sq = ddpc_mha_q_batch_stride(&s), sk = ddpc_mha_kv_batch_stride(&s);
    const int64_t nq = s.b * sq, nk = s.b * sk;
    const int64_t nout = s.b * s.tq * s.c;
    const bool half = prec != DDPC_PREC_FP32, bf16 = prec == DDPC_PREC_BF16;
    printf(" %s (%s): b %lld tq %lld tk %lld c %lld nh %lld%s, %u blocks per row loop\n", what,
           ddpc_precision_name(prec), (long long)s.b, (long long)s.tq, (long long)s.tk,
           (long long)s.c, (long long)s.nh, s.causal ? " causal" : "", row_blocks);
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
    cpu->mha_forward(prec, out.data(), att.data(), q.data(), k, v, kp, &s, nullptr);
    cpu->mha_backward(prec, dq.data(), dkv.data(), dkv.data() + s.c, dout.data(), q.data(), k, v,
                      att.data(), &s, ws.data());

    const tolerance tol = tolerance_of(prec);
    const mha_layout L = mha_layout_of(&s, half);
    emu_mha_dev dev{prec, row_blocks};
    std::vector<float> eout = emu_poison(nout), eatt = emu_poison(rows * s.tk);
    std::vector<float> ews = emu_poison((int64_t)mha_workspace_floats(&s));
    mha_forward_on(dev, prec, eout.data(), eatt.data(), q.data(), k, v, kp, &s, ews.data());
    CHECK_EQ_INT(dev.gemms, 2);
    CHECK_EQ_INT(dev.launches, 3);
    CHECK(emu_rel_err("att", eatt.data(), att.data(), rows * s.tk) <= tol.fwd);
    CHECK(emu_rel_err("out", eout.data(), out.data(), nout) <= tol.fwd);
    if (half) {
        CHECK(same_heads("q16", ews.data(), L.q, q.data(), s.tq, s.ldq, sq, &s, L.ldh, bf16));
        CHECK(same_heads("k16", ews.data(), L.k, k, s.tk, s.ldk, sk, &s, L.ldh, bf16));
        CHECK(same_heads("v16", ews.data(), L.v, v, s.tk, s.ldk, sk, &s, L.ldh, bf16));
        CHECK(same_rows("P16", ews.data(), L.p16, eatt.data(), rows, s.tk, L.ldp, bf16));
    }

    /* Backward writes only the first c columns of each row of dq, dk, dv: the rest stay 0. */
    std::vector<float> edq(dq.size(), 0.0f), edkv(dkv.size(), 0.0f);
    ews = emu_poison((int64_t)ews.size());
    mha_backward_on(dev, prec, edq.data(), edkv.data(), edkv.data() + s.c, dout.data(), q.data(), k,
                    v, eatt.data(), &s, ews.data());
    CHECK_EQ_INT(dev.gemms, 6);
    CHECK_EQ_INT(dev.launches, 6);
    CHECK(emu_rel_err("dq", edq.data(), dq.data(), nq) <= tol.bwd);
    CHECK(emu_rel_err("dk | dv", edkv.data(), dkv.data(), nk) <= tol.bwd);
    if (half) {
        CHECK(same_heads("dout16", ews.data(), L.dout, dout.data(), s.tq, s.c, s.tq * s.c, &s,
                         L.ldh, bf16));
        CHECK(same_rows("dS16", ews.data(), L.ds16, ews.data() + L.dp, rows, s.tk, L.ldp, bf16));
        CHECK(same_rows("P16 (backward)", ews.data(), L.p16, eatt.data(), rows, s.tk, L.ldp, bf16));
    }
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
    const ddpc_precision f32 = DDPC_PREC_FP32;
    check_mha("encoder self-attention, padded", shape(3, 7, 7, 8, 2, 24, 24, 0, 0, false), true, 0,
              f32);
    check_mha("decoder causal self-attention", shape(3, 7, 7, 8, 2, 24, 24, 0, 0, true), true, 4,
              f32);
    check_mha("cross-attention", shape(2, 5, 9, 12, 3, 12, 24, 0, 0, false), true, 0, f32);
    /* Search: one query each against the first 4 of 6 cached positions, k | v packed per row. */
    check_mha("cached step", shape(4, 1, 4, 8, 2, 24, 16, 24, 96, false), true, 0, f32);
    check_mha("rows longer than the block", shape(1, 3, 300, 4, 1, 4, 8, 0, 0, false), false, 2,
              f32);
}

/* 16 bits: head size 6 and tk 9 pad the 16-bit rows (to 8 and 16). */
static void test_mha_16(void)
{
    const ddpc_precision p[] = {DDPC_PREC_BF16, DDPC_PREC_FP16};
    for (int i = 0; i < 2; i++) {
        check_mha("cross-attention", shape(2, 5, 9, 12, 2, 12, 24, 0, 0, false), true, 3, p[i]);
        check_mha("decoder causal self-attention", shape(3, 7, 7, 16, 2, 48, 48, 0, 0, true), true,
                  0, p[i]);
        check_mha("cached step", shape(4, 1, 4, 8, 2, 24, 16, 24, 96, false), true, 0, p[i]);
    }
}

static void test_no_emulator_faults(void)
{
    CHECK_EQ_INT(emu_failures, 0);
}

int main(void)
{
    RUN_TEST(test_mha);
    RUN_TEST(test_mha_16);
    RUN_TEST(test_no_emulator_faults);
    return check_summary();
}
