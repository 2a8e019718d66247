// SPDX-License-Identifier: MIT
/* seq2seq decoding: the searches on a hand-made next-token table (beam search finds the sequence of
 * higher length-normalised log-probability that greedy misses; beam 1 is greedy); on a random
 * model, ddpc_model_translate (incremental, with a key/value cache that follows beam search's
 * reordering) equals the same searches driven by full teacher-forced forwards (ddpc_model_forward
 * on each whole prefix), for beam 1 and beam 3; a small model trained on a copy task
 * translates held-out sequences back; <pad> and <bos> are never generated, even when likeliest; bad
 * arguments and non-seq2seq models are refused. */
#include <ddpc/alloc.h>
#include <ddpc/kernels.h>
#include <ddpc/models.h>
#include <ddpc/nn.h>
#include <ddpc/optim.h>
#include <ddpc/rng.h>

#include "check.h"
#include "nn/seq2seq_impl.h"

enum { PAD = 0, BOS = 1, EOS = 2, A = 3, Bt = 4 };

/* p(next | last token): after <bos> A .5, B .4, <eos> .1; after A: A .3, B .3, <eos> .4; after B:
 * <eos> .95, A .03, B .02. Greedy takes A then stops: p = .2 over 2 tokens; "B <eos>" has .38. */
static ddpc_status table_step(void *ctx, const int32_t *prefix, const int64_t *parent, int64_t rows,
                              int64_t t, float *logp)
{
    (void)ctx, (void)parent;
    static const float p[3][5] = {{1e-9f, 1e-9f, .1f, .5f, .4f},
                                  {1e-9f, 1e-9f, .4f, .3f, .3f},
                                  {1e-9f, 1e-9f, .95f, .03f, .02f}};
    for (int64_t r = 0; r < rows; r++) {
        int32_t last = prefix[r * t + t - 1];
        int row = last == A ? 1 : last == Bt ? 2 : 0;
        for (int v = 0; v < 5; v++)
            logp[r * 5 + v] = logf(p[row][v]);
    }
    return DDPC_OK;
}

static void test_beam_beats_greedy_on_a_table(void)
{
    int32_t greedy[2 * 4], beam1[2 * 4], beam2[2 * 4], beam4[2 * 4];
    CHECK_EQ_INT(ddpc__s2s_greedy(table_step, NULL, 2, 5, 4, greedy), DDPC_OK);
    CHECK_EQ_INT(ddpc__s2s_beam(table_step, NULL, 2, 1, 5, 4, beam1), DDPC_OK);
    CHECK_EQ_INT(ddpc__s2s_beam(table_step, NULL, 2, 2, 5, 4, beam2), DDPC_OK);
    CHECK_EQ_INT(ddpc__s2s_beam(table_step, NULL, 2, 4, 5, 4, beam4), DDPC_OK);
    static const int32_t want_greedy[4] = {A, 0, 0, 0}, want_beam[4] = {Bt, 0, 0, 0};
    for (int i = 0; i < 2; i++) {
        CHECK(memcmp(greedy + 4 * i, want_greedy, sizeof want_greedy) == 0);
        CHECK(memcmp(beam1 + 4 * i, want_greedy, sizeof want_greedy) == 0);
        CHECK(memcmp(beam2 + 4 * i, want_beam, sizeof want_beam) == 0);
        CHECK(memcmp(beam4 + 4 * i, want_beam, sizeof want_beam) == 0);
    }
    /* Length-normalised log-probabilities (eos counted): beam's log(.38)/2 > greedy's log(.2)/2. */
    CHECK(logf(.4f * .95f) / 2 > logf(.5f * .4f) / 2);
}

/* A table that never emits <eos>: both searches stop at max_out with full rows. */
static ddpc_status no_eos_step(void *ctx, const int32_t *prefix, const int64_t *parent,
                               int64_t rows, int64_t t, float *logp)
{
    (void)ctx, (void)prefix, (void)parent, (void)t;
    for (int64_t r = 0; r < rows; r++)
        for (int v = 0; v < 5; v++)
            logp[r * 5 + v] = v == EOS ? -INFINITY : v == Bt ? logf(.6f) : logf(.1f);
    return DDPC_OK;
}

