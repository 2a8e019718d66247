// SPDX-License-Identifier: MIT
/* The CUDA cross-entropy, argmax accuracy, row softmax and embedding kernels against the CPU table
 * on the same random inputs: GPT-2's 50257-wide rows with ignored and out-of-range targets, ties in
 * argmax, embedding backward with repeated tokens (and ids past 65535) without a host wait; the
 * backward written over the probabilities (count from the host or device sums, all 0 when every
 * row is ignored); reruns of embedding backward give the same bits; second calls with the same
 * shapes allocate nothing on the device. Skips (exit 77) without a GPU; device outputs are
 * poisoned with NaN before a kernel runs. */
#include "backend_testutil.h"

static const ddpc_kernel_table *gpu;
static const ddpc_kernel_table *cpu;

enum { V = 50257, N = 9, IGNORE = -100 };

/* Targets of N rows: two ignore_index, one >= v, one negative (all ignored), the rest valid. */
static void make_targets(int32_t *tg, int64_t v)
{
    const int32_t t[N] = {3, IGNORE, (int32_t)v - 1, 0, (int32_t)v, 17, -5, IGNORE, (int32_t)v / 2};
    for (int i = 0; i < N; i++)
        tg[i] = t[i];
}

static void check_cross_entropy(int64_t v)
{
    printf(" cross-entropy n %d v %lld\n", N, (long long)v);
    int32_t tg[N];
    make_targets(tg, v);
    float *logits = tu_rand(N * v, -4.0f, 4.0f, 21);
    float *probs = tu_alloc(N * v), *losses = tu_alloc(N);
    int64_t nv = -1, gnv = -1;
    float mean = cpu->cross_entropy_forward(probs, losses, logits, tg, N, v, IGNORE, &nv);
    CHECK_EQ_INT(nv, v > 17 ? 5 : 4); /* target 17 is out of range when v = 10 */

    int32_t *d_tg = bt_up_bytes(gpu, tg, sizeof tg);
    float *d_logits = bt_up(gpu, logits, N * v);
    float *d_probs = bt_poison(gpu, N * v), *d_losses = bt_poison(gpu, N);
    float gmean = gpu->cross_entropy_forward(d_probs, d_losses, d_logits, d_tg, N, v, IGNORE, &gnv);
    CHECK_EQ_INT(gnv, nv);
    CHECK_NEAR(gmean, mean, 1e-4);
    CHECK(bt_err(gpu, "probs", d_probs, probs, N * v) <= 1e-4);
    CHECK(bt_err(gpu, "losses", d_losses, losses, N) <= 1e-4);

    /* No losses array, and probs over the logits (in place): the same mean, the same probs. A
     * second call with these shapes allocates nothing. */
    uint64_t allocs = gpu->alloc_count();
    gnv = -1;
    float gmean2 = gpu->cross_entropy_forward(d_logits, NULL, d_logits, d_tg, N, v, IGNORE, &gnv);
    CHECK_EQ_INT(gpu->alloc_count(), allocs);
    CHECK_EQ_INT(gnv, nv);
    CHECK(gmean2 == gmean);
    CHECK(bt_err(gpu, "probs in place", d_logits, probs, N * v) <= 1e-4);

    /* Backward accumulates into a random dlogits. */
    float *dl = tu_rand(N * v, -1.0f, 1.0f, 22);
    float *d_dl = bt_up(gpu, dl, N * v);
    cpu->cross_entropy_backward(dl, probs, tg, N, v, IGNORE, nv, 0.75f);
    gpu->cross_entropy_backward(d_dl, d_probs, d_tg, N, v, IGNORE, nv, 0.75f);
    CHECK(bt_err(gpu, "dlogits", d_dl, dl, N * v) <= 1e-5);

    /* The backward over the probabilities, the count from the host and then from device sums:
     * the gradient alone, 0 on ignored rows. */
    float *over = tu_alloc(N * v);
    memcpy(over, probs, (size_t)(N * v) * sizeof(float));
    cpu->cross_entropy_backward_inplace(over, tg, N, v, IGNORE, nv, NULL, 0.75f);
    gpu->cross_entropy_backward_inplace(d_probs, d_tg, N, v, IGNORE, nv, NULL, 0.75f);
    CHECK(bt_err(gpu, "dlogits over probs", d_probs, over, N * v) <= 1e-5);
    const double sums[2] = {0.0, (double)nv};
    double *d_sums = bt_up_bytes(gpu, sums, sizeof sums);
    gpu->cross_entropy_backward_inplace(d_logits, d_tg, N, v, IGNORE, -1, d_sums, 0.75f);
    CHECK(bt_err(gpu, "dlogits over probs, count from sums", d_logits, over, N * v) <= 1e-5);

    /* Every row ignored: mean 0, count 0, and backward leaves dlogits alone. */
    int32_t none[N];
    for (int i = 0; i < N; i++)
        none[i] = IGNORE;
    int32_t *d_none = bt_up_bytes(gpu, none, sizeof none);
    gnv = -1;
    CHECK(gpu->cross_entropy_forward(d_probs, d_losses, d_probs, d_none, N, v, IGNORE, &gnv) ==
          0.0f);
    CHECK_EQ_INT(gnv, 0);
    /* ... and over the probabilities, writes 0 everywhere. */
    gpu->cross_entropy_backward_inplace(d_probs, d_none, N, v, IGNORE, 0, NULL, 0.75f);
    float *zeros = tu_alloc(N * v);
    memset(zeros, 0, (size_t)(N * v) * sizeof(float));
    float *back = bt_down(gpu, d_probs, N * v);
    CHECK(memcmp(back, zeros, (size_t)(N * v) * sizeof(float)) == 0);

    gpu->free(d_tg);
    gpu->free(d_none);
    gpu->free(d_logits);
    gpu->free(d_probs);
    gpu->free(d_losses);
    gpu->free(d_dl);
    gpu->free(d_sums);
    ddpc_free(over);
    ddpc_free(zeros);
    ddpc_free(back);
    ddpc_free(logits);
    ddpc_free(probs);
    ddpc_free(losses);
    ddpc_free(dl);
}

