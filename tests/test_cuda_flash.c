// SPDX-License-Identifier: MIT
/* The CUDA table's fused (flash) causal attention (kernels/cuda/attention_flash.cu) against the
 * CPU kernel on the same random inputs: out and dqkv at bf16 and fp16 within 1e-2 relative, fp32
 * (today's kernel, which the table keeps for fp32) within 1e-4; T = 1, 17, 64, 129, 300, 1024 and
 * head dims 32, 64, 128. Also: the table sizes att as the fused state (logsumexps and a copy of
 * out, far below B*NH*T*T floats), each logsumexp gives the CPU's P(i, 0), the copy equals out,
 * reruns give the same bits and allocate nothing on the device (the workspace the table sized is
 * all the kernels use), aligned or not. The fused kernels need sm_80's or sm_90's shared memory.
 * Skips (exit 77) without a GPU; every device output and the workspace are poisoned with NaN
 * first, so an element a kernel misses, or a read of the workspace before a write, fails. */
#include "backend_testutil.h"
#include "flash_lse.h"

#include <ddpc/half.h>

static const ddpc_kernel_table *gpu;
static const ddpc_kernel_table *cpu;

/* One shape at one precision, inputs uniform in (-amp, amp); `skew` floats before qkv and dout
 * on the device (1: not 16-byte aligned, so the forward takes its one-float loads). */
static void check_flash_at(int64_t b, int64_t t, int64_t c, int64_t nh, ddpc_precision prec,
                           float amp, int64_t skew)
{
    const int64_t hs = c / nh;
    const bool fused = prec != DDPC_PREC_FP32 && (hs == 32 || hs == 64 || hs == 128);
    /* The bounds, as test_cuda_attention's: 16-bit products (fused or not) 1e-2. */
    const double tol = prec == DDPC_PREC_FP32 ? 1e-4 : 1e-2;
    const int64_t nqkv = b * t * 3 * c, nout = b * t * c, natt = b * nh * t * t;
    printf(" flash b %lld t %lld c %lld nh %lld (hs %lld) %s amp %g skew %lld\n", (long long)b,
           (long long)t, (long long)c, (long long)nh, (long long)(c / nh),
           ddpc_precision_name(prec), amp, (long long)skew);
    float *qkv = tu_rand(nqkv, -amp, amp, 31 + (uint64_t)t);
    float *dout = tu_rand(nout, -1.0f, 1.0f, 32 + (uint64_t)t);
    float *out = tu_alloc(nout), *att = tu_alloc(natt), *dqkv = tu_alloc(nqkv);
    float *ws = tu_alloc((int64_t)cpu->attention_workspace_floats(prec, b, t, c, nh));
    cpu->attention_forward(prec, out, att, qkv, b, t, c, nh, ws);
    cpu->attention_backward(prec, dqkv, dout, qkv, att, b, t, c, nh, ws);

    /* The fused state: lse (B, NH, T) then out's copy (B, T, C); fp32 keeps the probabilities. */
    const int64_t nsaved = (int64_t)gpu->attention_saved_floats(prec, b, t, c, nh);
    CHECK_EQ_INT(nsaved, fused ? b * nh * t + nout : natt);
    const int64_t nws = (int64_t)gpu->attention_workspace_floats(prec, b, t, c, nh);
    float *d_qkv_buf = bt_poison(gpu, nqkv + skew), *d_dout_buf = bt_poison(gpu, nout + skew);
    float *d_qkv = d_qkv_buf + skew, *d_dout = d_dout_buf + skew;
    gpu->to_device(d_qkv, qkv, (size_t)nqkv * sizeof(float));
    gpu->to_device(d_dout, dout, (size_t)nout * sizeof(float));
    float *d_out = bt_poison(gpu, nout), *d_saved = bt_poison(gpu, nsaved);
    float *d_dqkv = bt_poison(gpu, nqkv), *d_ws = bt_poison(gpu, nws);
    gpu->attention_forward(prec, d_out, d_saved, d_qkv, b, t, c, nh, d_ws);
    CHECK(bt_err(gpu, "out", d_out, out, nout) <= tol);
    float *h_out = bt_down(gpu, d_out, nout), *h_saved = bt_down(gpu, d_saved, nsaved);
    if (fused) {
        const double e = flash_lse_err(prec, h_saved, att, qkv, b, t, c, nh);
        printf("  %-40s abs err %.3g\n", "P(i, 0) from the saved logsumexp", e);
        CHECK(e <= tol);
        CHECK(memcmp(h_saved + b * nh * t, h_out, (size_t)nout * sizeof(float)) == 0);
    }

    gpu->attention_backward(prec, d_dqkv, d_dout, d_qkv, d_saved, b, t, c, nh, d_ws);
    CHECK(bt_err(gpu, "dqkv", d_dqkv, dqkv, nqkv) <= tol);
    float *first = bt_down(gpu, d_dqkv, nqkv);

    /* Again from poison, with the shapes already seen: the same bits, no device allocation. */
    uint64_t allocs = gpu->alloc_count();
    gpu->fill_f32(d_out, NAN, nout);
    gpu->fill_f32(d_saved, NAN, nsaved);
    gpu->fill_f32(d_dqkv, NAN, nqkv);
    gpu->fill_f32(d_ws, NAN, nws);
    gpu->attention_forward(prec, d_out, d_saved, d_qkv, b, t, c, nh, d_ws);
    gpu->attention_backward(prec, d_dqkv, d_dout, d_qkv, d_saved, b, t, c, nh, d_ws);
    CHECK_EQ_INT(gpu->alloc_count(), allocs);
    float *out2 = bt_down(gpu, d_out, nout), *second = bt_down(gpu, d_dqkv, nqkv);
    CHECK(memcmp(h_out, out2, (size_t)nout * sizeof(float)) == 0);
    CHECK(memcmp(first, second, (size_t)nqkv * sizeof(float)) == 0);

    float *dev_bufs[] = {d_qkv_buf, d_dout_buf, d_out, d_saved, d_dqkv, d_ws};
    for (size_t i = 0; i < sizeof dev_bufs / sizeof *dev_bufs; i++)
        gpu->free(dev_bufs[i]);
    float *bufs[] = {qkv, dout, out, att, dqkv, ws, h_out, h_saved, first, out2, second};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        ddpc_free(bufs[i]);
}

