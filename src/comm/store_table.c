// SPDX-License-Identifier: MIT
/* The store server's table (store_table.h): an array of entries with a hash index over it, so a
 * big job's tens of thousands of keys cost no more per request than a small job's few hundred;
 * capped in keys and bytes so that no client can grow the server without bound. */
#include "comm/store_table.h"

#include <ddpc/store.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

ddpc__store_blob *ddpc__store_blob_new(size_t len)
{
    ddpc__store_blob *b = malloc(sizeof *b + (len ? len : 1));
    if (b) {
        b->refs = 1;
        b->len = len;
    }
    return b;
}

void ddpc__store_blob_unref(ddpc__store_blob *b)
{
    if (b && --b->refs == 0)
        free(b);
}

/* FNV-1a: keys are short and chosen by the job's own (authenticated) clients. */
static size_t hash(const char *key)
{
    uint64_t h = 1469598103934665603ull;
    for (; *key; key++)
        h = (h ^ (unsigned char)*key) * 1099511628211ull;
    return (size_t)h;
}

/* The slot of key: its entry's, or the empty one where it would go. */
static size_t *slot_of(const ddpc__store_table *t, const char *key)
{
    size_t mask = t->nslots - 1;
    for (size_t i = hash(key) & mask;; i = (i + 1) & mask)
        if (t->slots[i] == 0 || strcmp(t->entries[t->slots[i] - 1].key, key) == 0)
            return &t->slots[i];
}

/* Doubles the index (or makes the first); false when out of memory. */
static bool grow_index(ddpc__store_table *t)
{
    size_t n = t->nslots ? 2 * t->nslots : 128;
    size_t *slots = calloc(n, sizeof *slots);
    if (!slots)
        return false;
    free(t->slots);
    t->slots = slots;
    t->nslots = n;
    for (size_t e = 0; e < t->count; e++)
        *slot_of(t, t->entries[e].key) = e + 1;
    return true;
}

ddpc__store_entry *ddpc__store_table_find(ddpc__store_table *t, const char *key)
{
    if (t->nslots == 0)
        return NULL;
    size_t s = *slot_of(t, key);
    return s ? &t->entries[s - 1] : NULL;
}

bool ddpc__store_table_fits(ddpc__store_table *t, const char *key, size_t len)
{
    ddpc__store_entry *e = ddpc__store_table_find(t, key);
    if (!e && t->count >= DDPC_STORE_KEYS_MAX)
        return false;
    size_t old = e ? strlen(key) + e->value->len : 0;
    size_t after = t->bytes - old + strlen(key) + len + t->reserved;
    return after <= DDPC_STORE_BYTES_MAX;
}

ddpc__table_put ddpc__store_table_put(ddpc__store_table *t, const char *key,
                                      ddpc__store_blob *value)
{
    if (!ddpc__store_table_fits(t, key, value->len))
        return DDPC__TABLE_FULL;
    ddpc__store_entry *e = ddpc__store_table_find(t, key);
    if (!e) {
        if (t->count == t->cap) {
            size_t cap = t->cap ? 2 * t->cap : 64;
            ddpc__store_entry *grown = realloc(t->entries, cap * sizeof *grown);
            if (!grown)
                return DDPC__TABLE_NOMEM;
            t->entries = grown;
            t->cap = cap;
        }
        if (2 * (t->count + 1) > t->nslots && !grow_index(t))
            return DDPC__TABLE_NOMEM;
        char *k = strdup(key);
        if (!k)
            return DDPC__TABLE_NOMEM;
        *slot_of(t, key) = t->count + 1;
        e = &t->entries[t->count++];
        *e = (ddpc__store_entry){k, NULL};
        t->bytes += strlen(key);
    }
    if (e->value) {
        t->bytes -= e->value->len;
        ddpc__store_blob_unref(e->value);
    }
    value->refs++;
    e->value = value;
    t->bytes += value->len;
    return DDPC__TABLE_OK;
}

void ddpc__store_table_fini(ddpc__store_table *t)
{
    for (size_t i = 0; i < t->count; i++) {
        free(t->entries[i].key);
        ddpc__store_blob_unref(t->entries[i].value);
    }
    free(t->entries);
    free(t->slots);
    *t = (ddpc__store_table){0};
}
