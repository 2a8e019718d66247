// SPDX-License-Identifier: MIT
/* Tests for the memory plan (src/parallel/memplan.c): the ZeRO paper's per-stage totals for fp32
 * AdamW, ceil-division shards, communication buffers, one rank, activations both ways, the
 * refusal message and its suggested fix, and the bucket assignment it is fed with. */
#include <ddpc/alloc.h>
#include <ddpc/memplan.h>
#include <ddpc/nn.h>
#include <ddpc/reducer.h>

#include "check.h"

static ddpc_memplan plan(ddpc_memplan_input in)
{
    ddpc_memplan p;
    CHECK_EQ_INT(ddpc_memplan_compute(&in, &p), DDPC_OK);
    uint64_t sum = 0;
    for (int i = 0; i < DDPC_MEM_ITEMS; i++)
        sum += p.bytes[i];
    CHECK_EQ_INT(p.total, sum);
    return p;
}

/* Rajbhandari et al. 2020, figure 1, with fp32 weights and gradients: 16n, 8n + 8n/N,
 * 4n + 12n/N, 16n/N, plus ZeRO's buffers of the largest bucket (2 slots at stage 1, 6 with
 * stage 2's gradient pool, 9 with stage 3's parameter slots: the gathered working set). */
static void test_zero_paper_totals(void)
{
    static const size_t buckets[] = {4096, 2048, 1024};
    const uint64_t n = 4096 + 2048 + 1024;
    for (int w = 2; w <= 8; w *= 2) {
        ddpc_memplan_input in = {.n = n,
                                 .bucket_len = buckets,
                                 .n_buckets = 3,
                                 .world = w,
                                 .optim_states = 2,
                                 .comm_dtype = DDPC_DTYPE_F32};
        ddpc_memplan p[4];
        for (int s = 0; s <= 3; s++) {
            in.stage = s;
            p[s] = plan(in);
            CHECK_EQ_INT(p[s].stage, s);
        }
        uint64_t buf = 4 * 4096; /* one buffer of the largest bucket */
        CHECK_EQ_INT(p[0].total, 16 * n);
        CHECK_EQ_INT(p[1].total - 2 * buf, 8 * n + 8 * n / (uint64_t)w);
        CHECK_EQ_INT(p[2].total - 6 * buf, 4 * n + 12 * n / (uint64_t)w);
        CHECK_EQ_INT(p[3].total - 9 * buf, 16 * n / (uint64_t)w);
        CHECK_EQ_INT(p[3].owned, n / (uint64_t)w);
        CHECK_EQ_INT(p[1].bytes[DDPC_MEM_OPTIM], 8 * n / (uint64_t)w);
        CHECK_EQ_INT(p[2].bytes[DDPC_MEM_GRADS], 4 * n / (uint64_t)w);
        CHECK_EQ_INT(p[3].bytes[DDPC_MEM_PARAMS], 4 * n / (uint64_t)w);
        CHECK_EQ_INT(ddpc_memplan_largest(&p[0]), DDPC_MEM_OPTIM);
    }
}

/* Rank 0 owns ceil(L / W) of every bucket; staging is the largest bucket padded to W. */
static void test_ceil_shards_and_comm(void)
{
    static const size_t buckets[] = {10, 7};
    ddpc_memplan_input in = {.n = 32,
                             .bucket_len = buckets,
                             .n_buckets = 2,
                             .world = 4,
                             .stage = 2,
                             .optim_states = 1,
                             .comm_dtype = DDPC_DTYPE_F32};
    ddpc_memplan p = plan(in);
    CHECK_EQ_INT(p.owned, 3 + 2);
    CHECK_EQ_INT(p.max_bucket_padded, 12);
    CHECK_EQ_INT(p.bytes[DDPC_MEM_PARAMS], 4 * 32);
    CHECK_EQ_INT(p.bytes[DDPC_MEM_GRADS], 4 * 5);
    CHECK_EQ_INT(p.bytes[DDPC_MEM_OPTIM], 4 * 5);
    CHECK_EQ_INT(p.bytes[DDPC_MEM_COMM], 6 * 4 * 12); /* 2 slots + the pool of 4 */
    in.stage = 0;
    CHECK_EQ_INT(plan(in).bytes[DDPC_MEM_COMM], 0);
    CHECK_EQ_INT(plan(in).bytes[DDPC_MEM_OPTIM], 4 * 32);
    in.comm_dtype = DDPC_DTYPE_BF16; /* half-precision staging of every bucket */
    CHECK_EQ_INT(plan(in).bytes[DDPC_MEM_COMM], 2 * 17);
    in.world = 1; /* no reducer: nothing to stage, and every stage is stage 0 */
    CHECK_EQ_INT(plan(in).bytes[DDPC_MEM_COMM], 0);
    in.stage = 3;
    ddpc_memplan one = plan(in);
    CHECK_EQ_INT(one.stage, 0);
    CHECK_EQ_INT(one.total, 4 * 32 * 3);
}

