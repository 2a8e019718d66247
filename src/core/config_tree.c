// SPDX-License-Identifier: MIT
/* The config node tree: creation, destruction, map/sequence growth and dotted-path lookup.
 * Invariant: the root is always a mapping; every child belongs to exactly one parent, so freeing
 * the root frees everything; origins and known keys are owned by the config, not by nodes. */
#include "core/config_impl.h"

#include <ddpc/alloc.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>

char *ddpc__cfg_strndup(const char *s, size_t n)
{
    char *d = ddpc_malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

ddpc__cfg_node *ddpc__cfg_node_new(ddpc__cfg_kind kind, const char *origin, int line)
{
    ddpc__cfg_node *n = ddpc_calloc(1, sizeof *n);
    if (n) {
        n->kind = kind;
        n->origin = origin;
        n->line = line;
    }
    return n;
}

void ddpc__cfg_node_free(ddpc__cfg_node *n)
{
    if (!n)
        return;
    for (size_t i = 0; i < n->len; i++) {
        ddpc__cfg_node_free(n->kids[i]);
        if (n->keys)
            ddpc_free(n->keys[i]);
    }
    ddpc_free(n->kids);
    ddpc_free(n->keys);
    ddpc_free(n->key_lines);
    ddpc_free(n->slots);
    ddpc_free(n->text);
    ddpc_free(n);
}

/* FNV-1a: keys are short and trusted; any spread will do. */
static size_t key_hash(const char *key, size_t len)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)key[i]) * 1099511628211ull;
    return (size_t)h;
}

/* Puts entry i into a map's index (2 * cap slots, a power of two, never full). */
static void index_put(ddpc__cfg_node *map, size_t i)
{
    size_t mask = 2 * map->cap - 1;
    size_t at = key_hash(map->keys[i], strlen(map->keys[i])) & mask;
    while (map->slots[at])
        at = (at + 1) & mask;
    map->slots[at] = i + 1;
}

/* Grows a node's child arrays to hold one more entry; arrays are reallocated all-or-nothing. */
static bool grow(ddpc__cfg_node *n)
{
    if (n->len < n->cap)
        return true;
    size_t cap = n->cap ? 2 * n->cap : 4;
    ddpc__cfg_node **kids = ddpc_malloc(cap * sizeof *kids);
    char **keys = n->kind == DDPC__CFG_MAP ? ddpc_malloc(cap * sizeof *keys) : NULL;
    int *lines = n->kind == DDPC__CFG_MAP ? ddpc_malloc(cap * sizeof *lines) : NULL;
    size_t *slots = n->kind == DDPC__CFG_MAP ? ddpc_calloc(2 * cap, sizeof *slots) : NULL;
    if (!kids || (n->kind == DDPC__CFG_MAP && (!keys || !lines || !slots))) {
        ddpc_free(kids);
        ddpc_free(keys);
        ddpc_free(lines);
        ddpc_free(slots);
        return false;
    }
    if (n->len) {
        memcpy(kids, n->kids, n->len * sizeof *kids);
        if (keys) {
            memcpy(keys, n->keys, n->len * sizeof *keys);
            memcpy(lines, n->key_lines, n->len * sizeof *lines);
        }
    }
    ddpc_free(n->kids);
    ddpc_free(n->keys);
    ddpc_free(n->key_lines);
    ddpc_free(n->slots);
    n->kids = kids;
    n->keys = keys;
    n->key_lines = lines;
    n->slots = slots;
    n->cap = cap;
    for (size_t i = 0; slots && i < n->len; i++)
        index_put(n, i);
    return true;
}

ddpc_status ddpc__cfg_map_add(ddpc__cfg_node *map, const char *key, size_t key_len, int key_line,
                              ddpc__cfg_node *child)
{
    DDPC_ASSERT(map->kind == DDPC__CFG_MAP);
    char *k = ddpc__cfg_strndup(key, key_len);
    if (!k || !grow(map)) {
        ddpc_free(k);
        ddpc__cfg_node_free(child);
        return ddpc_errorf(DDPC_ENOMEM, "out of memory while building the config tree");
    }
    map->keys[map->len] = k;
    map->key_lines[map->len] = key_line;
    map->kids[map->len] = child;
    index_put(map, map->len++);
    return DDPC_OK;
}

ddpc_status ddpc__cfg_seq_add(ddpc__cfg_node *seq, ddpc__cfg_node *child)
{
    DDPC_ASSERT(seq->kind == DDPC__CFG_SEQ);
    if (!grow(seq)) {
        ddpc__cfg_node_free(child);
        return ddpc_errorf(DDPC_ENOMEM, "out of memory while building the config tree");
    }
    seq->kids[seq->len++] = child;
    return DDPC_OK;
}

ptrdiff_t ddpc__cfg_map_find(const ddpc__cfg_node *map, const char *key, size_t key_len)
{
    if (map->len == 0)
        return -1;
    size_t mask = 2 * map->cap - 1;
    for (size_t at = key_hash(key, key_len) & mask; map->slots[at]; at = (at + 1) & mask) {
        const char *k = map->keys[map->slots[at] - 1];
        if (strlen(k) == key_len && memcmp(k, key, key_len) == 0)
            return (ptrdiff_t)(map->slots[at] - 1);
    }
    return -1;
}

