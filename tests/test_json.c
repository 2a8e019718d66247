// SPDX-License-Identifier: MIT
/* Tests for src/core/json.c: values, escapes and surrogates, integer limits, strictness (each
 * invalid document is rejected with a byte position), depth bound, duplicate keys, failing
 * allocator, and a seeded mutation fuzz loop that must never crash or leak (run under ASan). */
#include <ddpc/alloc.h>
#include <ddpc/rng.h>

#include <stdint.h>

#include "check.h"
#include "core/json.h"

static ddpc__json *parse(const char *text)
{
    ddpc__json *v = NULL;
    ddpc_status s = ddpc__json_parse(&v, text, strlen(text), "test");
    if (s != DDPC_OK)
        return NULL;
    return v;
}

static void test_values(void)
{
    ddpc__json *v = parse(" {\"a\": [1, -2, 3.5e1, true, false, null, \"x\"], \"b\": {}} \n");
    CHECK(v != NULL);
    if (!v)
        return;
    CHECK_EQ_INT(v->type, DDPC__JSON_OBJECT);
    CHECK_EQ_INT(v->count, 2);
    const ddpc__json *a = ddpc__json_get(v, "a");
    CHECK(a && a->type == DDPC__JSON_ARRAY && a->count == 7);
    if (a && a->count == 7) {
        CHECK(a->items[0].is_int && a->items[0].integer == 1);
        CHECK(a->items[1].is_int && a->items[1].integer == -2);
        CHECK(!a->items[2].is_int);
        CHECK_NEAR(a->items[2].number, 35.0, 0);
        CHECK(a->items[3].type == DDPC__JSON_BOOL && a->items[3].boolean);
        CHECK(a->items[4].type == DDPC__JSON_BOOL && !a->items[4].boolean);
        CHECK_EQ_INT(a->items[5].type, DDPC__JSON_NULL);
        CHECK(a->items[6].type == DDPC__JSON_STRING && strcmp(a->items[6].str, "x") == 0);
    }
    CHECK(ddpc__json_get(v, "b") && ddpc__json_get(v, "b")->count == 0);
    CHECK(ddpc__json_get(v, "c") == NULL);
    ddpc__json_free(v);
}

static void test_strings(void)
{
    ddpc__json *v = parse("\"q\\\" b\\\\ s\\/ \\b\\f\\n\\r\\t \\u00e9 \\u20AC \\ud83d\\ude00 \xc3\xa9\"");
    CHECK(v != NULL);
    if (v) {
        const char *want = "q\" b\\ s/ \b\f\n\r\t \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xc3\xa9";
        CHECK(strcmp(v->str, want) == 0);
        CHECK_EQ_INT(v->str_len, strlen(want));
    }
    ddpc__json_free(v);
}

static void test_integers(void)
{
    ddpc__json *v = parse("[9223372036854775807, -9223372036854775808, 9223372036854775808, -0]");
    CHECK(v != NULL);
    if (!v)
        return;
    CHECK(v->items[0].is_int && v->items[0].integer == INT64_MAX);
    CHECK(v->items[1].is_int && v->items[1].integer == INT64_MIN);
    CHECK(!v->items[2].is_int);
    CHECK(v->items[3].is_int && v->items[3].integer == 0);
    ddpc__json_free(v);
}

static void test_rejects_invalid(void)
{
    const char *bad[] = {
        "", " ", "{", "}", "[1,]", "[,1]", "{\"a\":1,}", "{\"a\" 1}", "{a:1}", "{1:2}",
        "[01]", "[1.]", "[.5]", "[1e]", "[+1]", "[-]", "[0x10]", "[NaN]", "[Infinity]",
        "\"abc", "\"a\\x\"", "\"\\u12\"", "\"\\u12g4\"", "\"\\ud800\"", "\"\\udc00\"",
        "\"\\ud800\\u0041\"", "\"\\u0000\"", "\"tab\there\"", "\"\xc0\xaf\"", "\"\xed\xa0\x80\"",
        "\"\xf4\x90\x80\x80\"", "\"\xe2\x82\"", "tru", "nul", "[true false]", "{} {}", "[1] x",
        "'a'",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ddpc__json *v = (ddpc__json *)1;
        ddpc_status s = ddpc__json_parse(&v, bad[i], strlen(bad[i]), "doc");
        if (s != DDPC_EFORMAT || v != NULL) {
            fprintf(stderr, "accepted invalid JSON #%zu: %s\n", i, bad[i]);
            check_failures_in_test++;
        }
        CHECK_STR_CONTAINS(ddpc_last_error(), "doc: invalid JSON at byte ");
    }
    /* An embedded NUL byte outside a string. */
    ddpc__json *v = NULL;
    CHECK_EQ_INT(ddpc__json_parse(&v, "[1,\0 2]", 7, "doc"), DDPC_EFORMAT);
    CHECK_STR_CONTAINS(ddpc_last_error(), "byte 3");
}