static void test_max_out_without_eos(void)
{
    int32_t g[3], b[3];
    CHECK_EQ_INT(ddpc__s2s_greedy(no_eos_step, NULL, 1, 5, 3, g), DDPC_OK);
    CHECK_EQ_INT(ddpc__s2s_beam(no_eos_step, NULL, 1, 3, 5, 3, b), DDPC_OK);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_INT(g[i], Bt);
        CHECK_EQ_INT(b[i], Bt);
    }
}

/* A table where <pad> and <bos> are the likeliest next tokens (.45 each), then A (.06), <eos> (.03)
 * and B (.01): docs/seq2seq.md promises <pad> and <bos> are never generated. Greedy and beam 4
 * write A up to max_out (log .06 per token beats (log .06 + log .03) / 2); beam 2 has finished
 * "<eos>" and "A <eos>" after two steps, so it stops (fairseq's rule) with the better, "A". */
static ddpc_status pad_bos_step(void *ctx, const int32_t *prefix, const int64_t *parent,
                                int64_t rows, int64_t t, float *logp)
{
    (void)ctx, (void)prefix, (void)parent, (void)t;
    static const float p[5] = {.45f, .45f, .03f, .06f, .01f};
    for (int64_t r = 0; r < rows; r++)
        for (int v = 0; v < 5; v++)
            logp[r * 5 + v] = logf(p[v]);
    return DDPC_OK;
}

static void test_never_emits_pad_or_bos(void)
{
    int32_t g[2 * 3], b2[2 * 3], b4[2 * 3];
    CHECK_EQ_INT(ddpc__s2s_greedy(pad_bos_step, NULL, 2, 5, 3, g), DDPC_OK);
    CHECK_EQ_INT(ddpc__s2s_beam(pad_bos_step, NULL, 2, 2, 5, 3, b2), DDPC_OK);
    CHECK_EQ_INT(ddpc__s2s_beam(pad_bos_step, NULL, 2, 4, 5, 3, b4), DDPC_OK);
    for (int i = 0; i < 2 * 3; i++) {
        CHECK_EQ_INT(g[i], A);
        CHECK_EQ_INT(b2[i], i % 3 == 0 ? A : 0);
        CHECK_EQ_INT(b4[i], A);
    }
}

static ddpc_model *small_model(int64_t c, int64_t layers, int64_t vocab, int64_t max_len,
                               uint64_t seed)
{
    ddpc_model_config cfg = ddpc_model_config_default();
    ddpc_seq2seq_config own = ddpc_seq2seq_config_default();
    cfg.type_config = &own;
    strcpy(cfg.type, "seq2seq");
    own.d_model = c, own.num_heads = 4, own.num_encoder_layers = layers;
    own.num_decoder_layers = layers, own.d_ff = 2 * c, own.max_len = max_len;
    own.src_vocab = own.tgt_vocab = vocab, cfg.dropout = 0.0f, cfg.seed = seed;
    ddpc_model *m = NULL;
    if (ddpc_model_create(&m, &cfg) != DDPC_OK)
        fprintf(stderr, "create failed: %s\n", ddpc_last_error());
    return m;
}

/* The search's step through the public forward: the whole prefix, teacher-forced, every time. */
typedef struct {
    ddpc_model *m;
    const int32_t *src; /* (n, S) */
    int64_t S, k;
    int32_t *rep; /* (n k, S) */
} fwd_ctx;

static ddpc_status forward_step(void *p, const int32_t *prefix, const int64_t *parent, int64_t rows,
                                int64_t t, float *logp)
{
    (void)parent; /* recomputes from the whole prefix */
    fwd_ctx *c = p;
    int64_t V = ddpc_seq2seq_config_of(c->m)->tgt_vocab;
    for (int64_t r = 0; r < rows; r++)
        memcpy(c->rep + r * c->S, c->src + (r / c->k) * c->S, (size_t)c->S * sizeof(int32_t));
    ddpc_model_input in = {
        .n = rows, .src_tokens = c->rep, .tokens = prefix, .src_len = c->S, .tgt_len = t};
    DDPC_TRY(ddpc_model_forward(c->m, &in, false, NULL));
    const float *probs = ddpc_model_probs(c->m);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t v = 0; v < V; v++)
            logp[r * V + v] = logf(probs[(r * t + t - 1) * V + v]);
    return DDPC_OK;
}

