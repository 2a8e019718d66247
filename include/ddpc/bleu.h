// SPDX-License-Identifier: MIT
/* ddpc BLEU: corpus BLEU-4 (Papineni et al. 2002) over token ids, as sacrebleu's corpus_bleu
 * computes it from its n-gram statistics (default smooth_method 'exp'): clipped n-gram matches and
 * hypothesis n-grams per order 1..4 summed over the corpus, the geometric mean of the precisions,
 * times the brevity penalty exp(1 - ref_len / hyp_len) when hyp_len < ref_len. An order with no
 * match but some n-grams gets precision 1 / (2^k * total) for its k-th such order ('exp'); an order
 * with no hypothesis n-gram at all, no match at any order (sacrebleu's early stop), or an empty
 * hypothesis corpus gives 0. With a match at every order this is Papineni's BLEU exactly. One
 * reference per sentence. Statistics are plain sums, so shares computed on different ranks add
 * up. */
#ifndef DDPC_BLEU_H
#define DDPC_BLEU_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DDPC_BLEU_ORDER 4

typedef struct {
    double match[DDPC_BLEU_ORDER]; /* clipped n-gram matches, order n at [n - 1] */
    double total[DDPC_BLEU_ORDER]; /* hypothesis n-grams */
    double hyp_len, ref_len;       /* tokens */
} ddpc_bleu_stats;

/* Adds one sentence pair to s: hyp (hyp_len) against ref (ref_len). A hypothesis id < 0 matches
 * nothing (an unknown token). Needs no memory; O((hyp_len + ref_len) * hyp_len) per order. */
void ddpc_bleu_add(ddpc_bleu_stats *s, const int32_t *hyp, int64_t hyp_len, const int32_t *ref,
                   int64_t ref_len);
/* The corpus BLEU of the statistics, in [0, 100]. */
double ddpc_bleu_score(const ddpc_bleu_stats *s);
/* The brevity penalty, in [0, 1] (0 for an empty hypothesis corpus). */
double ddpc_bleu_brevity_penalty(const ddpc_bleu_stats *s);

#ifdef __cplusplus
}
#endif
#endif
