// SPDX-License-Identifier: MIT
/* The effective configuration as "dotted.key: value" lines, one per key a getter asked for.
 * Invariant: output is bounded by the caller's buffer (always NUL-terminated when cap > 0) while
 * the returned length counts everything, like snprintf; strings that would not read back as the
 * same plain YAML scalar are double-quoted. */
#include "core/config_impl.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    char *buf;
    size_t cap, len;
} sink;

static void put(sink *s, const char *str, size_t n)
{
    if (s->cap && s->len < s->cap - 1) {
        size_t room = s->cap - 1 - s->len;
        memcpy(s->buf + s->len, str, n < room ? n : room);
    }
    s->len += n;
}

static void puts_(sink *s, const char *str)
{
    put(s, str, strlen(str));
}

static bool is_null_word(const char *t)
{
    return strcmp(t, "~") == 0 || strcmp(t, "null") == 0 || strcmp(t, "Null") == 0 ||
           strcmp(t, "NULL") == 0;
}

/* Whether `t` can be written as a plain scalar, in block and flow context alike. */
static bool plain_ok(const char *t)
{
    size_t n = strlen(t);
    if (!n || is_null_word(t) || t[0] == ' ' || t[n - 1] == ' ')
        return false;
    if (strchr("-?:", t[0]) && (t[1] == '\0' || t[1] == ' '))
        return false;
    if (strchr("&*!|>'\"%@`#", t[0]))
        return false;
    for (const char *p = t; *p; p++) {
        if ((unsigned char)*p < 0x20 || *p == 0x7f || strchr(",[]{}", *p))
            return false;
        if ((*p == ':' && (p[1] == ' ' || p[1] == '\0')) || (*p == '#' && p[-1] == ' '))
            return false;
    }
    return true;
}

static void put_text(sink *s, const char *t)
{
    if (plain_ok(t)) {
        puts_(s, t);
        return;
    }
    puts_(s, "\"");
    for (const char *p = t; *p; p++) {
        char esc[8];
        unsigned char ch = (unsigned char)*p;
        if (ch == '"' || ch == '\\')
            snprintf(esc, sizeof esc, "\\%c", ch);
        else if (ch == '\n')
            snprintf(esc, sizeof esc, "\\n");
        else if (ch == '\t')
            snprintf(esc, sizeof esc, "\\t");
        else if (ch < 0x20 || ch == 0x7f)
            snprintf(esc, sizeof esc, "\\x%02x", ch);
        else
            snprintf(esc, sizeof esc, "%c", ch);
        puts_(s, esc);
    }
    puts_(s, "\"");
}

static void put_node(sink *s, const ddpc__cfg_node *n)
{
    if (n->kind == DDPC__CFG_SCALAR) {
        if (ddpc__cfg_is_null(n))
            puts_(s, "null");
        else
            put_text(s, n->text);
        return;
    }
    bool map = n->kind == DDPC__CFG_MAP;
    puts_(s, map ? "{" : "[");
    for (size_t i = 0; i < n->len; i++) {
        if (i)
            puts_(s, ", ");
        if (map) {
            put_text(s, n->keys[i]);
            puts_(s, ": ");
        }
        put_node(s, n->kids[i]);
    }
    puts_(s, map ? "}" : "]");
}

size_t ddpc_config_dump(const ddpc_config *c, char *buf, size_t cap)
{
    sink s = {buf, buf ? cap : 0, 0};
    for (size_t i = 0; c && i < c->n_known; i++) {
        const ddpc__cfg_known *k = &c->known[i];
        const ddpc__cfg_node *n = ddpc__cfg_find(c, k->key);
        puts_(&s, k->key);
        puts_(&s, ": ");
        if (n)
            put_node(&s, n);
        else if (!k->def)
            puts_(&s, "null");
        else if (k->def_yaml)
            puts_(&s, k->def);
        else
            put_text(&s, k->def);
        puts_(&s, "\n");
    }
    if (s.cap)
        s.buf[s.len < s.cap ? s.len : s.cap - 1] = '\0';
    return s.len;
}
