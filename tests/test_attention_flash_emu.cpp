// SPDX-License-Identifier: MIT
/* The CUDA flash attention's own device code (src/kernels/cuda/attention_flash.cu, compiled for
 * the host against tests/cuda_emu.h: a fiber per thread, warp barriers, whole-tile WMMA
 * fragments that check alignment) against the CPU attention at bf16 and fp16, within 1e-2:
 * forward out, the saved logsumexps' copy of out, and backward dqkv, for T = 1 to 1024 (300: an
 * odd tile count) and head dims 32, 64, 128, aligned and not. Candidate flash2's kernels
 * (attention_flash2.cu) must give exactly these kernels' bits: out, saved state, dqkv and D.
 * Shared memory starts as NaN and outputs and flash2's workspace are poisoned, so a read before a
 * write or a missed element fails. What it cannot see: the GPU's timing, occupancy and the real
 * fragment layouts (the kernels never depend on them). */
#include "cuda_emu.h"

#include "../src/kernels/cuda/attention_flash.cu"
#include "../src/kernels/cuda/attention_flash2.cu"

#include <ddpc/kernels.h>
#include <ddpc/rng.h>

#include <vector>

#include "check.h"

static std::vector<float> rand_vec(int64_t n, float amp, uint64_t seed)
{
    std::vector<float> v((size_t)n);
    for (int64_t i = 0; i < n; i++)
        v[(size_t)i] = amp * (2.0f * ddpc_rng_uniform_at(seed, 7, (uint64_t)i) - 1.0f);
    return v;
}

/* The kernels, launched as attention_flash.cu's forward_hs/backward_hs launch them. */
template <typename H, int HS>
static void run_flash(float *out, float *saved, float *dqkv, float *dd, const float *qkv,
                      const float *dout, int64_t b, int64_t t, int64_t c, int64_t nh)
{
    using D = flash_dims<HS>;
    const int tiles = (int)((t + TILE - 1) / TILE);
    const unsigned blocks = (unsigned)(b * nh * tiles);
    const float scale = 1.0f / sqrtf((float)HS);
    emu_launch(blocks, THREADS, D::FWD_BYTES, [&] {
        flash_forward_kernel<H, HS>(out, saved, qkv, (int)t, (int)c, (int)nh, tiles, b * nh, scale);
    });
    /* Three blocks: the row-dot kernel's grid-stride loop goes round. */
    emu_launch(3, THREADS, 0, [&] {
        flash_rowdot_kernel(dd, dout, saved + b * nh * t, b * t * nh, (int)t, (int)nh, HS);
    });
    emu_launch(blocks, THREADS, D::BWD_BYTES, [&] {
        flash_dkdv_kernel<H, HS>(dqkv, dout, qkv, saved, dd, (int)t, (int)c, (int)nh, tiles, scale);
    });
    emu_launch(blocks, THREADS, D::BWD_BYTES, [&] {
        flash_dq_kernel<H, HS>(dqkv, dout, qkv, saved, dd, (int)t, (int)c, (int)nh, tiles, scale);
    });
}

/* Candidate flash2's kernels, launched as attention_flash2.cu's forward2_hs/backward2_hs launch
 * them; its forward stands aside for a qkv not 16-byte aligned (the 4-warp kernel runs). */
