// SPDX-License-Identifier: MIT
/* Tests for the --check of `ddpc bench <collective>` (src/cli/bench_coll_check.c, compiled in
 * here since src/cli is not part of libddpc): the inputs have the documented values and bit
 * patterns, a correct result counts 0 wrong, and every kind of wrong result is counted. The
 * "correct results" are assembled here by hand from each rank's inputs, as a collective would. */
#include "cli/bench_coll_check.c"

#include "check.h"

enum { N = 37 }; /* elements per rank block: not a multiple of the input period 17 */

static ddpc__bench_options opts(ddpc__bench_coll coll, ddpc_dtype t, ddpc_reduce_op op)
{
    return (ddpc__bench_options){.coll = coll, .dtype = t, .op = op};
}

static ddpc__bench_shape shape(const ddpc__bench_options *o, int rank, int world)
{
    bool blocks = o->coll == DDPC__BENCH_ALL_GATHER || o->coll == DDPC__BENCH_REDUCE_SCATTER;
    size_t nb = blocks ? (size_t)world : 1;
    return (ddpc__bench_shape){.rank = rank,
                               .world = world,
                               .per = N,
                               .n_send = o->coll == DDPC__BENCH_REDUCE_SCATTER ? N * nb : N,
                               .n_recv = o->coll == DDPC__BENCH_ALL_GATHER ? N * nb : N};
}

static void test_input_values_and_bits(void)
{
    /* rank 0 element 0 is -8, element 5 is ((35) % 17) - 8 = -7; rank 1 element 0 is 13 - 8 = 5 */
    float f[N], g[N];
    uint16_t b[N], h[N], sb[N], sh[N];
    ddpc__bench_options o = opts(DDPC__BENCH_ALL_REDUCE, DDPC_DTYPE_F32, DDPC_REDUCE_SUM);
    ddpc__bench_shape s0 = shape(&o, 0, 2), s1 = shape(&o, 1, 2);
    ddpc__bench_fill(&o, &s0, f, g);
    CHECK(f[0] == -8.0f && f[5] == -7.0f && g[0] == -99.0f && g[N - 1] == -99.0f);
    ddpc__bench_fill(&o, &s1, f, g);
    CHECK(f[0] == 5.0f);
    for (int i = 0; i < N; i++)
        CHECK(f[i] >= -8.0f && f[i] <= 8.0f && f[i] == (float)(int)f[i]);
    o.dtype = DDPC_DTYPE_BF16;
    ddpc__bench_fill(&o, &s0, b, sb);
    o.dtype = DDPC_DTYPE_F16;
    ddpc__bench_fill(&o, &s0, h, sh);
    CHECK_EQ_INT(b[0], 0xC100); /* -8 */
    CHECK_EQ_INT(h[0], 0xC800);
    CHECK_EQ_INT(sb[0], 0xC2C6); /* -99 */
    CHECK_EQ_INT(sh[0], 0xD630);
    for (int i = 0; i < N; i++) { /* 0 is +0 in both; 1 is 0x3F80 / 0x3C00 */
        int v = ((i * 7) % 17) - 8;
        if (v == 0)
            CHECK(b[i] == 0 && h[i] == 0);
        if (v == 1)
            CHECK(b[i] == 0x3F80 && h[i] == 0x3C00);
    }
}

/* A 1-rank all_reduce returns its input (avg of one value included), for every dtype and op. */
static void test_one_rank_identity_every_dtype_op(void)
{
    int64_t buf_send[N], buf_recv[N];
    for (int t = 0; t < DDPC_DTYPE_COUNT; t++) {
        for (int op = 0; op < DDPC_REDUCE_COUNT; op++) {
            ddpc__bench_options o = opts(DDPC__BENCH_ALL_REDUCE, (ddpc_dtype)t, (ddpc_reduce_op)op);
            ddpc__bench_shape s = shape(&o, 0, 1);
            ddpc__bench_fill(&o, &s, buf_send, buf_recv);
            CHECK_EQ_INT(ddpc__bench_count_wrong(&o, &s, buf_recv), N); /* sentinel everywhere */
            memcpy(buf_recv, buf_send, N * ddpc_dtype_size((ddpc_dtype)t));
            CHECK_EQ_INT(ddpc__bench_count_wrong(&o, &s, buf_recv), 0);
            unsigned char *bytes = (unsigned char *)buf_recv;
            bytes[3 * ddpc_dtype_size((ddpc_dtype)t)] ^= 0x40; /* one element's bits changed */
            CHECK_EQ_INT(ddpc__bench_count_wrong(&o, &s, buf_recv), 1);
        }
    }
}

