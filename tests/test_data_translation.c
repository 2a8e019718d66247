// SPDX-License-Identifier: MIT
/* Tests for src/data/translation.c and pair batches in the loader: ids with <eos>/<bos>, the
 * dataset shape, per-batch padding (the loader's widths are the batch's longest rows, with 0 and 2
 * workers), max_len (error naming file and line, or dropping), line-count mismatch, CRLF and empty
 * lines, and the argument errors. */
#include <ddpc/loader.h>
#include <ddpc/vocab.h>

#include <unistd.h>

#include "check.h"

static char dir[] = "/tmp/ddpc_translation_XXXXXX";

static const char *write_file(const char *name, const char *text)
{
    static char path[4][256];
    static int k;
    char *p = path[k++ % 4];
    snprintf(p, 256, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    fputs(text, f);
    fclose(f);
    return p;
}

static ddpc_vocab *vocab(const char *path, ddpc_tokenize tok)
{
    ddpc_vocab *v = NULL;
    if (ddpc_vocab_build(&v, path, tok, 1, 0) != DDPC_OK)
        fprintf(stderr, "vocab: %s\n", ddpc_last_error());
    return v;
}

/* Source words, target characters: "a b" -> "xy" and so on. */
static const char *SRC = "a b\nb\r\na a b c\n\n";
static const char *TGT = "xy\nx\nyyy\r\nz\n";

static void test_pairs(void)
{
    const char *sp = write_file("p.src", SRC), *tp = write_file("p.tgt", TGT);
    ddpc_vocab *sv = vocab(sp, DDPC_TOKENIZE_WORD), *tv = vocab(tp, DDPC_TOKENIZE_CHAR);
    ddpc_dataset *d = NULL;
    int64_t dropped = -1;
    CHECK(ddpc_dataset_translation_create(&d, sp, tp, sv, tv, 8, false, &dropped) == DDPC_OK);
    CHECK(d != NULL);
    if (!d)
        return;
    CHECK_EQ_INT(dropped, 0);
    CHECK_EQ_INT(ddpc_dataset_kind_of(d), DDPC_DATASET_PAIRS);
    CHECK_EQ_INT(ddpc_dataset_size(d), 4);
    CHECK_EQ_INT(ddpc_dataset_num_classes(d), ddpc_vocab_size(tv));
    int64_t shape[3];
    ddpc_dataset_sample_shape(d, shape);
    CHECK_EQ_INT(shape[0], 5); /* "a a b c" + <eos> */
    CHECK_EQ_INT(shape[1], 4); /* "yyy" + 1 */
    /* src ids: a 4, b 5, c 6 (a:3, b:3 tie in byte order); tgt: y 4, x 5, z 6 */
    int64_t idx[2] = {2, 1}, S, T;
    CHECK(ddpc_dataset_pair_lengths(d, idx, 2, &S, &T) == DDPC_OK);
    CHECK(S == 5 && T == 4);
    int32_t src[10], tok[8], tgt[8];
    CHECK(ddpc_dataset_get_pairs(d, idx, 2, 5, 4, src, tok, tgt) == DDPC_OK);
    const int32_t want_src[10] = {4, 4, 5, 6, 2, 5, 2, 0, 0, 0};
    const int32_t want_tok[8] = {1, 4, 4, 4, 1, 5, 0, 0};
    const int32_t want_tgt[8] = {4, 4, 4, 2, 5, 2, 0, 0};
    CHECK(memcmp(src, want_src, sizeof src) == 0);
    CHECK(memcmp(tok, want_tok, sizeof tok) == 0);
    CHECK(memcmp(tgt, want_tgt, sizeof tgt) == 0);
    /* the empty source line is just <eos> */
    int64_t i3 = 3;
    CHECK(ddpc_dataset_get_pairs(d, &i3, 1, 1, 2, src, tok, tgt) == DDPC_OK);
    CHECK(src[0] == 2 && tok[0] == 1 && tok[1] == 6 && tgt[0] == 6 && tgt[1] == 2);
    /* too narrow, bad index, other entry points */
    CHECK_EQ_INT(ddpc_dataset_get_pairs(d, idx, 2, 4, 4, src, tok, tgt), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "narrower");
    int64_t bad = 4;
    CHECK_EQ_INT(ddpc_dataset_get_pairs(d, &bad, 1, 5, 4, src, tok, tgt), DDPC_EINVAL);
    CHECK_EQ_INT(ddpc_dataset_get_batch(d, idx, 1, NULL, tok, tgt), DDPC_EINVAL);
    ddpc_dataset_destroy(d);
    ddpc_vocab_destroy(sv);
    ddpc_vocab_destroy(tv);
}

static void test_max_len(void)
{
    const char *sp = write_file("p.src", SRC), *tp = write_file("p.tgt", TGT);
    ddpc_vocab *sv = vocab(sp, DDPC_TOKENIZE_WORD), *tv = vocab(tp, DDPC_TOKENIZE_CHAR);
    ddpc_dataset *d = NULL;
    int64_t dropped = 0;
    /* max_len 3: "a a b c" (5 with <eos>) and "yyy" (4) do not fit */
    CHECK_EQ_INT(ddpc_dataset_translation_create(&d, sp, tp, sv, tv, 3, false, NULL), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "p.src:3: the pair has 4 source and 3 target tokens");
    CHECK(d == NULL);
    CHECK(ddpc_dataset_translation_create(&d, sp, tp, sv, tv, 3, true, &dropped) == DDPC_OK);
    CHECK_EQ_INT(dropped, 1);
    CHECK(d && ddpc_dataset_size(d) == 3);
    ddpc_dataset_destroy(d);
    d = NULL;
    CHECK_EQ_INT(ddpc_dataset_translation_create(&d, sp, tp, sv, tv, 1, true, NULL), DDPC_EINVAL);
    /* line counts differ */
    const char *short_tgt = write_file("s.tgt", "x\ny\n");
    CHECK_EQ_INT(ddpc_dataset_translation_create(&d, sp, short_tgt, sv, tv, 8, false, NULL),
                 DDPC_EFORMAT);
    CHECK_STR_CONTAINS(ddpc_last_error(), "has 4 lines but");
    CHECK_EQ_INT(ddpc_dataset_translation_create(&d, sp, "/nonexistent/t", sv, tv, 8, false, NULL),
                 DDPC_EIO);
    const char *empty = write_file("e.src", "");
    CHECK_EQ_INT(ddpc_dataset_translation_create(&d, empty, empty, sv, tv, 8, false, NULL),
                 DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "no pair (empty file)");
    ddpc_vocab_destroy(sv);
    ddpc_vocab_destroy(tv);
}

/* The loader pads each batch to its own longest rows, whatever the number of workers. */
static void test_loader_batches(void)
{
    char src[4096] = "", tgt[4096] = "";
    for (int i = 0; i < 37; i++) {
        size_t a = strlen(src), b = strlen(tgt);
        for (int k = 0; k <= i % 7; k++)
            snprintf(src + a + 2 * (size_t)k, 3, "%c ", 'a' + (i + k) % 5);
        snprintf(src + strlen(src), 2, "\n");
        for (int k = 0; k <= (i * 3) % 5; k++)
            tgt[b++] = (char)('p' + (i + k) % 4);
        tgt[b++] = '\n';
        tgt[b] = '\0';
    }
    const char *sp = write_file("l.src", src), *tp = write_file("l.tgt", tgt);
    ddpc_vocab *sv = vocab(sp, DDPC_TOKENIZE_WORD), *tv = vocab(tp, DDPC_TOKENIZE_CHAR);
    ddpc_dataset *d = NULL;
    CHECK(ddpc_dataset_translation_create(&d, sp, tp, sv, tv, 16, false, NULL) == DDPC_OK);
    for (int workers = 0; d && workers <= 2; workers += 2) {
        ddpc_sampler_config sc = ddpc_sampler_config_default();
        sc.kind = DDPC_SAMPLER_DISTRIBUTED;
        sc.shuffle = true;
        sc.size = ddpc_dataset_size(d);
        ddpc_sampler *s = NULL;
        ddpc_loader *l = NULL;
        CHECK(ddpc_sampler_create(&sc, &s) == DDPC_OK);
        ddpc_loader_config lc = ddpc_loader_config_default();
        lc.batch_size = 5;
        lc.num_workers = workers;
        const ddpc_dataset *ds[1] = {d};
        if (ddpc_loader_create(ds, 1, s, &lc, &l) != DDPC_OK)
            fprintf(stderr, "loader: %s\n", ddpc_last_error());
        CHECK(l != NULL);
        if (!l)
            break;
        CHECK(ddpc_loader_start_epoch(l, 1) == DDPC_OK);
        const ddpc_batch *b;
        int64_t rows = 0;
        while (ddpc_loader_next(l, &b) == DDPC_OK && b) {
            int64_t S, T;
            CHECK(ddpc_dataset_pair_lengths(d, b->idx, b->n, &S, &T) == DDPC_OK);
            CHECK(b->src_len == S && b->tgt_len == T);
            int32_t ws[5 * 16], wt[5 * 16], wy[5 * 16];
            CHECK(ddpc_dataset_get_pairs(d, b->idx, b->n, S, T, ws, wt, wy) == DDPC_OK);
            CHECK(memcmp(b->src_tokens, ws, (size_t)(b->n * S) * sizeof *ws) == 0);
            CHECK(memcmp(b->tokens, wt, (size_t)(b->n * T) * sizeof *wt) == 0);
            CHECK(memcmp(b->targets, wy, (size_t)(b->n * T) * sizeof *wy) == 0);
            rows += b->n;
        }
        CHECK_EQ_INT(rows, 37);
        ddpc_loader_destroy(l);
        ddpc_sampler_destroy(s);
    }
    ddpc_dataset_destroy(d);
    ddpc_vocab_destroy(sv);
    ddpc_vocab_destroy(tv);
}

int main(void)
{
    if (!mkdtemp(dir))
        return 1;
    RUN_TEST(test_pairs);
    RUN_TEST(test_max_len);
    RUN_TEST(test_loader_batches);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return check_summary();
}
