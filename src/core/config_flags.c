// SPDX-License-Identifier: MIT
/* Command-line flags over the config tree: `--optim.lr 0.1` sets its key at once; `--d_model 64`
 * names a key by its last component and waits until a getter asks for a key ending in it.
 * Invariant: a waiting flag is applied to at most one key; a second key with its last name, asked
 * for or present in the tree, is an error naming every candidate, never a silent choice. */
#include "core/config_impl.h"

#include <ddpc/alloc.h>

#include <stdio.h>
#include <string.h>

#define MAX_LISTED 8 /* candidate keys named in an ambiguity message */

/* `a` and `b` (b of length n) spell the same name, '-' and '_' alike. */
static bool same_name(const char *a, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char x = a[i] == '-' ? '_' : a[i], y = b[i] == '-' ? '_' : b[i];
        if (x != y || !x)
            return false;
    }
    return a[n] == '\0';
}

static const char *last_name(const char *key)
{
    const char *dot = strrchr(key, '.');
    return dot ? dot + 1 : key;
}

/* A string kept with the origins until destroy; NULL when out of memory. */
static const char *keep(ddpc_config *c, const char *s)
{
    return s ? ddpc__cfg_origin_add(c, s) : NULL;
}

static ddpc_status add_flag(ddpc_config *c, const ddpc__cfg_flag *f)
{
    if (c->n_flags == c->cap_flags) {
        size_t cap = c->cap_flags ? 2 * c->cap_flags : 8;
        ddpc__cfg_flag *fl = ddpc_malloc(cap * sizeof *fl);
        if (!fl)
            return ddpc_errorf(DDPC_ENOMEM, "%s: out of memory", f->origin);
        if (c->n_flags)
            memcpy(fl, c->flags, c->n_flags * sizeof *fl);
        ddpc_free(c->flags);
        c->flags = fl;
        c->cap_flags = cap;
    }
    c->flags[c->n_flags++] = *f;
    return DDPC_OK;
}

ddpc_status ddpc_config_set_flag(ddpc_config *c, const char *name, bool by_last_name,
                                 const char *value, const char *given, int arg_index)
{
    if (!c || !name || !given)
        return ddpc_errorf(DDPC_EINVAL,
                           "ddpc_config_set_flag: config, name and flag must be given");
    char buf[600], norm[256];
    snprintf(buf, sizeof buf, "command line '%s%s%s'", given, value ? " " : "", value ? value : "");
    if (snprintf(norm, sizeof norm, "%s", name) >= (int)sizeof norm || !norm[0])
        return ddpc_errorf(DDPC_EINVAL, "%s: flag name is empty or too long", buf);
    for (char *p = norm; *p; p++)
        *p = *p == '-' ? '_' : *p;
    if (by_last_name && strchr(norm, '.'))
        return ddpc_errorf(DDPC_EINVAL, "%s: a last name holds no '.'", buf);
    ddpc__cfg_flag f = {
        .value = keep(c, value),
        .given = keep(c, given),
        .origin = keep(c, buf),
        .arg = arg_index,
    };
    const char *kept_name = keep(c, norm);
    if ((value && !f.value) || !f.given || !f.origin || !kept_name)
        return ddpc_errorf(DDPC_ENOMEM, "%s: out of memory", buf);
    if (by_last_name) {
        f.name = kept_name;
        return add_flag(c, &f);
    }
    f.key = kept_name;
    DDPC_TRY(ddpc__cfg_assign_text(c, f.key, value, f.origin, arg_index));
    return add_flag(c, &f);
}

/* Candidate keys for a flag: a fixed list of distinct dotted names. */
typedef struct {
    char keys[MAX_LISTED][256];
    size_t n;
    bool more; /* further candidates were left out */
} candidates;

static void add_candidate(candidates *cs, const char *key)
{
    for (size_t i = 0; i < cs->n; i++)
        if (strcmp(cs->keys[i], key) == 0)
            return;
    if (cs->n == MAX_LISTED) {
        cs->more = true;
        return;
    }
    snprintf(cs->keys[cs->n++], sizeof cs->keys[0], "%s", key);
}

/* Present values (scalars, and sequences of scalars) under `n` whose key's last name is `name`, in
 * file order; `path` holds n's dotted key (len characters). */
static void present_keys(const ddpc__cfg_node *n, const char *name, char *path, size_t len,
                         candidates *cs)
{
    for (size_t i = 0; i < n->len; i++) {
        const ddpc__cfg_node *kid = n->kids[i];
        int w = n->kind == DDPC__CFG_MAP
                    ? snprintf(path + len, 512 - len, "%s%s", len ? "." : "", n->keys[i])
                    : snprintf(path + len, 512 - len, "%s%zu", len ? "." : "", i);
        if (w < 0 || len + (size_t)w >= 512)
            continue;
        bool nested = false;
        for (size_t j = 0; kid->kind == DDPC__CFG_SEQ && j < kid->len; j++)
            nested |= kid->kids[j]->kind != DDPC__CFG_SCALAR;
        if (kid->kind == DDPC__CFG_MAP || nested)
            present_keys(kid, name, path, len + (size_t)w, cs);
        else if (n->kind == DDPC__CFG_MAP && same_name(name, n->keys[i], strlen(n->keys[i])))
            add_candidate(cs, path);
        path[len] = '\0';
    }
}