/* 3 ranks, f32: the sum, avg (one rounding of the f32 quotient), min and max built by hand. */
static void test_three_rank_f32_reductions(void)
{
    float in[3][N], recv[N], junk[N];
    for (int op = 0; op < DDPC_REDUCE_COUNT; op++) {
        ddpc__bench_options o = opts(DDPC__BENCH_ALL_REDUCE, DDPC_DTYPE_F32, (ddpc_reduce_op)op);
        for (int r = 0; r < 3; r++) {
            ddpc__bench_shape s = shape(&o, r, 3);
            ddpc__bench_fill(&o, &s, in[r], junk);
        }
        for (int i = 0; i < N; i++) {
            float a = in[0][i], b = in[1][i], c = in[2][i];
            float mn = fminf(a, fminf(b, c)), mx = fmaxf(a, fmaxf(b, c));
            recv[i] = op == DDPC_REDUCE_SUM   ? a + b + c
                      : op == DDPC_REDUCE_AVG ? (a + b + c) / 3.0f
                      : op == DDPC_REDUCE_MIN ? mn
                                              : mx;
        }
        ddpc__bench_shape s = shape(&o, 2, 3);
        CHECK_EQ_INT(ddpc__bench_count_wrong(&o, &s, recv), 0);
        recv[N - 1] += op == DDPC_REDUCE_AVG ? 1e-3f : 1.0f;
        CHECK_EQ_INT(ddpc__bench_count_wrong(&o, &s, recv), 1);
    }
}

/* Integer avg truncates toward zero (as NCCL does); rounding to nearest would be wrong. */
static void test_integer_avg_truncates(void)
{
    int32_t in[3][N], recv[N], junk[N];
    ddpc__bench_options o = opts(DDPC__BENCH_ALL_REDUCE, DDPC_DTYPE_I32, DDPC_REDUCE_AVG);
    for (int r = 0; r < 3; r++) {
        ddpc__bench_shape s = shape(&o, r, 3);
        ddpc__bench_fill(&o, &s, in[r], junk);
    }
    int rounded_differs = 0;
    for (int i = 0; i < N; i++) {
        int sum = in[0][i] + in[1][i] + in[2][i];
        recv[i] = sum / 3;
        rounded_differs += (int)lround(sum / 3.0) != sum / 3;
    }
    ddpc__bench_shape s = shape(&o, 0, 3);
    CHECK_EQ_INT(ddpc__bench_count_wrong(&o, &s, recv), 0);
    CHECK(rounded_differs > 0);
    for (int i = 0; i < N; i++)
        recv[i] = (int32_t)lround((in[0][i] + in[1][i] + in[2][i]) / 3.0);
    CHECK_EQ_INT(ddpc__bench_count_wrong(&o, &s, recv), rounded_differs);
}

/* bf16 avg of 2 ranks: the halves are exact in bf16, so the f32 bits' top half is the answer. */
static void test_two_rank_bf16_avg(void)
{
    uint16_t in[2][N], recv[N], junk[N];
    ddpc__bench_options o = opts(DDPC__BENCH_ALL_REDUCE, DDPC_DTYPE_BF16, DDPC_REDUCE_AVG);
    for (int r = 0; r < 2; r++) {
        ddpc__bench_shape s = shape(&o, r, 2);
        ddpc__bench_fill(&o, &s, in[r], junk);
    }
    for (int i = 0; i < N; i++) {
        float a = bf16_value(in[0][i]), b = bf16_value(in[1][i]), avg = (a + b) / 2.0f;
        uint32_t bits;
        memcpy(&bits, &avg, sizeof bits);
        CHECK((bits & 0xFFFFu) == 0);
        recv[i] = (uint16_t)(bits >> 16);
    }
    ddpc__bench_shape s = shape(&o, 1, 2);
    CHECK_EQ_INT(ddpc__bench_count_wrong(&o, &s, recv), 0);
    recv[7] = (uint16_t)(recv[7] + 2); /* two bf16 ulps off */
    CHECK_EQ_INT(ddpc__bench_count_wrong(&o, &s, recv), 1);
}

