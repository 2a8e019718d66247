// SPDX-License-Identifier: MIT
/* Strict recursive-descent JSON parser over untrusted bytes (see json.h).
 * Invariant: every node reachable through a parent's `count` is fully initialised (possibly
 * partially filled), so one ddpc__json_free of the root releases any half-built tree; the cursor
 * never passes `end`; recursion is bounded by DDPC__JSON_MAX_DEPTH. */
#include "core/json.h"

#include <ddpc/alloc.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *start, *p, *end;
    const char *origin;
    int depth;
} parser;

static ddpc_status parse_value(parser *ps, ddpc__json *v);

static ddpc_status syntax(const parser *ps, const char *why)
{
    return ddpc_errorf(DDPC_EFORMAT, "%s: invalid JSON at byte %zu: %s", ps->origin,
                       (size_t)(ps->p - ps->start), why);
}

static ddpc_status oom(const parser *ps)
{
    return ddpc_errorf(DDPC_ENOMEM, "%s: out of memory parsing JSON", ps->origin);
}

static void skip_ws(parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

/* Length (1..4) of the valid UTF-8 sequence at p (< end), or 0: rejects overlong forms,
 * surrogates and code points above U+10FFFF. */
static size_t utf8_len(const unsigned char *p, const unsigned char *end)
{
    unsigned c = p[0];
    size_t n;
    unsigned lo = 0x80, hi = 0xBF;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        lo = c == 0xE0 ? 0xA0 : 0x80;
        hi = c == 0xED ? 0x9F : 0xBF;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        lo = c == 0xF0 ? 0x90 : 0x80;
        hi = c == 0xF4 ? 0x8F : 0xBF;
    } else
        return 0;
    if ((size_t)(end - p) < n || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xBF)
            return 0;
    return n;
}

