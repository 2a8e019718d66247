// SPDX-License-Identifier: MIT
/* Tokenization, encoding and decoding of lines. Invariant: the same line always gives the same
 * tokens, whatever vocabulary looks them up, so the build and every later encode agree. */
#include "data/vocab_impl.h"

#include <string.h>

static bool is_space(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* Bytes of the UTF-8 character at s[0, n): its length when it is well formed, else 1. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    size_t len = s[0] < 0x80             ? 1
                 : (s[0] & 0xE0) == 0xC0 ? 2
                 : (s[0] & 0xF0) == 0xE0 ? 3
                 : (s[0] & 0xF8) == 0xF0 ? 4
                                         : 1;
    if (len > n || (len == 2 && s[0] < 0xC2))
        return 1;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 1;
    return len;
}

const char *ddpc_tokenize_name(ddpc_tokenize t)
{
    return t == DDPC_TOKENIZE_CHAR ? "char" : "word";
}

void ddpc__vocab_trim(const char *s, size_t n, size_t *b, size_t *e)
{
    size_t i = 0, j = n;
    while (i < j && is_space((unsigned char)s[i]))
        i++;
    while (j > i && is_space((unsigned char)s[j - 1]))
        j--;
    *b = i;
    *e = j;
}

bool ddpc__vocab_next_token(ddpc_tokenize tok, const char *s, size_t *pos, size_t end,
                            const char **t, size_t *tn)
{
    size_t i = *pos;
    if (tok == DDPC_TOKENIZE_WORD) {
        while (i < end && is_space((unsigned char)s[i]))
            i++;
        if (i == end) {
            *pos = i;
            return false;
        }
        size_t j = i;
        while (j < end && !is_space((unsigned char)s[j]))
            j++;
        *t = s + i;
        *tn = j - i;
        *pos = j;
        return true;
    }
    if (i == end)
        return false;
    if (is_space((unsigned char)s[i])) {
        while (i < end && is_space((unsigned char)s[i]))
            i++;
        *t = " ";
        *tn = 1;
        *pos = i;
        return true;
    }
    *t = s + i;
    *tn = utf8_len((const unsigned char *)s + i, end - i);
    *pos = i + *tn;
    return true;
}

void ddpc_vocab_encode(const ddpc_vocab *v, const char *line, int32_t *ids, int64_t cap, int64_t *n)
{
    size_t len = strcspn(line, "\n"), b, e;
    ddpc__vocab_trim(line, len, &b, &e);
    const char *t;
    size_t tn;
    int64_t k = 0;
    while (ddpc__vocab_next_token(v->tok, line, &b, e, &t, &tn)) {
        if (k < cap)
            ids[k] = ddpc_vocab_id(v, t, tn);
        k++;
    }
    *n = k;
}

size_t ddpc_vocab_decode(const ddpc_vocab *v, const int32_t *ids, int64_t n, char *buf, size_t cap)
{
    size_t used = 0;
    bool first = true;
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] == DDPC_TOK_PAD || ids[i] == DDPC_TOK_EOS)
            break;
        if (ids[i] == DDPC_TOK_BOS)
            continue;
        const char *t = ddpc_vocab_token(v, ids[i]);
        if (!t)
            t = "<unk>";
        size_t tn = strlen(t);
        size_t sep = v->tok == DDPC_TOKENIZE_WORD && !first ? 1 : 0;
        for (size_t j = 0; j < sep + tn; j++) {
            if (used + 1 < cap)
                buf[used] = j < sep ? ' ' : t[j - sep];
            used++;
        }
        first = false;
    }
    if (cap > 0)
        buf[used < cap ? used : cap - 1] = '\0';
    return used;
}
