// SPDX-License-Identifier: MIT
/* Tests for src/core/config*.c: YAML subset, overrides, typed getters with exact error messages,
 * unknown-key detection with suggestions, dump, and parsing under a failing allocator. */
#include <ddpc/alloc.h>
#include <ddpc/config.h>
#include <ddpc/status.h>

#include <stdio.h>
#include <stdlib.h>

#include <unistd.h>

#include "check.h"

#define CHECK_STR_EQ(a, b)                                                              \
    do {                                                                                \
        const char *check_sa_ = (a), *check_sb_ = (b);                                  \
        if (!check_sa_ || strcmp(check_sa_, check_sb_) != 0) {                          \
            fprintf(stderr, "%s:%d: \"%s\" != \"%s\"\n", __FILE__, __LINE__,            \
                    check_sa_ ? check_sa_ : "(null)", check_sb_);                       \
            check_failures_in_test++;                                                   \
        }                                                                               \
    } while (0)

/* The call fails with `code` and exactly `msg`. */
#define CHECK_ERR(expr, code, msg)                  \
    do {                                            \
        ddpc_status check_s_ = (expr);              \
        CHECK_EQ_INT(check_s_, code);               \
        CHECK_STR_EQ(ddpc_last_error(), msg);       \
    } while (0)

static const char *const SAMPLE =
    "# experiment\n"                  /* 1 */
    "epochs: 10\n"                    /* 2 */
    "seed: -3\n"                      /* 3 */
    "optim:\n"                        /* 4 */
    "  type: adamw\n"                 /* 5 */
    "  lr: 3e-4\n"                    /* 6 */
    "  betas: [0.9, 0.999]\n"         /* 7 */
    "data:\n"                         /* 8 */
    "  shuffle: yes\n"                /* 9 */
    "  path: 'data/fashion mnist'\n"  /* 10 */
    "model:\n"                        /* 11 */
    "  hidden:\n"                     /* 12 */
    "    - 256\n"                     /* 13 */
    "    - 128\n"                     /* 14 */
    "tasks:\n"                        /* 15 */
    "  - name: cls\n"                 /* 16 */
    "    weight: 1.0\n"               /* 17 */
    "  - name: reg\n"                 /* 18 */
    "    weight: .5\n";               /* 19 */

static ddpc_config *parse_ok(const char *text)
{
    ddpc_config *c = NULL;
    ddpc_status s = ddpc_config_parse(&c, text, "x.yaml");
    if (s != DDPC_OK)
        fprintf(stderr, "parse failed: %s\n", ddpc_last_error());
    CHECK_EQ_INT(s, DDPC_OK);
    return c;
}

/* Reads every key of SAMPLE, as a trainer would. */
static void read_sample(ddpc_config *c)
{
    int64_t i, list[4];
    double f, fl[2];
    bool b;
    const char *str;
    int ch;
    size_t n;
    static const char *const types[] = {"sgd", "adamw", NULL};
    CHECK_EQ_INT(ddpc_config_int(c, "epochs", 1, 1, 1000, &i), DDPC_OK);
    CHECK_EQ_INT(i, 10);
    CHECK_EQ_INT(ddpc_config_int(c, "seed", 0, INT64_MIN, INT64_MAX, &i), DDPC_OK);
    CHECK_EQ_INT(i, -3);
    CHECK_EQ_INT(ddpc_config_choice(c, "optim.type", "sgd", types, &ch), DDPC_OK);
    CHECK_EQ_INT(ch, 1);
    CHECK_EQ_INT(ddpc_config_float(c, "optim.lr", 0.1, 0, 10, &f), DDPC_OK);
    CHECK_NEAR(f, 3e-4, 1e-15);
    CHECK_EQ_INT(ddpc_config_float_list(c, "optim.betas", NULL, 0, 0, 1, fl, 2, &n), DDPC_OK);
    CHECK_EQ_INT(n, 2);
    CHECK_NEAR(fl[1], 0.999, 1e-15);
    CHECK_EQ_INT(ddpc_config_bool(c, "data.shuffle", false, &b), DDPC_OK);
    CHECK(b);
    CHECK_EQ_INT(ddpc_config_string(c, "data.path", NULL, &str), DDPC_OK);
    CHECK_STR_EQ(str, "data/fashion mnist");
    CHECK_EQ_INT(ddpc_config_int_list(c, "model.hidden", NULL, 0, 1, 4096, list, 4, &n), DDPC_OK);
    CHECK_EQ_INT(n, 2);
    CHECK_EQ_INT(list[0], 256);
    CHECK_EQ_INT(list[1], 128);
    CHECK_EQ_INT(ddpc_config_seq_len(c, "tasks"), 2);
    for (size_t t = 0; t < ddpc_config_seq_len(c, "tasks"); t++) {
        char key[64];
        snprintf(key, sizeof key, "tasks.%zu.name", t);
        CHECK_EQ_INT(ddpc_config_string(c, key, NULL, &str), DDPC_OK);
        CHECK_STR_EQ(str, t == 0 ? "cls" : "reg");
        snprintf(key, sizeof key, "tasks.%zu.weight", t);
        CHECK_EQ_INT(ddpc_config_float(c, key, 1.0, 0, 1, &f), DDPC_OK);
        CHECK_NEAR(f, t == 0 ? 1.0 : 0.5, 1e-15);
    }
}

static void test_parse_and_read_everything(void)
{
    ddpc_config *c = parse_ok(SAMPLE);
    read_sample(c);
    CHECK(ddpc_config_has(c, "optim"));
    CHECK(ddpc_config_has(c, "tasks.1.name"));
    CHECK(!ddpc_config_has(c, "tasks.2.name"));
    CHECK(!ddpc_config_has(c, "optim.lr.x"));
    CHECK_EQ_INT(ddpc_config_seq_len(c, "optim"), 0);
    CHECK_EQ_INT(ddpc_config_seq_len(c, "nope"), 0);
    CHECK_EQ_INT(ddpc_config_check_unused(c), DDPC_OK);
    ddpc_config_destroy(c);
    ddpc_config_destroy(NULL);
}

