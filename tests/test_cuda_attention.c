// SPDX-License-Identifier: MIT
/* The CUDA causal attention against the CPU table on the same random inputs: out, att (exactly 0
 * above the diagonal, where the table saves probabilities) and dqkv, at fp32 (1e-4 relative) and
 * bf16 (1e-2); backward reruns give the same bits; a second call with the same shapes allocates
 * nothing on the device. The fused kernels' own shapes are test_cuda_flash's.
 * Skips (exit 77) without a GPU; every device output is poisoned with NaN before a kernel runs. */
#include "backend_testutil.h"

static const ddpc_kernel_table *gpu;
static const ddpc_kernel_table *cpu;

/* One shape at one precision: forward, backward, rerun and allocation checks. */
static void check_attention(int64_t b, int64_t t, int64_t c, int64_t nh, ddpc_precision prec)
{
    const double tol = prec == DDPC_PREC_FP32 ? 1e-4 : 1e-2;
    const int64_t nqkv = b * t * 3 * c, nout = b * t * c, natt = b * nh * t * t;
    printf(" attention b %lld t %lld c %lld nh %lld %s\n", (long long)b, (long long)t, (long long)c,
           (long long)nh, ddpc_precision_name(prec));
    float *qkv = tu_rand(nqkv, -1.0f, 1.0f, 11 + (uint64_t)t);
    float *dout = tu_rand(nout, -1.0f, 1.0f, 12 + (uint64_t)t);
    float *out = tu_alloc(nout), *att = tu_alloc(natt), *dqkv = tu_alloc(nqkv);
    float *ws = tu_alloc((int64_t)cpu->attention_workspace_floats(prec, b, t, c, nh));
    cpu->attention_forward(prec, out, att, qkv, b, t, c, nh, ws);
    cpu->attention_backward(prec, dqkv, dout, qkv, att, b, t, c, nh, ws);

    const int64_t nws = (int64_t)gpu->attention_workspace_floats(prec, b, t, c, nh);
    const int64_t nsaved = (int64_t)gpu->attention_saved_floats(prec, b, t, c, nh);
    float *d_qkv = bt_up(gpu, qkv, nqkv), *d_dout = bt_up(gpu, dout, nout);
    float *d_out = bt_poison(gpu, nout), *d_att = bt_poison(gpu, nsaved);
    float *d_dqkv = bt_poison(gpu, nqkv), *d_ws = bt_poison(gpu, nws);
    gpu->attention_forward(prec, d_out, d_att, d_qkv, b, t, c, nh, d_ws);
    CHECK(bt_err(gpu, "out", d_out, out, nout) <= tol);
    if (nsaved == natt) { /* probabilities, as the CPU saves them */
        CHECK(bt_err(gpu, "att", d_att, att, natt) <= tol);
        float *h_att = bt_down(gpu, d_att, natt);
        int64_t nonzero_above = 0;
        for (int64_t r = 0; r < b * nh * t; r++)
            for (int64_t j = r % t + 1; j < t; j++)
                nonzero_above += h_att[r * t + j] != 0.0f;
        CHECK_EQ_INT(nonzero_above, 0);
        ddpc_free(h_att);
    }

    gpu->attention_backward(prec, d_dqkv, d_dout, d_qkv, d_att, b, t, c, nh, d_ws);
    CHECK(bt_err(gpu, "dqkv", d_dqkv, dqkv, nqkv) <= tol);
    float *first = bt_down(gpu, d_dqkv, nqkv);

    /* Again from poison, with the shapes already seen: the same bits, no device allocation. */
    uint64_t allocs = gpu->alloc_count();
    gpu->fill_f32(d_out, NAN, nout);
    gpu->fill_f32(d_dqkv, NAN, nqkv);
    gpu->attention_forward(prec, d_out, d_att, d_qkv, b, t, c, nh, d_ws);
    gpu->attention_backward(prec, d_dqkv, d_dout, d_qkv, d_att, b, t, c, nh, d_ws);
    CHECK_EQ_INT(gpu->alloc_count(), allocs);
    float *second = bt_down(gpu, d_dqkv, nqkv);
    CHECK(memcmp(first, second, (size_t)nqkv * sizeof(float)) == 0);

    gpu->free(d_qkv);
    gpu->free(d_dout);
    gpu->free(d_out);
    gpu->free(d_att);
    gpu->free(d_dqkv);
    gpu->free(d_ws);
    ddpc_free(qkv);
    ddpc_free(dout);
    ddpc_free(out);
    ddpc_free(att);
    ddpc_free(dqkv);
    ddpc_free(ws);
    ddpc_free(first);
    ddpc_free(second);
}

/* t = 37 is not a multiple of anything the kernels tile by; hs = 12. */
static void test_attention_small(void)
{
    check_attention(2, 37, 48, 4, DDPC_PREC_FP32);
    check_attention(2, 37, 48, 4, DDPC_PREC_BF16);
}

static void test_attention_gpt_block(void)
{
    check_attention(4, 256, 256, 4, DDPC_PREC_FP32);
    check_attention(4, 256, 256, 4, DDPC_PREC_BF16);
}

/* One position: att is the 1x1 matrix 1 and out = v. */
static void test_attention_t1(void)
{
    check_attention(3, 1, 16, 2, DDPC_PREC_FP32);
}

int main(void)
{
    gpu = bt_cuda_or_skip();
    cpu = ddpc_kernel_table_cpu();
    RUN_TEST(test_attention_small);
    RUN_TEST(test_attention_gpt_block);
    RUN_TEST(test_attention_t1);
    return check_summary();
}
