// SPDX-License-Identifier: MIT
/* The configuration tree: a YAML file (a subset, see docs/config.md) plus `key=value` overrides,
 * read through typed getters on dotted keys ("optim.lr", "tasks.1.weight").
 * Invariant: every value remembers where it came from (file:line or the command-line argument), so
 * each error names it; every key a getter asks for is recorded, so a key nobody read is an error.
 * One thread at a time. Getters that fail leave *out unchanged and set ddpc_last_error(). */
#ifndef DDPC_CONFIG_H
#define DDPC_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ddpc/status.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ddpc_config ddpc_config;

/* Parses the YAML file at `path`: nested mappings, scalars, block/flow sequences, sequences of
 * mappings. The top level must be a mapping (an empty file is an empty tree). Anchors, aliases,
 * tags, multi-document files, duplicate keys and keys containing '.' are DDPC_EFORMAT naming
 * path:line; a YAML syntax error names path:line:column and libyaml's problem; a file that cannot
 * be read is DDPC_EIO ("cannot open config 'x.yaml': No such file or directory"). */
ddpc_status ddpc_config_load(ddpc_config **out, const char *path);
/* Same from a NUL-terminated string; `name` stands in for the path in messages. */
ddpc_status ddpc_config_parse(ddpc_config **out, const char *yaml_text, const char *name);
/* An empty tree, for runs without a file. */
ddpc_status ddpc_config_create(ddpc_config **out);
/* Frees the tree and every string a getter returned. NULL is a no-op. */
void ddpc_config_destroy(ddpc_config *c);

/* Applies one override "optim.lr=3e-4", "model.hidden=[256,128]", "tasks.1.weight=0.5": a dotted
 * path, creating intermediate mappings; a numeric component indexes a sequence (index == length
 * appends). A value starting with '[', '{' or a quote is parsed as YAML flow/quoted text; anything
 * else is taken verbatim (trimmed) as a plain scalar. An existing key's value and origin are
 * replaced. Messages name the argument as "command line 'optim.lr=abc'". A malformed assignment
 * (no '=', empty key or component, bad flow syntax, path through a scalar) is DDPC_EINVAL.
 * `arg_index` is the argument's position in argv: against a flag by last name (below), the later
 * argument wins, as repeated assignments do. */
ddpc_status ddpc_config_set(ddpc_config *c, const char *assignment, int arg_index);
/* Applies one argparse-style flag, as typed `given` ("--d-model") with `value` (NULL: given bare,
 * which a bool key reads as true and any other getter refuses: "flag '--epochs' needs a value").
 * `name` is a dotted key ("optim.lr"), or with `by_last_name` a key's last component ("d_model"),
 * '-' and '_' alike. Such a flag waits until a getter asks for a key ending in that name, then sets
 * it (unless a later argument set that key); a second key with the name, present in the tree or
 * asked for later, makes the getter fail naming every candidate ("flag '--type' is ambiguous: it
 * could set 'data.type', 'model.type' or 'optim.type'; ..."). Messages about the value name it as
 * "command line '--d-model 64'". */
ddpc_status ddpc_config_set_flag(ddpc_config *c, const char *name, bool by_last_name,
                                 const char *value, const char *given, int arg_index);
/* After every module has read its keys: the first flag by last name that no key asked for matched,
 * as given ("--d-modle"), or NULL. With `near`, *near is the closest flag name among the keys asked
 * for (a key's last name where no other key shares it, else the full key) and `more` (further
 * names, NULL-terminated; may be NULL), or NULL when none is close. Strings are borrowed. */
const char *ddpc_config_unmatched_flag(const ddpc_config *c, const char *const *more,
                                       const char **near);
/* Whether a getter failed on a flag's use (ambiguous, or bare where a value is needed): a usage
 * error, for the command line's exit status. */
bool ddpc_config_flag_failed(const ddpc_config *c);

/* Typed getters on dotted keys. A missing key yields the default. Every key asked for is recorded
 * as known (for suggestions and the dump) and a present key is marked used. A wrong type or an
 * out-of-range value is DDPC_EINVAL: "x.yaml:7: key 'optim.lr' must be a number in [0, 10], got
 * 'abc'" (for overrides "command line 'optim.lr=abc': key ..."). DDPC_ENOMEM if recording fails. */
/* Decimal integers only (YAML 1.2 core): "2.5", "1e3" and values beyond int64 are rejected. */
ddpc_status ddpc_config_int(ddpc_config *c, const char *key, int64_t def, int64_t min, int64_t max,
                            int64_t *out);
/* Decimal numbers: 3, -0.5, .5, 1.0, 3e-4 (no inf/nan). Integers are accepted. */
ddpc_status ddpc_config_float(ddpc_config *c, const char *key, double def, double min, double max,
                              double *out);