static void test_activations_both_ways(void)
{
    static const size_t buckets[] = {16};
    ddpc_memplan_input in = {.n = 16,
                             .bucket_len = buckets,
                             .n_buckets = 1,
                             .world = 1,
                             .optim_states = 2,
                             .act_bytes = {1000, 400},
                             .can_checkpoint = true};
    ddpc_memplan p = plan(in);
    CHECK_EQ_INT(p.bytes[DDPC_MEM_ACTIVATIONS], 1000);
    CHECK_EQ_INT(p.activations_other, 400);
    in.checkpointing = true;
    p = plan(in);
    CHECK_EQ_INT(p.bytes[DDPC_MEM_ACTIVATIONS], 400);
    CHECK_EQ_INT(p.activations_other, 1000);
    CHECK_EQ_INT(ddpc_memplan_largest(&p), DDPC_MEM_ACTIVATIONS);
}

/* DataParallel: every replica holds parameters, gradients and an arena; one optimizer state. */
static void test_dataparallel_replicas(void)
{
    static const size_t buckets[] = {16};
    ddpc_memplan_input in = {.n = 16,
                             .bucket_len = buckets,
                             .n_buckets = 1,
                             .world = 1,
                             .optim_states = 2,
                             .act_bytes = {1000, 400},
                             .replicas = 3};
    ddpc_memplan p = plan(in);
    CHECK_EQ_INT(p.replicas, 3);
    CHECK_EQ_INT(p.bytes[DDPC_MEM_PARAMS], 3 * 64);
    CHECK_EQ_INT(p.bytes[DDPC_MEM_GRADS], 3 * 64);
    CHECK_EQ_INT(p.bytes[DDPC_MEM_OPTIM], 2 * 64);
    CHECK_EQ_INT(p.bytes[DDPC_MEM_ACTIVATIONS], 3 * 1000);
    CHECK_EQ_INT(p.activations_other, 3 * 400);
    CHECK_EQ_INT(p.total, 3 * 64 + 3 * 64 + 2 * 64 + 3 * 1000);
    in.replicas = 0;
    CHECK_EQ_INT(plan(in).total, 64 + 64 + 2 * 64 + 1000);
}

static void test_bad_input(void)
{
    ddpc_memplan p;
    ddpc_memplan_input in = {.n = 16, .world = 0};
    CHECK_EQ_INT(ddpc_memplan_compute(&in, &p), DDPC_EINVAL);
    in.world = 2, in.stage = 4;
    CHECK_EQ_INT(ddpc_memplan_compute(&in, &p), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "zero.stage 4");
}

