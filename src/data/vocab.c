// SPDX-License-Identifier: MIT
/* Vocabulary tables: building from a corpus (count, sort by frequency, cut at min_freq and
 * max_size), the id lookup and the accessors. Invariant: see vocab_impl.h; building allocates a
 * counting table that is freed before it returns. */
#include "data/textfile.h"
#include "data/vocab_impl.h"

#include <ddpc/alloc.h>

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

const char *const ddpc__vocab_specials[DDPC_VOCAB_SPECIALS] = {"<pad>", "<bos>", "<eos>", "<unk>"};

uint64_t ddpc__vocab_hash(const char *s, size_t len)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

ddpc_vocab *ddpc__vocab_alloc(int64_t size)
{
    ddpc_vocab *v = ddpc_calloc(1, sizeof *v);
    if (!v)
        return NULL;
    v->size = size;
    v->tokens = ddpc_calloc((size_t)size, sizeof *v->tokens);
    v->lens = ddpc_calloc((size_t)size, sizeof *v->lens);
    v->counts = ddpc_calloc((size_t)size, sizeof *v->counts);
    if (!v->tokens || !v->lens || !v->counts) {
        ddpc_vocab_destroy(v);
        return NULL;
    }
    return v;
}

ddpc_status ddpc__vocab_set(ddpc_vocab *v, int64_t id, const char *s, size_t len, int64_t count)
{
    char *t = ddpc_malloc(len + 1);
    if (!t)
        return ddpc_errorf(DDPC_ENOMEM, "vocabulary: out of memory for a token");
    memcpy(t, s, len);
    t[len] = '\0';
    v->tokens[id] = t;
    v->lens[id] = len;
    v->counts[id] = count;
    return DDPC_OK;
}

ddpc_status ddpc__vocab_index(ddpc_vocab *v, const char *what)
{
    size_t cap = 16;
    while (cap < 2 * (size_t)v->size)
        cap *= 2;
    v->slots = ddpc_malloc(cap * sizeof *v->slots);
    if (!v->slots)
        return ddpc_errorf(DDPC_ENOMEM, "vocabulary: out of memory for %lld entries",
                           (long long)v->size);
    v->cap = cap;
    memset(v->slots, 0xff, cap * sizeof *v->slots);
    for (int64_t id = 0; id < v->size; id++) {
        size_t i = (size_t)ddpc__vocab_hash(v->tokens[id], v->lens[id]) & (cap - 1);
        for (; v->slots[i] >= 0; i = (i + 1) & (cap - 1)) {
            int32_t o = v->slots[i];
            if (v->lens[o] == v->lens[id] && memcmp(v->tokens[o], v->tokens[id], v->lens[id]) == 0)
                return ddpc_errorf(DDPC_EFORMAT, "%s: token '%s' appears twice (ids %d and %lld)",
                                   what, v->tokens[id], o, (long long)id);
        }
        v->slots[i] = (int32_t)id;
    }
    return DDPC_OK;
}

int32_t ddpc_vocab_id(const ddpc_vocab *v, const char *s, size_t len)
{
    size_t i = (size_t)ddpc__vocab_hash(s, len) & (v->cap - 1);
    for (; v->slots[i] >= 0; i = (i + 1) & (v->cap - 1)) {
        int32_t o = v->slots[i];
        if (v->lens[o] == len && memcmp(v->tokens[o], s, len) == 0)
            return o;
    }
    return DDPC_TOK_UNK;
}

/* Counting table of the build: distinct tokens with their counts. */
typedef struct {
    char **tok;     /* (n) owned copies */
    size_t *len;    /* (n) */
    int64_t *count; /* (n) */
    int64_t *slot;  /* (cap) index into tok, -1 = empty */
    size_t n, room, cap;
} counter;

static void counter_free(counter *c)
{
    for (size_t i = 0; i < c->n; i++)
        ddpc_free(c->tok[i]);
    ddpc_free(c->tok);
    ddpc_free(c->len);
    ddpc_free(c->count);
    ddpc_free(c->slot);
}