static void test_cross_entropy_gpt2_vocab(void)
{
    check_cross_entropy(V);
}

static void test_cross_entropy_small(void)
{
    check_cross_entropy(10);
}

/* Ties pick the first maximum: rows whose target is the second of two equal maxima miss. */
static void check_argmax(int64_t v)
{
    printf(" argmax n %d v %lld\n", N, (long long)v);
    int32_t tg[N];
    make_targets(tg, v);
    float *s = tu_rand(N * v, -1.0f, 1.0f, 31);
    s[0 * v + 3] = 5.0f; /* row 0: target 3 is the unique maximum */
    s[2 * v + 1] = 7.0f; /* row 2: a tie at 1 and v - 1; the first (1) wins, target v - 1 misses */
    s[2 * v + v - 1] = 7.0f;
    s[3 * v + 0] = 2.0f; /* row 3: a tie at 0 (the target) and at v / 2: the target wins */
    s[3 * v + v / 2] = 2.0f;
    if (v > 17)
        s[5 * v + 17] = 3.0f; /* row 5: target 17 the unique maximum */
    s[8 * v + 0] = 9.0f;      /* row 8: target v / 2 is not the maximum */
    int64_t want = cpu->argmax_correct(s, tg, N, v, IGNORE);
    CHECK_EQ_INT(want, v > 17 ? 3 : 2);
    int32_t *d_tg = bt_up_bytes(gpu, tg, sizeof tg);
    float *d_s = bt_up(gpu, s, N * v);
    CHECK_EQ_INT(gpu->argmax_correct(d_s, d_tg, N, v, IGNORE), want);
    uint64_t allocs = gpu->alloc_count();
    CHECK_EQ_INT(gpu->argmax_correct(d_s, d_tg, N, v, IGNORE), want);
    CHECK_EQ_INT(gpu->alloc_count(), allocs);
    gpu->free(d_tg);
    gpu->free(d_s);
    ddpc_free(s);
}

static void test_argmax_ties(void)
{
    check_argmax(V);
    check_argmax(10);
}

static void test_softmax_rows(void)
{
    const int64_t sizes[] = {10, 1000, V};
    for (int k = 0; k < 3; k++) {
        const int64_t v = sizes[k], n = 7;
        float *x = tu_rand(n * v, -8.0f, 8.0f, 41);
        float *d_x = bt_up(gpu, x, n * v);
        cpu->softmax_rows(x, n, v);
        gpu->softmax_rows(d_x, n, v);
        /* A reduction over up to 50257 values: the CPU sums them one by one in fp32, the GPU in
         * a tree, so they part by more than fp32 elementwise rounding (5e-5 seen on an H200). */
        CHECK(bt_err(gpu, "softmax_rows", d_x, x, n * v) <= 1e-4);
        gpu->free(d_x);
        ddpc_free(x);
    }
}

/* Embedding forward and backward over vocab rows of width c, with tokens that repeat within and
 * across batch rows; vocab > 65536 exercises the sort's high digit. */