static void test_translate_equals_forward_driven_search(void)
{
    enum { N = 4, S = 6, MAXO = 7, K = 3 };
    ddpc_model *m = small_model(16, 2, 13, 8, 5);
    if (!m)
        return;
    /* Larger weights than the init, so the distributions are far from flat (no near-ties). */
    ddpc_rng r = ddpc_rng_make(4, 4);
    float *prm = ddpc_model_params(m);
    for (size_t i = 0; i < ddpc_model_num_params(m); i++)
        prm[i] += 0.2f * ddpc_rng_normal(&r);
    int32_t src[N * S] = {0};
    for (int i = 0; i < N; i++)
        for (int j = 0; j < S - i; j++) /* lengths 6, 5, 4, 3 */
            src[i * S + j] = 4 + (int32_t)ddpc_rng_below(&r, 9);
    int32_t *rep = ddpc_malloc(N * K * S * sizeof(int32_t));
    int32_t t1[N * MAXO], f1[N * MAXO], b1[N * MAXO], tk[N * MAXO], fk[N * MAXO];
    CHECK_EQ_INT(ddpc_model_translate(m, src, N, S, 1, MAXO, t1), DDPC_OK);
    CHECK_EQ_INT(ddpc_model_translate(m, src, N, S, K, MAXO, tk), DDPC_OK);
    fwd_ctx c1 = {m, src, S, 1, rep}, ck = {m, src, S, K, rep};
    CHECK_EQ_INT(ddpc__s2s_greedy(forward_step, &c1, N, 13, MAXO, f1), DDPC_OK);
    CHECK_EQ_INT(ddpc__s2s_beam(forward_step, &c1, N, 1, 13, MAXO, b1), DDPC_OK);
    CHECK_EQ_INT(ddpc__s2s_beam(forward_step, &ck, N, K, 13, MAXO, fk), DDPC_OK);
    CHECK(memcmp(t1, f1, sizeof t1) == 0);
    CHECK(memcmp(t1, b1, sizeof t1) == 0);
    CHECK(memcmp(tk, fk, sizeof tk) == 0);
    int nonzero = 0; /* a real output, not all <eos> at once */
    for (int i = 0; i < N * MAXO; i++) {
        nonzero += t1[i] != 0;
        CHECK(t1[i] != BOS && t1[i] != EOS && tk[i] != BOS && tk[i] != EOS);
    }
    CHECK(nonzero > 0);
    /* After translate, backward has no forward to use. */
    CHECK_EQ_INT(ddpc_model_backward(m, 1.0f), DDPC_EINVAL);
    ddpc_free(rep);
    ddpc_model_destroy(m);
}

/* A copy task: the target is the source. 300 AdamW steps of a 2-layer model, then greedy and
 * beam-4 decoding reproduce held-out sources. */
static void copy_batch(ddpc_rng *r, int32_t *src, int32_t *tok, int32_t *tgt, int n, int S, int T)
{
    memset(src, 0, (size_t)(n * S) * sizeof(int32_t));
    memset(tok, 0, (size_t)(n * T) * sizeof(int32_t));
    memset(tgt, 0, (size_t)(n * T) * sizeof(int32_t));
    for (int i = 0; i < n; i++) {
        int len = 2 + (int)ddpc_rng_below(r, (uint64_t)(S - 1)); /* 2..S */
        tok[i * T] = BOS;
        for (int j = 0; j < len; j++) {
            int32_t y = 4 + (int32_t)ddpc_rng_below(r, 6);
            src[i * S + j] = y;
            tgt[i * T + j] = y;
            tok[i * T + j + 1] = y;
        }
        tgt[i * T + len] = EOS;
    }
}

