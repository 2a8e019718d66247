// SPDX-License-Identifier: MIT
/* Command-line overrides: "dotted.key=value" assignments applied to the config tree.
 * Invariant: an assignment either fully applies (its value replaces or joins the tree, with the
 * argument as its origin) or leaves the tree exactly as it was. */
#include "core/config_impl.h"

#include <ddpc/alloc.h>

#include <stdio.h>
#include <string.h>

static bool is_space(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r';
}

static void trim(const char **s, size_t *n)
{
    while (*n && is_space(**s)) {
        (*s)++;
        (*n)--;
    }
    while (*n && is_space((*s)[*n - 1]))
        (*n)--;
}

/* The value as a node: flow collections and quoted scalars through the YAML parser, anything else
 * verbatim as a plain scalar. */
static ddpc_status parse_value(const char *origin, const char *key, const char *v, size_t n,
                               ddpc__cfg_node **out)
{
    if (n && strchr("[{'\"", v[0]))
        return ddpc__cfg_build(v, n, origin, true, key, out);
    ddpc__cfg_node *node = ddpc__cfg_node_new(DDPC__CFG_SCALAR, origin, 0);
    if (node)
        node->text = ddpc__cfg_strndup(v, n);
    if (!node || !node->text) {
        ddpc__cfg_node_free(node);
        return ddpc_errorf(DDPC_ENOMEM, "%s: out of memory", origin);
    }
    *out = node;
    return DDPC_OK;
}

/* Puts `value` (owned) at component `comp` of `parent`, replacing what is there. */
static ddpc_status put(ddpc__cfg_node *parent, const char *comp, size_t len, ddpc__cfg_node *value,
                       const char *origin, const char *key)
{
    size_t idx;
    if (parent->kind == DDPC__CFG_MAP) {
        ptrdiff_t i = ddpc__cfg_map_find(parent, comp, len);
        if (i < 0)
            return ddpc__cfg_map_add(parent, comp, len, 0, value);
        ddpc__cfg_node_free(parent->kids[i]);
        parent->kids[i] = value;
        parent->key_lines[i] = 0;
        return DDPC_OK;
    }
    if (!ddpc__cfg_parse_index(comp, len, &idx) || idx > parent->len) {
        ddpc__cfg_node_free(value);
        return ddpc_errorf(DDPC_EINVAL,
                           "%s: '%.*s' in key '%s' is not an index into a sequence of %zu elements",
                           origin, (int)len, comp, key, parent->len);
    }
    if (idx == parent->len)
        return ddpc__cfg_seq_add(parent, value);
    ddpc__cfg_node_free(parent->kids[idx]);
    parent->kids[idx] = value;
    return DDPC_OK;
}

/* The child at `comp` of `parent` if it can hold further components; NULL if absent. */
static ddpc_status step(ddpc__cfg_node *parent, const char *comp, size_t len, const char *origin,
                        const char *key, ddpc__cfg_node **child)
{
    size_t idx;
    *child = NULL;
    if (parent->kind == DDPC__CFG_MAP) {
        ptrdiff_t i = ddpc__cfg_map_find(parent, comp, len);
        *child = i >= 0 ? parent->kids[i] : NULL;
    } else if (ddpc__cfg_parse_index(comp, len, &idx) && idx < parent->len) {
        *child = parent->kids[idx];
    }
    if (*child && (*child)->kind == DDPC__CFG_SCALAR) {
        return ddpc_errorf(DDPC_EINVAL, "%s: cannot set '%s': '%.*s' holds a value, not a mapping",
                           origin, key, (int)(comp + len - key), key);
    }
    return DDPC_OK;
}

/* Wraps `value` (owned) in new containers for the dotted path `rest`: "b.c" gives {b: {c: value}}
 * and "0.c" gives [{c: value}] (a new sequence can only start at index 0). */
