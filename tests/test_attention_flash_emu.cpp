// SPDX-License-Identifier: MIT
/* The CUDA flash attention's own device code (src/kernels/cuda/attention_flash.cu, compiled for
 * the host against tests/cuda_emu.h: a fiber per thread, warp barriers, whole-tile WMMA
 * fragments that check alignment) against the CPU attention at bf16 and fp16, within 1e-2:
 * forward out, each saved logsumexp (the CPU's P(i, 0) from it), the saved copy of out (bit for
 * bit) and backward dqkv, for T = 1 to 1024 (300: an odd tile count, so the last 128-row block
 * has one tile) and head dims 32, 64, 128. D in the workspace must be rowsum(dout * out) summed
 * in the kernel's order (bit for bit), and qkv and dout not 16-byte aligned (the forward's
 * one-float loads) must give the aligned run's bits. Shared memory starts as NaN and outputs and
 * the workspace are poisoned, so a read before a write or a missed element fails. What it cannot
 * see: the GPU's timing, occupancy and the real fragment layouts (the kernels never depend on
 * them). */
#include "cuda_emu.h"

#include "../src/kernels/cuda/attention_flash.cu"

#include <ddpc/half.h>
#include <ddpc/kernels.h>
#include <ddpc/rng.h>

#include <vector>

#include "check.h"
#include "flash_lse.h"

static std::vector<float> rand_vec(int64_t n, float amp, uint64_t seed)
{
    std::vector<float> v((size_t)n);
    for (int64_t i = 0; i < n; i++)
        v[(size_t)i] = amp * (2.0f * ddpc_rng_uniform_at(seed, 7, (uint64_t)i) - 1.0f);
    return v;
}

/* n floats, 64-byte aligned as the table's allocations are, NaN until written. */
static float *poisoned(size_t n)
{
    float *p = (float *)aligned_alloc(64, (n * 4 + 63) / 64 * 64);
    if (!p)
        abort();
    memset(p, 0xff, n * 4);
    return p;
}

/* The kernels, launched as attention_flash.cu's forward_hs/backward_hs launch them: the forward's
 * float4 loads where qkv is 16-byte aligned, its one-float loads where not. */
template <typename H, int HS>
static void run_flash(float *out, float *saved, float *dqkv, float *ws, const float *qkv,
                      const float *dout, int64_t b, int64_t t, int64_t c, int64_t nh)
{
    using D = flash_dims<HS>;
    const flash_layout l = flash_plan(b, t, c, nh);
    const int tiles = (int)l.tiles, tp = (int)l.tp;
    const unsigned big_blocks = (unsigned)(b * nh * ((tiles + 1) / 2));
    const float scale = 1.0f / sqrtf((float)HS);
    emu_launch(big_blocks, THREADS8, D::FWD_BYTES, [&] {
        if (((uintptr_t)qkv & 15) == 0)
            flash_forward_kernel<H, HS, true>(out, saved, qkv, (int)t, (int)c, (int)nh, tiles,
                                              b * nh, scale);
        else
            flash_forward_kernel<H, HS, false>(out, saved, qkv, (int)t, (int)c, (int)nh, tiles,
                                               b * nh, scale);
    });
    H *q16 = (H *)(ws + l.dd), *k16 = (H *)(ws + l.dd + l.r16);
    H *v16 = (H *)(ws + l.dd + 2 * l.r16), *do16 = (H *)(ws + l.dd + 3 * l.r16);
    H *ds = (H *)(ws + l.dd + 4 * l.r16);
    /* Three blocks: the rounding kernel's grid-stride loop goes round. */
    emu_launch(3, THREADS8, 0, [&] {
        flash_round_kernel<H, HS>(q16, k16, v16, do16, ws, qkv, dout, saved + b * nh * t, (int)t,
                                  tp, (int)c, (int)nh, b * nh * l.tp);
    });
    emu_launch(big_blocks, THREADS8, D::DKDV_BYTES, [&] {
        flash_dkdv_kernel<H, HS>(dqkv, ds, q16, k16, v16, do16, saved, ws, (int)t, tp, (int)c,
                                 (int)nh, tiles, scale);
    });
    emu_launch((unsigned)(b * nh * tiles), THREADS, D::DQ_BYTES,
               [&] { flash_dq_kernel<H, HS>(dqkv, ds, k16, (int)t, tp, (int)c, (int)nh, tiles); });
}