/* Doubles the slot table (and the entry arrays when full). */
static ddpc_status counter_grow(counter *c)
{
    if (c->n == c->room) {
        size_t room = c->room ? 2 * c->room : 1024;
        char **t = ddpc_malloc(room * sizeof *t);
        size_t *l = ddpc_malloc(room * sizeof *l);
        int64_t *k = ddpc_malloc(room * sizeof *k);
        if (!t || !l || !k) {
            ddpc_free(t), ddpc_free(l), ddpc_free(k);
            return ddpc_errorf(DDPC_ENOMEM, "vocabulary: out of memory counting tokens");
        }
        if (c->n) {
            memcpy(t, c->tok, c->n * sizeof *t);
            memcpy(l, c->len, c->n * sizeof *l);
            memcpy(k, c->count, c->n * sizeof *k);
        }
        ddpc_free(c->tok), ddpc_free(c->len), ddpc_free(c->count);
        c->tok = t, c->len = l, c->count = k, c->room = room;
    }
    if (2 * (c->n + 1) <= c->cap)
        return DDPC_OK;
    size_t cap = c->cap ? 2 * c->cap : 2048;
    int64_t *slot = ddpc_malloc(cap * sizeof *slot);
    if (!slot)
        return ddpc_errorf(DDPC_ENOMEM, "vocabulary: out of memory counting tokens");
    memset(slot, 0xff, cap * sizeof *slot);
    for (size_t e = 0; e < c->n; e++) {
        size_t i = (size_t)ddpc__vocab_hash(c->tok[e], c->len[e]) & (cap - 1);
        while (slot[i] >= 0)
            i = (i + 1) & (cap - 1);
        slot[i] = (int64_t)e;
    }
    ddpc_free(c->slot);
    c->slot = slot;
    c->cap = cap;
    return DDPC_OK;
}

static ddpc_status counter_add(counter *c, const char *s, size_t len)
{
    DDPC_TRY(counter_grow(c));
    size_t i = (size_t)ddpc__vocab_hash(s, len) & (c->cap - 1);
    for (; c->slot[i] >= 0; i = (i + 1) & (c->cap - 1)) {
        size_t e = (size_t)c->slot[i];
        if (c->len[e] == len && memcmp(c->tok[e], s, len) == 0) {
            c->count[e]++;
            return DDPC_OK;
        }
    }
    char *t = ddpc_malloc(len + 1);
    if (!t)
        return ddpc_errorf(DDPC_ENOMEM, "vocabulary: out of memory counting tokens");
    memcpy(t, s, len);
    t[len] = '\0';
    c->tok[c->n] = t, c->len[c->n] = len, c->count[c->n] = 1;
    c->slot[i] = (int64_t)c->n++;
    return DDPC_OK;
}

/* A counted token, for sorting. */
typedef struct {
    const char *tok;
    size_t len;
    int64_t count;
} counted;

/* Most frequent first, ties in byte order. */
static int by_count(const void *pa, const void *pb)
{
    const counted *a = pa, *b = pb;
    if (a->count != b->count)
        return a->count > b->count ? -1 : 1;
    size_t n = a->len < b->len ? a->len : b->len;
    int r = memcmp(a->tok, b->tok, n);
    return r ? r : (a->len > b->len) - (a->len < b->len);
}

/* Counts every token of the file into c. */
static ddpc_status count_file(const char *path, ddpc_tokenize tok, counter *c)
{
    ddpc__textfile f;
    DDPC_TRY(ddpc__textfile_read(&f, path));
    const char *s, *t;
    size_t n, tn, b, e;
    ddpc_status st = DDPC_OK;
    while (st == DDPC_OK && ddpc__textfile_next(&f, &s, &n)) {
        ddpc__vocab_trim(s, n, &b, &e);
        while (st == DDPC_OK && ddpc__vocab_next_token(tok, s, &b, e, &t, &tn))
            st = counter_add(c, t, tn);
    }
    ddpc__textfile_free(&f);
    return st;
}

/* A corpus token spelled like a special ("<unk>" in the text) is that special. */
static bool is_special(const char *s, size_t len)
{
    for (int i = 0; i < DDPC_VOCAB_SPECIALS; i++)
        if (strlen(ddpc__vocab_specials[i]) == len && memcmp(ddpc__vocab_specials[i], s, len) == 0)
            return true;
    return false;
}