template <typename H, int HS>
static void run_flash2(float *out, float *saved, float *dqkv, float *ws, const float *qkv,
                       const float *dout, int64_t b, int64_t t, int64_t c, int64_t nh)
{
    using F = flash2_dims<HS>;
    const flash2_layout l = flash2_plan(b, t, c, nh);
    const int tiles = (int)l.tiles, tp = (int)l.tp;
    const unsigned big_blocks = (unsigned)(b * nh * ((tiles + 1) / 2));
    const float scale = 1.0f / sqrtf((float)HS);
    if (((uintptr_t)qkv & 15) == 0)
        emu_launch(big_blocks, THREADS8, F::FWD_BYTES, [&] {
            flash2_forward_kernel<H, HS>(out, saved, qkv, (int)t, (int)c, (int)nh, tiles, b * nh,
                                         scale);
        });
    else
        emu_launch((unsigned)(b * nh * tiles), THREADS, flash_dims<HS>::FWD_BYTES, [&] {
            flash_forward_kernel<H, HS>(out, saved, qkv, (int)t, (int)c, (int)nh, tiles, b * nh,
                                        scale);
        });
    H *q16 = (H *)(ws + l.dd), *k16 = (H *)(ws + l.dd + l.r16);
    H *v16 = (H *)(ws + l.dd + 2 * l.r16), *do16 = (H *)(ws + l.dd + 3 * l.r16);
    H *ds = (H *)(ws + l.dd + 4 * l.r16);
    /* Three blocks: the rounding kernel's grid-stride loop goes round. */
    emu_launch(3, THREADS8, 0, [&] {
        flash2_round_kernel<H, HS>(q16, k16, v16, do16, ws, qkv, dout, saved + b * nh * t, (int)t,
                                   tp, (int)c, (int)nh, b * nh * l.tp);
    });
    emu_launch(big_blocks, THREADS8, F::DKDV_BYTES, [&] {
        flash2_dkdv_kernel<H, HS>(dqkv, ds, q16, k16, v16, do16, saved, ws, (int)t, tp, (int)c,
                                  (int)nh, tiles, scale);
    });
    emu_launch((unsigned)(b * nh * tiles), THREADS, F::DQ_BYTES,
               [&] { flash2_dq_kernel<H, HS>(dqkv, ds, k16, (int)t, tp, (int)c, (int)nh, tiles); });
}

template <typename H>
static void run2_hs(int64_t hs, float *out, float *saved, float *dqkv, float *ws, const float *qkv,
                    const float *dout, int64_t b, int64_t t, int64_t c, int64_t nh)
{
    if (hs == 32)
        run_flash2<H, 32>(out, saved, dqkv, ws, qkv, dout, b, t, c, nh);
    else if (hs == 64)
        run_flash2<H, 64>(out, saved, dqkv, ws, qkv, dout, b, t, c, nh);
    else
        run_flash2<H, 128>(out, saved, dqkv, ws, qkv, dout, b, t, c, nh);
}

template <typename H>
static void run_hs(int64_t hs, float *out, float *saved, float *dqkv, float *dd, const float *qkv,
                   const float *dout, int64_t b, int64_t t, int64_t c, int64_t nh)
{
    if (hs == 32)
        run_flash<H, 32>(out, saved, dqkv, dd, qkv, dout, b, t, c, nh);
    else if (hs == 64)
        run_flash<H, 64>(out, saved, dqkv, dd, qkv, dout, b, t, c, nh);
    else
        run_flash<H, 128>(out, saved, dqkv, dd, qkv, dout, b, t, c, nh);
}

