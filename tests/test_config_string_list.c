// SPDX-License-Identifier: MIT
/* Tests for ddpc_config_string_list (src/core/config_get.c), the getter behind `plugins:`: block,
 * flow and single-string forms, absent, empty and null keys, an override replacing the list, the
 * dump writing it back as a flow list that parses to the same strings, and errors naming the
 * element. */
#include <ddpc/config.h>
#include <ddpc/status.h>

#include <stdio.h>

#include "check.h"

static ddpc_config *parse(const char *text)
{
    ddpc_config *c = NULL;
    CHECK_EQ_INT(ddpc_config_parse(&c, text, "x.yaml"), DDPC_OK);
    return c;
}

/* block and flow sequences, and one string, read as lists; the values are marked used */
static void test_forms(void)
{
    ddpc_config *c = parse("a:\n  - one.so\n  - \"two words.so\"\nb: [x, y, z]\nc: lone.so\n");
    const char *s[4];
    size_t n = 0;
    CHECK_EQ_INT(ddpc_config_string_list(c, "a", s, 4, &n), DDPC_OK);
    CHECK_EQ_INT(n, 2);
    CHECK(n == 2 && strcmp(s[0], "one.so") == 0 && strcmp(s[1], "two words.so") == 0);
    CHECK_EQ_INT(ddpc_config_string_list(c, "b", s, 4, &n), DDPC_OK);
    CHECK(n == 3 && strcmp(s[2], "z") == 0);
    CHECK_EQ_INT(ddpc_config_string_list(c, "c", s, 4, &n), DDPC_OK);
    CHECK(n == 1 && strcmp(s[0], "lone.so") == 0);
    CHECK_EQ_INT(ddpc_config_check_unused(c), DDPC_OK);
    ddpc_config_destroy(c);
}

/* absent, empty and null all read as no elements; the dump writes the absent default as [] */
static void test_empty(void)
{
    ddpc_config *c = parse("e: []\nz:\n");
    const char *s[2];
    size_t n = 9;
    CHECK_EQ_INT(ddpc_config_string_list(c, "absent", s, 2, &n), DDPC_OK);
    CHECK_EQ_INT(n, 0);
    n = 9;
    CHECK_EQ_INT(ddpc_config_string_list(c, "e", s, 2, &n), DDPC_OK);
    CHECK_EQ_INT(n, 0);
    n = 9;
    CHECK_EQ_INT(ddpc_config_string_list(c, "z", s, 2, &n), DDPC_OK);
    CHECK_EQ_INT(n, 0);
    CHECK_EQ_INT(ddpc_config_check_unused(c), DDPC_OK);
    char dump[256];
    ddpc_config_dump(c, dump, sizeof dump);
    CHECK_STR_CONTAINS(dump, "absent: []\n");
    ddpc_config_destroy(c);
}

/* an override replaces the list; the dump's flow list parses back to the same strings */
static void test_override_and_dump(void)
{
    ddpc_config *c = parse("plugins: [a.so]\n");
    CHECK_EQ_INT(ddpc_config_set(c, "plugins=[\"/p/a b.so\", \"/q/c,d.so\"]", 1), DDPC_OK);
    const char *s[4];
    size_t n = 0;
    CHECK_EQ_INT(ddpc_config_string_list(c, "plugins", s, 4, &n), DDPC_OK);
    CHECK(n == 2 && strcmp(s[0], "/p/a b.so") == 0 && strcmp(s[1], "/q/c,d.so") == 0);
    char dump[256];
    ddpc_config_dump(c, dump, sizeof dump);
    ddpc_config *back = parse(dump);
    const char *t[4];
    size_t m = 0;
    CHECK_EQ_INT(ddpc_config_string_list(back, "plugins", t, 4, &m), DDPC_OK);
    CHECK(m == 2 && strcmp(t[0], s[0]) == 0 && strcmp(t[1], s[1]) == 0);
    ddpc_config_destroy(back);
    ddpc_config_destroy(c);
}

/* a mapping, a nested or null element and too many elements are errors naming file and line */
static void test_errors(void)
{
    ddpc_config *c = parse("m: {a: 1}\nn: [a, [b]]\nu: [a, ~]\nl: [a, b, c]\n");
    const char *s[2];
    size_t n = 7;
    CHECK_EQ_INT(ddpc_config_string_list(c, "m", s, 2, &n), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "x.yaml:1: key 'm' must be a list of strings");
    CHECK_EQ_INT(ddpc_config_string_list(c, "n", s, 2, &n), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "key 'n' element 1 must be a string");
    CHECK_EQ_INT(ddpc_config_string_list(c, "u", s, 2, &n), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "key 'u' element 1 must be a string");
    CHECK_EQ_INT(ddpc_config_string_list(c, "l", s, 2, &n), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "x.yaml:4: key 'l' must have at most 2 elements, got 3");
    CHECK_EQ_INT(n, 7); /* left unchanged */
    ddpc_config_destroy(c);
}

int main(void)
{
    RUN_TEST(test_forms);
    RUN_TEST(test_empty);
    RUN_TEST(test_override_and_dump);
    RUN_TEST(test_errors);
    return check_summary();
}