/* "'a', 'b' or 'c'" into buf. */
static void list_candidates(const candidates *cs, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < cs->n && len < cap; i++) {
        const char *sep = i == 0 ? "" : i + 1 < cs->n || cs->more ? ", " : " or ";
        len += (size_t)snprintf(buf + len, cap - len, "%s'%s'", sep, cs->keys[i]);
    }
    if (cs->more && len < cap)
        snprintf(buf + len, cap - len, " or more");
}

static ddpc_status ambiguous(ddpc_config *c, const ddpc__cfg_flag *f, const char *key)
{
    candidates cs = {.n = 0};
    char path[512] = "", list[MAX_LISTED * 260];
    if (f->key)
        add_candidate(&cs, f->key);
    for (size_t i = 0; i < c->n_known; i++)
        if (same_name(f->name, last_name(c->known[i].key), strlen(last_name(c->known[i].key))))
            add_candidate(&cs, c->known[i].key);
    present_keys(c->root, f->name, path, 0, &cs);
    add_candidate(&cs, key);
    list_candidates(&cs, list, sizeof list);
    c->flag_failed = true;
    return ddpc_errorf(DDPC_EINVAL,
                       "flag '%s' is ambiguous: it could set %s; give the full key instead, as in "
                       "'--%s'",
                       f->given, list, cs.keys[0]);
}

/* Whether the tree holds another value than `key` whose last name is the flag's. */
static bool present_elsewhere(const ddpc_config *c, const ddpc__cfg_flag *f, const char *key)
{
    candidates cs = {.n = 0};
    char path[512] = "";
    present_keys(c->root, f->name, path, 0, &cs);
    for (size_t i = 0; i < cs.n; i++)
        if (strcmp(cs.keys[i], key) != 0)
            return true;
    return cs.more;
}

ddpc_status ddpc__cfg_bind_flags(ddpc_config *c, const char *key, bool is_bool)
{
    const char *leaf = last_name(key);
    for (size_t i = 0; i < c->n_flags; i++) {
        ddpc__cfg_flag *f = &c->flags[i];
        if (!f->name || !same_name(f->name, leaf, strlen(leaf)))
            continue;
        if (f->key && strcmp(f->key, key) == 0)
            continue;
        if (f->key || present_elsewhere(c, f, key))
            return ambiguous(c, f, key);
        const char *kept = keep(c, key);
        if (!kept)
            return ddpc_errorf(DDPC_ENOMEM, "%s: out of memory", f->origin);
        const ddpc__cfg_node *n = ddpc__cfg_find(c, key);
        /* a key=value given after the flag (a later argument) for the same key wins over it */
        if (!n || n->line > 0 || n->arg <= f->arg)
            DDPC_TRY(ddpc__cfg_assign_text(c, key, f->value, f->origin, f->arg));
        f->key = kept;
    }
    const ddpc__cfg_node *n = ddpc__cfg_find(c, key);
    if (!n || !n->bare || is_bool)
        return DDPC_OK;
    const char *given = key;
    for (size_t i = 0; i < c->n_flags; i++)
        if (c->flags[i].key && strcmp(c->flags[i].key, key) == 0 && !c->flags[i].value)
            given = c->flags[i].given;
    c->flag_failed = true;
    return ddpc_errorf(DDPC_EINVAL,
                       "flag '%s' needs a value: key '%s' is not a true/false switch that the flag "
                       "alone turns on",
                       given, key);
}

static const char *unique_name(const ddpc_config *c, size_t i)
{
    const char *leaf = last_name(c->known[i].key);
    for (size_t j = 0; j < c->n_known; j++)
        if (j != i && strcmp(last_name(c->known[j].key), leaf) == 0)
            return c->known[i].key; /* a shared last name is no flag: the full key is */
    return leaf;
}

typedef struct {
    const ddpc_config *c;
    const char *const *more;
} suggest_ctx;

static const char *nth_name(const void *ctx, size_t i)
{
    const suggest_ctx *s = ctx;
    return i < s->c->n_known ? unique_name(s->c, i) : s->more[i - s->c->n_known];
}

const char *ddpc_config_unmatched_flag(const ddpc_config *c, const char *const *more,
                                       const char **near)
{
    if (near)
        *near = NULL;
    for (size_t i = 0; c && i < c->n_flags; i++) {
        const ddpc__cfg_flag *f = &c->flags[i];
        if (f->key)
            continue;
        size_t n_more = 0;
        while (more && more[n_more])
            n_more++;
        suggest_ctx ctx = {c, more};
        if (near)
            *near = ddpc__cfg_suggest(f->name, nth_name, &ctx, c->n_known + n_more);
        return f->given;
    }
    return NULL;
}

bool ddpc_config_flag_failed(const ddpc_config *c)
{
    return c && c->flag_failed;
}