template <typename H>
static void run_hs(int64_t hs, float *out, float *saved, float *dqkv, float *ws, const float *qkv,
                   const float *dout, int64_t b, int64_t t, int64_t c, int64_t nh)
{
    if (hs == 32)
        run_flash<H, 32>(out, saved, dqkv, ws, qkv, dout, b, t, c, nh);
    else if (hs == 64)
        run_flash<H, 64>(out, saved, dqkv, ws, qkv, dout, b, t, c, nh);
    else
        run_flash<H, 128>(out, saved, dqkv, ws, qkv, dout, b, t, c, nh);
}

/* The fused kernels' outputs of one run, from NaN. */
struct flash_run {
    float *out, *saved, *dqkv, *ws;
};

static flash_run run(ddpc_precision prec, const float *qkv, const float *dout, int64_t b, int64_t t,
                     int64_t c, int64_t nh)
{
    const int64_t nout = b * t * c;
    flash_run r = {poisoned((size_t)nout), poisoned((size_t)(b * nh * t + nout)),
                   poisoned((size_t)(b * t * 3 * c)),
                   poisoned((size_t)flash_plan(b, t, c, nh).total)};
    const int before = emu_failures;
    if (prec == DDPC_PREC_BF16)
        run_hs<__nv_bfloat16>(c / nh, r.out, r.saved, r.dqkv, r.ws, qkv, dout, b, t, c, nh);
    else
        run_hs<__half>(c / nh, r.out, r.saved, r.dqkv, r.ws, qkv, dout, b, t, c, nh);
    CHECK_EQ_INT(emu_failures, before); /* WMMA's alignment rules, full-warp shuffles */
    return r;
}

static void release(flash_run *r)
{
    free(r->out);
    free(r->saved);
    free(r->dqkv);
    free(r->ws);
}

/* D (B*NH, T) as flash_round_kernel sums it: lane l sums d = l, l + 32, ..., then the butterfly
 * adds lane l ^ 16, ^ 8, ^ 4, ^ 2, ^ 1; lane 0's sum. */
static bool d_bits_match(const float *dd, const float *dout, const float *o, int64_t b, int64_t t,
                         int64_t c, int64_t nh)
{
    const int64_t hs = c / nh;
    for (int64_t bh = 0; bh < b * nh; bh++)
        for (int64_t i = 0; i < t; i++) {
            const int64_t at = (bh / nh * t + i) * c + bh % nh * hs;
            float s[32];
            for (int lane = 0; lane < 32; lane++) {
                s[lane] = 0.0f;
                for (int64_t d = lane; d < hs; d += 32)
                    s[lane] += dout[at + d] * o[at + d];
            }
            for (int off = 16; off > 0; off /= 2) {
                float n[32];
                for (int lane = 0; lane < 32; lane++)
                    n[lane] = s[lane] + s[lane ^ off];
                memcpy(s, n, sizeof s);
            }
            if (memcmp(&s[0], &dd[bh * t + i], sizeof(float)) != 0)
                return false;
        }
    return true;
}


/* One shape: `skew` floats before qkv and dout (1: the forward's one-float loads, whose bits must
 * be the aligned run's). */
