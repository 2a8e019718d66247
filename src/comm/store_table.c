/* The store server's table (store_table.h): a plain array searched linearly, since a job has a
 * few hundred keys (rendezvous addresses, agents' states), capped in keys and bytes so that no
 * client can grow the server without bound. */
#include "comm/store_table.h"

#include <ddpc/store.h>

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

ddpc__store_entry *ddpc__store_table_find(ddpc__store_table *t, const char *key)
{
    for (size_t i = 0; i < t->count; i++)
        if (strcmp(t->entries[i].key, key) == 0)
            return &t->entries[i];
    return NULL;
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
        char *k = strdup(key);
        if (!k)
            return DDPC__TABLE_NOMEM;
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
    *t = (ddpc__store_table){0};
}