static void check_flash(int64_t b, int64_t t, int64_t c, int64_t nh, ddpc_precision prec, float amp)
{
    check_flash_at(b, t, c, nh, prec, amp, 0);
}

static void check_all_precisions(int64_t b, int64_t t, int64_t c, int64_t nh)
{
    check_flash(b, t, c, nh, DDPC_PREC_BF16, 1.0f);
    check_flash(b, t, c, nh, DDPC_PREC_FP16, 1.0f);
    check_flash(b, t, c, nh, DDPC_PREC_FP32, 1.0f);
}

/* One position: the row attends to itself, out = v. */
static void test_flash_t1(void)
{
    check_all_precisions(2, 1, 64, 2);  /* hs 32 */
    check_all_precisions(1, 1, 256, 2); /* hs 128 */
}

/* Partial tiles (the kernels tile by 64): T = 17 and 129, one and three tiles. */
static void test_flash_partial_tiles(void)
{
    check_all_precisions(2, 17, 96, 3);   /* hs 32 */
    check_all_precisions(2, 129, 256, 2); /* hs 128 */
    check_all_precisions(1, 129, 256, 4); /* hs 64 */
}

static void test_flash_whole_tiles(void)
{
    check_all_precisions(1, 64, 128, 2);  /* hs 64 */
    check_all_precisions(2, 128, 128, 1); /* hs 128, two tiles */
}

/* GPT-2's head dim at its context: 16 key tiles per query tile, rescaled online. */
static void test_flash_t1024(void)
{
    check_all_precisions(1, 1024, 128, 2);
}

/* T = 300: five 64-row tiles, an odd count (the kernels pair them into 128-row blocks). */
static void test_flash_t300(void)
{
    check_all_precisions(1, 300, 128, 2);              /* hs 64 */
    check_flash(2, 300, 96, 3, DDPC_PREC_FP16, 1.0f);  /* hs 32 */
    check_flash(1, 300, 256, 2, DDPC_PREC_BF16, 1.0f); /* hs 128 */
}

/* GPT-2 124M's attention: 12 heads of 64 at T = 1024, one sequence. */
static void test_flash_gpt2(void)
{
    check_flash(1, 1024, 768, 12, DDPC_PREC_BF16, 1.0f);
}

/* Larger scores make the softmax peaky, so the running maximum moves across tiles. */
static void test_flash_peaky(void)
{
    check_flash(1, 200, 128, 2, DDPC_PREC_BF16, 2.5f);
    check_flash(1, 200, 128, 2, DDPC_PREC_FP16, 2.5f);
}

/* Head dims without fused kernels keep the probabilities (and today's kernel). */
static void test_flash_other_head_dims(void)
{
    check_flash(2, 37, 96, 2, DDPC_PREC_BF16, 1.0f); /* hs 48 */
    check_flash(1, 20, 16, 1, DDPC_PREC_FP16, 1.0f); /* hs 16 */
}

/* qkv and dout not 16-byte aligned: the forward's one-float loads. */
static void test_flash_unaligned(void)
{
    check_flash_at(2, 129, 256, 4, DDPC_PREC_BF16, 1.0f, 1);
    check_flash_at(1, 70, 96, 3, DDPC_PREC_FP16, 1.0f, 1);
}

int main(void)
{
    gpu = bt_cuda_or_skip();
    cpu = ddpc_kernel_table_cpu();
    /* A GPU whose shared memory cannot hold the fused blocks (sm_86/89) runs the unfused kernels,
     * which save the whole softmax (test_cuda_attention tests them): nothing fused to test. */
    const int64_t t = 256, whole = 12 * t * t;
    if ((int64_t)gpu->attention_saved_floats(DDPC_PREC_BF16, 1, t, 768, 12) >= whole) {
        printf("skipped: this GPU's shared memory cannot hold the fused attention's blocks\n");
        return 77;
    }
    RUN_TEST(test_flash_t1);
    RUN_TEST(test_flash_partial_tiles);
    RUN_TEST(test_flash_whole_tiles);
    RUN_TEST(test_flash_t1024);
    RUN_TEST(test_flash_t300);
    RUN_TEST(test_flash_gpt2);
    RUN_TEST(test_flash_peaky);
    RUN_TEST(test_flash_unaligned);
    RUN_TEST(test_flash_other_head_dims);
    return check_summary();
}
