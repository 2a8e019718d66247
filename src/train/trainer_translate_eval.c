// SPDX-License-Identifier: MIT
/* Translation quality at evaluation: each evaluated row is decoded by the model (greedy or beam)
 * and scored against its reference (the target ids of the batch, up to <eos>) with corpus BLEU-4
 * and exact match, next to two trivial baselines on the same rows: copying the source (its text
 * re-encoded with the target vocabulary) and the most frequent translation (the target seen most
 * often with the same source in the train split, else the most frequent train target; ties go to
 * the earliest train pair). A hypothesis <unk> is scored as matching nothing. */
#include "train/trainer_impl.h"
#include "train/trainer_translation.h"

#include <ddpc/alloc.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* FNV-1a over the ids. */
static uint64_t hash_ids(const int32_t *ids, int64_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (int64_t i = 0; i < n; i++)
        for (int k = 0; k < 4; k++)
            h = (h ^ (((uint32_t)ids[i] >> (8 * k)) & 0xffu)) * 1099511628211ull;
    return h;
}

typedef struct {
    uint64_t src, tgt;
    int64_t i;
} pair_key;

static int by_src_tgt(const void *pa, const void *pb)
{
    const pair_key *a = pa, *b = pb;
    if (a->src != b->src)
        return a->src < b->src ? -1 : 1;
    if (a->tgt != b->tgt)
        return a->tgt < b->tgt ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i);
}

static int by_tgt(const void *pa, const void *pb)
{
    const pair_key *a = pa, *b = pb;
    if (a->tgt != b->tgt)
        return a->tgt < b->tgt ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i);
}

/* The most frequent target run among keys[a, e) (sorted by target, then index): its first
 * sample; ties go to the run whose first sample is earliest. */
static int64_t most_frequent(const pair_key *k, int64_t a, int64_t e)
{
    int64_t best = -1, best_n = 0;
    for (int64_t r = a; r < e;) {
        int64_t s = r;
        while (r < e && k[r].tgt == k[s].tgt)
            r++;
        if (r - s > best_n || (r - s == best_n && k[s].i < best)) {
            best = k[s].i;
            best_n = r - s;
        }
    }
    return best;
}

/* Builds the most-frequent-translation table over the train split. */
static ddpc_status build_mf(ddpc_trainer *t)
{
    ddpc__translation *tr = t->tr;
    const ddpc_dataset *train = t->data.task[0].train;
    int64_t n = ddpc_dataset_size(train);
    pair_key *k = ddpc_malloc((size_t)n * sizeof *k);
    tr->mf_src = ddpc_malloc((size_t)n * sizeof *tr->mf_src);
    tr->mf_pick = ddpc_malloc((size_t)n * sizeof *tr->mf_pick);
    if (!k || !tr->mf_src || !tr->mf_pick) {
        ddpc_free(k);
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for the most-frequent baseline");
    }
    for (int64_t i = 0; i < n; i++) {
        const int32_t *s, *y;
        int64_t ls, ly;
        ddpc_status st = ddpc_dataset_pair(train, i, &s, &ls, &y, &ly);
        if (st != DDPC_OK) {
            ddpc_free(k);
            return st;
        }
        k[i] = (pair_key){hash_ids(s, ls), hash_ids(y, ly), i};
    }
    qsort(k, (size_t)n, sizeof *k, by_src_tgt);
    tr->n_mf = 0;
    for (int64_t r = 0; r < n;) {
        int64_t s = r;
        while (r < n && k[r].src == k[s].src)
            r++;
        tr->mf_src[tr->n_mf] = k[s].src;
        tr->mf_pick[tr->n_mf++] = most_frequent(k, s, r);
    }
    qsort(k, (size_t)n, sizeof *k, by_tgt);
    tr->mf_overall = most_frequent(k, 0, n);
    ddpc_free(k);
    return DDPC_OK;
}

/* The train sample whose target is the most frequent translation of source s (ls). */
static int64_t mf_lookup(const ddpc__translation *tr, const int32_t *s, int64_t ls)
{
    uint64_t h = hash_ids(s, ls);
    int64_t lo = 0, hi = tr->n_mf;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (tr->mf_src[mid] < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < tr->n_mf && tr->mf_src[lo] == h ? tr->mf_pick[lo] : tr->mf_overall;
}

/* Adds one hypothesis (ids, <unk> and anything < 0 matching nothing) against ref to sys. */
static void score(double *sys, const int32_t *hyp, int64_t lh, const int32_t *ref, int64_t lr,
                  int32_t *scratch)
{
    for (int64_t i = 0; i < lh; i++)
        scratch[i] = hyp[i] == DDPC_TOK_UNK ? -1 : hyp[i];
    ddpc_bleu_stats s = {0};
    ddpc_bleu_add(&s, scratch, lh, ref, lr);
    for (int n = 0; n < DDPC_BLEU_ORDER; n++) {
        sys[n] += s.match[n];
        sys[DDPC_BLEU_ORDER + n] += s.total[n];
    }
    sys[2 * DDPC_BLEU_ORDER] += s.hyp_len;
    sys[2 * DDPC_BLEU_ORDER + 1] += s.ref_len;
    bool exact = lh == lr;
    for (int64_t i = 0; exact && i < lh; i++)
        exact = scratch[i] == ref[i];
    sys[2 * DDPC_BLEU_ORDER + 2] += exact;
}

/* Length of ids (cap) up to the first <pad> or <eos>. */
static int64_t seq_len(const int32_t *ids, int64_t cap)
{
    int64_t n = 0;
    while (n < cap && ids[n] != DDPC_TOK_PAD && ids[n] != DDPC_TOK_EOS)
        n++;
    return n;
}

/* out: rows x (max_len - 1) decoded ids, then 2 x max_len scratch ids and the text buffer. */
static ddpc_status ensure_out(ddpc__translation *tr, int64_t rows)
{
    if (tr->out_rows >= rows)
        return DDPC_OK;
    ddpc_free(tr->out);
    tr->out = ddpc_malloc((size_t)((rows + 2) * tr->max_len) * sizeof *tr->out);
    if (!tr->out)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for %lld decoded translations",
                           (long long)rows);
    tr->out_rows = rows;
    return DDPC_OK;
}