static void test_defaults_when_absent(void)
{
    ddpc_config *c;
    CHECK_EQ_INT(ddpc_config_create(&c), DDPC_OK);
    int64_t i = 0, list[3];
    double f = 0;
    bool b = false;
    const char *s = "x";
    int ch = 9;
    size_t n = 0;
    static const char *const types[] = {"sgd", "adamw", NULL};
    static const int64_t hidden[] = {64, 32};
    CHECK_EQ_INT(ddpc_config_int(c, "epochs", 5, 1, 10, &i), DDPC_OK);
    CHECK_EQ_INT(i, 5);
    CHECK_EQ_INT(ddpc_config_float(c, "optim.lr", 0.25, 0, 1, &f), DDPC_OK);
    CHECK_NEAR(f, 0.25, 0);
    CHECK_EQ_INT(ddpc_config_bool(c, "data.shuffle", true, &b), DDPC_OK);
    CHECK(b);
    CHECK_EQ_INT(ddpc_config_string(c, "run.name", NULL, &s), DDPC_OK);
    CHECK(s == NULL);
    CHECK_EQ_INT(ddpc_config_choice(c, "optim.type", "adamw", types, &ch), DDPC_OK);
    CHECK_EQ_INT(ch, 1);
    CHECK_EQ_INT(ddpc_config_choice(c, "optim.kind", NULL, types, &ch), DDPC_OK);
    CHECK_EQ_INT(ch, -1);
    CHECK_EQ_INT(ddpc_config_int_list(c, "model.hidden", hidden, 2, 1, 100, list, 3, &n), DDPC_OK);
    CHECK_EQ_INT(n, 2);
    CHECK_EQ_INT(list[1], 32);
    CHECK(!ddpc_config_has(c, "epochs"));
    CHECK_EQ_INT(ddpc_config_check_unused(c), DDPC_OK);
    CHECK_ERR(ddpc_config_choice(c, "optim.type", "adam", types, &ch), DDPC_EINVAL,
              "config key 'optim.type': default 'adam' is not one of its choices");
    CHECK_ERR(ddpc_config_int_list(c, "model.hidden", hidden, 2, 1, 100, list, 1, &n), DDPC_EINVAL,
              "config key 'model.hidden': bad list arguments");
    ddpc_config_destroy(c);
}

static void test_type_and_range_errors(void)
{
    ddpc_config *c = parse_ok("optim:\n"
                              "  lr: abc\n"
                              "epochs: 2.5\n"
                              "shuffle: maybe\n"
                              "big: 99999999999999999999\n"
                              "hot: 20\n"
                              "n: 7\n");
    int64_t i = 42;
    double f = 42;
    bool b = false;
    const char *s;
    CHECK_ERR(ddpc_config_float(c, "optim.lr", 0.1, 0, 10, &f), DDPC_EINVAL,
              "x.yaml:2: key 'optim.lr' must be a number in [0, 10], got 'abc'");
    CHECK_NEAR(f, 42, 0); /* untouched on error */
    CHECK_ERR(ddpc_config_int(c, "epochs", 1, 1, 1000, &i), DDPC_EINVAL,
              "x.yaml:3: key 'epochs' must be an integer in [1, 1000], got '2.5'");
    CHECK_EQ_INT(i, 42);
    CHECK_ERR(ddpc_config_bool(c, "shuffle", true, &b), DDPC_EINVAL,
              "x.yaml:4: key 'shuffle' must be a boolean (true/false, yes/no, on/off, 1/0), got "
              "'maybe'");
    CHECK_ERR(ddpc_config_int(c, "big", 0, INT64_MIN, INT64_MAX, &i), DDPC_EINVAL,
              "x.yaml:5: key 'big' must be an integer, got '99999999999999999999'");
    CHECK_ERR(ddpc_config_float(c, "hot", 1, 0, 2.5, &f), DDPC_EINVAL,
              "x.yaml:6: key 'hot' must be a number in [0, 2.5], got '20'");
    CHECK_ERR(ddpc_config_int(c, "n", 1, 8, 16, &i), DDPC_EINVAL,
              "x.yaml:7: key 'n' must be an integer in [8, 16], got '7'");
    CHECK_ERR(ddpc_config_string(c, "optim", NULL, &s), DDPC_EINVAL,
              "x.yaml:2: key 'optim' must be a string, got a mapping");
    CHECK_ERR(ddpc_config_float(c, "optim", 0, 0, 1, &f), DDPC_EINVAL,
              "x.yaml:2: key 'optim' must be a number in [0, 1], got a mapping");
    CHECK_ERR(ddpc_config_float(c, "n", 1, 8, INFINITY, &f), DDPC_EINVAL,
              "x.yaml:7: key 'n' must be a number >= 8, got '7'");
    CHECK_ERR(ddpc_config_int(c, "n", 1, INT64_MIN, 3, &i), DDPC_EINVAL,
              "x.yaml:7: key 'n' must be an integer <= 3, got '7'");
    CHECK_ERR(ddpc_config_float(c, "optim.lr", 1, 1e-8, 1, &f), DDPC_EINVAL,
              "x.yaml:2: key 'optim.lr' must be a number in [1e-08, 1], got 'abc'");
    CHECK_EQ_INT(ddpc_config_float(c, "n", 0, 0, 10, &f), DDPC_OK); /* an int is a float */
    CHECK_NEAR(f, 7, 0);
    CHECK_ERR(ddpc_config_int(c, "", 0, 0, 1, &i), DDPC_EINVAL,
              "config getter: config and key must be given");
    ddpc_config_destroy(c);
}