/* One shape: `skew` floats before qkv and dout (1: the one-float loads). */
static void check_emu(int64_t b, int64_t t, int64_t c, int64_t nh, ddpc_precision prec,
                      int64_t skew)
{
    const int64_t hs = c / nh, nqkv = b * t * 3 * c, nout = b * t * c;
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

    /* 64-byte aligned outputs, as the table's allocations are; NaN until written. */
    const size_t nsaved = (size_t)(b * nh * t + nout);
    float *fout = (float *)aligned_alloc(64, ((size_t)nout * 4 + 63) / 64 * 64);
    float *saved = (float *)aligned_alloc(64, (nsaved * 4 + 63) / 64 * 64);
    float *fdqkv = (float *)aligned_alloc(64, ((size_t)nqkv * 4 + 63) / 64 * 64);
    float *dd = (float *)aligned_alloc(64, ((size_t)(b * nh * t) * 4 + 63) / 64 * 64);
    if (!fout || !saved || !fdqkv || !dd)
        abort();
    memset(fout, 0xff, (size_t)nout * 4);
    memset(saved, 0xff, nsaved * 4);
    memset(fdqkv, 0xff, (size_t)nqkv * 4);
    memset(dd, 0xff, (size_t)(b * nh * t) * 4);
    const int before = emu_failures;
    if (prec == DDPC_PREC_BF16)
        run_hs<__nv_bfloat16>(hs, fout, saved, fdqkv, dd, qkv, dout, b, t, c, nh);
    else
        run_hs<__half>(hs, fout, saved, fdqkv, dd, qkv, dout, b, t, c, nh);
    CHECK_EQ_INT(emu_failures, before); /* WMMA's alignment rules, full-warp shuffles */

    const double e_out = emu_rel_err(fout, out.data(), nout),
                 e_dqkv = emu_rel_err(fdqkv, dqkv.data(), nqkv);
    printf("  out rel err %.3g, dqkv rel err %.3g\n", e_out, e_dqkv);
    CHECK(e_out <= 1e-2);
    CHECK(e_dqkv <= 1e-2);
    CHECK(memcmp(saved + b * nh * t, fout, (size_t)nout * 4) == 0);

    /* flash2 from NaN outputs and a NaN workspace: the 4-warp kernels' bits, everywhere. */
    const size_t nws2 = (size_t)flash2_plan(b, t, c, nh).total;
    float *out2 = (float *)aligned_alloc(64, ((size_t)nout * 4 + 63) / 64 * 64);
    float *saved2 = (float *)aligned_alloc(64, (nsaved * 4 + 63) / 64 * 64);
    float *dqkv2 = (float *)aligned_alloc(64, ((size_t)nqkv * 4 + 63) / 64 * 64);
    float *ws2 = (float *)aligned_alloc(64, (nws2 * 4 + 63) / 64 * 64);
    if (!out2 || !saved2 || !dqkv2 || !ws2)
        abort();
    memset(out2, 0xff, (size_t)nout * 4);
    memset(saved2, 0xff, nsaved * 4);
    memset(dqkv2, 0xff, (size_t)nqkv * 4);
    memset(ws2, 0xff, nws2 * 4);
    if (prec == DDPC_PREC_BF16)
        run2_hs<__nv_bfloat16>(hs, out2, saved2, dqkv2, ws2, qkv, dout, b, t, c, nh);
    else
        run2_hs<__half>(hs, out2, saved2, dqkv2, ws2, qkv, dout, b, t, c, nh);
    CHECK_EQ_INT(emu_failures, before);
    const double e2_out = emu_rel_err(out2, out.data(), nout),
                 e2_dqkv = emu_rel_err(dqkv2, dqkv.data(), nqkv);
    printf("  flash2: out rel err %.3g, dqkv rel err %.3g\n", e2_out, e2_dqkv);
    CHECK(e2_out <= 1e-2);
    CHECK(e2_dqkv <= 1e-2);
    CHECK(memcmp(out2, fout, (size_t)nout * 4) == 0);
    CHECK(memcmp(saved2, saved, nsaved * 4) == 0);
    CHECK(memcmp(dqkv2, fdqkv, (size_t)nqkv * 4) == 0);
    CHECK(memcmp(ws2, dd, (size_t)(b * nh * t) * 4) == 0); /* D */
    free(out2);
    free(saved2);
    free(dqkv2);
    free(ws2);
    free(fout);
    free(saved);
    free(fdqkv);
    free(dd);
}

static void test_emu_head_dims(void)
{
    check_emu(2, 17, 64, 2, DDPC_PREC_BF16, 0);   /* hs 32, one partial tile */
    check_emu(1, 129, 128, 2, DDPC_PREC_FP16, 0); /* hs 64, three tiles */
    check_emu(1, 70, 256, 2, DDPC_PREC_BF16, 0);  /* hs 128, two tiles */
}

/* T = 300: five tiles, so flash2's last 128-row block has one; every head dim, both types. */
static void test_emu_t300(void)
{
    check_emu(1, 300, 64, 2, DDPC_PREC_BF16, 0);  /* hs 32 */
    check_emu(1, 300, 64, 1, DDPC_PREC_FP16, 0);  /* hs 64 */
    check_emu(1, 300, 128, 1, DDPC_PREC_BF16, 0); /* hs 128 */
    check_emu(1, 300, 128, 2, DDPC_PREC_FP16, 0); /* hs 64 */
}

/* flash2's 128-row blocks: an even tile count with two heads and sequences, T = 128 (no row
 * padding), one tile (a block half empty), and GPT-2's head at T = 1024 (16 tiles). */
static void test_emu_flash2_blocks(void)
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
}

int main(void)
{
    RUN_TEST(test_emu_head_dims);
    RUN_TEST(test_emu_t1_and_unaligned);
    RUN_TEST(test_emu_t300);
    RUN_TEST(test_emu_flash2_blocks);
    return check_summary();
}
