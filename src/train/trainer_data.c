// SPDX-License-Identifier: MIT
/* Datasets and tasks. A dataset is built from a table of {name, keys, create}: `data.*` (one task)
 * and `tasks.<i>.data.*` read the same keys through the same builder. Tasks whose datasets have the
 * same type and keys share one copy; a label_map is a relabelled view over it. Invariant: every
 * dataset a task points to is in t->owned, views after their base, so freeing in reverse order is
 * safe. */
#include "train/trainer_impl.h"

#include <ddpc/alloc.h>

#include <assert.h>
#include <stdio.h>
#include <string.h>

/* One dataset's keys. */
typedef struct {
    int type; /* index into builders[] */
    const char *path;
    const char *val_path, *test_path; /* tokens: the held-out splits' patterns */
    const char *npy_x[3], *npy_y[3];  /* npy: train, val, test; a held-out split may be NULL */
    int64_t size, classes, block;
    int format; /* tokens: ddpc_token_file_format */
    double val_fraction;
} data_spec;

/* A type's splits: train and test always; valid when it has its own validation split. */
typedef struct {
    ddpc_dataset *train, *test, *valid;
} data_splits;

typedef struct {
    const char *name;
    /* Reads this type's keys under `prefix` ("data" or "tasks.<i>.data"). */
    ddpc_status (*read)(ddpc_trainer *t, const char *prefix, data_spec *s);
    /* Builds the splits (the test split is labelled like the train split). */
    ddpc_status (*create)(const data_spec *s, uint64_t seed, data_splits *out);
} data_builder;

static const char *key_of(char *buf, size_t cap, const char *prefix, const char *name)
{
    snprintf(buf, cap, "%s.%s", prefix, name);
    return buf;
}

static ddpc_status read_fmnist(ddpc_trainer *t, const char *prefix, data_spec *s)
{
    char key[96];
    return ddpc_config_string(t->cfg, key_of(key, sizeof key, prefix, "path"), DDPC__FMNIST_DIR,
                              &s->path);
}

/* Debian ships Fashion-MNIST as train and test only, so validation uses the test split. */
static ddpc_status create_fmnist(const data_spec *s, uint64_t seed, data_splits *out)
{
    (void)seed;
    DDPC_TRY(ddpc_dataset_fmnist_create(&out->train, s->path, true));
    return ddpc_dataset_fmnist_create(&out->test, s->path, false);
}

static ddpc_status read_text(ddpc_trainer *t, const char *prefix, data_spec *s)
{
    char key[96];
    DDPC_TRY(ddpc_config_int(t->cfg, "model.block_size", 128, 1, 1 << 16, &s->block));
    DDPC_TRY(ddpc_config_string(t->cfg, key_of(key, sizeof key, prefix, "path"), DDPC__FORTUNES_DIR,
                                &s->path));
    return ddpc_config_float(t->cfg, key_of(key, sizeof key, prefix, "val_fraction"), 0.1, 0.001,
                             0.999, &s->val_fraction);
}

/* Text has one held-out split: the last val_fraction of the corpus. */
static ddpc_status create_text(const data_spec *s, uint64_t seed, data_splits *out)
{
    (void)seed;
    DDPC_TRY(ddpc_dataset_text_create(&out->train, s->path, s->block, s->val_fraction, true));
    return ddpc_dataset_text_create(&out->test, s->path, s->block, s->val_fraction, false);
}

static ddpc_status read_synthetic_images(ddpc_trainer *t, const char *prefix, data_spec *s)
{
    char key[96];
    DDPC_TRY(ddpc_config_int(t->cfg, key_of(key, sizeof key, prefix, "size"), 1024, 1, INT64_MAX,
                             &s->size));
    return ddpc_config_int(t->cfg, key_of(key, sizeof key, prefix, "classes"), 10, 2, 256,
                           &s->classes);
}

/* One seed for both splits: they share the labelling map and differ only in samples; the test
 * split is a quarter of the size. */
static ddpc_status create_synthetic_images(const data_spec *s, uint64_t seed, data_splits *out)
{
    DDPC_TRY(ddpc_dataset_synthetic_images_create(&out->train, s->size, 1, 28, 28, s->classes,
                                                  seed, true));
    return ddpc_dataset_synthetic_images_create(&out->test, s->size / 4 + 1, 1, 28, 28,
                                                s->classes, seed, false);
}

static ddpc_status read_synthetic_tokens(ddpc_trainer *t, const char *prefix, data_spec *s)
{
    char key[96];
    DDPC_TRY(ddpc_config_int(t->cfg, "model.block_size", 128, 1, 1 << 16, &s->block));
    return ddpc_config_int(t->cfg, key_of(key, sizeof key, prefix, "size"), 1 << 16, 2, INT64_MAX,
                           &s->size);
}