/* Parses "v: <text>" and reads v with the float (is_float) or int getter. */
static ddpc_status read_number(const char *text, bool is_float, double *f, int64_t *i)
{
    char yaml[128];
    snprintf(yaml, sizeof yaml, "v: %s\n", text);
    ddpc_config *c = parse_ok(yaml);
    if (!c)
        return DDPC_EINTERNAL;
    ddpc_status s = is_float ? ddpc_config_float(c, "v", 0, -1e300, 1e300, f)
                             : ddpc_config_int(c, "v", 0, INT64_MIN, INT64_MAX, i);
    ddpc_config_destroy(c);
    return s;
}

static void test_number_syntax(void)
{
    static const struct {
        const char *text;
        double value;
    } good[] = {{"3e-4", 3e-4}, {".5", 0.5}, {"1.0", 1.0}, {"-2", -2},
                {"+1.5E+2", 150}, {"7.", 7}, {"0", 0}, {"1e300", 1e300}};
    double f;
    int64_t i;
    for (size_t k = 0; k < sizeof good / sizeof good[0]; k++) {
        CHECK_EQ_INT(read_number(good[k].text, true, &f, &i), DDPC_OK);
        CHECK_NEAR(f, good[k].value, 1e-15);
    }
    static const char *const bad_float[] = {"1.2.3", "e5", ".", "inf", ".inf", ".nan", "1_000",
                                            "0x10", "1e", "'- 1'", "1e999", "''"};
    for (size_t k = 0; k < sizeof bad_float / sizeof bad_float[0]; k++)
        CHECK_EQ_INT(read_number(bad_float[k], true, &f, &i), DDPC_EINVAL);
    CHECK_EQ_INT(read_number("-9223372036854775808", false, &f, &i), DDPC_OK);
    CHECK(i == INT64_MIN);
    CHECK_EQ_INT(read_number("+7", false, &f, &i), DDPC_OK);
    CHECK_EQ_INT(i, 7);
    static const char *const bad_int[] = {"1e3", "1_000", "0x10", "2.5", "9223372036854775808",
                                          "10.0", "'-'", "abc"};
    for (size_t k = 0; k < sizeof bad_int / sizeof bad_int[0]; k++)
        CHECK_EQ_INT(read_number(bad_int[k], false, &f, &i), DDPC_EINVAL);
}

static void test_bool_spellings(void)
{
    static const char *const yes[] = {"true", "True", "TRUE", "yes", "Yes", "on", "ON", "1"};
    static const char *const no[] = {"false", "False", "no", "NO", "off", "Off", "0"};
    char yaml[64];
    for (size_t k = 0; k < 15; k++) {
        bool want = k < 8;
        snprintf(yaml, sizeof yaml, "b: %s\n", want ? yes[k] : no[k - 8]);
        ddpc_config *c = parse_ok(yaml);
        bool b = !want;
        CHECK_EQ_INT(ddpc_config_bool(c, "b", !want, &b), DDPC_OK);
        CHECK(b == want);
        ddpc_config_destroy(c);
    }
}

static void test_strings_and_nulls(void)
{
    ddpc_config *c = parse_ok("a: ~\nb:\nc: 'null'\nd: null\ne: 12\nf: \"two words\"\n");
    const char *s = "unset";
    CHECK_EQ_INT(ddpc_config_string(c, "a", "def", &s), DDPC_OK);
    CHECK(s == NULL);
    CHECK_EQ_INT(ddpc_config_string(c, "b", "def", &s), DDPC_OK);
    CHECK(s == NULL);
    CHECK_EQ_INT(ddpc_config_string(c, "c", NULL, &s), DDPC_OK);
    CHECK_STR_EQ(s, "null");
    CHECK_EQ_INT(ddpc_config_string(c, "d", NULL, &s), DDPC_OK);
    CHECK(s == NULL);
    CHECK_EQ_INT(ddpc_config_string(c, "e", NULL, &s), DDPC_OK);
    CHECK_STR_EQ(s, "12");
    CHECK_EQ_INT(ddpc_config_string(c, "f", NULL, &s), DDPC_OK);
    CHECK_STR_EQ(s, "two words");
    CHECK(ddpc_config_has(c, "a"));
    int64_t i;
    CHECK_ERR(ddpc_config_int(c, "b", 1, 0, 5, &i), DDPC_EINVAL,
              "x.yaml:2: key 'b' must be an integer in [0, 5], got ''");
    ddpc_config_destroy(c);
}

static void test_choice(void)
{
    static const char *const types[] = {"sgd", "adamw", NULL};
    ddpc_config *c = parse_ok("optim:\n  type: adam\nsched: cosine\n");
    int ch = 7;
    CHECK_ERR(ddpc_config_choice(c, "optim.type", "sgd", types, &ch), DDPC_EINVAL,
              "x.yaml:2: key 'optim.type' must be one of sgd, adamw, got 'adam' (did you mean "
              "'adamw'?)");
    CHECK_EQ_INT(ch, 7);
    static const char *const scheds[] = {"constant", "linear", "step", NULL};
    CHECK_ERR(ddpc_config_choice(c, "sched", "constant", scheds, &ch), DDPC_EINVAL,
              "x.yaml:3: key 'sched' must be one of constant, linear, step, got 'cosine'");
    /* A value that failed its choice is still unused. */
    CHECK_EQ_INT(ddpc_config_check_unused(c), DDPC_EINVAL);
    CHECK_EQ_INT(ddpc_config_set(c, "sched=step", 1), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_choice(c, "sched", "constant", scheds, &ch), DDPC_OK);
    CHECK_EQ_INT(ch, 2);
    ddpc_config_destroy(c);
}