/* The vocabulary of the counted tokens: specials, then those seen >= min_freq times by count. */
static ddpc_status make_vocab(const counter *c, ddpc_tokenize tok, int64_t min_freq,
                              int64_t max_size, ddpc_vocab **out)
{
    counted *e = ddpc_malloc((c->n ? c->n : 1) * sizeof *e);
    if (!e)
        return ddpc_errorf(DDPC_ENOMEM, "vocabulary: out of memory sorting %zu tokens", c->n);
    size_t kept = 0;
    for (size_t i = 0; i < c->n; i++)
        if (c->count[i] >= min_freq && !is_special(c->tok[i], c->len[i]))
            e[kept++] = (counted){c->tok[i], c->len[i], c->count[i]};
    qsort(e, kept, sizeof *e, by_count);
    int64_t size = DDPC_VOCAB_SPECIALS + (int64_t)kept;
    if (max_size > 0 && size > max_size)
        size = max_size;
    ddpc_vocab *v = ddpc__vocab_alloc(size);
    ddpc_status st = v ? DDPC_OK : ddpc_errorf(DDPC_ENOMEM, "vocabulary: out of memory");
    for (int64_t id = 0; st == DDPC_OK && id < size; id++) {
        const char *t =
            id < DDPC_VOCAB_SPECIALS ? ddpc__vocab_specials[id] : e[id - DDPC_VOCAB_SPECIALS].tok;
        size_t len = id < DDPC_VOCAB_SPECIALS ? strlen(t) : e[id - DDPC_VOCAB_SPECIALS].len;
        int64_t count = id < DDPC_VOCAB_SPECIALS ? 0 : e[id - DDPC_VOCAB_SPECIALS].count;
        st = ddpc__vocab_set(v, id, t, len, count);
    }
    ddpc_free(e);
    if (st == DDPC_OK) {
        v->tok = tok;
        v->min_freq = min_freq;
        st = ddpc__vocab_index(v, "vocabulary");
    }
    if (st != DDPC_OK) {
        ddpc_vocab_destroy(v);
        return st;
    }
    *out = v;
    return DDPC_OK;
}

ddpc_status ddpc_vocab_build(ddpc_vocab **out, const char *path, ddpc_tokenize tok,
                             int64_t min_freq, int64_t max_size)
{
    *out = NULL;
    if (min_freq < 1)
        return ddpc_errorf(DDPC_EINVAL, "%s: vocabulary min_freq must be >= 1, got %lld", path,
                           (long long)min_freq);
    if (max_size < 0 || (max_size > 0 && max_size <= DDPC_VOCAB_SPECIALS))
        return ddpc_errorf(DDPC_EINVAL,
                           "%s: vocabulary max_size must be 0 (no cap) or > %d, got %lld", path,
                           DDPC_VOCAB_SPECIALS, (long long)max_size);
    if (max_size > INT32_MAX)
        return ddpc_errorf(DDPC_EINVAL, "%s: vocabulary max_size %lld exceeds 2^31-1", path,
                           (long long)max_size);
    counter c = {0};
    ddpc_status st = count_file(path, tok, &c);
    if (st == DDPC_OK && (int64_t)c.n + DDPC_VOCAB_SPECIALS > INT32_MAX)
        st = ddpc_errorf(DDPC_EINVAL, "%s: more than 2^31 distinct tokens", path);
    if (st == DDPC_OK)
        st = make_vocab(&c, tok, min_freq, max_size, out);
    counter_free(&c);
    return st;
}

void ddpc_vocab_destroy(ddpc_vocab *v)
{
    if (!v)
        return;
    for (int64_t i = 0; v->tokens && i < v->size; i++)
        ddpc_free(v->tokens[i]);
    ddpc_free(v->tokens);
    ddpc_free(v->lens);
    ddpc_free(v->counts);
    ddpc_free(v->slots);
    ddpc_free(v);
}

int64_t ddpc_vocab_size(const ddpc_vocab *v)
{
    return v->size;
}

ddpc_tokenize ddpc_vocab_tokenize(const ddpc_vocab *v)
{
    return v->tok;
}

int64_t ddpc_vocab_min_freq(const ddpc_vocab *v)
{
    return v->min_freq;
}

const char *ddpc_vocab_token(const ddpc_vocab *v, int32_t id)
{
    return id >= 0 && id < v->size ? v->tokens[id] : NULL;
}

uint32_t ddpc_vocab_digest(const ddpc_vocab *v)
{
    uLong c = crc32(0L, Z_NULL, 0);
    for (int64_t i = 0; i < v->size; i++) /* with its NUL: "ab","c" is not "a","bc" */
        c = crc32(c, (const Bytef *)v->tokens[i], (uInt)v->lens[i] + 1);
    return (uint32_t)c;
}

bool ddpc_vocab_equal(const ddpc_vocab *a, const ddpc_vocab *b)
{
    if (a->tok != b->tok || a->min_freq != b->min_freq || a->size != b->size)
        return false;
    for (int64_t i = 0; i < a->size; i++)
        if (a->lens[i] != b->lens[i] || memcmp(a->tokens[i], b->tokens[i], a->lens[i]) != 0)
            return false;
    return true;
}