static void test_all_gather_blocks_in_rank_order(void)
{
    double in[3][N], recv[3 * N], junk[3 * N];
    ddpc__bench_options o = opts(DDPC__BENCH_ALL_GATHER, DDPC_DTYPE_F64, DDPC_REDUCE_SUM);
    for (int r = 0; r < 3; r++) {
        ddpc__bench_shape s = shape(&o, r, 3);
        ddpc__bench_fill(&o, &s, in[r], junk);
        memcpy(recv + r * N, in[r], sizeof in[r]);
    }
    ddpc__bench_shape s = shape(&o, 1, 3);
    CHECK_EQ_INT(ddpc__bench_count_wrong(&o, &s, recv), 0);
    memcpy(recv, in[1], sizeof in[1]); /* block 0 holds rank 1's values */
    CHECK(ddpc__bench_count_wrong(&o, &s, recv) > N / 2);
}

static void test_reduce_scatter_own_block(void)
{
    int64_t in[2][2 * N], recv[N], junk[2 * N];
    ddpc__bench_options o = opts(DDPC__BENCH_REDUCE_SCATTER, DDPC_DTYPE_I64, DDPC_REDUCE_MAX);
    for (int r = 0; r < 2; r++) {
        ddpc__bench_shape s = shape(&o, r, 2);
        ddpc__bench_fill(&o, &s, in[r], junk);
    }
    for (int i = 0; i < N; i++) /* rank 1 gets the max of block 1 */
        recv[i] = in[0][N + i] > in[1][N + i] ? in[0][N + i] : in[1][N + i];
    ddpc__bench_shape s = shape(&o, 1, 2);
    CHECK_EQ_INT(ddpc__bench_count_wrong(&o, &s, recv), 0);
    ddpc__bench_shape s0 = shape(&o, 0, 2); /* block 1 is not rank 0's answer */
    CHECK(ddpc__bench_count_wrong(&o, &s0, recv) > 0);
}

static void test_broadcast_from_root(void)
{
    uint16_t root_buf[N], other[N], junk[1];
    ddpc__bench_options o = opts(DDPC__BENCH_BROADCAST, DDPC_DTYPE_F16, DDPC_REDUCE_SUM);
    o.root = 2;
    ddpc__bench_shape sr = shape(&o, 2, 3), s0 = shape(&o, 0, 3);
    sr.n_send = s0.n_send = 0;
    ddpc__bench_fill(&o, &sr, junk, root_buf);
    ddpc__bench_fill(&o, &s0, junk, other);
    CHECK_EQ_INT(ddpc__bench_count_wrong(&o, &sr, root_buf), 0);
    CHECK_EQ_INT(ddpc__bench_count_wrong(&o, &s0, other), N);
    memcpy(other, root_buf, sizeof other);
    CHECK_EQ_INT(ddpc__bench_count_wrong(&o, &s0, other), 0);
    CHECK(f16_value(0x7C00) == INFINITY && isnan(f16_value(0x7E00)) && f16_value(1) > 0.0);
}

int main(void)
{
    RUN_TEST(test_input_values_and_bits);
    RUN_TEST(test_one_rank_identity_every_dtype_op);
    RUN_TEST(test_three_rank_f32_reductions);
    RUN_TEST(test_integer_avg_truncates);
    RUN_TEST(test_two_rank_bf16_avg);
    RUN_TEST(test_all_gather_blocks_in_rank_order);
    RUN_TEST(test_reduce_scatter_own_block);
    RUN_TEST(test_broadcast_from_root);
    return check_summary();
}