/* Aliases: rewritten to the canonical choice (the dump writes it; a string borrowed before stays
 * valid), a refused spelling names where it came from and why, others fail as choices do; and
 * ddpc_config_nearest, the command line's "did you mean". */
static void test_choice_alias(void)
{
    static const char *const precisions[] = {"fp32", "bf16", "fp16", NULL};
    static const ddpc_config_alias aliases[] = {
        {"16-mixed", "fp16", NULL},
        {"bf16-true", NULL, "weights stay fp32"},
        {NULL, NULL, NULL},
    };
    ddpc_config *c = parse_ok("precision: 16-mixed\nother: bf16-true\n");
    const char *before = NULL;
    CHECK_EQ_INT(ddpc_config_string(c, "precision", "fp32", &before), DDPC_OK);
    int ch = 7;
    CHECK_EQ_INT(ddpc_config_choice_alias(c, "precision", "fp32", precisions, aliases, &ch),
                 DDPC_OK);
    CHECK_EQ_INT(ch, 2);
    CHECK_STR_EQ(before, "16-mixed");
    const char *after = NULL;
    CHECK_EQ_INT(ddpc_config_string(c, "precision", "fp32", &after), DDPC_OK);
    CHECK_STR_EQ(after, "fp16");
    ch = 7;
    CHECK_ERR(ddpc_config_choice_alias(c, "other", "fp32", precisions, aliases, &ch), DDPC_EINVAL,
              "x.yaml:2: key 'other' cannot be 'bf16-true': weights stay fp32");
    CHECK_EQ_INT(ch, 7);
    CHECK_EQ_INT(ddpc_config_check_unused(c), DDPC_EINVAL); /* the refused value stays unused */
    CHECK_EQ_INT(ddpc_config_set(c, "other=bf16", 1), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_choice_alias(c, "other", "fp32", precisions, aliases, &ch), DDPC_OK);
    CHECK_EQ_INT(ch, 1);
    CHECK_EQ_INT(ddpc_config_choice_alias(c, "absent", "fp32", precisions, aliases, &ch), DDPC_OK);
    CHECK_EQ_INT(ch, 0);
    char buf[256];
    ddpc_config_dump(c, buf, sizeof buf);
    CHECK_STR_EQ(buf, "precision: fp16\nother: bf16\nabsent: fp32\n");
    CHECK_EQ_INT(ddpc_config_set(c, "precision=64", 1), DDPC_OK);
    CHECK_ERR(ddpc_config_choice_alias(c, "precision", "fp32", precisions, aliases, &ch),
              DDPC_EINVAL,
              "command line 'precision=64': key 'precision' must be one of fp32, bf16, fp16, got "
              "'64'");
    ddpc_config_destroy(c);
    static const char *const commands[] = {"train", "plan", "run", NULL};
    CHECK_STR_EQ(ddpc_config_nearest("trian", commands), "train");
    CHECK_EQ_INT(ddpc_config_nearest("train", commands) == NULL, 1);
    CHECK_EQ_INT(ddpc_config_nearest("frobnicate", commands) == NULL, 1);
}

static void test_int_list(void)
{
    ddpc_config *c = parse_ok("a: 8\n"
                              "b: [1, 2, 3]\n"
                              "c:\n"
                              "  - 1\n"
                              "  - x\n"
                              "d: [1, 5000]\n"
                              "e: {k: 1}\n"
                              "f: []\n"
                              "g: [[1]]\n");
    int64_t out[2] = {-1, -1};
    size_t n = 99;
    CHECK_EQ_INT(ddpc_config_int_list(c, "a", NULL, 0, 1, 100, out, 2, &n), DDPC_OK);
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(out[0], 8);
    out[0] = -1;
    CHECK_ERR(ddpc_config_int_list(c, "b", NULL, 0, 1, 100, out, 2, &n), DDPC_EINVAL,
              "x.yaml:2: key 'b' must have at most 2 elements, got 3");
    CHECK_ERR(ddpc_config_int_list(c, "c", NULL, 0, 1, 100, out, 2, &n), DDPC_EINVAL,
              "x.yaml:5: key 'c' element 1 must be an integer in [1, 100], got 'x'");
    CHECK_EQ_INT(out[0], -1); /* nothing written on error */
    CHECK_ERR(ddpc_config_int_list(c, "d", NULL, 0, 1, 4096, out, 2, &n), DDPC_EINVAL,
              "x.yaml:6: key 'd' element 1 must be an integer in [1, 4096], got '5000'");
    CHECK_ERR(ddpc_config_int_list(c, "e", NULL, 0, 1, 100, out, 2, &n), DDPC_EINVAL,
              "x.yaml:7: key 'e' must be a list of integers in [1, 100], got a mapping");
    CHECK_EQ_INT(ddpc_config_int_list(c, "f", NULL, 0, 1, 100, out, 2, &n), DDPC_OK);
    CHECK_EQ_INT(n, 0);
    CHECK_ERR(ddpc_config_int_list(c, "g", NULL, 0, 1, 100, out, 2, &n), DDPC_EINVAL,
              "x.yaml:9: key 'g' element 0 must be an integer in [1, 100], got a sequence");
    double fo[2];
    CHECK_ERR(ddpc_config_float_list(c, "c", NULL, 0, 0, 1, fo, 2, &n), DDPC_EINVAL,
              "x.yaml:5: key 'c' element 1 must be a number in [0, 1], got 'x'");
    static const double fdef[] = {0.5};
    CHECK_EQ_INT(ddpc_config_float_list(c, "zz", fdef, 1, 0, 1, fo, 2, &n), DDPC_OK);
    CHECK_EQ_INT(n, 1);
    CHECK_NEAR(fo[0], 0.5, 0);
    ddpc_config_destroy(c);
}