static void test_learns_to_copy(void)
{
    enum { N = 32, S = 5, T = S + 1, STEPS = 300, HELD = 16 };
    ddpc_model *m = small_model(32, 1, 10, 8, 3);
    if (!m)
        return;
    ddpc_optim_config oc = ddpc_optim_config_default();
    oc.type = DDPC_OPTIM_ADAMW, oc.lr = 3e-3f;
    ddpc_optim *opt = NULL;
    CHECK_EQ_INT(ddpc_optim_create(&opt, &oc, ddpc_model_num_params(m)), DDPC_OK);
    int32_t src[N * S], tok[N * T], tgt[N * T];
    ddpc_rng r = ddpc_rng_make(77, 0);
    ddpc_model_output out = {0};
    for (int step = 0; step < STEPS; step++) {
        copy_batch(&r, src, tok, tgt, N, S, T);
        ddpc_model_input in = {
            .n = N, .src_tokens = src, .tokens = tok, .targets = tgt, .src_len = S, .tgt_len = T};
        ddpc_model_zero_grad(m);
        CHECK_EQ_INT(ddpc_model_forward(m, &in, true, &out), DDPC_OK);
        CHECK_EQ_INT(ddpc_model_backward(m, 1.0f), DDPC_OK);
        ddpc_optim_step(opt, ddpc_model_params(m), ddpc_model_grads(m), ddpc_model_decay_mask(m),
                        oc.lr);
    }
    fprintf(stderr, "  copy task: loss %.3f, accuracy %.3f after %d steps\n", out.loss,
            (double)out.n_correct / (double)out.n_valid, STEPS);
    ddpc_rng held = ddpc_rng_make(78, 0);
    copy_batch(&held, src, tok, tgt, HELD, S, T);
    int32_t greedy[HELD * T], beam[HELD * T];
    CHECK_EQ_INT(ddpc_model_translate(m, src, HELD, S, 1, T, greedy), DDPC_OK);
    CHECK_EQ_INT(ddpc_model_translate(m, src, HELD, S, 4, T, beam), DDPC_OK);
    int exact_g = 0, exact_b = 0;
    for (int i = 0; i < HELD; i++) {
        int ok_g = 1, ok_b = 1;
        for (int j = 0; j < T; j++) {
            int32_t want = j < S ? src[i * S + j] : 0;
            ok_g &= greedy[i * T + j] == want;
            ok_b &= beam[i * T + j] == want;
        }
        exact_g += ok_g, exact_b += ok_b;
    }
    fprintf(stderr, "  copy task: %d/%d greedy, %d/%d beam-4 exact\n", exact_g, HELD, exact_b,
            HELD);
    CHECK(exact_g >= HELD * 3 / 4);
    CHECK(exact_b >= HELD * 3 / 4);
    ddpc_optim_destroy(opt);
    ddpc_model_destroy(m);
}

static void test_rejects_bad_arguments(void)
{
    ddpc_model *m = small_model(8, 1, 10, 6, 1);
    if (!m)
        return;
    int32_t src[6] = {4, 5, 0, 0, 0, 0}, out[12];
    CHECK_EQ_INT(ddpc_model_translate(m, src, 1, 6, 0, 6, out), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "beam");
    CHECK_EQ_INT(ddpc_model_translate(m, src, 1, 6, 2, 7, out), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "max_out 7");
    src[1] = 10;
    CHECK_EQ_INT(ddpc_model_translate(m, src, 1, 6, 2, 6, out), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "outside the vocabulary");
    ddpc_model_destroy(m);
    ddpc_model_config c = ddpc_model_config_default(); /* an mlp */
    CHECK_EQ_INT(ddpc_model_create(&m, &c), DDPC_OK);
    CHECK_EQ_INT(ddpc_model_translate(m, src, 1, 6, 1, 6, out), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "seq2seq");
    ddpc_model_destroy(m);
}

int main(void)
{
    ddpc_kernels_set_threads(1);
    RUN_TEST(test_beam_beats_greedy_on_a_table);
    RUN_TEST(test_max_out_without_eos);
    RUN_TEST(test_never_emits_pad_or_bos);
    RUN_TEST(test_translate_equals_forward_driven_search);
    RUN_TEST(test_learns_to_copy);
    RUN_TEST(test_rejects_bad_arguments);
    return check_summary();
}
