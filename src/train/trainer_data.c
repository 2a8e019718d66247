// SPDX-License-Identifier: MIT
/* The task table: `tasks:`, or one task from the `data.*` keys, each with its datasets (built by
 * trainer_data_builders.c, trainer_translation.c or a registered factory). Tasks whose datasets
 * have the same type and keys share one copy; a label_map is a relabelled view over it.
 * Invariant: every dataset a task points to is in t->data.owned, views after their base, so
 * freeing in reverse order is safe. */
#include "train/trainer_data.h"
#include "train/trainer_impl.h"
#include "train/trainer_translation.h"

#include <ddpc/alloc.h>
#include <ddpc/dataset_ops.h>

#include <stdio.h>
#include <string.h>

static ddpc_status own(ddpc_trainer *t, ddpc_dataset *d)
{
    if (t->data.n_owned == DDPC__MAX_OWNED) {
        ddpc_dataset_destroy(d);
        return ddpc_errorf(DDPC_EINTERNAL, "tasks: too many datasets");
    }
    t->data.owned[t->data.n_owned++] = d;
    return DDPC_OK;
}

/* A registered data type's splits, from its factory; the trainer owns whatever it made. */
static ddpc_status load_registered(ddpc_trainer *t, ddpc__task *k, const char *prefix,
                                   const char *name)
{
    void *ctx;
    ddpc_data_factory factory = ddpc_data_lookup(name, &ctx);
    ddpc_data_splits sp = {0};
    ddpc_status s = factory(ctx, t->cfg, prefix, t->set.seed, &sp);
    ddpc_dataset *made[3] = {sp.train, sp.test, sp.valid};
    for (int j = 0; j < 3; j++)
        if (made[j])
            DDPC_TRY(own(t, made[j]));
    DDPC_TRY(s);
    if (!sp.train || !sp.test)
        return ddpc_errorf(DDPC_EINVAL, "data.type %s: its factory made no %s split", name,
                           sp.train ? "test" : "train");
    k->data_type = name;
    k->train = sp.train;
    k->test = sp.test;
    k->valid = sp.valid;
    return DDPC_OK;
}

/* A dataset already loaded for an earlier task. */
typedef struct {
    ddpc__data_spec spec;
    ddpc__data_splits splits;
} loaded_data;

/* Builds or reuses the datasets of the built-in type `name` for task k. */
static ddpc_status load_builtin(ddpc_trainer *t, ddpc__task *k, const char *prefix,
                                const char *name, ddpc__data_spec *want, loaded_data *loaded,
                                int *n_loaded)
{
    k->data_type = name;
    DDPC_TRY(ddpc__trainer_read_data(t, prefix, want));
    loaded_data *d = NULL;
    for (int j = 0; j < *n_loaded && !d; j++)
        if (ddpc__data_same_spec(&loaded[j].spec, want))
            d = &loaded[j];
    if (!d) {
        d = &loaded[(*n_loaded)++];
        *d = (loaded_data){.spec = *want};
        ddpc_status st = ddpc__data_create(want, t->set.seed, &d->splits);
        ddpc_dataset *made[3] = {d->splits.train, d->splits.test, d->splits.valid};
        for (int j = 0; j < 3; j++)
            if (made[j])
                DDPC_TRY(own(t, made[j]));
        DDPC_TRY(st);
        ddpc__trainer_add_note(t, "%s", d->splits.note);
    }
    k->train = d->splits.train;
    k->test = d->splits.test;
    k->valid = d->splits.valid;
    return DDPC_OK;
}

/* Builds or reuses the datasets of `prefix` for task k, then its label_map view if any. */
static ddpc_status load_data(ddpc_trainer *t, ddpc__task *k, const char *prefix,
                             loaded_data *loaded, int *n_loaded)
{
    char key[96];
    ddpc__data_spec want = {0};
    const char *names[DDPC__DATA_NAMES_MAX];
    DDPC_TRY(ddpc__trainer_read_data_type(t, ddpc_config_key(key, sizeof key, prefix, "type"),
                                          names, &want.type));
    if (want.type == DDPC__DATA_TRANSLATION) {
        k->data_type = "translation";
        return ddpc__trainer_load_translation(t, k, prefix);
    }
    if (want.type > DDPC__DATA_TRANSLATION) /* label_map below is refused for its datasets */
        DDPC_TRY(load_registered(t, k, prefix, names[want.type]));
    else
        DDPC_TRY(load_builtin(t, k, prefix, names[want.type], &want, loaded, n_loaded));
    ddpc_config_key(key, sizeof key, prefix, "label_map");
    if (!ddpc_config_has(t->cfg, key))
        return DDPC_OK;
    int64_t map[256];
    size_t n_map;
    DDPC_TRY(ddpc_config_int_list(t->cfg, key, NULL, 0, 0, 255, map, 256, &n_map));
    ddpc_dataset *v = NULL;
    if (ddpc_dataset_relabel_create(&v, k->train, map, (int64_t)n_map) != DDPC_OK) {
        char why[256];
        snprintf(why, sizeof why, "%s", ddpc_last_error());
        return ddpc_errorf(DDPC_EINVAL, "key '%s': %s", key, why);
    }
    DDPC_TRY(own(t, v));
    k->train = v;
    DDPC_TRY(ddpc_dataset_relabel_create(&v, k->test, map, (int64_t)n_map));
    DDPC_TRY(own(t, v));
    k->test = v;
    return DDPC_OK;
}

