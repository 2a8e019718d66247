// SPDX-License-Identifier: MIT
/* Greedy and beam search over a next-token step function (the model's decoder, or a table in the
 * tests). Neither generates <pad> or <bos>. Beam search follows fairseq's rule: per source, the
 * 2k best (hypothesis, token) extensions by summed log-probability are ranked; an <eos> among the
 * first k finishes its hypothesis, and the first k others continue. A source stops when k
 * hypotheses have finished; at max_out the live ones finish without <eos>. The answer is the
 * finished hypothesis of highest log-probability / length, the length counting its <eos>; with
 * k = 1 this is exactly greedy search. Ties go to the lower (hypothesis, token) index. */
#include "nn/seq2seq_impl.h"

#include <ddpc/alloc.h>

#include <math.h>
#include <string.h>

enum { PAD = 0, BOS = 1, EOS = 2 };

/* The step for the prefixes hyp (rows, max_out + 1) cut to their first t tokens, into logp with
 * <pad> and <bos> made impossible. */
static ddpc_status run_step(ddpc__s2s_step_fn step, void *ctx, const int32_t *hyp,
                            const int64_t *parent, int32_t *cur, int64_t rows, int64_t t,
                            int64_t stride, int64_t vocab, float *logp)
{
    for (int64_t r = 0; r < rows; r++)
        memcpy(cur + r * t, hyp + r * stride, (size_t)t * sizeof(int32_t));
    DDPC_TRY(step(ctx, cur, parent, rows, t, logp));
    for (int64_t r = 0; r < rows; r++)
        logp[r * vocab + PAD] = logp[r * vocab + BOS] = -INFINITY;
    return DDPC_OK;
}

ddpc_status ddpc__s2s_greedy(ddpc__s2s_step_fn step, void *ctx, int64_t n, int64_t vocab,
                             int64_t max_out, int32_t *out)
{
    int64_t stride = max_out + 1;
    int32_t *hyp = ddpc_calloc((size_t)(n * stride), sizeof(int32_t));
    int32_t *cur = ddpc_malloc((size_t)(n * max_out) * sizeof(int32_t));
    float *logp = ddpc_malloc((size_t)(n * vocab) * sizeof(float));
    uint8_t *done = ddpc_calloc((size_t)n, 1);
    ddpc_status s = DDPC_OK;
    if (!hyp || !cur || !logp || !done)
        s = ddpc_errorf(DDPC_ENOMEM, "out of memory for greedy decoding of %lld sequences",
                        (long long)n);
    memset(out, 0, (size_t)(n * max_out) * sizeof(int32_t));
    for (int64_t r = 0; s == DDPC_OK && r < n; r++)
        hyp[r * stride] = BOS;
    int64_t left = n;
    for (int64_t t = 1; s == DDPC_OK && t <= max_out && left > 0; t++) {
        s = run_step(step, ctx, hyp, NULL, cur, n, t, stride, vocab, logp);
        for (int64_t r = 0; s == DDPC_OK && r < n; r++) {
            if (done[r])
                continue; /* a finished row is fed <pad>s, which its later steps ignore */
            const float *lp = logp + r * vocab;
            int64_t best = 0;
            for (int64_t v = 1; v < vocab; v++)
                best = lp[v] > lp[best] ? v : best;
            if (best == EOS) {
                done[r] = 1, left--;
                continue;
            }
            out[r * max_out + t - 1] = (int32_t)best;
            hyp[r * stride + t] = (int32_t)best;
        }
    }
    ddpc_free(hyp);
    ddpc_free(cur);
    ddpc_free(logp);
    ddpc_free(done);
    return s;
}

typedef struct {
    double score;
    int64_t hyp, tok;
} cand;

/* Inserts c into the sorted (descending) list top (len <= cap); earlier entries win ties. */
static void insert_top(cand *top, int *len, int cap, cand c)
{
    if (*len == cap && !(c.score > top[cap - 1].score))
        return;
    int i = *len < cap ? (*len)++ : cap - 1;
    while (i > 0 && c.score > top[i - 1].score) {
        top[i] = top[i - 1];
        i--;
    }
    top[i] = c;
}

typedef struct {
    int64_t n, k, vocab, max_out, stride;
    int32_t *hyp, *next, *cur, *out; /* (n k, stride) x2, (n k, max_out), (n, max_out) */
    double *score, *next_score;      /* (n k) summed log-probabilities, -inf: empty slot */
    double *best;                    /* (n) best finished length-normalised score */
    int64_t *parent;                 /* (n k) the row each next row extends */
    int64_t *finished;               /* (n) hypotheses finished */
    float *logp;                     /* (n k, vocab) */
    cand *top;                       /* (2k) */
} beam_state;

/* Finishes hypothesis `from` extended to t generated tokens (its last an <eos> when eos). */
static void finish(beam_state *b, int64_t i, const cand *c, int64_t t, bool eos)
{
    b->finished[i]++;
    double norm = c->score / (double)t;
    if (!(norm > b->best[i]))
        return;
    b->best[i] = norm;
    int32_t *o = b->out + i * b->max_out;
    memset(o, 0, (size_t)b->max_out * sizeof(int32_t));
    memcpy(o, b->hyp + c->hyp * b->stride + 1, (size_t)(t - 1) * sizeof(int32_t));
    if (!eos)
        o[t - 1] = (int32_t)c->tok;
}