static void test_overrides(void)
{
    ddpc_config *c = parse_ok(SAMPLE);
    CHECK_EQ_INT(ddpc_config_set(c, "optim.lr=abc", 1), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_set(c, "model.hidden=[64, 32, 16]", 2), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_set(c, "data.shuffle=false", 3), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_set(c, "tasks.1.weight=0.25", 4), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_set(c, "tasks.2.name=aux", 5), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_set(c, "new.deep.key = hello world ", 6), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_set(c, "quoted='a: b'", 7), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_set(c, "model.hidden.0=65", 8), DDPC_OK);
    double f;
    bool b = true;
    int64_t list[4];
    size_t n;
    const char *s;
    CHECK_ERR(ddpc_config_float(c, "optim.lr", 0.1, 0, 10, &f), DDPC_EINVAL,
              "command line 'optim.lr=abc': key 'optim.lr' must be a number in [0, 10], got 'abc'");
    CHECK_EQ_INT(ddpc_config_int_list(c, "model.hidden", NULL, 0, 1, 4096, list, 4, &n), DDPC_OK);
    CHECK_EQ_INT(n, 3);
    CHECK_EQ_INT(list[0], 65);
    CHECK_EQ_INT(list[2], 16);
    CHECK_EQ_INT(ddpc_config_bool(c, "data.shuffle", true, &b), DDPC_OK);
    CHECK(!b);
    CHECK_EQ_INT(ddpc_config_float(c, "tasks.1.weight", 1, 0, 1, &f), DDPC_OK);
    CHECK_NEAR(f, 0.25, 0);
    CHECK_EQ_INT(ddpc_config_seq_len(c, "tasks"), 3);
    CHECK_EQ_INT(ddpc_config_string(c, "tasks.2.name", NULL, &s), DDPC_OK);
    CHECK_STR_EQ(s, "aux");
    CHECK_EQ_INT(ddpc_config_string(c, "new.deep.key", NULL, &s), DDPC_OK);
    CHECK_STR_EQ(s, "hello world");
    CHECK_EQ_INT(ddpc_config_string(c, "quoted", NULL, &s), DDPC_OK);
    CHECK_STR_EQ(s, "a: b");
    CHECK_EQ_INT(ddpc_config_set(c, "optim.lr=", 9), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_string(c, "optim.lr", "d", &s), DDPC_OK);
    CHECK(s == NULL);
    ddpc_config_destroy(c);
}

static void test_overrides_build_sequences(void)
{
    ddpc_config *c;
    CHECK_EQ_INT(ddpc_config_create(&c), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_set(c, "tasks.0.name=a", 1), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_set(c, "tasks.0.weight=0.5", 2), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_set(c, "tasks.1.name=b", 3), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_set(c, "grid.0.0=7", 4), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_seq_len(c, "tasks"), 2);
    CHECK_EQ_INT(ddpc_config_seq_len(c, "grid"), 1);
    CHECK_EQ_INT(ddpc_config_seq_len(c, "grid.0"), 1);
    const char *s;
    CHECK_EQ_INT(ddpc_config_string(c, "tasks.1.name", NULL, &s), DDPC_OK);
    CHECK_STR_EQ(s, "b");
    CHECK_ERR(ddpc_config_set(c, "fresh.3.x=1", 5), DDPC_EINVAL,
              "command line 'fresh.3.x=1': '3' in key 'fresh.3.x' is not an index into a sequence "
              "of 0 elements");
    CHECK(!ddpc_config_has(c, "fresh"));
    ddpc_config_destroy(c);
}

static void test_override_errors(void)
{
    ddpc_config *c = parse_ok(SAMPLE);
    CHECK_ERR(ddpc_config_set(c, "optim.lr", 1), DDPC_EINVAL,
              "command line 'optim.lr': expected key=value");
    CHECK_ERR(ddpc_config_set(c, "=3", 1), DDPC_EINVAL, "command line '=3': empty key before '='");
    CHECK_ERR(ddpc_config_set(c, "a..b=3", 1), DDPC_EINVAL,
              "command line 'a..b=3': empty component in key 'a..b'");
    CHECK_ERR(ddpc_config_set(c, ".a=3", 1), DDPC_EINVAL,
              "command line '.a=3': empty component in key '.a'");
    CHECK_ERR(ddpc_config_set(c, "a.=3", 1), DDPC_EINVAL,
              "command line 'a.=3': empty component in key 'a.'");
    CHECK_ERR(ddpc_config_set(c, "tasks.5.weight=1", 1), DDPC_EINVAL,
              "command line 'tasks.5.weight=1': '5' in key 'tasks.5.weight' is not an index into "
              "a sequence of 2 elements");
    CHECK_ERR(ddpc_config_set(c, "tasks.x=1", 1), DDPC_EINVAL,
              "command line 'tasks.x=1': 'x' in key 'tasks.x' is not an index into a sequence of "
              "2 elements");
    CHECK_ERR(ddpc_config_set(c, "epochs.x=1", 1), DDPC_EINVAL,
              "command line 'epochs.x=1': cannot set 'epochs.x': 'epochs' holds a value, not a "
              "mapping");
    ddpc_status s = ddpc_config_set(c, "model.hidden=[1, 2", 1);
    CHECK_EQ_INT(s, DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "command line 'model.hidden=[1, 2': invalid value: ");
    CHECK_ERR(ddpc_config_set(c, "m=[1] x", 1), DDPC_EINVAL,
              "command line 'm=[1] x': invalid value: unexpected text after character 4");
    CHECK_ERR(ddpc_config_set(c, "m={a: 1, a: 2}", 1), DDPC_EINVAL,
              "command line 'm={a: 1, a: 2}': duplicate key 'm.a'");
    CHECK_ERR(ddpc_config_set(c, "m=[*x]", 1), DDPC_EINVAL,
              "command line 'm=[*x]': anchors and aliases are not supported ('*x')");
    CHECK_ERR(ddpc_config_set(NULL, "a=1", 1), DDPC_EINVAL,
              "ddpc_config_set: config and assignment must not be NULL");
    /* Nothing above changed the tree. */
    read_sample(c);
    CHECK_EQ_INT(ddpc_config_check_unused(c), DDPC_OK);
    ddpc_config_destroy(c);
}

