// SPDX-License-Identifier: MIT
/* A small strict JSON (RFC 8259) parser for headers read from outside bytes (safetensors).
 * Invariant: parsing never reads outside [text, text+len), never recurses deeper than
 * DDPC__JSON_MAX_DEPTH, and on any failure frees everything it built; strings are validated
 * UTF-8 without embedded NUL. Object keys keep file order; duplicates are kept (see
 * ddpc__json_check_unique_keys). */
#ifndef DDPC_CORE_JSON_H
#define DDPC_CORE_JSON_H

#include <ddpc/status.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DDPC__JSON_MAX_DEPTH 64

typedef enum {
    DDPC__JSON_NULL,
    DDPC__JSON_BOOL,
    DDPC__JSON_NUMBER,
    DDPC__JSON_STRING,
    DDPC__JSON_ARRAY,
    DDPC__JSON_OBJECT,
} ddpc__json_type;

typedef struct ddpc__json ddpc__json;
struct ddpc__json {
    ddpc__json_type type;
    bool boolean;       /* BOOL */
    double number;      /* NUMBER */
    bool is_int;        /* NUMBER written without fraction or exponent that fits int64 */
    int64_t integer;    /* NUMBER when is_int */
    char *str;          /* STRING: NUL-terminated UTF-8 (str_len bytes) */
    size_t str_len;
    size_t count;       /* ARRAY, OBJECT: number of items */
    ddpc__json *items;  /* (count) values */
    char **keys;        /* (count) OBJECT keys, NUL-terminated UTF-8 */
};

/* Parses text[0, len) (not NUL-terminated) as one JSON value surrounded by optional whitespace.
 * *out is a ddpc_malloc'd tree to free with ddpc__json_free. DDPC_EFORMAT "<origin>: invalid JSON
 * at byte N: <why>"; DDPC_ENOMEM "<origin>: out of memory ...". */
ddpc_status ddpc__json_parse(ddpc__json **out, const char *text, size_t len, const char *origin);

/* Frees a tree from ddpc__json_parse; NULL is a no-op. */
void ddpc__json_free(ddpc__json *v);

/* The value of the first `key` in object `obj`, or NULL (also when obj is not an object). */
const ddpc__json *ddpc__json_get(const ddpc__json *obj, const char *key);

/* DDPC_EFORMAT "<origin>: duplicate key '<k>'" if object `obj` repeats a key; O(n log n). */
ddpc_status ddpc__json_check_unique_keys(const ddpc__json *obj, const char *origin);

#endif