bool ddpc__cfg_parse_index(const char *s, size_t len, size_t *out)
{
    if (len == 0 || len > 9)
        return false;
    size_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (size_t)(s[i] - '0');
    }
    *out = v;
    return true;
}

ddpc__cfg_node *ddpc__cfg_find(const ddpc_config *c, const char *key)
{
    if (!c || !key)
        return NULL;
    ddpc__cfg_node *n = c->root;
    const char *p = key;
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t len = dot ? (size_t)(dot - p) : strlen(p);
        size_t idx;
        if (n->kind == DDPC__CFG_MAP) {
            ptrdiff_t i = ddpc__cfg_map_find(n, p, len);
            if (i < 0)
                return NULL;
            n = n->kids[i];
        } else if (n->kind == DDPC__CFG_SEQ && ddpc__cfg_parse_index(p, len, &idx) &&
                   idx < n->len) {
            n = n->kids[idx];
        } else {
            return NULL;
        }
        if (!dot)
            return n;
        p = dot + 1;
    }
}

bool ddpc__cfg_keep(ddpc_config *c, char *text)
{
    if (c->n_origins == c->cap_origins) {
        size_t cap = c->cap_origins ? 2 * c->cap_origins : 4;
        char **o = ddpc_malloc(cap * sizeof *o);
        if (!o)
            return false;
        if (c->n_origins)
            memcpy(o, c->origins, c->n_origins * sizeof *o);
        ddpc_free(c->origins);
        c->origins = o;
        c->cap_origins = cap;
    }
    c->origins[c->n_origins++] = text;
    return true;
}

const char *ddpc__cfg_origin_add(ddpc_config *c, const char *text)
{
    char *s = ddpc__cfg_strndup(text, strlen(text));
    if (s && !ddpc__cfg_keep(c, s)) {
        ddpc_free(s);
        return NULL;
    }
    return s;
}

ddpc_status ddpc__cfg_note_known(ddpc_config *c, const char *key, const char *def, bool def_yaml)
{
    for (size_t i = 0; i < c->n_known; i++) {
        if (strcmp(c->known[i].key, key) == 0)
            return DDPC_OK;
    }
    if (c->n_known == c->cap_known) {
        size_t cap = c->cap_known ? 2 * c->cap_known : 16;
        ddpc__cfg_known *k = ddpc_malloc(cap * sizeof *k);
        if (!k)
            return ddpc_errorf(DDPC_ENOMEM, "out of memory while reading config key '%s'", key);
        if (c->n_known)
            memcpy(k, c->known, c->n_known * sizeof *k);
        ddpc_free(c->known);
        c->known = k;
        c->cap_known = cap;
    }
    char *kc = ddpc__cfg_strndup(key, strlen(key));
    char *dc = def ? ddpc__cfg_strndup(def, strlen(def)) : NULL;
    if (!kc || (def && !dc)) {
        ddpc_free(kc);
        ddpc_free(dc);
        return ddpc_errorf(DDPC_ENOMEM, "out of memory while reading config key '%s'", key);
    }
    c->known[c->n_known++] = (ddpc__cfg_known){kc, dc, def_yaml};
    return DDPC_OK;
}

void ddpc__cfg_where(const char *origin, int line, char *buf, size_t cap)
{
    if (line > 0)
        snprintf(buf, cap, "%s:%d", origin, line);
    else
        snprintf(buf, cap, "%s", origin);
}

bool ddpc__cfg_is_null(const ddpc__cfg_node *n)
{
    if (n->kind != DDPC__CFG_SCALAR || n->quoted)
        return false;
    const char *t = n->text;
    return !t[0] || strcmp(t, "~") == 0 || strcmp(t, "null") == 0 || strcmp(t, "Null") == 0 ||
           strcmp(t, "NULL") == 0;
}

const char *ddpc_config_source(const ddpc_config *c)
{
    return c ? c->source : NULL;
}

ddpc_status ddpc_config_create(ddpc_config **out)
{
    *out = NULL;
    ddpc_config *c = ddpc_calloc(1, sizeof *c);
    const char *origin = c ? ddpc__cfg_origin_add(c, "(no config file)") : NULL;
    if (c && origin)
        c->root = ddpc__cfg_node_new(DDPC__CFG_MAP, origin, 0);
    if (!c || !c->root) {
        ddpc_config_destroy(c);
        return ddpc_errorf(DDPC_ENOMEM, "out of memory while creating a config");
    }
    *out = c;
    return DDPC_OK;
}

void ddpc_config_destroy(ddpc_config *c)
{
    if (!c)
        return;
    ddpc__cfg_node_free(c->root);
    for (size_t i = 0; i < c->n_origins; i++)
        ddpc_free(c->origins[i]);
    ddpc_free(c->origins);
    for (size_t i = 0; i < c->n_known; i++) {
        ddpc_free(c->known[i].key);
        ddpc_free(c->known[i].def);
    }
    ddpc_free(c->known);
    ddpc_free(c->flags);
    ddpc_free(c);
}

bool ddpc_config_has(const ddpc_config *c, const char *key)
{
    return ddpc__cfg_find(c, key) != NULL;
}

size_t ddpc_config_seq_len(const ddpc_config *c, const char *key)
{
    const ddpc__cfg_node *n = ddpc__cfg_find(c, key);
    return n && n->kind == DDPC__CFG_SEQ ? n->len : 0;
}