static void test_unknown_keys(void)
{
    ddpc_config *c = parse_ok("optim:\n"
                              "  lr: 0.1\n"
                              "  weight_decay: 0.01\n"
                              "  learning_rate: 3\n");
    double f;
    CHECK_EQ_INT(ddpc_config_float(c, "optim.lr", 0.1, 0, 10, &f), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_float(c, "optim.weight_decay", 0, 0, 1, &f), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_float(c, "optim.momentum", 0, 0, 1, &f), DDPC_OK);
    CHECK_ERR(ddpc_config_check_unused(c), DDPC_EINVAL,
              "x.yaml:4: unknown key 'optim.learning_rate' (did you mean 'optim.lr'?)");
    ddpc_config_destroy(c);

    c = parse_ok("optim:\n  lr: 1\n  momentun: 0.9\ntrain:\n  lr: 2\nzzz: 1\n");
    CHECK_EQ_INT(ddpc_config_float(c, "optim.lr", 0.1, 0, 10, &f), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_float(c, "optim.momentum", 0, 0, 1, &f), DDPC_OK);
    CHECK_ERR(ddpc_config_check_unused(c), DDPC_EINVAL,
              "x.yaml:3: unknown key 'optim.momentun' (did you mean 'optim.momentum'?)");
    CHECK_EQ_INT(ddpc_config_float(c, "optim.momentun", 0, 0, 1, &f), DDPC_OK);
    CHECK_ERR(ddpc_config_check_unused(c), DDPC_EINVAL,
              "x.yaml:5: unknown key 'train.lr' (did you mean 'optim.lr'?)");
    CHECK_EQ_INT(ddpc_config_float(c, "train.lr", 0, 0, 10, &f), DDPC_OK);
    CHECK_ERR(ddpc_config_check_unused(c), DDPC_EINVAL, "x.yaml:6: unknown key 'zzz'");
    ddpc_config_destroy(c);
}

static void test_unknown_key_shapes(void)
{
    /* An unread mapping reports its first leaf; an unread scalar list is reported whole. */
    ddpc_config *c = parse_ok("extra:\n  inner:\n    a: 1\n    b: 2\nlist:\n  - 1\n  - 2\n");
    CHECK_ERR(ddpc_config_check_unused(c), DDPC_EINVAL, "x.yaml:3: unknown key 'extra.inner.a'");
    const char *s;
    CHECK_EQ_INT(ddpc_config_string(c, "extra.inner.a", NULL, &s), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_string(c, "extra.inner.b", NULL, &s), DDPC_OK);
    CHECK_ERR(ddpc_config_check_unused(c), DDPC_EINVAL, "x.yaml:5: unknown key 'list'");
    CHECK_EQ_INT(ddpc_config_string(c, "list.0", NULL, &s), DDPC_OK);
    CHECK_ERR(ddpc_config_check_unused(c), DDPC_EINVAL, "x.yaml:7: unknown key 'list.1'");
    ddpc_config_destroy(c);

    /* A sequence of mappings is walked: the unread field of the second task is named. */
    c = parse_ok("tasks:\n  - name: a\n    weight: 1\n  - name: b\n    wieght: 2\n");
    for (size_t t = 0; t < ddpc_config_seq_len(c, "tasks"); t++) {
        char key[64];
        double f;
        snprintf(key, sizeof key, "tasks.%zu.name", t);
        CHECK_EQ_INT(ddpc_config_string(c, key, NULL, &s), DDPC_OK);
        snprintf(key, sizeof key, "tasks.%zu.weight", t);
        CHECK_EQ_INT(ddpc_config_float(c, key, 1, 0, 10, &f), DDPC_OK);
    }
    CHECK_ERR(ddpc_config_check_unused(c), DDPC_EINVAL,
              "x.yaml:5: unknown key 'tasks.1.wieght' (did you mean 'tasks.1.weight'?)");
    ddpc_config_destroy(c);

    /* Overrides are named by their argument. */
    CHECK_EQ_INT(ddpc_config_create(&c), DDPC_OK);
    double f;
    CHECK_EQ_INT(ddpc_config_float(c, "optim.lr", 0.1, 0, 10, &f), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_set(c, "optim.lrr=1", 1), DDPC_OK);
    CHECK_ERR(ddpc_config_check_unused(c), DDPC_EINVAL,
              "command line 'optim.lrr=1': unknown key 'optim.lrr' (did you mean 'optim.lr'?)");
    ddpc_config_destroy(c);
}

