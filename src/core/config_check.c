// SPDX-License-Identifier: MIT
/* Unknown-key detection: the first value no getter used, with a "did you mean" hint drawn from the
 * keys the modules asked for. Read-only over the tree; suggestions use fixed stack buffers, so
 * checking never allocates and cannot fail for lack of memory. */
#include "core/config_impl.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define MAX_SUGGEST_LEN 256

/* Levenshtein distance; SIZE_MAX for strings too long to compare. */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > MAX_SUGGEST_LEN || lb > MAX_SUGGEST_LEN)
        return SIZE_MAX;
    size_t row[MAX_SUGGEST_LEN + 1];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

static const char *leaf_of(const char *k)
{
    const char *d = strrchr(k, '.');
    return d ? d + 1 : k;
}

/* "lr" abbreviates "learning_rate": same first letter, a subsequence, at least two letters. */
static bool abbreviates(const char *s, const char *l)
{
    if (strlen(s) < 2 || s[0] != l[0])
        return false;
    for (; *l && *s; l++)
        s += *s == *l;
    return !*s;
}

/* "tasks.1.x" vs "tasks.0.x": another element of the same list is no suggestion. */
static bool differ_only_in_digits(const char *a, const char *b)
{
    if (strlen(a) != strlen(b))
        return false;
    for (; *a; a++, b++) {
        if (*a != *b && !(*a >= '0' && *a <= '9' && *b >= '0' && *b <= '9'))
            return false;
    }
    return true;
}

/* Closeness tier of candidate `k` for `key`: 0 a small edit, 1 an abbreviation under the same
 * parent, 2 the same leaf under another parent, 3 not close. */
static int tier(const char *key, const char *k, size_t d)
{
    size_t la = strlen(key), lb = strlen(k);
    if (d <= 1 + (la > lb ? la : lb) / 4)
        return 0;
    const char *ka = leaf_of(key), *kb = leaf_of(k);
    bool same_parent = ka - key == kb - k && memcmp(key, k, (size_t)(ka - key)) == 0;
    if (same_parent && (abbreviates(ka, kb) || abbreviates(kb, ka)))
        return 1;
    if (strcmp(ka, kb) == 0)
        return 2;
    return 3;
}

const char *ddpc__cfg_suggest(const char *key, const char *(*nth)(const void *ctx, size_t i),
                              const void *ctx, size_t n)
{
    const char *best = NULL;
    int best_tier = 3;
    size_t best_d = SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        const char *k = nth(ctx, i);
        size_t d = edit_distance(key, k);
        if (d == 0 || d == SIZE_MAX || differ_only_in_digits(key, k))
            continue;
        int t = tier(key, k, d);
        if (t < best_tier || (t == best_tier && t < 3 && d < best_d)) {
            best = k;
            best_tier = t;
            best_d = d;
        }
    }
    return best;
}

typedef struct {
    char path[512];
    const ddpc__cfg_node *node;
    int line;
} hit;

static size_t path_append(char *path, size_t len, const char *comp)
{
    int n = snprintf(path + len, 512 - len, "%s%s", len ? "." : "", comp);
    if (n < 0)
        return len;
    return len + (size_t)n < 512 ? len + (size_t)n : 511;
}

static bool record(hit *h, const ddpc__cfg_node *n, int line)
{
    h->node = n;
    h->line = n->line == 0 ? 0 : line;
    return true;
}

static bool find_unused(const ddpc__cfg_node *n, int line, char *path, size_t len, hit *h);

/* A sequence of scalars read as a whole is one value; one holding collections is walked. */
static bool find_unused_seq(const ddpc__cfg_node *n, int line, char *path, size_t len, hit *h)
{
    if (n->used)
        return false;
    bool nested = false, any_used = false;
    for (size_t i = 0; i < n->len; i++) {
        nested |= n->kids[i]->kind != DDPC__CFG_SCALAR;
        any_used |= n->kids[i]->used;
    }
    if (!nested && !any_used)
        return record(h, n, line);
    for (size_t i = 0; i < n->len; i++) {
        char idx[24];
        snprintf(idx, sizeof idx, "%zu", i);
        size_t l2 = path_append(path, len, idx);
        if (find_unused(n->kids[i], n->kids[i]->line, path, l2, h))
            return true;
        path[len] = '\0';
    }
    return false;
}

/* Depth-first in file order; on a hit, `path` holds the dotted key. */
static bool find_unused(const ddpc__cfg_node *n, int line, char *path, size_t len, hit *h)
{
    if (n->kind == DDPC__CFG_SCALAR)
        return n->used ? false : record(h, n, line);
    if (n->kind == DDPC__CFG_SEQ)
        return find_unused_seq(n, line, path, len, h);
    for (size_t i = 0; i < n->len; i++) {
        size_t l2 = path_append(path, len, n->keys[i]);
        if (find_unused(n->kids[i], n->key_lines[i], path, l2, h))
            return true;
        path[len] = '\0';
    }
    return false;
}

static const char *nth_known(const void *ctx, size_t i)
{
    return ((const ddpc_config *)ctx)->known[i].key;
}

ddpc_status ddpc_config_check_unused(const ddpc_config *c)
{
    if (!c)
        return ddpc_errorf(DDPC_EINVAL, "ddpc_config_check_unused: config must not be NULL");
    hit h = {.path = ""};
    if (!find_unused(c->root, 0, h.path, 0, &h))
        return DDPC_OK;
    char where[320], hint[300] = "";
    ddpc__cfg_where(h.node->origin, h.line, where, sizeof where);
    const char *near = ddpc__cfg_suggest(h.path, nth_known, c, c->n_known);
    if (near)
        snprintf(hint, sizeof hint, " (did you mean '%s'?)", near);
    return ddpc_errorf(DDPC_EINVAL, "%s: unknown key '%s'%s", where, h.path, hint);
}
