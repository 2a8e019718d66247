// SPDX-License-Identifier: MIT
/* Private to the store's server: its table of keys and values. Values are reference-counted
 * blobs, so an answer being sent keeps the bytes it answers with while a later SET replaces them.
 * The table holds at most DDPC_STORE_KEYS_MAX keys and DDPC_STORE_BYTES_MAX bytes of keys and
 * values; `reserved` counts values still arriving, so the bytes held never pass the cap. Uses the
 * C allocator, as the server does (store_server.c says why). Keys are never removed, so the hash
 * index needs no tombstones. */
#ifndef DDPC_COMM_STORE_TABLE_H
#define DDPC_COMM_STORE_TABLE_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    size_t refs, len;
    unsigned char data[]; /* (len) */
} ddpc__store_blob;

typedef struct {
    char *key;
    ddpc__store_blob *value;
} ddpc__store_entry;

typedef struct {
    ddpc__store_entry *entries;
    size_t count, cap;
    size_t *slots;   /* (nslots) open-addressed index: entry index + 1, or 0 for empty */
    size_t nslots;   /* a power of two, at least twice count */
    size_t bytes;    /* keys' and values' bytes held */
    size_t reserved; /* bytes of SET values being received */
} ddpc__store_table;

/* A blob of len bytes with one reference; NULL when out of memory. */
ddpc__store_blob *ddpc__store_blob_new(size_t len);
/* Drops one reference (NULL is a no-op). */
void ddpc__store_blob_unref(ddpc__store_blob *b);

/* The entry of key, or NULL. */
ddpc__store_entry *ddpc__store_table_find(ddpc__store_table *t, const char *key);
/* Whether a value of `len` bytes for key fits beside what is held and reserved. */
bool ddpc__store_table_fits(ddpc__store_table *t, const char *key, size_t len);
typedef enum { DDPC__TABLE_OK, DDPC__TABLE_FULL, DDPC__TABLE_NOMEM } ddpc__table_put;
/* Sets key to `value` (takes one reference on success; the caller keeps its own). */
ddpc__table_put ddpc__store_table_put(ddpc__store_table *t, const char *key,
                                      ddpc__store_blob *value);
/* Frees every entry. */
void ddpc__store_table_fini(ddpc__store_table *t);

#endif