static void test_format_errors(void)
{
    ddpc_config *c = (ddpc_config *)1;
    CHECK_ERR(ddpc_config_parse(&c, "optim:\n  lr: 1\n  lr: 2\n", "x.yaml"), DDPC_EFORMAT,
              "x.yaml:3: duplicate key 'optim.lr' (first at line 2)");
    CHECK(c == NULL);
    CHECK_ERR(ddpc_config_parse(&c, "base: &b {lr: 1}\nother: *b\n", "x.yaml"), DDPC_EFORMAT,
              "x.yaml:1: anchors and aliases are not supported ('&b')");
    CHECK_ERR(ddpc_config_parse(&c, "a: 1\nb: *b\n", "x.yaml"), DDPC_EFORMAT,
              "x.yaml:2: anchors and aliases are not supported ('*b')");
    CHECK_ERR(ddpc_config_parse(&c, "a: 1\n---\nb: 2\n", "x.yaml"), DDPC_EFORMAT,
              "x.yaml:2: multiple YAML documents are not supported");
    CHECK_ERR(ddpc_config_parse(&c, "a: !!str 1\n", "x.yaml"), DDPC_EFORMAT,
              "x.yaml:1: tags are not supported ('tag:yaml.org,2002:str')");
    CHECK_ERR(ddpc_config_parse(&c, "- 1\n- 2\n", "x.yaml"), DDPC_EFORMAT,
              "x.yaml:1: the top level must be a mapping of keys to values");
    CHECK_ERR(ddpc_config_parse(&c, "optim:\n  a.b: 1\n", "x.yaml"), DDPC_EFORMAT,
              "x.yaml:2: key 'optim.a.b' contains '.'; write nested mappings instead");
    CHECK_ERR(ddpc_config_parse(&c, "? [a]\n: 1\n", "x.yaml"), DDPC_EFORMAT,
              "x.yaml:1: keys must be scalars, not mappings or sequences");
    CHECK_ERR(ddpc_config_parse(&c, "a:\n  '': 1\n", "x.yaml"), DDPC_EFORMAT,
              "x.yaml:2: empty key in 'a'");
    ddpc_status s = ddpc_config_parse(&c, "a: 1\n b: 2\nc: [1, 2\n", "cfg/x.yaml");
    CHECK_EQ_INT(s, DDPC_EFORMAT);
    CHECK_STR_CONTAINS(ddpc_last_error(), "cfg/x.yaml:2:");
    CHECK_STR_CONTAINS(ddpc_last_error(), "mapping values are not allowed in this context");
    s = ddpc_config_parse(&c, "a: [1, 2\nb: 1\n", "x.yaml");
    CHECK_EQ_INT(s, DDPC_EFORMAT);
    CHECK_STR_CONTAINS(ddpc_last_error(), "x.yaml:2:");
    CHECK_STR_CONTAINS(ddpc_last_error(), "did not find expected ',' or ']'");
    char deep[400] = "a: ";
    for (int i = 0; i < 70; i++)
        strcat(deep, "[");
    CHECK_ERR(ddpc_config_parse(&c, deep, "x.yaml"), DDPC_EFORMAT,
              "x.yaml:1: nesting deeper than 64 levels");
}

static void test_empty_documents(void)
{
    static const char *const empties[] = {"", "# only a comment\n", "---\n", "---\n...\n", "{}"};
    for (size_t k = 0; k < sizeof empties / sizeof empties[0]; k++) {
        ddpc_config *c = parse_ok(empties[k]);
        CHECK(c != NULL);
        CHECK(!ddpc_config_has(c, "a"));
        CHECK_EQ_INT(ddpc_config_check_unused(c), DDPC_OK);
        ddpc_config_destroy(c);
    }
}

static void test_load_files(void)
{
    ddpc_config *c = (ddpc_config *)1;
    CHECK_ERR(ddpc_config_load(&c, "/nonexistent/x.yaml"), DDPC_EIO,
              "cannot open config '/nonexistent/x.yaml': No such file or directory");
    CHECK(c == NULL);
    char path[64];
    snprintf(path, sizeof path, "/tmp/ddpc_test_config_%d.yaml", (int)getpid());
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    for (int i = 0; i < 400; i++) /* bigger than the first read buffer */
        fprintf(f, "k%d: %d\n", i, i);
    fprintf(f, "optim:\n  lr: abc\n");
    fclose(f);
    CHECK_EQ_INT(ddpc_config_load(&c, path), DDPC_OK);
    int64_t v;
    CHECK_EQ_INT(ddpc_config_int(c, "k399", 0, 0, 1000, &v), DDPC_OK);
    CHECK_EQ_INT(v, 399);
    double lr;
    char want[160];
    snprintf(want, sizeof want, "%s:402: key 'optim.lr' must be a number in [0, 10], got 'abc'",
             path);
    CHECK_ERR(ddpc_config_float(c, "optim.lr", 0.1, 0, 10, &lr), DDPC_EINVAL, want);
    snprintf(want, sizeof want, "%s:1: unknown key 'k0'", path);
    CHECK_ERR(ddpc_config_check_unused(c), DDPC_EINVAL, want);
    ddpc_config_destroy(c);
    remove(path);
}

static void test_dump(void)
{
    ddpc_config *c = parse_ok(SAMPLE);
    read_sample(c);
    const char *s;
    double f;
    static const int64_t def[] = {1, 2};
    int64_t list[2];
    size_t n;
    CHECK_EQ_INT(ddpc_config_string(c, "run.name", "my run: #1", &s), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_string(c, "run.resume", NULL, &s), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_float(c, "optim.wd", 0.1, 0, 1, &f), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_int_list(c, "model.kernel", def, 2, 1, 9, list, 2, &n), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_set(c, "tasks.0.name=a \"b\"", 1), DDPC_OK);
    const char *want = "epochs: 10\n"
                       "seed: -3\n"
                       "optim.type: adamw\n"
                       "optim.lr: 3e-4\n"
                       "optim.betas: [0.9, 0.999]\n"
                       "data.shuffle: yes\n"
                       "data.path: data/fashion mnist\n"
                       "model.hidden: [256, 128]\n"
                       "tasks.0.name: a \"b\"\n"
                       "tasks.0.weight: 1.0\n"
                       "tasks.1.name: reg\n"
                       "tasks.1.weight: .5\n"
                       "run.name: \"my run: #1\"\n"
                       "run.resume: null\n"
                       "optim.wd: 0.1\n"
                       "model.kernel: [1, 2]\n";
    char buf[1024];
    size_t len = ddpc_config_dump(c, buf, sizeof buf);
    CHECK_STR_EQ(buf, want);
    CHECK_EQ_INT(len, strlen(want));
    char small[8];
    CHECK_EQ_INT(ddpc_config_dump(c, small, sizeof small), strlen(want));
    CHECK_STR_EQ(small, "epochs:");
    CHECK_EQ_INT(ddpc_config_dump(c, NULL, 0), strlen(want));
    ddpc_config_destroy(c);
}

