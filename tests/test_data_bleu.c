// SPDX-License-Identifier: MIT
/* Tests for src/data/bleu.c: statistics and scores against tests/golden/bleu_golden.h (sacrebleu's
 * corpus_bleu computation transcribed in Python), a hand-computed corpus, unknown hypothesis
 * tokens, sums of shares equal to the whole, and the degenerate corpora. */
#include <ddpc/bleu.h>

#include "check.h"
#include "golden/bleu_golden.h"

static void test_golden(void)
{
    for (int c = 0; c < GOLDEN_BLEU_CASES; c++) {
        const golden_bleu_case *g = &golden_bleu_cases[c];
        ddpc_bleu_stats s = {0};
        for (int64_t i = g->first; i < g->first + g->count; i++) {
            const int64_t *r = golden_bleu_sentences[i];
            ddpc_bleu_add(&s, golden_bleu_tokens + r[0], r[1], golden_bleu_tokens + r[2], r[3]);
        }
        for (int n = 0; n < DDPC_BLEU_ORDER; n++) {
            CHECK_NEAR(s.match[n], g->match[n], 0);
            CHECK_NEAR(s.total[n], g->total[n], 0);
        }
        CHECK_NEAR(s.hyp_len, g->hyp_len, 0);
        CHECK_NEAR(s.ref_len, g->ref_len, 0);
        CHECK_NEAR(ddpc_bleu_score(&s), g->score, 1e-9);
    }
}

/* hyp "a b c d e" vs ref "a b c d f g": precisions 4/5, 3/4, 2/3, 1/2; BP exp(1 - 6/5). */
static void test_hand_computed(void)
{
    const int32_t hyp[] = {1, 2, 3, 4, 5}, ref[] = {1, 2, 3, 4, 6, 7};
    ddpc_bleu_stats s = {0};
    ddpc_bleu_add(&s, hyp, 5, ref, 6);
    double want = 100.0 * exp(1.0 - 6.0 / 5.0) * pow(0.8 * 0.75 * (2.0 / 3.0) * 0.5, 0.25);
    CHECK_NEAR(ddpc_bleu_score(&s), want, 1e-12);
    CHECK_NEAR(ddpc_bleu_brevity_penalty(&s), exp(-0.2), 1e-12);
    /* identical sentences: 100 */
    ddpc_bleu_stats same = {0};
    ddpc_bleu_add(&same, ref, 6, ref, 6);
    CHECK_NEAR(ddpc_bleu_score(&same), 100.0, 1e-12);
}

/* Clipping: "the the the the" against "the cat": unigram matches clipped to 1. */
static void test_clipping_and_unknown(void)
{
    const int32_t hyp[] = {5, 5, 5, 5}, ref[] = {5, 6};
    ddpc_bleu_stats s = {0};
    ddpc_bleu_add(&s, hyp, 4, ref, 2);
    CHECK_NEAR(s.match[0], 1, 0);
    CHECK_NEAR(s.total[0], 4, 0);
    /* An unknown hypothesis token (-1) never matches, even an unknown reference token. */
    const int32_t h2[] = {-1, 7}, r2[] = {-1, 7};
    ddpc_bleu_stats u = {0};
    ddpc_bleu_add(&u, h2, 2, r2, 2);
    CHECK_NEAR(u.match[0], 1, 0);
    CHECK_NEAR(u.match[1], 0, 0);
}

/* Statistics of two halves added up equal those of the whole corpus (ranks sum their shares). */
static void test_shares_add(void)
{
    const golden_bleu_case *g = &golden_bleu_cases[5];
    ddpc_bleu_stats a = {0}, b = {0};
    for (int64_t i = g->first; i < g->first + g->count; i++) {
        const int64_t *r = golden_bleu_sentences[i];
        ddpc_bleu_add(i % 2 ? &a : &b, golden_bleu_tokens + r[0], r[1], golden_bleu_tokens + r[2],
                      r[3]);
    }
    for (int n = 0; n < DDPC_BLEU_ORDER; n++) {
        a.match[n] += b.match[n];
        a.total[n] += b.total[n];
    }
    a.hyp_len += b.hyp_len;
    a.ref_len += b.ref_len;
    CHECK_NEAR(ddpc_bleu_score(&a), g->score, 1e-9);
}

static void test_degenerate(void)
{
    ddpc_bleu_stats s = {0};
    CHECK_NEAR(ddpc_bleu_score(&s), 0, 0);
    CHECK_NEAR(ddpc_bleu_brevity_penalty(&s), 0, 0);
    const int32_t ref[] = {1, 2, 3};
    ddpc_bleu_add(&s, NULL, 0, ref, 3);
    CHECK_NEAR(ddpc_bleu_score(&s), 0, 0);
}

/* No n-gram of any order matches: 0, as sacrebleu's early stop (its issue #141) gives, not the
 * 'exp' smoothing of four empty orders, which would give 100 (1/10 1/16 1/24 1/32)^(1/4) = 5.34. */
static void test_no_match(void)
{
    const int32_t hyp[] = {8, 9, 8, 9, 9}, ref[] = {1, 2, 3, 4, 5};
    ddpc_bleu_stats s = {0};
    ddpc_bleu_add(&s, hyp, 5, ref, 5);
    CHECK_NEAR(s.total[3], 2, 0);
    CHECK_NEAR(ddpc_bleu_score(&s), 0, 0);
    /* All hypothesis tokens unknown (a model that outputs only <unk>): also 0. */
    const int32_t unk[] = {-1, -1, -1, -1};
    ddpc_bleu_stats u = {0};
    ddpc_bleu_add(&u, unk, 4, ref, 5);
    CHECK_NEAR(ddpc_bleu_score(&u), 0, 0);
}

int main(void)
{
    RUN_TEST(test_golden);
    RUN_TEST(test_hand_computed);
    RUN_TEST(test_clipping_and_unknown);
    RUN_TEST(test_shares_add);
    RUN_TEST(test_degenerate);
    RUN_TEST(test_no_match);
    return check_summary();
}