static ddpc_status create_synthetic_tokens(const data_spec *s, uint64_t seed, data_splits *out)
{
    DDPC_TRY(
        ddpc_dataset_synthetic_tokens_create(&out->train, s->size, 256, s->block, seed, true));
    return ddpc_dataset_synthetic_tokens_create(&out->test, s->size / 4 + s->block + 1, 256,
                                                s->block, seed, false);
}

static const char *const token_formats[] = {"llmc", "uint16", NULL}; /* ddpc_token_file_format */

/* tokens: llm.c / nanoGPT shards; data.train and data.val are required (a corpus tokenised by
 * someone else has no split to cut), data.test is optional. */
static ddpc_status read_tokens(ddpc_trainer *t, const char *prefix, data_spec *s)
{
    char key[96];
    DDPC_TRY(ddpc_config_int(t->cfg, "model.block_size", 128, 1, 1 << 16, &s->block));
    DDPC_TRY(ddpc_config_int(t->cfg, "model.vocab_size", 256, 2, INT32_MAX, &s->classes));
    DDPC_TRY(ddpc_config_choice(t->cfg, key_of(key, sizeof key, prefix, "format"), "llmc",
                                token_formats, &s->format));
    DDPC_TRY(ddpc_config_string(t->cfg, key_of(key, sizeof key, prefix, "test"), NULL,
                                &s->test_path));
    const char *names[2] = {"train", "val"};
    const char **dst[2] = {&s->path, &s->val_path};
    for (int i = 0; i < 2; i++) {
        DDPC_TRY(ddpc_config_string(t->cfg, key_of(key, sizeof key, prefix, names[i]), NULL,
                                    dst[i]));
        if (!*dst[i])
            return ddpc_errorf(DDPC_EINVAL,
                               "data.type tokens needs key '%s': a glob of token shard files "
                               "(llm.c's .bin, or raw uint16 with data.format: uint16)",
                               key);
    }
    return DDPC_OK;
}

/* Validation reads data.val; the final test reads data.test, or data.val when there is none. */
static ddpc_status create_tokens(const data_spec *s, uint64_t seed, data_splits *out)
{
    (void)seed;
    ddpc_token_file_format f = (ddpc_token_file_format)s->format;
    DDPC_TRY(ddpc_dataset_token_shards_create(&out->train, s->path, f, s->block, s->classes));
    if (!s->test_path)
        return ddpc_dataset_token_shards_create(&out->test, s->val_path, f, s->block, s->classes);
    DDPC_TRY(ddpc_dataset_token_shards_create(&out->valid, s->val_path, f, s->block, s->classes));
    return ddpc_dataset_token_shards_create(&out->test, s->test_path, f, s->block, s->classes);
}

/* npy: data.train_x/train_y required; data.val_x/val_y and data.test_x/test_y each a pair, at
 * least one of the two (a held-out split to evaluate on). */
static ddpc_status read_npy(ddpc_trainer *t, const char *prefix, data_spec *s)
{
    static const char *const split[3] = {"train", "val", "test"};
    char key[96], name[16];
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "%s_x", split[i]);
        DDPC_TRY(ddpc_config_string(t->cfg, key_of(key, sizeof key, prefix, name), NULL,
                                    &s->npy_x[i]));
        snprintf(name, sizeof name, "%s_y", split[i]);
        DDPC_TRY(ddpc_config_string(t->cfg, key_of(key, sizeof key, prefix, name), NULL,
                                    &s->npy_y[i]));
        if (!s->npy_x[i] != !s->npy_y[i] || (i == 0 && !s->npy_x[i]))
            return ddpc_errorf(DDPC_EINVAL,
                               "data.type npy needs keys '%s.%s_x' and '%s.%s_y' together: the "
                               "samples and labels .npy files",
                               prefix, split[i], prefix, split[i]);
    }
    if (!s->npy_x[1] && !s->npy_x[2])
        return ddpc_errorf(DDPC_EINVAL,
                           "data.type npy needs a held-out split: keys '%s.val_x'/'%s.val_y' or "
                           "'%s.test_x'/'%s.test_y'",
                           prefix, prefix, prefix, prefix);
    return DDPC_OK;
}