/* Parse, override, read, check and dump with the k-th allocation failing, for every k until a run
 * completes: each step either succeeds or says DDPC_ENOMEM, and nothing leaks. */
static void test_failing_allocator(void)
{
    int64_t live = ddpc_alloc_live();
    bool completed = false;
    for (int64_t k = 0; k < 5000 && !completed; k++) {
        ddpc_alloc_fail_after(k);
        ddpc_config *c = NULL;
        ddpc_status s = ddpc_config_parse(&c, SAMPLE, "x.yaml");
        CHECK(s == DDPC_OK || s == DDPC_ENOMEM);
        if (s == DDPC_OK)
            s = ddpc_config_set(c, "tasks.2.name=aux", 1);
        if (s == DDPC_OK)
            s = ddpc_config_set(c, "model.hidden=[1, {a: 2}]", 2);
        if (s == DDPC_OK)
            s = ddpc_config_set(c, "new.a.0.c=[1]", 3);
        int64_t v;
        if (s == DDPC_OK)
            s = ddpc_config_int(c, "epochs", 1, 1, 100, &v);
        const char *str;
        if (s == DDPC_OK)
            s = ddpc_config_string(c, "tasks.2.name", NULL, &str);
        CHECK(s == DDPC_OK || s == DDPC_ENOMEM);
        if (s == DDPC_OK) {
            CHECK_EQ_INT(ddpc_config_check_unused(c), DDPC_EINVAL);
            char buf[256];
            ddpc_config_dump(c, buf, sizeof buf);
            completed = true;
        }
        ddpc_alloc_fail_after(-1);
        ddpc_config_destroy(c);
        CHECK_EQ_INT(ddpc_alloc_live(), live);
    }
    CHECK(completed);
    ddpc_config *c = NULL;
    ddpc_alloc_fail_after(0);
    CHECK_EQ_INT(ddpc_config_create(&c), DDPC_ENOMEM);
    CHECK(c == NULL);
    ddpc_alloc_fail_after(-1);
    CHECK_EQ_INT(ddpc_alloc_live(), live);
}

/* A map of 20000 keys (the index behind a map grows many times): keys and overrides find their
 * own values, a duplicate anywhere is still caught, and an unknown key is still named. */
static void test_large_maps(void)
{
    enum { N = 20000 };
    size_t cap = (size_t)N * 32 + 64;
    char *text = malloc(cap);
    CHECK(text != NULL);
    if (!text)
        return;
    size_t at = (size_t)snprintf(text, cap, "big:\n");
    for (int i = 0; i < N; i++)
        at += (size_t)snprintf(text + at, cap - at, "  k%d: %d\n", i, 3 * i);
    ddpc_config *c = NULL;
    CHECK_EQ_INT(ddpc_config_parse(&c, text, "x.yaml"), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_set(c, "big.k7=-1", 1), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_set(c, "big.new=5", 2), DDPC_OK);
    bool all = true; /* a sample: each getter also records its key in a short linear list */
    for (int i = 0; i < N; i += (i < 50 || i > N - 50) ? 1 : 97) {
        char key[32];
        snprintf(key, sizeof key, "big.k%d", i);
        int64_t v = 0;
        all = all && ddpc_config_int(c, key, 0, -10, 1000000, &v) == DDPC_OK &&
              v == (i == 7 ? -1 : 3 * i);
    }
    CHECK(all);
    int64_t v = 0;
    CHECK_EQ_INT(ddpc_config_int(c, "big.new", 0, 0, 10, &v), DDPC_OK);
    CHECK_EQ_INT(v, 5);
    CHECK(!ddpc_config_has(c, "big.k20000"));
    ddpc_config_destroy(c);

    at += (size_t)snprintf(text + at, cap - at, "  k12345: 1\n");
    c = NULL;
    CHECK_ERR(ddpc_config_parse(&c, text, "x.yaml"), DDPC_EFORMAT,
              "x.yaml:20002: duplicate key 'big.k12345' (first at line 12347)");
    free(text);
}

int main(void)
{
    RUN_TEST(test_parse_and_read_everything);
    RUN_TEST(test_large_maps);
    RUN_TEST(test_defaults_when_absent);
    RUN_TEST(test_type_and_range_errors);
    RUN_TEST(test_number_syntax);
    RUN_TEST(test_bool_spellings);
    RUN_TEST(test_strings_and_nulls);
    RUN_TEST(test_choice);
    RUN_TEST(test_choice_alias);
    RUN_TEST(test_int_list);
    RUN_TEST(test_overrides);
    RUN_TEST(test_overrides_build_sequences);
    RUN_TEST(test_override_errors);
    RUN_TEST(test_unknown_keys);
    RUN_TEST(test_unknown_key_shapes);
    RUN_TEST(test_format_errors);
    RUN_TEST(test_empty_documents);
    RUN_TEST(test_load_files);
    RUN_TEST(test_dump);
    RUN_TEST(test_failing_allocator);
    return check_summary();
}
