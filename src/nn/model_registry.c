// SPDX-License-Identifier: MIT
/* The process-wide registry of model types: ddpc's four built-ins, then the types a program
 * registers (ddpc_model_register). Invariant: entries are only appended, under the lock, and an
 * entry's table outlives the process, so a pointer handed out stays valid. */
#include "nn/model_impl.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static const ddpc_model_ops *const builtins[] = {&ddpc__mlp_ops, &ddpc__cnn_ops, &ddpc__gpt_ops,
                                                  &ddpc__seq2seq_ops};
#define N_BUILTINS (sizeof builtins / sizeof builtins[0])
#define MAX_USER_TYPES (DDPC_MODEL_MAX_TYPES - N_BUILTINS)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const ddpc_model_ops *user_types[MAX_USER_TYPES];
static size_t n_user;
/* "mlp, cnn, gpt, seq2seq[, user types]": rebuilt on each registration, under the lock. */
static char type_list[MAX_USER_TYPES * DDPC_MODEL_TYPE_MAX * 2 + 64] = "mlp, cnn, gpt, seq2seq";

static const ddpc_model_ops *find_locked(const char *name)
{
    for (size_t i = 0; i < N_BUILTINS; i++)
        if (strcmp(builtins[i]->name, name) == 0)
            return builtins[i];
    for (size_t i = 0; i < n_user; i++)
        if (strcmp(user_types[i]->name, name) == 0)
            return user_types[i];
    return NULL;
}

const ddpc_model_ops *ddpc_model_lookup(const char *name)
{
    if (!name)
        return NULL;
    pthread_mutex_lock(&lock);
    const ddpc_model_ops *ops = find_locked(name);
    pthread_mutex_unlock(&lock);
    return ops;
}

const char *ddpc_model_types(void)
{
    return type_list; /* the header asks callers not to read it while a type registers */
}

ddpc_status ddpc__model_ops_check(const ddpc_model_ops *ops)
{
    if (!ops || !ops->name)
        return ddpc_errorf(DDPC_EINVAL, "model type: the ops table or its name is NULL");
    size_t len = strlen(ops->name);
    if (len == 0 || len >= DDPC_MODEL_TYPE_MAX ||
        strspn(ops->name, "abcdefghijklmnopqrstuvwxyz0123456789_") != len)
        return ddpc_errorf(DDPC_EINVAL, "model type name '%s' must be 1 to %d characters of "
                           "[a-z0-9_]", ops->name, DDPC_MODEL_TYPE_MAX - 1);
    const char *missing = !ops->build      ? "build"
                          : !ops->init     ? "init"
                          : !ops->forward  ? "forward"
                          : !ops->backward ? "backward"
                                           : NULL;
    if (missing)
        return ddpc_errorf(DDPC_EINVAL, "model type '%s' has no %s member (it is required)",
                           ops->name, missing);
    if (ops->data_kind != DDPC_DATASET_IMAGES && ops->data_kind != DDPC_DATASET_TOKENS &&
        ops->data_kind != DDPC_DATASET_PAIRS)
        return ddpc_errorf(DDPC_EINVAL, "model type '%s': data_kind %d is not a ddpc_dataset_kind",
                           ops->name, (int)ops->data_kind);
    return DDPC_OK;
}

ddpc_status ddpc_model_register(const ddpc_model_ops *ops)
{
    DDPC_TRY(ddpc__model_ops_check(ops));
    ddpc_status s = DDPC_OK;
    pthread_mutex_lock(&lock);
    if (find_locked(ops->name))
        s = ddpc_errorf(DDPC_EINVAL, "model type '%s' is already registered", ops->name);
    else if (n_user == MAX_USER_TYPES)
        s = ddpc_errorf(DDPC_EINVAL, "model type '%s': %d types are registered already, the most "
                        "there can be", ops->name, (int)MAX_USER_TYPES);
    if (s == DDPC_OK) {
        user_types[n_user++] = ops;
        size_t len = strlen(type_list);
        snprintf(type_list + len, sizeof type_list - len, ", %s", ops->name);
    }
    pthread_mutex_unlock(&lock);
    return s;
}

size_t ddpc_model_type_names(const char **names, size_t cap)
{
    pthread_mutex_lock(&lock);
    size_t n = 0;
    for (size_t i = 0; i < N_BUILTINS + n_user && n < cap; i++)
        names[n++] = i < N_BUILTINS ? builtins[i]->name : user_types[i - N_BUILTINS]->name;
    pthread_mutex_unlock(&lock);
    return n;
}