static ddpc_status read_name(ddpc_trainer *t, int i, const char *key)
{
    const char *name;
    DDPC_TRY(ddpc_config_string(t->cfg, key, NULL, &name));
    size_t len = name ? strlen(name) : 0;
    if (len == 0 || len >= DDPC__TASK_NAME_MAX ||
        strspn(name, "abcdefghijklmnopqrstuvwxyz"
                     "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                     "0123456789_-.") != len)
        return ddpc_errorf(DDPC_EINVAL,
                           "key '%s' must be 1 to %d letters, digits, '_', '-' or '.', got '%s'",
                           key, DDPC__TASK_NAME_MAX - 1, name ? name : "");
    for (int j = 0; j < i; j++)
        if (strcmp(t->data.task[j].name, name) == 0)
            return ddpc_errorf(DDPC_EINVAL, "key '%s': '%s' is already the name of tasks.%d", key,
                               name, j);
    snprintf(t->data.task[i].name, DDPC__TASK_NAME_MAX, "%s", name);
    return DDPC_OK;
}

/* tasks.<i>: name, data, batch sizes, loss weight, head width. */
static ddpc_status read_task(ddpc_trainer *t, int i, loaded_data *loaded, int *n_loaded)
{
    ddpc_config *c = t->cfg;
    ddpc__task *k = &t->data.task[i];
    char prefix[64], key[96];
    double w;
    snprintf(prefix, sizeof prefix, "tasks.%d", i);
    DDPC_TRY(read_name(t, i, ddpc_config_key(key, sizeof key, prefix, "name")));
    DDPC_TRY(load_data(t, k, ddpc_config_key(key, sizeof key, prefix, "data"), loaded, n_loaded));
    DDPC_TRY(ddpc_config_int(c, ddpc_config_key(key, sizeof key, prefix, "batch_size"),
                             t->set.batch_size, 1, 1 << 20, &k->batch_size));
    DDPC_TRY(ddpc_config_int(c, ddpc_config_key(key, sizeof key, prefix, "eval_batch_size"),
                             t->set.eval_batch_size, 1, 1 << 20, &k->eval_batch_size));
    DDPC_TRY(ddpc_config_float(c, ddpc_config_key(key, sizeof key, prefix, "loss_weight"), 1.0, 0.0,
                               1e6, &w));
    k->loss_weight = (float)w;
    int64_t classes = ddpc_dataset_num_classes(k->train);
    return ddpc_config_int(c, ddpc_config_key(key, sizeof key, prefix, "num_classes"), classes,
                           classes, 256, &k->num_classes);
}

static const char *const combined_modes[] = {"max_size_cycle", "min_size", "max_size", "sequential",
                                             NULL};

ddpc_status ddpc__trainer_load_tasks(ddpc_trainer *t)
{
    ddpc_config *c = t->cfg;
    loaded_data loaded[DDPC_MODEL_MAX_HEADS];
    int n_loaded = 0;
    t->data.multi = ddpc_config_has(c, "tasks");
    if (!t->data.multi) { /* data.* is shorthand for the one task */
        ddpc__task *k = &t->data.task[0];
        t->data.n_tasks = 1;
        snprintf(k->name, sizeof k->name, "default");
        k->batch_size = t->set.batch_size;
        k->eval_batch_size = t->set.eval_batch_size;
        k->loss_weight = 1.0f;
        DDPC_TRY(load_data(t, k, "data", loaded, &n_loaded));
        k->num_classes = ddpc_dataset_num_classes(k->train);
    } else {
        size_t n = ddpc_config_seq_len(c, "tasks");
        if (n == 0 || n > DDPC_MODEL_MAX_HEADS)
            return ddpc_errorf(DDPC_EINVAL,
                               "key 'tasks' must be a list of 1 to %d task mappings, got %zu",
                               DDPC_MODEL_MAX_HEADS, n);
        int mode;
        DDPC_TRY(
            ddpc_config_choice(c, "data.combined_mode", "max_size_cycle", combined_modes, &mode));
        t->data.mode = (ddpc_combined_mode)mode; /* the table follows the enum's order */
        for (int i = 0; i < (int)n; i++) {
            t->data.n_tasks = i + 1; /* freeing sees every task begun */
            DDPC_TRY(read_task(t, i, loaded, &n_loaded));
        }
    }
    if (!t->kind) /* translation chose its own while loading */
        t->kind = ddpc_dataset_kind_of(t->data.task[0].train) == DDPC_DATASET_IMAGES
                      ? &ddpc__kind_classify
                      : &ddpc__kind_language_model;
    DDPC_TRY(ddpc__trainer_select_tasks(t));
    return ddpc__trainer_shard_tasks(t);
}

void ddpc__trainer_free_tasks(ddpc_trainer *t)
{
    ddpc_combined_destroy(t->data.combined);
    t->data.combined = NULL;
    for (int i = 0; i < t->data.n_tasks; i++) {
        ddpc_loader_destroy(t->data.task[i].loader);
        ddpc_sampler_destroy(t->data.task[i].sampler);
        t->data.task[i].loader = NULL;
        t->data.task[i].sampler = NULL;
    }
    for (int i = t->data.n_owned - 1; i >= 0; i--)
        ddpc_dataset_destroy(t->data.owned[i]);
    t->data.n_owned = 0;
    ddpc_free(t->data.holds);
    t->data.holds = NULL;
    if (t->data.indices_log)
        fclose(t->data.indices_log);
    t->data.indices_log = NULL;
    ddpc__trainer_free_translation(t); /* after the datasets, which borrow the vocabularies */
}