/* A held-out split's labels must be classes the train split has (the head's width). */
static ddpc_status check_classes(const ddpc_dataset *train, const ddpc_dataset *held,
                                 const char *path)
{
    if (ddpc_dataset_num_classes(held) > ddpc_dataset_num_classes(train))
        return ddpc_errorf(DDPC_EINVAL,
                           "%s: label %lld, but the train split's labels stop at %lld", path,
                           (long long)ddpc_dataset_num_classes(held) - 1,
                           (long long)ddpc_dataset_num_classes(train) - 1);
    return DDPC_OK;
}

/* Validation reads val (test without it); the final test reads test (val without it). */
static ddpc_status create_npy(const data_spec *s, uint64_t seed, data_splits *out)
{
    (void)seed;
    DDPC_TRY(ddpc_dataset_npy_create(&out->train, s->npy_x[0], s->npy_y[0]));
    int test = s->npy_x[2] ? 2 : 1;
    DDPC_TRY(ddpc_dataset_npy_create(&out->test, s->npy_x[test], s->npy_y[test]));
    DDPC_TRY(check_classes(out->train, out->test, s->npy_y[test]));
    if (test == 1 || !s->npy_x[1])
        return DDPC_OK;
    DDPC_TRY(ddpc_dataset_npy_create(&out->valid, s->npy_x[1], s->npy_y[1]));
    return check_classes(out->train, out->valid, s->npy_y[1]);
}

static const data_builder builders[] = {
    {"fmnist", read_fmnist, create_fmnist},
    {"text", read_text, create_text},
    {"synthetic_images", read_synthetic_images, create_synthetic_images},
    {"synthetic_tokens", read_synthetic_tokens, create_synthetic_tokens},
    {"tokens", read_tokens, create_tokens},
    {"npy", read_npy, create_npy},
};
/* "translation" (last) has vocabularies and three splits: trainer_translation.c builds it. */
static const char *const builder_names[] = {"fmnist", "text",        "synthetic_images",
                                            "synthetic_tokens", "tokens", "npy",
                                            "translation",      NULL};
#define TRANSLATION_TYPE 6
static_assert(sizeof builders / sizeof builders[0] == TRANSLATION_TYPE,
              "builder_names lists every builder, then translation");

