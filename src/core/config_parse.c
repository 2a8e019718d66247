// SPDX-License-Identifier: MIT
/* YAML text to config tree, through libyaml's event parser (one document, no anchors or tags).
 * Invariant: every yaml_event_t fetched is deleted exactly once, and a node is owned either by
 * the local variable that built it or by its parent, never both, so every error path frees all. */
#include "core/config_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/fs.h>

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <yaml.h>

#define MAX_DEPTH 64

typedef struct {
    yaml_parser_t parser;
    const char *origin;
    bool cmdline;
    char path[512]; /* dotted path of the node being parsed, for messages */
    size_t path_len;
} reader;

static ddpc_status fail(const reader *r, yaml_mark_t m, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static ddpc_status fail(const reader *r, yaml_mark_t m, const char *fmt, ...)
{
    char msg[640], where[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ddpc__cfg_where(r->origin, r->cmdline ? 0 : (int)m.line + 1, where, sizeof where);
    return ddpc_errorf(r->cmdline ? DDPC_EINVAL : DDPC_EFORMAT, "%s: %s", where, msg);
}

static ddpc_status syntax_error(const reader *r)
{
    const yaml_parser_t *p = &r->parser;
    if (p->error == YAML_MEMORY_ERROR)
        return ddpc_errorf(DDPC_ENOMEM, "%s: out of memory while parsing YAML", r->origin);
    const char *problem = p->problem ? p->problem : "invalid YAML";
    const char *sep = p->context ? " " : "";
    const char *context = p->context ? p->context : "";
    if (r->cmdline && strstr(problem, "<document start>"))
        return ddpc_errorf(DDPC_EINVAL, "%s: invalid value: unexpected text after character %zu",
                           r->origin, p->problem_mark.column);
    if (r->cmdline)
        return ddpc_errorf(DDPC_EINVAL, "%s: invalid value: %s%s%s (at character %zu)",
                           r->origin, problem, sep, context, p->problem_mark.column + 1);
    if (p->error == YAML_READER_ERROR)
        return ddpc_errorf(DDPC_EFORMAT, "%s: %s at byte %zu", r->origin, problem,
                           p->problem_offset);
    return ddpc_errorf(DDPC_EFORMAT, "%s:%zu:%zu: %s%s%s", r->origin, p->problem_mark.line + 1,
                       p->problem_mark.column + 1, problem, sep, context);
}

static ddpc_status next_event(reader *r, yaml_event_t *ev)
{
    if (yaml_parser_parse(&r->parser, ev))
        return DDPC_OK;
    return syntax_error(r);
}

static ddpc_status oom(const reader *r)
{
    return ddpc_errorf(DDPC_ENOMEM, "%s: out of memory while building the config tree", r->origin);
}

/* Appends ".comp" (or "comp" at the top) to the path; returns the old length to restore. */
static size_t path_push(reader *r, const char *comp)
{
    size_t old = r->path_len;
    int n = snprintf(r->path + old, sizeof r->path - old, "%s%s", old ? "." : "", comp);
    if (n > 0)
        r->path_len = old + (size_t)n < sizeof r->path ? old + (size_t)n : sizeof r->path - 1;
    return old;
}

static void path_pop(reader *r, size_t old)
{
    r->path_len = old;
    r->path[old] = '\0';
}

static ddpc_status check_props(const reader *r, const yaml_event_t *ev)
{
    const yaml_char_t *anchor = NULL, *tag = NULL;
    if (ev->type == YAML_ALIAS_EVENT) {
        return fail(r, ev->start_mark, "anchors and aliases are not supported ('*%s')",
                    (const char *)ev->data.alias.anchor);
    } else if (ev->type == YAML_SCALAR_EVENT) {
        anchor = ev->data.scalar.anchor;
        tag = ev->data.scalar.tag;
    } else if (ev->type == YAML_SEQUENCE_START_EVENT) {
        anchor = ev->data.sequence_start.anchor;
        tag = ev->data.sequence_start.tag;
    } else if (ev->type == YAML_MAPPING_START_EVENT) {
        anchor = ev->data.mapping_start.anchor;
        tag = ev->data.mapping_start.tag;
    }
    if (anchor)
        return fail(r, ev->start_mark, "anchors and aliases are not supported ('&%s')",
                    (const char *)anchor);
    if (tag)
        return fail(r, ev->start_mark, "tags are not supported ('%s')", (const char *)tag);
    return DDPC_OK;
}

static ddpc_status parse_node(reader *r, const yaml_event_t *ev, int depth, ddpc__cfg_node **out);

static ddpc_status check_key(reader *r, const ddpc__cfg_node *map, const yaml_event_t *kev)
{
    DDPC_TRY(check_props(r, kev));
    if (kev->type != YAML_SCALAR_EVENT)
        return fail(r, kev->start_mark, "keys must be scalars, not mappings or sequences");
    const char *k = (const char *)kev->data.scalar.value;
    size_t n = kev->data.scalar.length;
    if (n == 0)
        return fail(r, kev->start_mark, "empty key%s%s%s", r->path_len ? " in '" : "", r->path,
                    r->path_len ? "'" : "");
    if (strlen(k) != n)
        return fail(r, kev->start_mark, "key contains a NUL character");
    size_t old = path_push(r, k);
    ddpc_status s = DDPC_OK;
    if (memchr(k, '.', n)) {
        s = fail(r, kev->start_mark, "key '%s' contains '.'; write nested mappings instead",
                 r->path);
    } else {
        ptrdiff_t i = ddpc__cfg_map_find(map, k, n);
        if (i >= 0 && map->key_lines[i] > 0)
            s = fail(r, kev->start_mark, "duplicate key '%s' (first at line %d)", r->path,
                     map->key_lines[i]);
        else if (i >= 0)
            s = fail(r, kev->start_mark, "duplicate key '%s'", r->path);
    }
    path_pop(r, old);
    return s;
}

/* Parses the value of key event `kev` and adds the entry to `map`. */
static ddpc_status parse_entry(reader *r, ddpc__cfg_node *map, const yaml_event_t *kev, int depth)
{
    const char *k = (const char *)kev->data.scalar.value;
    yaml_event_t vev;
    DDPC_TRY(next_event(r, &vev));
    size_t old = path_push(r, k);
    ddpc__cfg_node *child = NULL;
    ddpc_status s = parse_node(r, &vev, depth + 1, &child);
    yaml_event_delete(&vev);
    path_pop(r, old);
    if (s != DDPC_OK)
        return s;
    return ddpc__cfg_map_add(map, k, kev->data.scalar.length,
                             r->cmdline ? 0 : (int)kev->start_mark.line + 1, child);
}

static ddpc_status parse_map(reader *r, ddpc__cfg_node *map, int depth)
{
    for (;;) {
        yaml_event_t kev;
        DDPC_TRY(next_event(r, &kev));
        if (kev.type == YAML_MAPPING_END_EVENT) {
            yaml_event_delete(&kev);
            return DDPC_OK;
        }
        ddpc_status s = check_key(r, map, &kev);
        if (s == DDPC_OK)
            s = parse_entry(r, map, &kev, depth);
        yaml_event_delete(&kev);
        if (s != DDPC_OK)
            return s;
    }
}

static ddpc_status parse_seq(reader *r, ddpc__cfg_node *seq, int depth)
{
    for (size_t i = 0;; i++) {
        yaml_event_t ev;
        DDPC_TRY(next_event(r, &ev));
        if (ev.type == YAML_SEQUENCE_END_EVENT) {
            yaml_event_delete(&ev);
            return DDPC_OK;
        }
        char idx[24];
        snprintf(idx, sizeof idx, "%zu", i);
        size_t old = path_push(r, idx);
        ddpc__cfg_node *child = NULL;
        ddpc_status s = parse_node(r, &ev, depth + 1, &child);
        yaml_event_delete(&ev);
        path_pop(r, old);
        if (s != DDPC_OK)
            return s;
        DDPC_TRY(ddpc__cfg_seq_add(seq, child));
    }
}

/* Builds the node that starts with `ev` (borrowed; the caller deletes it). */
static ddpc_status parse_node(reader *r, const yaml_event_t *ev, int depth, ddpc__cfg_node **out)
{
    DDPC_TRY(check_props(r, ev));
    if (depth > MAX_DEPTH)
        return fail(r, ev->start_mark, "nesting deeper than %d levels", MAX_DEPTH);
    ddpc__cfg_kind kind;
    if (ev->type == YAML_SCALAR_EVENT)
        kind = DDPC__CFG_SCALAR;
    else if (ev->type == YAML_MAPPING_START_EVENT)
        kind = DDPC__CFG_MAP;
    else if (ev->type == YAML_SEQUENCE_START_EVENT)
        kind = DDPC__CFG_SEQ;
    else
        return fail(r, ev->start_mark, "unexpected YAML event %d", (int)ev->type);
    int line = r->cmdline ? 0 : (int)ev->start_mark.line + 1;
    ddpc__cfg_node *n = ddpc__cfg_node_new(kind, r->origin, line);
    if (!n)
        return oom(r);
    ddpc_status s = DDPC_OK;
    if (kind == DDPC__CFG_SCALAR) {
        n->text = ddpc__cfg_strndup((const char *)ev->data.scalar.value, ev->data.scalar.length);
        n->quoted = ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE;
        if (!n->text)
            s = oom(r);
    } else if (kind == DDPC__CFG_MAP) {
        s = parse_map(r, n, depth);
    } else {
        s = parse_seq(r, n, depth);
    }
    if (s != DDPC_OK) {
        ddpc__cfg_node_free(n);
        return s;
    }
    *out = n;
    return DDPC_OK;
}

/* A file's document must be a mapping; a null document is an empty one. */
static ddpc_status check_root(reader *r, ddpc__cfg_node **root)
{
    if (r->cmdline || (*root)->kind == DDPC__CFG_MAP)
        return DDPC_OK;
    if (ddpc__cfg_is_null(*root)) {
        ddpc__cfg_node *empty = ddpc__cfg_node_new(DDPC__CFG_MAP, r->origin, 1);
        if (!empty)
            return oom(r);
        ddpc__cfg_node_free(*root);
        *root = empty;
        return DDPC_OK;
    }
    return ddpc_errorf(DDPC_EFORMAT, "%s:%d: the top level must be a mapping of keys to values",
                       r->origin, (*root)->line);
}

/* After the first document: the stream must end (a second document is refused). */
static ddpc_status expect_stream_end(reader *r)
{
    yaml_event_t ev;
    DDPC_TRY(next_event(r, &ev)); /* document end */
    yaml_event_delete(&ev);
    DDPC_TRY(next_event(r, &ev));
    ddpc_status s = DDPC_OK;
    if (ev.type == YAML_DOCUMENT_START_EVENT)
        s = fail(r, ev.start_mark, "multiple YAML documents are not supported");
    yaml_event_delete(&ev);
    return s;
}

static ddpc_status parse_stream(reader *r, ddpc__cfg_node **out)
{
    yaml_event_t ev;
    DDPC_TRY(next_event(r, &ev)); /* stream start */
    yaml_event_delete(&ev);
    DDPC_TRY(next_event(r, &ev));
    bool empty = ev.type == YAML_STREAM_END_EVENT;
    yaml_event_delete(&ev);
    if (empty) {
        *out = ddpc__cfg_node_new(DDPC__CFG_MAP, r->origin, r->cmdline ? 0 : 1);
        return *out ? DDPC_OK : oom(r);
    }
    DDPC_TRY(next_event(r, &ev)); /* the document's root node */
    ddpc__cfg_node *root = NULL;
    ddpc_status s = parse_node(r, &ev, 0, &root);
    yaml_event_delete(&ev);
    if (s == DDPC_OK)
        s = check_root(r, &root);
    if (s == DDPC_OK)
        s = expect_stream_end(r);
    if (s != DDPC_OK) {
        ddpc__cfg_node_free(root);
        return s;
    }
    *out = root;
    return DDPC_OK;
}

ddpc_status ddpc__cfg_build(const char *text, size_t len, const char *origin, bool cmdline,
                            const char *path, ddpc__cfg_node **out)
{
    *out = NULL;
    reader *r = ddpc_calloc(1, sizeof *r);
    if (!r)
        return ddpc_errorf(DDPC_ENOMEM, "%s: out of memory while parsing YAML", origin);
    r->origin = origin;
    r->cmdline = cmdline;
    path_push(r, path);
    if (!yaml_parser_initialize(&r->parser)) {
        ddpc_free(r);
        return ddpc_errorf(DDPC_ENOMEM, "%s: out of memory while parsing YAML", origin);
    }
    yaml_parser_set_input_string(&r->parser, (const unsigned char *)text, len);
    ddpc_status s = parse_stream(r, out);
    yaml_parser_delete(&r->parser);
    ddpc_free(r);
    return s;
}

static ddpc_status parse_n(ddpc_config **out, const char *text, size_t len, const char *name)
{
    *out = NULL;
    ddpc_config *c;
    DDPC_TRY(ddpc_config_create(&c));
    const char *origin = ddpc__cfg_origin_add(c, name);
    if (!origin) {
        ddpc_config_destroy(c);
        return ddpc_errorf(DDPC_ENOMEM, "%s: out of memory while parsing YAML", name);
    }
    ddpc__cfg_node *root;
    ddpc_status s = ddpc__cfg_build(text, len, origin, false, "", &root);
    if (s != DDPC_OK) {
        ddpc_config_destroy(c);
        return s;
    }
    ddpc__cfg_node_free(c->root);
    c->root = root;
    c->source = origin;
    *out = c;
    return DDPC_OK;
}

ddpc_status ddpc_config_parse(ddpc_config **out, const char *yaml_text, const char *name)
{
    *out = NULL;
    if (!yaml_text || !name)
        return ddpc_errorf(DDPC_EINVAL, "ddpc_config_parse: text and name must not be NULL");
    return parse_n(out, yaml_text, strlen(yaml_text), name);
}

ddpc_status ddpc_config_load(ddpc_config **out, const char *path)
{
    *out = NULL;
    if (!path)
        return ddpc_errorf(DDPC_EINVAL, "ddpc_config_load: path must not be NULL");
    char *text = NULL;
    size_t len = 0;
    DDPC_TRY(ddpc_read_file(path, "config", 0, NULL, &text, &len));
    ddpc_status s = parse_n(out, text, len, path);
    ddpc_free(text);
    return s;
}