static void check_embedding(int64_t b, int64_t t, int64_t c, int64_t vocab, bool with_wpe)
{
    printf(" embedding b %lld t %lld c %lld vocab %lld%s\n", (long long)b, (long long)t,
           (long long)c, (long long)vocab, with_wpe ? "" : " (no wpe)");
    const int64_t n = b * t;
    int32_t *tok = ddpc_calloc((size_t)n, sizeof(int32_t));
    for (int64_t i = 0; i < n; i++) /* few distinct ids, many repeats, the last id included */
        tok[i] = (int32_t)((i * 7 + i / 5) % 5 == 0 ? vocab - 1 : (i * 13) % 9 * (vocab / 9));
    float *wte = tu_rand(vocab * c, -1.0f, 1.0f, 51), *wpe = tu_rand(t * c, -1.0f, 1.0f, 52);
    float *dy = tu_rand(n * c, -1.0f, 1.0f, 53);
    float *dwte = tu_rand(vocab * c, -1.0f, 1.0f, 54), *dwpe = tu_rand(t * c, -1.0f, 1.0f, 55);
    float *y = tu_alloc(n * c);

    int32_t *d_tok = bt_up_bytes(gpu, tok, (size_t)n * sizeof(int32_t));
    float *d_wte = bt_up(gpu, wte, vocab * c), *d_wpe = bt_up(gpu, wpe, t * c);
    float *d_dy = bt_up(gpu, dy, n * c), *d_y = bt_poison(gpu, n * c);
    float *d_dwte = bt_up(gpu, dwte, vocab * c), *d_dwpe = bt_up(gpu, dwpe, t * c);

    cpu->embedding_forward(y, tok, wte, with_wpe ? wpe : NULL, b, t, c);
    gpu->embedding_forward(d_y, d_tok, d_wte, with_wpe ? d_wpe : NULL, b, t, c);
    CHECK(bt_err(gpu, "embedding y", d_y, y, n * c) <= 1e-6);

    /* The GPU sums in the CPU's order, so these agree to the bit (checked at 1e-6 to print); it
     * groups the tokens on the device, so the host never waits for it. */
    uint64_t waits = gpu->host_waits();
    gpu->embedding_backward(d_dwte, with_wpe ? d_dwpe : NULL, d_dy, d_tok, b, t, c);
    CHECK_EQ_INT(gpu->host_waits(), waits);
    float *g1 = bt_down(gpu, d_dwte, vocab * c), *p1 = bt_down(gpu, d_dwpe, t * c);
    cpu->embedding_backward(dwte, with_wpe ? dwpe : NULL, dy, tok, b, t, c);
    CHECK(bt_err(gpu, "dwte", d_dwte, dwte, vocab * c) <= 1e-6);
    CHECK(bt_err(gpu, "dwpe", d_dwpe, dwpe, t * c) <= 1e-6);

    /* Rerun from the same starting gradients: identical bits, and no device allocation. */
    float *start_te = tu_rand(vocab * c, -1.0f, 1.0f, 54);
    float *start_pe = tu_rand(t * c, -1.0f, 1.0f, 55);
    gpu->to_device(d_dwte, start_te, (size_t)(vocab * c) * sizeof(float));
    gpu->to_device(d_dwpe, start_pe, (size_t)(t * c) * sizeof(float));
    uint64_t allocs = gpu->alloc_count();
    gpu->embedding_backward(d_dwte, with_wpe ? d_dwpe : NULL, d_dy, d_tok, b, t, c);
    CHECK_EQ_INT(gpu->alloc_count(), allocs);
    float *g2 = bt_down(gpu, d_dwte, vocab * c), *p2 = bt_down(gpu, d_dwpe, t * c);
    CHECK(memcmp(g1, g2, (size_t)(vocab * c) * sizeof(float)) == 0);
    CHECK(memcmp(p1, p2, (size_t)(t * c) * sizeof(float)) == 0);

    gpu->free(d_tok);
    gpu->free(d_wte);
    gpu->free(d_wpe);
    gpu->free(d_dy);
    gpu->free(d_y);
    gpu->free(d_dwte);
    gpu->free(d_dwpe);
    float *host[] = {wte, wpe, dy, dwte, dwpe, y, g1, p1, g2, p2, start_te, start_pe};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++)
        ddpc_free(host[i]);
    ddpc_free(tok);
}

static void test_embedding(void)
{
    check_embedding(3, 7, 40, 11, true);
    check_embedding(4, 64, 300, 1000, true); /* c past one 256-thread channel tile */
    check_embedding(2, 33, 8, 70001, false);
    check_embedding(8, 1024, 64, 50257, true); /* GPT-2's vocabulary and context */
}

int main(void)
{
    gpu = bt_cuda_or_skip();
    cpu = ddpc_kernel_table_cpu();
    RUN_TEST(test_cross_entropy_gpt2_vocab);
    RUN_TEST(test_cross_entropy_small);
    RUN_TEST(test_argmax_ties);
    RUN_TEST(test_softmax_rows);
    RUN_TEST(test_embedding);
    return check_summary();
}
