// SPDX-License-Identifier: MIT
/* The seq2seq model under data parallelism, through the engine and the reducer on forked shm
 * ranks: 2 ranks x 2 sentence pairs train the same parameters as one process x 4 (relative
 * difference <= 1e-5 after 6 SGD steps with momentum) at ZeRO stages 0 (DDP all-reduce, tiny
 * buckets so many are in flight while backward goes on), 2 (gradients in pooled buckets: the
 * grad-use hook) and 3 (parameters gathered per bucket as forward and backward read them: the
 * param-use hook), with activation checkpointing at stage 3; every rank ends with the same bits.
 * Each rank's half of the batch holds the same number of target tokens, so the mean of the ranks'
 * per-token means is the whole batch's. */
#include "check.h"
#include "spawn.h"

#include <ddpc/alloc.h>
#include <ddpc/comm.h>
#include <ddpc/engine.h>
#include <ddpc/models.h>
#include <ddpc/nn.h>
#include <ddpc/reducer.h>
#include <ddpc/rng.h>

#include <string.h>

enum { STEPS = 6, N = 4, S = 7, T = 7, MAX_PARAMS = 65536 };

typedef struct {
    int zero_stage;
    bool ckpt;
    size_t n_params;
    float params[MAX_PARAMS]; /* the one-process reference */
} job;

static ddpc_model *make_model(bool ckpt)
{
    ddpc_model_config c = ddpc_model_config_default();
    ddpc_seq2seq_config own = ddpc_seq2seq_config_default();
    c.type_config = &own;
    strcpy(c.type, "seq2seq");
    own.d_model = 16, own.num_heads = 2, own.num_encoder_layers = 2, own.num_decoder_layers = 2;
    own.d_ff = 32, own.max_len = 8, own.src_vocab = 15, own.tgt_vocab = 13, c.dropout = 0.0f;
    c.activation_checkpointing = ckpt, c.seed = 3;
    ddpc_model *m = NULL;
    if (ddpc_model_create(&m, &c) != DDPC_OK)
        fprintf(stderr, "create: %s\n", ddpc_last_error());
    return m;
}

/* Step `step`'s batch: target lengths 6, 3 | 4, 5 (9 tokens per half), sources 7, 2 | 5, 4. */
static void make_batch(int step, int32_t *src, int32_t *tok, int32_t *tgt)
{
    static const int ls[N] = {7, 2, 5, 4}, lt[N] = {6, 3, 4, 5};
    ddpc_rng r = ddpc_rng_make(17, (uint64_t)step);
    memset(src, 0, sizeof(int32_t) * N * S);
    memset(tok, 0, sizeof(int32_t) * N * T);
    memset(tgt, 0, sizeof(int32_t) * N * T);
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < ls[i]; j++)
            src[i * S + j] = 4 + (int32_t)ddpc_rng_below(&r, 11);
        tok[i * T] = 1;
        for (int j = 0; j < lt[i] - 1; j++)
            tgt[i * T + j] = tok[i * T + j + 1] = 4 + (int32_t)ddpc_rng_below(&r, 9);
        tgt[i * T + lt[i] - 1] = 2;
    }
}