static size_t utf8_put(char *out, uint32_t cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Reads the 4 hex digits after "\u" at ps->p (which points at 'u'). */
static ddpc_status read_hex4(parser *ps, uint32_t *cp)
{
    if (ps->end - ps->p < 5)
        return syntax(ps, "truncated \\u escape");
    *cp = 0;
    for (int i = 1; i <= 4; i++) {
        char h = ps->p[i];
        unsigned d = h >= '0' && h <= '9'   ? (unsigned)(h - '0')
                     : h >= 'a' && h <= 'f' ? (unsigned)(h - 'a' + 10)
                     : h >= 'A' && h <= 'F' ? (unsigned)(h - 'A' + 10)
                                            : 16u;
        if (d == 16)
            return syntax(ps, "bad hex digit in \\u escape");
        *cp = *cp << 4 | d;
    }
    ps->p += 5;
    return DDPC_OK;
}

/* A \uXXXX escape (ps->p at 'u'), combining a surrogate pair; writes UTF-8 to out. */
static ddpc_status parse_u_escape(parser *ps, char *out, size_t *n)
{
    uint32_t cp;
    DDPC_TRY(read_hex4(ps, &cp));
    if (cp >= 0xDC00 && cp <= 0xDFFF)
        return syntax(ps, "lone low surrogate in \\u escape");
    if (cp >= 0xD800 && cp <= 0xDBFF) {
        uint32_t lo;
        if (ps->end - ps->p < 2 || ps->p[0] != '\\' || ps->p[1] != 'u')
            return syntax(ps, "high surrogate not followed by a low surrogate");
        ps->p++;
        DDPC_TRY(read_hex4(ps, &lo));
        if (lo < 0xDC00 || lo > 0xDFFF)
            return syntax(ps, "high surrogate not followed by a low surrogate");
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    }
    if (cp == 0)
        return syntax(ps, "\\u0000 (NUL) in a string is not supported");
    *n = utf8_put(out, cp);
    return DDPC_OK;
}

/* One escape sequence (ps->p just after the backslash). */
static ddpc_status parse_escape(parser *ps, char *out, size_t *n)
{
    if (ps->p >= ps->end)
        return syntax(ps, "unterminated string");
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    const char *hit = *ps->p ? strchr(from, *ps->p) : NULL;
    if (hit) {
        out[0] = to[hit - from];
        *n = 1;
        ps->p++;
        return DDPC_OK;
    }
    if (*ps->p == 'u')
        return parse_u_escape(ps, out, n);
    return syntax(ps, "invalid escape character");
}

/* A string at ps->p (which is '"') into a new NUL-terminated buffer *out of *len bytes. */
static ddpc_status parse_string(parser *ps, char **out, size_t *len)
{
    const char *q = ps->p + 1;
    while (q < ps->end && *q != '"')
        q += (*q == '\\' && q + 1 < ps->end) ? 2 : 1;
    if (q >= ps->end)
        return syntax(ps, "unterminated string");
    /* Decoding never lengthens: an escape of k bytes yields at most k bytes of UTF-8. */
    char *s = ddpc_malloc((size_t)(q - ps->p));
    if (!s)
        return oom(ps);
    size_t n = 0;
    ps->p++;
    while (*ps->p != '"') {
        const unsigned char c = (unsigned char)*ps->p;
        size_t k = 0;
        ddpc_status st = DDPC_OK;
        if (c == '\\') {
            ps->p++;
            st = parse_escape(ps, s + n, &k);
        } else if (c < 0x20) {
            st = syntax(ps, "control character in string");
        } else if ((k = utf8_len((const unsigned char *)ps->p, (const unsigned char *)q)) == 0) {
            st = syntax(ps, "invalid UTF-8 in string");
        } else {
            memcpy(s + n, ps->p, k);
            ps->p += k;
        }
        if (st != DDPC_OK) {
            ddpc_free(s);
            return st;
        }
        n += k;
    }
    ps->p++;
    s[n] = '\0';
    *out = s;
    *len = n;
    return DDPC_OK;
}

/* Sets is_int and integer for the integral literal [b, e) ("-"? digits) if it fits int64. */
static void set_integer(ddpc__json *v, const char *b, const char *e)
{
    bool neg = *b == '-';
    uint64_t mag = 0, limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    for (const char *d = b + neg; d < e; d++) {
        uint64_t digit = (uint64_t)(*d - '0');
        if (mag > (limit - digit) / 10)
            return;
        mag = mag * 10 + digit;
    }
    v->is_int = true;
    v->integer = !neg ? (int64_t)mag : mag == limit ? INT64_MIN : -(int64_t)mag;
}

static ddpc_status parse_number(parser *ps, ddpc__json *v)
{
    const char *b = ps->p, *p = ps->p, *e = ps->end;
    bool integral = true;
    if (p < e && *p == '-')
        p++;
    if (p < e && *p == '0')
        p++;
    else if (p < e && *p >= '1' && *p <= '9')
        while (p < e && *p >= '0' && *p <= '9')
            p++;
    else
        return syntax(ps, "invalid number");
    if (p < e && *p == '.') {
        integral = false;
        if (++p >= e || *p < '0' || *p > '9')
            return syntax(ps, "digit expected after '.'");
        while (p < e && *p >= '0' && *p <= '9')
            p++;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        integral = false;
        if (++p < e && (*p == '+' || *p == '-'))
            p++;
        if (p >= e || *p < '0' || *p > '9')
            return syntax(ps, "digit expected in exponent");
        while (p < e && *p >= '0' && *p <= '9')
            p++;
    }
    char buf[128];
    if ((size_t)(p - b) >= sizeof buf)
        return syntax(ps, "number longer than 127 characters");
    memcpy(buf, b, (size_t)(p - b));
    buf[p - b] = '\0';
    v->type = DDPC__JSON_NUMBER;
    v->number = strtod(buf, NULL);
    if (integral)
        set_integer(v, b, p);
    ps->p = p;
    return DDPC_OK;
}

/* Makes room for one more item (and key, for objects), zero-initialised, and counts it. */
static ddpc_status push_item(parser *ps, ddpc__json *v, size_t *cap)
{
    if (v->count == *cap) {
        size_t ncap = *cap ? 2 * *cap : 4;
        ddpc__json *items = ddpc_calloc(ncap, sizeof *items);
        char **keys = v->type == DDPC__JSON_OBJECT ? ddpc_calloc(ncap, sizeof *keys) : NULL;
        if (!items || (v->type == DDPC__JSON_OBJECT && !keys)) {
            ddpc_free(items);
            ddpc_free(keys);
            return oom(ps);
        }
        if (v->count) {
            memcpy(items, v->items, v->count * sizeof *items);
            if (keys)
                memcpy(keys, v->keys, v->count * sizeof *keys);
        }
        ddpc_free(v->items);
        ddpc_free(v->keys);
        v->items = items;
        v->keys = keys;
        *cap = ncap;
    }
    v->count++;
    return DDPC_OK;
}

/* An array or object at ps->p ('[' or '{'); `close` is the matching bracket. */
static ddpc_status parse_container(parser *ps, ddpc__json *v, ddpc__json_type type, char close)
{
    if (++ps->depth > DDPC__JSON_MAX_DEPTH)
        return syntax(ps, "nested too deeply");
    v->type = type;
    size_t cap = 0;
    ps->p++;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        ps->depth--;
        return DDPC_OK;
    }
    for (;;) {
        DDPC_TRY(push_item(ps, v, &cap));
        if (type == DDPC__JSON_OBJECT) {
            size_t klen;
            if (ps->p >= ps->end || *ps->p != '"')
                return syntax(ps, "object key (a string) expected");
            DDPC_TRY(parse_string(ps, &v->keys[v->count - 1], &klen));
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':')
                return syntax(ps, "':' expected after object key");
            ps->p++;
        }
        DDPC_TRY(parse_value(ps, &v->items[v->count - 1]));
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            skip_ws(ps);
            continue;
        }
        if (ps->p < ps->end && *ps->p == close) {
            ps->p++;
            ps->depth--;
            return DDPC_OK;
        }
        return syntax(ps, close == ']' ? "',' or ']' expected" : "',' or '}' expected");
    }
}