static bool same_string(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

static bool same_strings(const char *const *a, const char *const *b, int n)
{
    for (int i = 0; i < n; i++)
        if (!same_string(a[i], b[i]))
            return false;
    return true;
}

static bool same_spec(const data_spec *a, const data_spec *b)
{
    return a->type == b->type && a->size == b->size && a->classes == b->classes &&
           a->block == b->block && a->val_fraction == b->val_fraction &&
           a->format == b->format && same_string(a->path, b->path) &&
           same_string(a->val_path, b->val_path) && same_string(a->test_path, b->test_path) &&
           same_strings(a->npy_x, b->npy_x, 3) && same_strings(a->npy_y, b->npy_y, 3);
}

static ddpc_status own(ddpc_trainer *t, ddpc_dataset *d)
{
    if (t->n_owned == DDPC__MAX_OWNED) {
        ddpc_dataset_destroy(d);
        return ddpc_errorf(DDPC_EINTERNAL, "tasks: too many datasets");
    }
    t->owned[t->n_owned++] = d;
    return DDPC_OK;
}

/* A dataset already loaded for an earlier task. */
typedef struct {
    data_spec spec;
    data_splits splits;
} loaded_data;

/* Builds or reuses the datasets of `prefix` for task k, then its label_map view if any. */
static ddpc_status load_data(ddpc_trainer *t, ddpc__task *k, const char *prefix,
                             loaded_data *loaded, int *n_loaded)
{
    char key[96];
    data_spec want = {0};
    DDPC_TRY(ddpc_config_choice(t->cfg, key_of(key, sizeof key, prefix, "type"), "fmnist",
                                builder_names, &want.type));
    if (want.type == TRANSLATION_TYPE) {
        k->data_type = "translation";
        return ddpc__trainer_load_translation(t, k, prefix);
    }
    const data_builder *b = &builders[want.type];
    k->data_type = b->name;
    DDPC_TRY(b->read(t, prefix, &want));
    loaded_data *d = NULL;
    for (int j = 0; j < *n_loaded && !d; j++)
        if (same_spec(&loaded[j].spec, &want))
            d = &loaded[j];
    if (!d) {
        d = &loaded[(*n_loaded)++];
        *d = (loaded_data){.spec = want};
        ddpc_status st = b->create(&want, t->set.seed, &d->splits);
        ddpc_dataset *made[3] = {d->splits.train, d->splits.test, d->splits.valid};
        for (int j = 0; j < 3; j++)
            if (made[j])
                DDPC_TRY(own(t, made[j]));
        DDPC_TRY(st);
    }
    k->train = d->splits.train;
    k->test = d->splits.test;
    k->valid = d->splits.valid;
    key_of(key, sizeof key, prefix, "label_map");
    if (!ddpc_config_has(t->cfg, key))
        return DDPC_OK;
    int64_t map[256];
    size_t n_map;
    DDPC_TRY(ddpc_config_int_list(t->cfg, key, NULL, 0, 0, 255, map, 256, &n_map));
    ddpc_dataset *v = NULL;
    if (ddpc_dataset_relabel_create(&v, d->splits.train, map, (int64_t)n_map) != DDPC_OK) {
        char why[256];
        snprintf(why, sizeof why, "%s", ddpc_last_error());
        return ddpc_errorf(DDPC_EINVAL, "key '%s': %s", key, why);
    }
    DDPC_TRY(own(t, v));
    k->train = v;
    DDPC_TRY(ddpc_dataset_relabel_create(&v, d->splits.test, map, (int64_t)n_map));
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
        if (strcmp(t->task[j].name, name) == 0)
            return ddpc_errorf(DDPC_EINVAL, "key '%s': '%s' is already the name of tasks.%d", key,
                               name, j);
    snprintf(t->task[i].name, DDPC__TASK_NAME_MAX, "%s", name);
    return DDPC_OK;
}

/* tasks.<i>: name, data, batch sizes, loss weight, head width. */
static ddpc_status read_task(ddpc_trainer *t, int i, loaded_data *loaded, int *n_loaded)
{
    ddpc_config *c = t->cfg;
    ddpc__task *k = &t->task[i];
    char prefix[64], key[96];
    double w;
    snprintf(prefix, sizeof prefix, "tasks.%d", i);
    DDPC_TRY(read_name(t, i, key_of(key, sizeof key, prefix, "name")));
    DDPC_TRY(load_data(t, k, key_of(key, sizeof key, prefix, "data"), loaded, n_loaded));
    DDPC_TRY(ddpc_config_int(c, key_of(key, sizeof key, prefix, "batch_size"), t->set.batch_size, 1,
                             1 << 20, &k->batch_size));
    DDPC_TRY(ddpc_config_int(c, key_of(key, sizeof key, prefix, "eval_batch_size"),
                             t->set.eval_batch_size, 1, 1 << 20, &k->eval_batch_size));
    DDPC_TRY(
        ddpc_config_float(c, key_of(key, sizeof key, prefix, "loss_weight"), 1.0, 0.0, 1e6, &w));
    k->loss_weight = (float)w;
    int64_t classes = ddpc_dataset_num_classes(k->train);
    return ddpc_config_int(c, key_of(key, sizeof key, prefix, "num_classes"), classes, classes, 256,
                           &k->num_classes);
}

static const char *const combined_modes[] = {"max_size_cycle", "min_size", "max_size", "sequential",
                                             NULL};

ddpc_status ddpc__trainer_load_tasks(ddpc_trainer *t)
{
    ddpc_config *c = t->cfg;
    loaded_data loaded[DDPC_MODEL_MAX_HEADS];
    int n_loaded = 0;
    t->multi = ddpc_config_has(c, "tasks");
    if (!t->multi) { /* data.* is shorthand for the one task */
        ddpc__task *k = &t->task[0];
        t->n_tasks = 1;
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
        t->mode = (ddpc_combined_mode)mode; /* the table follows the enum's order */
        for (int i = 0; i < (int)n; i++) {
            t->n_tasks = i + 1; /* freeing sees every task begun */
            DDPC_TRY(read_task(t, i, loaded, &n_loaded));
        }
    }
    DDPC_TRY(ddpc__trainer_select_tasks(t));
    return ddpc__trainer_shard_tasks(t);
}

void ddpc__trainer_free_tasks(ddpc_trainer *t)
{
    ddpc_combined_destroy(t->combined);
    t->combined = NULL;
    for (int i = 0; i < t->n_tasks; i++) {
        ddpc_loader_destroy(t->task[i].loader);
        ddpc_sampler_destroy(t->task[i].sampler);
        t->task[i].loader = NULL;
        t->task[i].sampler = NULL;
    }
    for (int i = t->n_owned - 1; i >= 0; i--)
        ddpc_dataset_destroy(t->owned[i]);
    t->n_owned = 0;
    ddpc_free(t->holds);
    t->holds = NULL;
    if (t->indices_log)
        fclose(t->indices_log);
    t->indices_log = NULL;
    ddpc__trainer_free_translation(t); /* after the datasets, which borrow the vocabularies */
}