static ddpc_status build_chain(const char *rest, ddpc__cfg_node *value, const char *origin,
                               const char *key, ddpc__cfg_node **out)
{
    const char *end = rest + strlen(rest);
    for (;;) {
        const char *begin = end;
        while (begin > rest && begin[-1] != '.')
            begin--;
        size_t len = (size_t)(end - begin), idx;
        bool seq = ddpc__cfg_parse_index(begin, len, &idx);
        ddpc__cfg_node *outer = ddpc__cfg_node_new(seq ? DDPC__CFG_SEQ : DDPC__CFG_MAP, origin, 0);
        if (!outer) {
            ddpc__cfg_node_free(value);
            return ddpc_errorf(DDPC_ENOMEM, "%s: out of memory", origin);
        }
        ddpc_status s = put(outer, begin, len, value, origin, key);
        if (s != DDPC_OK) {
            ddpc__cfg_node_free(outer);
            return s;
        }
        value = outer;
        if (begin == rest)
            break;
        end = begin - 1;
    }
    *out = value;
    return DDPC_OK;
}

/* Walks the path `key`, creating what is missing, and stores `value` (owned) at its end. */
static ddpc_status assign(ddpc_config *c, const char *key, ddpc__cfg_node *value,
                          const char *origin)
{
    ddpc__cfg_node *cur = c->root;
    const char *p = key;
    for (const char *dot; (dot = strchr(p, '.')) != NULL; p = dot + 1) {
        size_t len = (size_t)(dot - p);
        ddpc__cfg_node *child;
        ddpc_status s = step(cur, p, len, origin, key, &child);
        if (s != DDPC_OK) {
            ddpc__cfg_node_free(value);
            return s;
        }
        if (!child) {
            ddpc__cfg_node *chain = NULL;
            DDPC_TRY(build_chain(dot + 1, value, origin, key, &chain));
            return put(cur, p, len, chain, origin, key);
        }
        cur = child;
    }
    return put(cur, p, strlen(p), value, origin, key);
}

static ddpc_status check_key(const char *origin, const char *key)
{
    if (!key[0])
        return ddpc_errorf(DDPC_EINVAL, "%s: empty key before '='", origin);
    for (const char *p = key;; p++) {
        if (*p == '.' && (p == key || p[1] == '.' || p[1] == '\0'))
            return ddpc_errorf(DDPC_EINVAL, "%s: empty component in key '%s'", origin, key);
        if (is_space(*p))
            return ddpc_errorf(DDPC_EINVAL, "%s: key '%s' contains a space", origin, key);
        if (!*p)
            return DDPC_OK;
    }
}

/* Marks `n` and everything under it as argument `arg`'s. */
static void mark_arg(ddpc__cfg_node *n, int arg)
{
    n->arg = arg;
    for (size_t i = 0; i < n->len; i++)
        mark_arg(n->kids[i], arg);
}

ddpc_status ddpc__cfg_assign_text(ddpc_config *c, const char *key, const char *value,
                                  const char *origin, int arg)
{
    DDPC_TRY(check_key(origin, key));
    const char *v = value ? value : "true";
    size_t vn = strlen(v);
    trim(&v, &vn);
    ddpc__cfg_node *node = NULL;
    DDPC_TRY(parse_value(origin, key, v, vn, &node));
    mark_arg(node, arg);
    node->bare = !value;
    return assign(c, key, node, origin);
}

ddpc_status ddpc_config_set(ddpc_config *c, const char *assignment, int arg_index)
{
    if (!c || !assignment)
        return ddpc_errorf(DDPC_EINVAL, "ddpc_config_set: config and assignment must not be NULL");
    char buf[600];
    snprintf(buf, sizeof buf, "command line '%s'", assignment);
    const char *eq = strchr(assignment, '=');
    if (!eq)
        return ddpc_errorf(DDPC_EINVAL, "%s: expected key=value", buf);
    const char *k = assignment;
    size_t kn = (size_t)(eq - assignment);
    trim(&k, &kn);
    const char *origin = ddpc__cfg_origin_add(c, buf);
    char *key = ddpc__cfg_strndup(k, kn);
    if (!origin || !key) {
        ddpc_free(key);
        return ddpc_errorf(DDPC_ENOMEM, "%s: out of memory", buf);
    }
    ddpc_status s = ddpc__cfg_assign_text(c, key, eq + 1, origin, arg_index);
    ddpc_free(key);
    return s;
}