static ddpc_status parse_literal(parser *ps, ddpc__json *v, const char *word, ddpc__json_type type,
                                 bool value)
{
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0)
        return syntax(ps, "unexpected character");
    ps->p += n;
    v->type = type;
    v->boolean = value;
    return DDPC_OK;
}

static ddpc_status parse_value(parser *ps, ddpc__json *v)
{
    skip_ws(ps);
    if (ps->p >= ps->end)
        return syntax(ps, "unexpected end of input");
    switch (*ps->p) {
    case '{':
        return parse_container(ps, v, DDPC__JSON_OBJECT, '}');
    case '[':
        return parse_container(ps, v, DDPC__JSON_ARRAY, ']');
    case '"':
        v->type = DDPC__JSON_STRING;
        return parse_string(ps, &v->str, &v->str_len);
    case 't':
        return parse_literal(ps, v, "true", DDPC__JSON_BOOL, true);
    case 'f':
        return parse_literal(ps, v, "false", DDPC__JSON_BOOL, false);
    case 'n':
        return parse_literal(ps, v, "null", DDPC__JSON_NULL, false);
    default:
        if (*ps->p == '-' || (*ps->p >= '0' && *ps->p <= '9'))
            return parse_number(ps, v);
        return syntax(ps, "unexpected character");
    }
}

static void free_contents(ddpc__json *v)
{
    for (size_t i = 0; i < v->count; i++) {
        free_contents(&v->items[i]);
        if (v->keys)
            ddpc_free(v->keys[i]);
    }
    ddpc_free(v->items);
    ddpc_free(v->keys);
    ddpc_free(v->str);
}

void ddpc__json_free(ddpc__json *v)
{
    if (!v)
        return;
    free_contents(v);
    ddpc_free(v);
}

ddpc_status ddpc__json_parse(ddpc__json **out, const char *text, size_t len, const char *origin)
{
    *out = NULL;
    parser ps = {.start = text, .p = text, .end = text + len, .origin = origin, .depth = 0};
    ddpc__json *root = ddpc_calloc(1, sizeof *root);
    if (!root)
        return oom(&ps);
    ddpc_status s = parse_value(&ps, root);
    if (s == DDPC_OK) {
        skip_ws(&ps);
        if (ps.p != ps.end)
            s = syntax(&ps, "trailing characters after the JSON value");
    }
    if (s != DDPC_OK) {
        ddpc__json_free(root);
        return s;
    }
    *out = root;
    return DDPC_OK;
}

const ddpc__json *ddpc__json_get(const ddpc__json *obj, const char *key)
{
    if (!obj || obj->type != DDPC__JSON_OBJECT)
        return NULL;
    for (size_t i = 0; i < obj->count; i++)
        if (strcmp(obj->keys[i], key) == 0)
            return &obj->items[i];
    return NULL;
}

static int cmp_key(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

ddpc_status ddpc__json_check_unique_keys(const ddpc__json *obj, const char *origin)
{
    if (!obj || obj->type != DDPC__JSON_OBJECT || obj->count < 2)
        return DDPC_OK;
    char **sorted = ddpc_malloc(obj->count * sizeof *sorted);
    if (!sorted)
        return ddpc_errorf(DDPC_ENOMEM, "%s: out of memory checking JSON keys", origin);
    memcpy(sorted, obj->keys, obj->count * sizeof *sorted);
    qsort(sorted, obj->count, sizeof *sorted, cmp_key);
    ddpc_status s = DDPC_OK;
    for (size_t i = 1; i < obj->count && s == DDPC_OK; i++)
        if (strcmp(sorted[i - 1], sorted[i]) == 0)
            s = ddpc_errorf(DDPC_EFORMAT, "%s: duplicate key '%.200s'", origin, sorted[i]);
    ddpc_free(sorted);
    return s;
}
