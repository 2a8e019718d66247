// SPDX-License-Identifier: MIT
/* Private to src/core/config*.c: the node tree behind ddpc_config.
 * Invariant: the root is always a mapping; a map's keys are unique, non-empty and contain no '.';
 * every node's `origin` points at a string owned by the config's origin list, and `line` is the
 * 1-based line of the value in that file, or 0 when the value came from the command line. */
#ifndef DDPC_CORE_CONFIG_IMPL_H
#define DDPC_CORE_CONFIG_IMPL_H

#include <ddpc/config.h>

typedef enum { DDPC__CFG_SCALAR, DDPC__CFG_MAP, DDPC__CFG_SEQ } ddpc__cfg_kind;

typedef struct ddpc__cfg_node ddpc__cfg_node;
struct ddpc__cfg_node {
    ddpc__cfg_kind kind;
    const char *origin; /* "x.yaml" or "command line 'k=v'"; owned by the config */
    int line;           /* line of the value, 0 for command-line values */
    bool used;          /* a getter read this value */
    bool quoted;        /* scalar only: written quoted, so never null */
    bool bare;          /* scalar "true" from a flag given without a value: only a bool reads it */
    int arg;            /* command-line values: the argument's position, so a later one wins */
    char *text;         /* scalar only */
    size_t len, cap;    /* number of map entries / sequence elements, and room for them */
    char **keys;        /* map only: keys[i] names kids[i] */
    int *key_lines;     /* map only: line of keys[i] (0 for command-line keys) */
    ddpc__cfg_node **kids;
    size_t *slots; /* map only: open-addressing index of keys, 2 * cap slots holding i + 1 (0: free),
                      so that building and looking up a map of n keys costs O(n), not O(n^2) */
};

typedef struct {
    char *key; /* full dotted path as asked */
    char *def;     /* the default; NULL for none (dumped as null) */
    bool def_yaml; /* def is YAML text already ("[1, 2]", "3e-4"), not a string to quote */
} ddpc__cfg_known;

/* A command-line flag (ddpc_config_set_flag). One by a key's last name waits in the list until a
 * getter asks for a key ending in it; one by a full key is applied at once, kept for messages. */
typedef struct {
    const char *name;   /* the last name, '-' read as '_'; NULL for a full key's flag */
    const char *value;  /* NULL: given bare */
    const char *given;  /* the flag as typed, "--d-model", for messages */
    const char *origin; /* "command line '--d-model 64'" */
    int arg;            /* position among the arguments */
    const char *key;    /* the key it set; NULL while no getter has asked for one */
} ddpc__cfg_flag;

struct ddpc_config {
    ddpc__cfg_node *root;
    char **origins;
    size_t n_origins, cap_origins;
    ddpc__cfg_known *known;
    size_t n_known, cap_known;
    ddpc__cfg_flag *flags; /* strings kept in the origin list */
    size_t n_flags, cap_flags;
    bool flag_failed; /* a getter failed on a flag: ambiguous, or bare for a non-bool key */
    const char *source; /* the name parsed (a config file's path), an origin; NULL: created */
};

/* Tree (config_tree.c). */
ddpc__cfg_node *ddpc__cfg_node_new(ddpc__cfg_kind kind, const char *origin, int line);
void ddpc__cfg_node_free(ddpc__cfg_node *n);
/* Both take ownership of `child`, freeing it on failure (DDPC_ENOMEM, message set). */
ddpc_status ddpc__cfg_map_add(ddpc__cfg_node *map, const char *key, size_t key_len, int key_line,
                              ddpc__cfg_node *child);
ddpc_status ddpc__cfg_seq_add(ddpc__cfg_node *seq, ddpc__cfg_node *child);
/* Index of `key` in `map`, or -1. */
ptrdiff_t ddpc__cfg_map_find(const ddpc__cfg_node *map, const char *key, size_t key_len);
/* Parses a sequence index component ("0", "12"); false if not all digits or too large. */
bool ddpc__cfg_parse_index(const char *s, size_t len, size_t *out);
/* The node at a dotted path, or NULL. */
ddpc__cfg_node *ddpc__cfg_find(const ddpc_config *c, const char *key);
/* Copies `text` into the config's origin list; NULL when out of memory. */
const char *ddpc__cfg_origin_add(ddpc_config *c, const char *text);
/* Takes ownership of `text` (from ddpc__cfg_strndup) until destroy, as the origins are kept: a
 * replaced value's old text stays valid for whoever borrowed it. false when out of memory. */
bool ddpc__cfg_keep(ddpc_config *c, char *text);
/* Records `key` as asked for with default `def` (may be NULL); the first record of a key wins. */
ddpc_status ddpc__cfg_note_known(ddpc_config *c, const char *key, const char *def, bool def_yaml);
char *ddpc__cfg_strndup(const char *s, size_t n);
/* "x.yaml:7" or "command line 'k=v'" into buf. */
void ddpc__cfg_where(const char *origin, int line, char *buf, size_t cap);
/* A plain scalar spelled ~, null, Null, NULL or nothing. */
bool ddpc__cfg_is_null(const ddpc__cfg_node *n);

/* Flags (config_flags.c): applies the flags waiting for `key`'s last name, as a getter asks for it;
 * an ambiguous flag, or a bare one where `is_bool` is false, is DDPC_EINVAL naming the flag. */
ddpc_status ddpc__cfg_bind_flags(ddpc_config *c, const char *key, bool is_bool);
/* Overrides (config_set.c): puts `value` (YAML text as ddpc_config_set takes it; NULL: a bare
 * "true") at `key` with `origin` (kept by the config), marking it as argument `arg`. */
ddpc_status ddpc__cfg_assign_text(ddpc_config *c, const char *key, const char *value,
                                  const char *origin, int arg);

/* Parser (config_parse.c): builds a node from YAML text. With `cmdline`, line numbers are 0,
 * errors are DDPC_EINVAL and `path` prefixes key names; otherwise the result must be a mapping and
 * errors are DDPC_EFORMAT naming origin:line. */
ddpc_status ddpc__cfg_build(const char *text, size_t len, const char *origin, bool cmdline,
                            const char *path, ddpc__cfg_node **out);

/* Suggestions (config_check.c): the candidate closest to `key` (nth(ctx, i) for i < n), or NULL
 * if none is reasonably close. */
const char *ddpc__cfg_suggest(const char *key, const char *(*nth)(const void *ctx, size_t i),
                              const void *ctx, size_t n);

#endif
