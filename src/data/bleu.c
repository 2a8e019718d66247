// SPDX-License-Identifier: MIT
/* Corpus BLEU-4 over token ids (see ddpc/bleu.h for the definition it follows: sacrebleu's
 * corpus_bleu statistics and 'exp' smoothing). Counting is quadratic in the sentence length and
 * allocates nothing: sentences here are short (at most a model's max_len). */
#include <ddpc/bleu.h>

#include <math.h>
#include <stdbool.h>

static bool same_gram(const int32_t *a, const int32_t *b, int64_t n)
{
    for (int64_t k = 0; k < n; k++)
        if (a[k] != b[k])
            return false;
    return true;
}

static bool known_gram(const int32_t *a, int64_t n)
{
    for (int64_t k = 0; k < n; k++)
        if (a[k] < 0)
            return false;
    return true;
}

/* Occurrences of the n-gram g in s (len). */
static int64_t count_gram(const int32_t *g, int64_t n, const int32_t *s, int64_t len)
{
    int64_t c = 0;
    for (int64_t i = 0; i + n <= len; i++)
        c += same_gram(g, s + i, n);
    return c;
}

void ddpc_bleu_add(ddpc_bleu_stats *s, const int32_t *hyp, int64_t hyp_len, const int32_t *ref,
                   int64_t ref_len)
{
    s->hyp_len += (double)hyp_len;
    s->ref_len += (double)ref_len;
    for (int64_t n = 1; n <= DDPC_BLEU_ORDER; n++) {
        if (hyp_len < n)
            break;
        s->total[n - 1] += (double)(hyp_len - n + 1);
        /* Each distinct hypothesis n-gram counts once, at its first occurrence, clipped by the
         * reference's count. */
        for (int64_t i = 0; i + n <= hyp_len; i++) {
            const int32_t *g = hyp + i;
            bool first = known_gram(g, n);
            for (int64_t j = 0; j < i && first; j++)
                first = !same_gram(g, hyp + j, n);
            if (!first)
                continue;
            int64_t ch = count_gram(g, n, hyp + i, hyp_len - i);
            int64_t cr = count_gram(g, n, ref, ref_len);
            s->match[n - 1] += (double)(ch < cr ? ch : cr);
        }
    }
}

double ddpc_bleu_brevity_penalty(const ddpc_bleu_stats *s)
{
    if (s->hyp_len <= 0)
        return 0.0;
    return s->hyp_len < s->ref_len ? exp(1.0 - s->ref_len / s->hyp_len) : 1.0;
}

double ddpc_bleu_score(const ddpc_bleu_stats *s)
{
    double log_sum = 0, smooth = 1, any = 0;
    for (int n = 0; n < DDPC_BLEU_ORDER; n++)
        any += s->match[n];
    if (any <= 0)
        return 0.0; /* sacrebleu's early stop (its #141): no match at all scores 0, unsmoothed */
    for (int n = 0; n < DDPC_BLEU_ORDER; n++) {
        if (s->total[n] <= 0)
            return 0.0; /* sacrebleu: precision 0 for this and higher orders */
        double p;
        if (s->match[n] > 0) {
            p = s->match[n] / s->total[n];
        } else {
            smooth *= 2;
            p = 1.0 / (smooth * s->total[n]);
        }
        log_sum += log(p);
    }
    return 100.0 * ddpc_bleu_brevity_penalty(s) * exp(log_sum / DDPC_BLEU_ORDER);
}