/* A plan over the limit names the total, the limit, the largest item and the cheapest fix. */
static void test_check_names_the_fix(void)
{
    static const size_t buckets[8] = {1 << 18, 1 << 18, 1 << 18, 1 << 18,
                                      1 << 18, 1 << 18, 1 << 18, 1 << 18};
    ddpc_memplan_input in = {.n = 2 << 20,
                             .bucket_len = buckets,
                             .n_buckets = 8,
                             .world = 4,
                             .optim_states = 2,
                             .act_bytes = {1 << 20, 1 << 19}};
    /* MiB of params + grads + optim + activations + comm: stage 0 8 + 8 + 16 + 1 + 0 = 33,
     * stage 1 8 + 8 + 4 + 1 + 2 = 23, stage 2 8 + 2 + 4 + 1 + 6 = 21, stage 3 2 + 2 + 4 + 1 + 9 =
     * 18, and on 8 ranks: stage 2 8 + 1 + 2 + 1 + 6 = 18, stage 3 1 + 1 + 2 + 1 + 9 = 14. */
    CHECK_EQ_INT(ddpc_memplan_check(&in, 33u << 20, "memory.limit_gb is x"), DDPC_OK);
    CHECK_EQ_INT(ddpc_memplan_check(&in, 30u << 20, "memory.limit_gb is x"), DDPC_ENOMEM);
    CHECK_STR_CONTAINS(ddpc_last_error(), "the plan needs 33.0 MiB per rank (largest: optimizer "
                                          "state 16.0 MiB) but memory.limit_gb is x; ");
    CHECK_STR_CONTAINS(ddpc_last_error(), "; zero.stage 1 would need 23.0 MiB per rank");
    CHECK_EQ_INT(ddpc_memplan_check(&in, 22u << 20, "L"), DDPC_ENOMEM);
    CHECK_STR_CONTAINS(ddpc_last_error(), "zero.stage 2 would need 21.0 MiB per rank");
    /* Checkpointing comes first when it is enough. */
    in.can_checkpoint = true;
    CHECK_EQ_INT(ddpc_memplan_check(&in, (32u << 20) + (1u << 19), "L"), DDPC_ENOMEM);
    CHECK_STR_CONTAINS(ddpc_last_error(),
                       "model.activation_checkpointing true would need 32.5 MiB");
    /* Past stage 3 at this world size: more ranks. */
    in.can_checkpoint = false;
    CHECK_EQ_INT(ddpc_memplan_check(&in, 14u << 20, "L"), DDPC_ENOMEM);
    CHECK_STR_CONTAINS(ddpc_last_error(), "zero.stage 3 on 8 ranks would need 14.0 MiB");
    /* Nothing fits: what is left is the gathered buckets and their staging. */
    CHECK_EQ_INT(ddpc_memplan_check(&in, 1u << 20, "L"), DDPC_ENOMEM);
    CHECK_STR_CONTAINS(ddpc_last_error(), "no zero.stage, activation checkpointing or number of "
                                          "ranks fits");
    CHECK_STR_CONTAINS(ddpc_last_error(), "lower the batch size per rank or ddp.bucket_cap_mb");
    /* ... or the activations of one micro-batch. */
    in.act_bytes[0] = 1u << 30;
    CHECK_EQ_INT(ddpc_memplan_check(&in, 1u << 30, "L"), DDPC_ENOMEM);
    CHECK_STR_CONTAINS(ddpc_last_error(), "mostly activations): lower the batch size per rank");
}

static void test_format_bytes(void)
{
    char b[32];
    CHECK(strcmp(ddpc_memplan_format_bytes(812, b, sizeof b), "812 B") == 0);
    CHECK(strcmp(ddpc_memplan_format_bytes(3482, b, sizeof b), "3.40 KiB") == 0);
    CHECK(strcmp(ddpc_memplan_format_bytes(3ull << 30, b, sizeof b), "3.00 GiB") == 0);
    CHECK(strcmp(ddpc_memplan_format_bytes(150ull << 20, b, sizeof b), "150 MiB") == 0);
}

/* The buckets the plan is fed are the reducer's: contiguous ranges, first bucket small. */
static void test_bucket_assignment(void)
{
    ddpc_model_config c = ddpc_model_config_default(); /* mlp 784-256-128-10 */
    ddpc_model *m = NULL;
    CHECK_EQ_INT(ddpc_model_create_shapes(&m, &c), DDPC_OK);
    size_t nt = ddpc_model_num_tensors(m), of[8], len[8];
    CHECK_EQ_INT(nt, 6);
    ddpc_reducer_config rc = ddpc_reducer_config_default();
    rc.first_bucket_mb = 0.01, rc.bucket_cap_mb = 25;
    size_t nb = ddpc_reducer_assign_buckets(m, &rc, of, len);
    /* Backward order: fc.2.bias, fc.2.weight, fc.1.bias fill the 0.01 MB first bucket; the rest
     * is one bucket. Only fc.2.bias's padding to 16 floats lies outside every bucket. */
    CHECK_EQ_INT(nb, 2);
    CHECK_EQ_INT(of[5], 0);
    CHECK_EQ_INT(of[3], 0);
    CHECK_EQ_INT(of[2], 1);
    CHECK_EQ_INT(len[0], 10 + 128 * 10 + 128);
    CHECK_EQ_INT(len[1], 128 * 256 + 256 + 256 * 784);
    CHECK_EQ_INT(len[0] + len[1] + 6, ddpc_model_num_params(m));
    ddpc_model_destroy(m);
}

int main(void)
{
    RUN_TEST(test_zero_paper_totals);
    RUN_TEST(test_ceil_shards_and_comm);
    RUN_TEST(test_activations_both_ways);
    RUN_TEST(test_dataparallel_replicas);
    RUN_TEST(test_bad_input);
    RUN_TEST(test_check_names_the_fix);
    RUN_TEST(test_format_bytes);
    RUN_TEST(test_bucket_assignment);
    return check_summary();
}