static void test_depth_bound(void)
{
    char deep[300];
    for (int depth = 60; depth <= 70; depth += 10) {
        for (int i = 0; i < depth; i++) {
            deep[i] = '[';
            deep[2 * depth - 1 - i] = ']';
        }
        ddpc__json *v = NULL;
        ddpc_status s = ddpc__json_parse(&v, deep, (size_t)(2 * depth), "deep");
        CHECK_EQ_INT(s, depth <= DDPC__JSON_MAX_DEPTH ? DDPC_OK : DDPC_EFORMAT);
        ddpc__json_free(v);
    }
    CHECK_STR_CONTAINS(ddpc_last_error(), "nested too deeply");
    /* Deep garbage is rejected before any stack trouble. */
    static char many[100000];
    memset(many, '[', sizeof many);
    ddpc__json *v = NULL;
    CHECK_EQ_INT(ddpc__json_parse(&v, many, sizeof many, "many"), DDPC_EFORMAT);
}

static void test_duplicate_keys(void)
{
    ddpc__json *v = parse("{\"b\":1,\"a\":2,\"b\":3}");
    CHECK(v != NULL);
    CHECK_EQ_INT(ddpc__json_check_unique_keys(v, "obj"), DDPC_EFORMAT);
    CHECK_STR_CONTAINS(ddpc_last_error(), "obj: duplicate key 'b'");
    CHECK_EQ_INT(ddpc__json_get(v, "b")->integer, 1);
    ddpc__json_free(v);
    v = parse("{\"b\":1,\"a\":2}");
    CHECK_EQ_INT(ddpc__json_check_unique_keys(v, "obj"), DDPC_OK);
    ddpc__json_free(v);
}

static const char *sample =
    "{\"__metadata__\":{\"k\":\"v\\u00e9\"},\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],"
    "\"data_offsets\":[0,24]},\"b\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[24,28]}}";

static void test_failing_allocator(void)
{
    int64_t live = ddpc_alloc_live();
    int failures = 0;
    for (int64_t k = 0; k < 10000; k++) {
        ddpc__json *v = NULL;
        ddpc_alloc_fail_after(k);
        ddpc_status s = ddpc__json_parse(&v, sample, strlen(sample), "s");
        ddpc_alloc_fail_after(-1);
        ddpc__json_free(v);
        CHECK_EQ_INT(ddpc_alloc_live(), live);
        if (s == DDPC_OK)
            break;
        CHECK_EQ_INT(s, DDPC_ENOMEM);
        failures++;
    }
    CHECK(failures > 10);
}

/* Mutations of a valid header (byte flips, truncations, insertions) must parse or fail cleanly. */
static void test_mutation_fuzz(void)
{
    ddpc_rng r = ddpc_rng_make(2024, 1);
    size_t n = strlen(sample);
    char buf[512];
    int ok = 0;
    for (int iter = 0; iter < 20000; iter++) {
        memcpy(buf, sample, n);
        size_t len = n;
        int edits = 1 + (int)ddpc_rng_below(&r, 4);
        for (int e = 0; e < edits; e++) {
            size_t at = (size_t)ddpc_rng_below(&r, len);
            switch (ddpc_rng_below(&r, 3)) {
            case 0:
                buf[at] = (char)ddpc_rng_below(&r, 256);
                break;
            case 1:
                len = at;
                break;
            default:
                if (len + 1 < sizeof buf) {
                    memmove(buf + at + 1, buf + at, len - at);
                    buf[at] = "{}[]\",:\\0-e"[ddpc_rng_below(&r, 11)];
                    len++;
                }
            }
            if (len == 0)
                break;
        }
        ddpc__json *v = NULL;
        if (ddpc__json_parse(&v, buf, len, "fuzz") == DDPC_OK)
            ok++;
        ddpc__json_free(v);
    }
    CHECK(ok > 0 && ok < 20000);
    CHECK_EQ_INT(ddpc_alloc_live(), 0);
}

int main(void)
{
    RUN_TEST(test_values);
    RUN_TEST(test_strings);
    RUN_TEST(test_integers);
    RUN_TEST(test_rejects_invalid);
    RUN_TEST(test_depth_bound);
    RUN_TEST(test_duplicate_keys);
    RUN_TEST(test_failing_allocator);
    RUN_TEST(test_mutation_fuzz);
    return check_summary();
}