/* The copy baseline's hypothesis for source ids s (ls, ending in <eos>) into hyp (cap). */
static int64_t copy_hyp(const ddpc__translation *tr, const int32_t *s, int64_t ls, int32_t *hyp,
                        int64_t cap)
{
    char stack[4096], *text = stack;
    size_t need = ddpc_vocab_decode(tr->src_vocab, s, ls, stack, sizeof stack);
    if (need >= sizeof stack) {
        text = ddpc_malloc(need + 1);
        if (!text)
            return 0; /* no hypothesis: scored as empty */
        ddpc_vocab_decode(tr->src_vocab, s, ls, text, need + 1);
    }
    int64_t n;
    ddpc_vocab_encode(tr->tgt_vocab, text, hyp, cap, &n);
    if (text != stack)
        ddpc_free(text);
    return n < cap ? n : cap;
}

ddpc_status ddpc__translation_eval_batch(ddpc_trainer *t, const ddpc_dataset *d,
                                         const ddpc_batch *b, double *sums)
{
    ddpc__translation *tr = t->tr;
    int64_t max_out = tr->max_len - 1, T = b->tgt_len;
    if (!tr->mf_src)
        DDPC_TRY(build_mf(t));
    DDPC_TRY(ensure_out(tr, b->n));
    int32_t *hyp = tr->out + tr->out_rows * tr->max_len, *scratch = hyp + tr->max_len;
    DDPC_TRY(ddpc_model_translate(t->model, b->src_tokens, b->n, b->src_len, tr->eval_beam, max_out,
                                  tr->out));
    for (int64_t r = 0; r < b->n; r++) {
        const int32_t *ref = b->targets + r * T, *s, *y;
        int64_t lr = seq_len(ref, T), ls, ly;
        const int32_t *out = tr->out + r * max_out;
        score(sums, out, seq_len(out, max_out), ref, lr, scratch);
        DDPC_TRY(ddpc_dataset_pair(d, b->idx[r], &s, &ls, &y, &ly));
        int64_t lc = copy_hyp(tr, s, ls, hyp, tr->max_len);
        score(sums + DDPC__TR_FIELDS, hyp, lc, ref, lr, scratch);
        DDPC_TRY(ddpc_dataset_pair(t->data.task[0].train, mf_lookup(tr, s, ls), &s, &ls, &y, &ly));
        score(sums + 2 * DDPC__TR_FIELDS, y, ly < tr->max_len ? ly : tr->max_len, ref, lr, scratch);
    }
    return DDPC_OK;
}

/* BLEU of one system's sums. */
static double bleu_of(const double *sys)
{
    ddpc_bleu_stats s = {0};
    for (int n = 0; n < DDPC_BLEU_ORDER; n++) {
        s.match[n] = sys[n];
        s.total[n] = sys[DDPC_BLEU_ORDER + n];
    }
    s.hyp_len = sys[2 * DDPC_BLEU_ORDER];
    s.ref_len = sys[2 * DDPC_BLEU_ORDER + 1];
    return ddpc_bleu_score(&s);
}

void ddpc__translation_eval_record(ddpc_trainer *t, const double *sums, double rows, char *text,
                                   size_t cap)
{
    static const char *const names[3][2] = {{"bleu", "exact_match"},
                                            {"bleu_copy", "exact_match_copy"},
                                            {"bleu_most_frequent", "exact_match_most_frequent"}};
    double bleu[3], exact[3];
    for (int k = 0; k < 3; k++) {
        const double *sys = sums + k * DDPC__TR_FIELDS;
        bleu[k] = bleu_of(sys);
        exact[k] = rows > 0 ? sys[2 * DDPC_BLEU_ORDER + 2] / rows : 0.0;
        ddpc_metrics_f64(t->metrics, names[k][0], bleu[k], 4);
        ddpc_metrics_f64(t->metrics, names[k][1], exact[k], 6);
    }
    snprintf(text, cap,
             " | bleu %.2f, exact %.2f%% (copy %.2f, %.2f%%; most frequent %.2f, %.2f%%)", bleu[0],
             100.0 * exact[0], bleu[1], 100.0 * exact[1], bleu[2], 100.0 * exact[2]);
}
