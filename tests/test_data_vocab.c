// SPDX-License-Identifier: MIT
/* Tests for src/data/vocab*.c: word and character tokenization (UTF-8, white space, bad bytes),
 * frequency order with byte-order ties, min_freq and max_size, specials, encode and decode,
 * save/load round trips, malformed files, argument errors. */
#include <ddpc/vocab.h>

#include <unistd.h>

#include "check.h"

static char dir[] = "/tmp/ddpc_vocab_XXXXXX";

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

static ddpc_vocab *build(const char *path, ddpc_tokenize tok, int64_t min_freq, int64_t max_size)
{
    ddpc_vocab *v = NULL;
    if (ddpc_vocab_build(&v, path, tok, min_freq, max_size) != DDPC_OK)
        fprintf(stderr, "build: %s\n", ddpc_last_error());
    return v;
}

static void test_word_order(void)
{
    const char *p = write_file("w.txt", "b a c\n  a b\ta  \r\nd\n\nz <unk> z\n");
    ddpc_vocab *v = build(p, DDPC_TOKENIZE_WORD, 1, 0);
    CHECK(v != NULL);
    if (!v)
        return;
    /* a:3, b:2, z:2, c:1, d:1 ("<unk>" in the text is the special) */
    CHECK_EQ_INT(ddpc_vocab_size(v), 9);
    const char *want[] = {"<pad>", "<bos>", "<eos>", "<unk>", "a", "b", "z", "c", "d"};
    for (int i = 0; i < 9; i++)
        CHECK(strcmp(ddpc_vocab_token(v, i), want[i]) == 0);
    CHECK(ddpc_vocab_token(v, 9) == NULL);
    CHECK(ddpc_vocab_token(v, -1) == NULL);
    CHECK_EQ_INT(ddpc_vocab_id(v, "z", 1), 6);
    CHECK_EQ_INT(ddpc_vocab_id(v, "zz", 2), DDPC_TOK_UNK);
    int32_t ids[8];
    int64_t n;
    ddpc_vocab_encode(v, "  c a q\tb \n ignored", ids, 8, &n);
    CHECK_EQ_INT(n, 4);
    CHECK_EQ_INT(ids[0], 7);
    CHECK_EQ_INT(ids[1], 4);
    CHECK_EQ_INT(ids[2], DDPC_TOK_UNK);
    CHECK_EQ_INT(ids[3], 5);
    ddpc_vocab_encode(v, "a a a", ids, 2, &n); /* more tokens than room */
    CHECK_EQ_INT(n, 3);
    char buf[64];
    const int32_t seq[] = {DDPC_TOK_BOS, 7, 4, DDPC_TOK_UNK, 5, DDPC_TOK_EOS, 6};
    CHECK_EQ_INT(ddpc_vocab_decode(v, seq, 7, buf, sizeof buf), strlen("c a <unk> b"));
    CHECK(strcmp(buf, "c a <unk> b") == 0);
    CHECK_EQ_INT(ddpc_vocab_decode(v, seq, 7, buf, 4), 11); /* cut, still terminated */
    CHECK(strcmp(buf, "c a") == 0);
    ddpc_vocab_destroy(v);
    /* min_freq 2 keeps a, b, z; max_size 6 keeps the specials and a, b */
    v = build(p, DDPC_TOKENIZE_WORD, 2, 0);
    CHECK(v && ddpc_vocab_size(v) == 7 && ddpc_vocab_min_freq(v) == 2);
    ddpc_vocab_destroy(v);
    v = build(p, DDPC_TOKENIZE_WORD, 1, 6);
    CHECK(v && ddpc_vocab_size(v) == 6 && strcmp(ddpc_vocab_token(v, 5), "b") == 0);
    ddpc_vocab_destroy(v);
}

static void test_char_utf8(void)
{
    /* "ä" is two bytes, "ß" two, "\xff" an invalid byte: a token of its own */
    const char *p = write_file("c.txt", "Häuser  groß\nhaus\t\xff\n");
    ddpc_vocab *v = build(p, DDPC_TOKENIZE_CHAR, 1, 0);
    CHECK(v != NULL);
    if (!v)
        return;
    CHECK_EQ_INT(ddpc_vocab_tokenize(v), DDPC_TOKENIZE_CHAR);
    /* ' ', r, s, u twice each (tab = space), in byte order; the rest once */
    CHECK(ddpc_vocab_id(v, "ä", strlen("ä")) != DDPC_TOK_UNK);
    CHECK(ddpc_vocab_id(v, "ß", strlen("ß")) != DDPC_TOK_UNK);
    CHECK(ddpc_vocab_id(v, " ", 1) != DDPC_TOK_UNK);
    CHECK(ddpc_vocab_id(v, "\xff", 1) != DDPC_TOK_UNK);
    CHECK(strcmp(ddpc_vocab_token(v, 4), " ") == 0);
    CHECK(strcmp(ddpc_vocab_token(v, 7), "u") == 0);
    CHECK(strcmp(ddpc_vocab_token(v, 8), "H") == 0);
    int32_t ids[16];
    int64_t n;
    ddpc_vocab_encode(v, " groß  Haus ", ids, 16, &n);
    CHECK_EQ_INT(n, 9); /* g r o ß ' ' H a u s */
    char buf[64];
    ddpc_vocab_decode(v, ids, n, buf, sizeof buf);
    CHECK(strcmp(buf, "groß Haus") == 0);
    ddpc_vocab_destroy(v);
}

