// SPDX-License-Identifier: MIT
/* The process-wide registry of data types a program adds for the trainer (`data.type: NAME`).
 * Invariant: entries are only appended, under the lock, so a factory looked up stays valid. */
#include <ddpc/dataset_ops.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define MAX_TYPES 32
#define NAME_MAX_LEN 32

typedef struct {
    char name[NAME_MAX_LEN];
    ddpc_data_factory factory;
    void *ctx;
} data_type;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static data_type types[MAX_TYPES];
static size_t n_types;

static const data_type *find_locked(const char *name)
{
    for (size_t i = 0; i < n_types; i++)
        if (strcmp(types[i].name, name) == 0)
            return &types[i];
    return NULL;
}

ddpc_status ddpc_data_register(const char *name, ddpc_data_factory factory, void *ctx)
{
    size_t len = name ? strlen(name) : 0;
    if (len == 0 || len >= NAME_MAX_LEN ||
        strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_") != len)
        return ddpc_errorf(DDPC_EINVAL, "data type name '%s' must be 1 to %d characters of "
                           "[a-z0-9_]", name ? name : "", NAME_MAX_LEN - 1);
    if (!factory)
        return ddpc_errorf(DDPC_EINVAL, "data type '%s': the factory is NULL", name);
    ddpc_status s = DDPC_OK;
    pthread_mutex_lock(&lock);
    if (find_locked(name))
        s = ddpc_errorf(DDPC_EINVAL, "data type '%s' is already registered", name);
    else if (n_types == MAX_TYPES)
        s = ddpc_errorf(DDPC_EINVAL, "data type '%s': %d types are registered already, the most "
                        "there can be", name, MAX_TYPES);
    else {
        data_type *t = &types[n_types++];
        snprintf(t->name, sizeof t->name, "%s", name);
        t->factory = factory;
        t->ctx = ctx;
    }
    pthread_mutex_unlock(&lock);
    return s;
}

ddpc_data_factory ddpc_data_lookup(const char *name, void **ctx)
{
    pthread_mutex_lock(&lock);
    const data_type *t = name ? find_locked(name) : NULL;
    ddpc_data_factory f = t ? t->factory : NULL;
    if (ctx)
        *ctx = t ? t->ctx : NULL;
    pthread_mutex_unlock(&lock);
    return f;
}

size_t ddpc_data_type_names(const char **names, size_t cap)
{
    pthread_mutex_lock(&lock);
    size_t n = n_types < cap ? n_types : cap;
    for (size_t i = 0; i < n; i++)
        names[i] = types[i].name;
    pthread_mutex_unlock(&lock);
    return n;
}