/* true/false, yes/no, on/off, 1/0 (any letter case). */
ddpc_status ddpc_config_bool(ddpc_config *c, const char *key, bool def, bool *out);
/* Any scalar's text, borrowed until destroy. A plain null (`~`, `null`, or nothing after the
 * colon) reads as NULL; a quoted "null" is the string. A present mapping or sequence is an
 * error. */
ddpc_status ddpc_config_string(ddpc_config *c, const char *key, const char *def, const char **out);
/* The value must be one of `choices` (NULL-terminated); *out = its index. The error lists the
 * choices (and suggests the nearest). An absent key yields def's index, or -1 if def is NULL; a
 * def that is not among the choices is DDPC_EINVAL. */
ddpc_status ddpc_config_choice(ddpc_config *c, const char *key, const char *def,
                               const char *const *choices, int *out);
/* The entry of `choices` (NULL-terminated) closest to `word` by the rule behind the "did you mean"
 * hints (a small edit, or an abbreviation), or NULL when none is close or `word` is one of them.
 * For callers that check words outside a config, such as the command line's command names. */
const char *ddpc_config_nearest(const char *word, const char *const *choices);
/* Another spelling of a choice, e.g. Lightning's "16-mixed" for "fp16", or a refused spelling. */
typedef struct {
    const char *spelling;
    const char *canonical; /* one of the choices; NULL: the spelling is refused, saying `why` */
    const char *why;       /* for a refused spelling: one clause saying why */
} ddpc_config_alias;
/* ddpc_config_choice that also accepts `aliases` (ending with an entry whose spelling is NULL):
 * an alias's value is replaced in the tree by its canonical choice, so ddpc_config_dump writes the
 * canonical name (strings borrowed earlier stay valid). A refused spelling is DDPC_EINVAL:
 * "x.yaml:3: key 'precision' cannot be 'bf16-true': <why>". */
ddpc_status ddpc_config_choice_alias(ddpc_config *c, const char *key, const char *def,
                                     const char *const *choices, const ddpc_config_alias *aliases,
                                     int *out);
/* A sequence of integers (a single integer reads as a 1-element list), at most `cap` elements,
 * each in [min, max]; `def` (n_def elements, n_def <= cap) when absent. Errors name the element. */
ddpc_status ddpc_config_int_list(ddpc_config *c, const char *key, const int64_t *def, size_t n_def,
                                 int64_t min, int64_t max, int64_t *out, size_t cap,
                                 size_t *n_out);
/* The same for numbers ("optim.betas: [0.9, 0.999]"). */
ddpc_status ddpc_config_float_list(ddpc_config *c, const char *key, const double *def,
                                   size_t n_def, double min, double max, double *out, size_t cap,
                                   size_t *n_out);
/* "<prefix>.<name>" in key (cap bytes; DDPC_CONFIG_KEY_MAX will do), for reading a section's keys
 * ("model" + "hidden", "tasks.1" + "batch_size"), as a type's read_config does; returns key. */
#define DDPC_CONFIG_KEY_MAX 128
const char *ddpc_config_key(char *key, size_t cap, const char *prefix, const char *name);

/* A sequence of strings (a single string reads as a 1-element list; an empty sequence, a null or
 * an absent key as no elements), at most `cap`, borrowed until destroy; a null or a nested element
 * is an error naming it. */
ddpc_status ddpc_config_string_list(ddpc_config *c, const char *key, const char **out, size_t cap,
                                    size_t *n_out);

/* Whether `key` is present (any kind, null included). Records nothing. */
bool ddpc_config_has(const ddpc_config *c, const char *key);
/* Number of elements if `key` is a sequence, else 0 (for iterating "tasks.<i>.*"). */
size_t ddpc_config_seq_len(const ddpc_config *c, const char *key);

/* Call after every module has read its keys. The first present value (in file order, then
 * overrides) that no getter used is DDPC_EINVAL: "x.yaml:12: unknown key 'optim.learning_rate'
 * (did you mean 'optim.lr'?)"; the hint is the closest known key and is omitted when none is close.
 * An unread sequence of scalars is reported as a whole; a mapping by its first leaf. */
ddpc_status ddpc_config_check_unused(const ddpc_config *c);

/* The name the tree was parsed under: ddpc_config_load's path (as given), ddpc_config_parse's
 * name; NULL for ddpc_config_create's tree. Borrowed until destroy. */
const char *ddpc_config_source(const ddpc_config *c);

/* Writes the effective configuration as "dotted.key: value\n" lines, one per key asked for, in the
 * order first asked (the present value, else the default), for saving next to run outputs.
 * Writes at most cap bytes including the NUL; returns the length needed, like snprintf. */
size_t ddpc_config_dump(const ddpc_config *c, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