static void test_save_load(void)
{
    const char *p = write_file("s.txt", "eins zwei drei\nzwei drei\ndrei\n");
    const char *q = write_file("c2.txt", "ab cd\n");
    ddpc_vocab *v = build(p, DDPC_TOKENIZE_WORD, 1, 0), *c = build(q, DDPC_TOKENIZE_CHAR, 1, 0);
    char path[256], text[512];
    snprintf(path, sizeof path, "%s/vocab.txt", dir);
    CHECK(ddpc_vocab_save(v, path) == DDPC_OK);
    check_read_file(path, text, sizeof text);
    CHECK(strcmp(text, "# ddpc vocab v1 tokenize=word min_freq=1 size=7\n<pad>\t0\n<bos>\t0\n"
                       "<eos>\t0\n<unk>\t0\ndrei\t3\nzwei\t2\neins\t1\n") == 0);
    ddpc_vocab *w = NULL;
    CHECK(ddpc_vocab_load(&w, path) == DDPC_OK);
    CHECK(w && ddpc_vocab_equal(v, w));
    CHECK(!ddpc_vocab_equal(v, c));
    ddpc_vocab_destroy(w);
    /* a char vocabulary holds the " " token */
    CHECK(ddpc_vocab_save(c, path) == DDPC_OK);
    CHECK(ddpc_vocab_load(&w, path) == DDPC_OK);
    CHECK(w && ddpc_vocab_equal(c, w) && ddpc_vocab_id(w, " ", 1) != DDPC_TOK_UNK);
    ddpc_vocab_destroy(w);
    ddpc_vocab_destroy(v);
    ddpc_vocab_destroy(c);
}

static void expect_load_error(const char *text, ddpc_status want, const char *msg)
{
    const char *p = write_file("bad.txt", text);
    ddpc_vocab *v = NULL;
    CHECK_EQ_INT(ddpc_vocab_load(&v, p), want);
    CHECK(v == NULL);
    CHECK_STR_CONTAINS(ddpc_last_error(), msg);
}

static void test_malformed(void)
{
    const char *sp = "<pad>\t0\n<bos>\t0\n<eos>\t0\n<unk>\t0\n";
    char buf[256];
    expect_load_error("", DDPC_EFORMAT, "empty file");
    expect_load_error("hello\n", DDPC_EFORMAT, ":1: not a ddpc vocabulary");
    expect_load_error("# ddpc vocab v1 tokenize=bpe min_freq=1 size=4\n", DDPC_EFORMAT,
                      "tokenize must be word or char");
    snprintf(buf, sizeof buf, "# ddpc vocab v1 tokenize=word min_freq=1 size=6\n%sa\t1\n", sp);
    expect_load_error(buf, DDPC_EFORMAT, "the header says 6 tokens but 5 lines follow");
    snprintf(buf, sizeof buf, "# ddpc vocab v1 tokenize=word min_freq=1 size=6\n%sa\t1\na\t1\n",
             sp);
    expect_load_error(buf, DDPC_EFORMAT, "token 'a' appears twice");
    snprintf(buf, sizeof buf, "# ddpc vocab v1 tokenize=word min_freq=1 size=5\n%sa 1\n", sp);
    expect_load_error(buf, DDPC_EFORMAT, ":6: expected '<token><TAB><count>'");
    expect_load_error("# ddpc vocab v1 tokenize=word min_freq=1 size=4\n<bos>\t0\n<pad>\t0\n"
                      "<eos>\t0\n<unk>\t0\n",
                      DDPC_EFORMAT, ":2: id 0 must be the special token <pad>");
    ddpc_vocab *v = NULL;
    CHECK_EQ_INT(ddpc_vocab_load(&v, "/nonexistent/vocab.txt"), DDPC_EIO);
    CHECK_STR_CONTAINS(ddpc_last_error(), "/nonexistent/vocab.txt");
    CHECK_EQ_INT(ddpc_vocab_build(&v, "/nonexistent/x", DDPC_TOKENIZE_WORD, 1, 0), DDPC_EIO);
    const char *p = write_file("ok.txt", "a\n");
    CHECK_EQ_INT(ddpc_vocab_build(&v, p, DDPC_TOKENIZE_WORD, 0, 0), DDPC_EINVAL);
    CHECK_EQ_INT(ddpc_vocab_build(&v, p, DDPC_TOKENIZE_WORD, 1, 4), DDPC_EINVAL);
    CHECK(v == NULL);
}

int main(void)
{
    if (!mkdtemp(dir))
        return 1;
    RUN_TEST(test_word_order);
    RUN_TEST(test_char_utf8);
    RUN_TEST(test_save_load);
    RUN_TEST(test_malformed);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return check_summary();
}