static void check_emu(int64_t b, int64_t t, int64_t c, int64_t nh, ddpc_precision prec,
                      int64_t skew)
{
    const int64_t hs = c / nh, nqkv = b * t * 3 * c, nout = b * t * c;
    const size_t nsaved = (size_t)(b * nh * t + nout);
    printf(" emulated flash b %lld t %lld c %lld nh %lld (hs %lld) %s skew %lld\n", (long long)b,
           (long long)t, (long long)c, (long long)nh, (long long)hs, ddpc_precision_name(prec),
           (long long)skew);
    std::vector<float> qkv_buf = rand_vec(nqkv + skew, 1.0f, 41 + (uint64_t)t);
    std::vector<float> dout_buf = rand_vec(nout + skew, 1.0f, 42 + (uint64_t)t);
    const float *qkv = qkv_buf.data() + skew, *dout = dout_buf.data() + skew;

    std::vector<float> out(nout), att((size_t)(b * nh * t * t)), dqkv(nqkv);
    std::vector<float> ws(ddpc_attention_workspace_floats(b, t, c, nh) + 1);
    ddpc_attention_forward(prec, out.data(), att.data(), qkv, b, t, c, nh, ws.data());
    ddpc_attention_backward(prec, dqkv.data(), dout, qkv, att.data(), b, t, c, nh, ws.data());

    flash_run r = run(prec, qkv, dout, b, t, c, nh);
    const double e_out = emu_rel_err(r.out, out.data(), nout),
                 e_dqkv = emu_rel_err(r.dqkv, dqkv.data(), nqkv),
                 e_lse = flash_lse_err(prec, r.saved, att.data(), qkv, b, t, c, nh);
    printf("  out rel err %.3g, dqkv rel err %.3g, P(i, 0) from the logsumexp abs err %.3g\n",
           e_out, e_dqkv, e_lse);
    CHECK(e_out <= 1e-2);
    CHECK(e_dqkv <= 1e-2);
    CHECK(e_lse <= 1e-2);
    CHECK(memcmp(r.saved + b * nh * t, r.out, (size_t)nout * 4) == 0);
    CHECK(d_bits_match(r.ws, dout, r.out, b, t, c, nh));

    if (skew != 0) { /* the same inputs 64-byte aligned: the same bits everywhere */
        float *aq = poisoned((size_t)nqkv), *ad = poisoned((size_t)nout);
        memcpy(aq, qkv, (size_t)nqkv * 4);
        memcpy(ad, dout, (size_t)nout * 4);
        flash_run a = run(prec, aq, ad, b, t, c, nh);
        CHECK(memcmp(a.out, r.out, (size_t)nout * 4) == 0);
        CHECK(memcmp(a.saved, r.saved, nsaved * 4) == 0);
        CHECK(memcmp(a.dqkv, r.dqkv, (size_t)nqkv * 4) == 0);
        CHECK(memcmp(a.ws, r.ws, (size_t)(b * nh * t) * 4) == 0); /* D */
        release(&a);
        free(aq);
        free(ad);
    }
    release(&r);
}

static void test_emu_head_dims(void)
{
    check_emu(2, 17, 64, 2, DDPC_PREC_BF16, 0);   /* hs 32, one partial tile */
    check_emu(1, 129, 128, 2, DDPC_PREC_FP16, 0); /* hs 64, three tiles */
    check_emu(1, 70, 256, 2, DDPC_PREC_BF16, 0);  /* hs 128, two tiles */
}

/* T = 300: five tiles, so the last 128-row block has one; every head dim, both types. */
static void test_emu_t300(void)
{
    check_emu(1, 300, 64, 2, DDPC_PREC_BF16, 0);  /* hs 32 */
    check_emu(1, 300, 64, 1, DDPC_PREC_FP16, 0);  /* hs 64 */
    check_emu(1, 300, 128, 1, DDPC_PREC_BF16, 0); /* hs 128 */
    check_emu(1, 300, 128, 2, DDPC_PREC_FP16, 0); /* hs 64 */
}

/* The 128-row blocks: an even tile count with two heads and sequences, T = 128 (no row padding),
 * one tile (a block half empty), and GPT-2's head at T = 1024 (16 tiles). */
static void test_emu_blocks(void)
{
    check_emu(2, 200, 64, 2, DDPC_PREC_BF16, 0); /* hs 32, four tiles */
    check_emu(1, 128, 128, 2, DDPC_PREC_FP16, 0);
    check_emu(2, 64, 64, 1, DDPC_PREC_BF16, 0);
    check_emu(1, 1024, 64, 1, DDPC_PREC_BF16, 0);
}

static void test_emu_t1_and_unaligned(void)
{
    check_emu(2, 1, 64, 1, DDPC_PREC_BF16, 0);
    check_emu(1, 70, 128, 2, DDPC_PREC_BF16, 1); /* one-float loads */
    check_emu(1, 300, 96, 3, DDPC_PREC_FP16, 1); /* hs 32, an odd tile count */
}

int main(void)
{
    RUN_TEST(test_emu_head_dims);
    RUN_TEST(test_emu_t1_and_unaligned);
    RUN_TEST(test_emu_t300);
    RUN_TEST(test_emu_blocks);
    return check_summary();
}