/* Trains STEPS steps; this rank takes rows [rank * b, (rank + 1) * b) of each batch. */
static int train(const job *j, ddpc_pg *pg, int rank, int world, ddpc_model *m)
{
    ddpc_reducer *red = NULL;
    if (pg) {
        ddpc_reducer_config rc = ddpc_reducer_config_default();
        rc.bucket_cap_mb = rc.first_bucket_mb = 0.004; /* ~1000 floats: many buckets */
        rc.zero_stage = j->zero_stage;
        if (ddpc_reducer_create(pg, m, &rc, &red) != DDPC_OK) {
            fprintf(stderr, "rank %d: %s\n", rank, ddpc_last_error());
            return 1;
        }
    }
    ddpc_engine_config ec = ddpc_engine_config_default();
    /* SGD: AdamW would turn the analytically zero gradients (attention's key bias: softmax ignores
     * a per-query constant) into lr-sized steps of opposite sign from summation-order noise. */
    ec.optim.type = DDPC_OPTIM_SGD, ec.optim.lr = 0.05f, ec.optim.momentum = 0.9f;
    ddpc_engine *e = NULL;
    int rc = ddpc_engine_create(m, red, rank, world, &ec, &e) != DDPC_OK;
    int32_t src[N * S], tok[N * T], tgt[N * T];
    int64_t b = N / world;
    for (int step = 0; step < STEPS && rc == 0; step++) {
        make_batch(step, src, tok, tgt);
        ddpc_model_input in = {.n = b,
                               .src_tokens = src + rank * b * S,
                               .tokens = tok + rank * b * T,
                               .targets = tgt + rank * b * T,
                               .src_len = S,
                               .tgt_len = T};
        ddpc_model_output out;
        ddpc_engine_step_info info;
        ddpc_engine_zero_grad(e);
        rc |= ddpc_engine_pass(e, &in, 0, 1.0f, true, &out) != DDPC_OK;
        rc |= out.n_valid != 9 * b / 2;
        rc |= ddpc_engine_update(e, &info) != DDPC_OK;
    }
    if (rc)
        fprintf(stderr, "rank %d: %s\n", rank, ddpc_last_error());
    rc |= ddpc_engine_gather_params(e) != DDPC_OK; /* stage 3: every parameter, for comparing */
    ddpc_engine_destroy(e);
    ddpc_reducer_destroy(red);
    return rc;
}

static int rank_main(int rank, int world, void *ctx)
{
    job *j = ctx;
    ddpc_comm_env env;
    ddpc_pg *pg = NULL;
    ddpc_pg_config pc = ddpc_pg_config_default();
    pc.timeout_s = 30;
    if (ddpc_comm_env_discover(&env) != DDPC_OK || ddpc_pg_create(&env, &pc, &pg) != DDPC_OK) {
        fprintf(stderr, "rank %d: %s\n", rank, ddpc_last_error());
        return 1;
    }
    ddpc_model *m = make_model(j->ckpt);
    ddpc_model_params(m)[3] += (float)rank; /* the reducer's broadcast must equalise replicas */
    int rc = !m || train(j, pg, rank, world, m);
    if (rc == 0) {
        size_t n = ddpc_model_num_params(m);
        const float *p = ddpc_model_params(m);
        uint64_t h = 0, all[2];
        for (size_t i = 0; i < n; i++)
            h = h * 31 + ((const uint32_t *)p)[i];
        rc |= ddpc_pg_all_gather(pg, &h, all, 1, DDPC_DTYPE_I64) != DDPC_OK;
        rc |= all[0] != all[1];
        double d = 0, r = 0;
        for (size_t i = 0; i < n; i++) {
            d += ((double)p[i] - j->params[i]) * ((double)p[i] - j->params[i]);
            r += (double)j->params[i] * j->params[i];
        }
        double rel = sqrt(d / r);
        if (rel > 1e-5 || all[0] != all[1]) {
            fprintf(stderr,
                    "rank %d (stage %d): relative difference to one process %g, ranks "
                    "%s\n",
                    rank, j->zero_stage, rel, all[0] == all[1] ? "agree" : "differ");
            rc = 1;
        }
    }
    ddpc_model_destroy(m);
    ddpc_pg_destroy(pg);
    return rc;
}

static void check_stage(int stage, bool ckpt)
{
    static job j;
    memset(&j, 0, sizeof j);
    j.zero_stage = stage, j.ckpt = ckpt;
    ddpc_model *m = make_model(false);
    if (!m)
        return;
    j.n_params = ddpc_model_num_params(m);
    CHECK(j.n_params <= MAX_PARAMS);
    CHECK_EQ_INT(train(&j, NULL, 0, 1, m), 0);
    memcpy(j.params, ddpc_model_params(m), j.n_params * sizeof(float));
    ddpc_model_destroy(m);
    CHECK_EQ_INT(spawn_ranks(2, 60.0, rank_main, &j), 0);
}

static void test_ddp_matches_one_process(void)
{
    check_stage(0, false);
}
static void test_zero2_matches_one_process(void)
{
    check_stage(2, false);
}
static void test_zero3_with_checkpointing_matches_one_process(void)
{
    check_stage(3, true);
}

int main(void)
{
    RUN_TEST(test_ddp_matches_one_process);
    RUN_TEST(test_zero2_matches_one_process);
    RUN_TEST(test_zero3_with_checkpointing_matches_one_process);
    return check_summary();
}