/* Step t for source i: ranks its extensions and fills its rows of next/next_score. */
static void advance(beam_state *b, int64_t i, int64_t t)
{
    int64_t k = b->k, V = b->vocab;
    int len = 0;
    for (int64_t j = i * k; j < (i + 1) * k; j++) {
        if (b->score[j] == -INFINITY)
            continue;
        for (int64_t v = 0; v < V; v++) {
            float lp = b->logp[j * V + v];
            if (lp != -INFINITY)
                insert_top(b->top, &len, (int)(2 * k), (cand){b->score[j] + lp, j, v});
        }
    }
    int64_t live = 0;
    for (int r = 0; r < len && live < k; r++) {
        const cand *c = &b->top[r];
        if (c->tok == EOS) {
            if (r < k)
                finish(b, i, c, t, true);
            continue;
        }
        if (t == b->max_out) { /* out of room: finishes without <eos> */
            finish(b, i, c, t, false);
            live++;
            continue;
        }
        int64_t row = i * k + live++;
        memcpy(b->next + row * b->stride, b->hyp + c->hyp * b->stride, (size_t)t * sizeof(int32_t));
        b->next[row * b->stride + t] = (int32_t)c->tok;
        b->next_score[row] = c->score;
        b->parent[row] = c->hyp;
    }
    for (; live < k; live++) {
        b->next_score[i * k + live] = -INFINITY;
        b->parent[i * k + live] = i * k + live;
    }
}

ddpc_status ddpc__s2s_beam(ddpc__s2s_step_fn step, void *ctx, int64_t n, int k, int64_t vocab,
                           int64_t max_out, int32_t *out)
{
    int64_t rows = n * k, stride = max_out + 1;
    beam_state b = {
        .n = n, .k = k, .vocab = vocab, .max_out = max_out, .stride = stride, .out = out};
    b.hyp = ddpc_calloc((size_t)(rows * stride), sizeof(int32_t));
    b.next = ddpc_calloc((size_t)(rows * stride), sizeof(int32_t));
    b.cur = ddpc_malloc((size_t)(rows * max_out) * sizeof(int32_t));
    b.score = ddpc_malloc((size_t)rows * sizeof(double));
    b.next_score = ddpc_malloc((size_t)rows * sizeof(double));
    b.best = ddpc_malloc((size_t)n * sizeof(double));
    b.parent = ddpc_malloc((size_t)rows * sizeof(int64_t));
    b.finished = ddpc_calloc((size_t)n, sizeof(int64_t));
    b.logp = ddpc_malloc((size_t)(rows * vocab) * sizeof(float));
    b.top = ddpc_malloc((size_t)(2 * k) * sizeof(cand));
    ddpc_status s = DDPC_OK;
    if (!b.hyp || !b.next || !b.cur || !b.score || !b.next_score || !b.best || !b.parent ||
        !b.finished || !b.logp || !b.top)
        s = ddpc_errorf(DDPC_ENOMEM, "out of memory for beam search (%lld sequences, beam %d)",
                        (long long)n, k);
    memset(out, 0, (size_t)(n * max_out) * sizeof(int32_t));
    for (int64_t r = 0; s == DDPC_OK && r < rows; r++) {
        b.hyp[r * stride] = b.next[r * stride] = BOS;
        b.score[r] = r % k == 0 ? 0.0 : -INFINITY; /* one live hypothesis to start from */
        b.parent[r] = r;
    }
    for (int64_t i = 0; s == DDPC_OK && i < n; i++)
        b.best[i] = -INFINITY;
    for (int64_t t = 1; s == DDPC_OK && t <= max_out; t++) {
        s = run_step(step, ctx, b.hyp, t > 1 ? b.parent : NULL, b.cur, rows, t, stride, vocab,
                     b.logp);
        int64_t active = 0;
        for (int64_t i = 0; s == DDPC_OK && i < n; i++) {
            if (b.finished[i] >= k) {
                for (int64_t r = i * k; r < (i + 1) * k; r++)
                    b.next_score[r] = -INFINITY, b.parent[r] = r;
                continue;
            }
            advance(&b, i, t);
            active += b.finished[i] < k;
        }
        int32_t *h = b.hyp;
        b.hyp = b.next, b.next = h;
        double *sc = b.score;
        b.score = b.next_score, b.next_score = sc;
        if (active == 0)
            break;
    }
    ddpc_free(b.hyp);
    ddpc_free(b.next);
    ddpc_free(b.cur);
    ddpc_free(b.score);
    ddpc_free(b.next_score);
    ddpc_free(b.best);
    ddpc_free(b.parent);
    ddpc_free(b.finished);
    ddpc_free(b.logp);
    ddpc_free(b.top);
    return s;
}
