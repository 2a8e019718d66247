// SPDX-License-Identifier: MIT
/* Datasets and tasks. A dataset is built from a table of {name, keys, create}: `data.*` (one task)
 * and `tasks.<i>.data.*` read the same keys through the same builder. Tasks whose datasets have the
 * same type and keys share one copy; a label_map is a relabelled view over it. Invariant: every
 * dataset a task points to is in t->data.owned, views after their base, so freeing in reverse order
 * is safe. */
#include "train/trainer_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/dataset_ops.h>

#include <assert.h>
#include <stdio.h>
#include <string.h>

/* One dataset's keys. */
typedef struct {
    int type; /* index into builders[] */
    const char *path;
    const char *val_path, *test_path; /* tokens: the held-out splits' patterns */
    const char *npy_x[3], *npy_y[3];  /* npy: train, val, test; a held-out split may be NULL */
    const char *img_root[3];          /* imagefolder: train, val, test; as npy */
    ddpc_imagefolder_config img;
    int64_t size, classes, block;
    int format; /* tokens: ddpc_token_file_format; csv: ddpc_csv_targets */
    const char *label; /* csv: the target columns */
    double val_fraction;
} data_spec;

/* A type's splits: train and test always; valid when it has its own validation split. */
typedef struct {
    ddpc_dataset *train, *test, *valid;
    char note[512]; /* lines for the run's log, about what was read */
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

/* csv: data.train and data.label required, data.val and data.test optional (at least one); the
 * loss decides what the label columns hold. */
static ddpc_status read_csv(ddpc_trainer *t, const char *prefix, data_spec *s)
{
    static const char *const split[3] = {"train", "val", "test"};
    const char **dst[3] = {&s->path, &s->val_path, &s->test_path};
    char key[96];
    for (int i = 0; i < 3; i++)
        DDPC_TRY(ddpc_config_string(t->cfg, key_of(key, sizeof key, prefix, split[i]), NULL,
                                    dst[i]));
    DDPC_TRY(ddpc_config_string(t->cfg, key_of(key, sizeof key, prefix, "label"), NULL,
                                &s->label));
    if (!s->path || !s->label)
        return ddpc_errorf(DDPC_EINVAL, "data.type csv needs keys '%s.train' (a CSV file with a "
                           "header row) and '%s.label' (its target column, or columns \"y1,y2\")",
                           prefix, prefix);
    if (!s->val_path && !s->test_path)
        return ddpc_errorf(DDPC_EINVAL, "data.type csv needs a held-out split: key '%s.val' or "
                           "'%s.test'", prefix, prefix);
    int loss;
    DDPC_TRY(ddpc_config_choice(t->cfg, "loss", "cross_entropy", ddpc_loss_names(), &loss));
    s->format = loss == DDPC_LOSS_CROSS_ENTROPY ? DDPC_CSV_CLASSES
                : loss == DDPC_LOSS_BCE_LOGITS ? DDPC_CSV_PROBABILITIES
                                               : DDPC_CSV_VALUES;
    return DDPC_OK;
}

/* A held-out CSV must have the train file's features and targets. */
static ddpc_status check_csv(const ddpc_dataset *train, const ddpc_dataset *held,
                             const char *train_path, const char *path)
{
    int64_t a[3], b[3];
    ddpc_dataset_sample_shape(train, a);
    ddpc_dataset_sample_shape(held, b);
    if (a[2] != b[2])
        return ddpc_errorf(DDPC_EFORMAT, "%s: %lld feature columns, but the train file %s has %lld",
                           path,
                           (long long)b[2], train_path, (long long)a[2]);
    if (ddpc_dataset_target_width(train) == 0)
        return check_classes(train, held, path);
    return DDPC_OK;
}

/* Validation reads val (test without it); the final test reads test (val without it). */
static ddpc_status create_csv(const data_spec *s, uint64_t seed, data_splits *out)
{
    (void)seed;
    ddpc_csv_targets k = (ddpc_csv_targets)s->format;
    DDPC_TRY(ddpc_dataset_csv_create(&out->train, s->path, s->label, k));
    const char *test = s->test_path ? s->test_path : s->val_path;
    DDPC_TRY(ddpc_dataset_csv_create(&out->test, test, s->label, k));
    DDPC_TRY(check_csv(out->train, out->test, s->path, test));
    if (!s->test_path || !s->val_path)
        return DDPC_OK;
    DDPC_TRY(ddpc_dataset_csv_create(&out->valid, s->val_path, s->label, k));
    return check_csv(out->train, out->valid, s->path, s->val_path);
}

static ddpc_status read_imagefolder(ddpc_trainer *t, const char *prefix, data_spec *s)
{
    return ddpc__trainer_read_imagefolder(t, prefix, s->img_root, &s->img);
}

/* The splits as npy's: validation reads val (test without it), the final test test (or val). */
static ddpc_status create_imagefolder(const data_spec *s, uint64_t seed, data_splits *out)
{
    (void)seed;
    ddpc_dataset *ds[3] = {NULL, NULL, NULL};
    ddpc_status st = ddpc__trainer_create_imagefolder(s->img_root, &s->img, ds, out->note,
                                                      sizeof out->note);
    out->train = ds[0];
    out->test = ds[2] ? ds[2] : ds[1];
    out->valid = ds[2] ? ds[1] : NULL;
    return st;
}

static bool same_image(const ddpc_imagefolder_config *a, const ddpc_imagefolder_config *b)
{
    return a->height == b->height && a->width == b->width && a->channels == b->channels &&
           a->n_mean == b->n_mean && a->n_std == b->n_std &&
           memcmp(a->mean, b->mean, sizeof a->mean) == 0 &&
           memcmp(a->std, b->std, sizeof a->std) == 0;
}

static const data_builder builders[] = {
    {"fmnist", read_fmnist, create_fmnist},
    {"text", read_text, create_text},
    {"synthetic_images", read_synthetic_images, create_synthetic_images},
    {"synthetic_tokens", read_synthetic_tokens, create_synthetic_tokens},
    {"tokens", read_tokens, create_tokens},
    {"npy", read_npy, create_npy},
    {"csv", read_csv, create_csv},
    {"imagefolder", read_imagefolder, create_imagefolder},
};
/* "translation" (last) has vocabularies and three splits: trainer_translation.c builds it. */
static const char *const builder_names[] = {"fmnist", "text",        "synthetic_images",
                                            "synthetic_tokens", "tokens", "npy",
                                            "csv",              "imagefolder",      "translation",
                                            NULL};
#define TRANSLATION_TYPE 8
static_assert(sizeof builders / sizeof builders[0] == TRANSLATION_TYPE,
              "builder_names lists every builder, then translation");

#define N_BUILTIN_TYPES (TRANSLATION_TYPE + 1)

/* data.type among the built-ins and the types a program registered (ddpc_data_register), which
 * follow them: *type indexes names[]. */
static ddpc_status read_data_type(ddpc_trainer *t, const char *key, const char **names, int *type)
{
    for (int i = 0; i < N_BUILTIN_TYPES; i++)
        names[i] = builder_names[i];
    size_t n = ddpc_data_type_names(names + N_BUILTIN_TYPES, 32);
    for (size_t j = 0; j < n; j++)
        for (int i = 0; i < N_BUILTIN_TYPES; i++)
            if (strcmp(names[N_BUILTIN_TYPES + j], names[i]) == 0)
                return ddpc_errorf(DDPC_EINVAL, "data type '%s' is registered by the program but "
                                   "is a built-in type's name", names[i]);
    names[N_BUILTIN_TYPES + n] = NULL;
    return ddpc_config_choice(t->cfg, key, "fmnist", names, type);
}

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
           same_strings(a->npy_x, b->npy_x, 3) && same_strings(a->npy_y, b->npy_y, 3) &&
           same_string(a->label, b->label) && same_strings(a->img_root, b->img_root, 3) &&
           same_image(&a->img, &b->img);
}

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
    data_spec spec;
    data_splits splits;
} loaded_data;

/* Builds or reuses the datasets of a built-in type for task k. */
static ddpc_status load_builtin(ddpc_trainer *t, ddpc__task *k, const char *prefix,
                                data_spec *want, loaded_data *loaded, int *n_loaded)
{
    const data_builder *b = &builders[want->type];
    k->data_type = b->name;
    DDPC_TRY(b->read(t, prefix, want));
    loaded_data *d = NULL;
    for (int j = 0; j < *n_loaded && !d; j++)
        if (same_spec(&loaded[j].spec, want))
            d = &loaded[j];
    if (!d) {
        d = &loaded[(*n_loaded)++];
        *d = (loaded_data){.spec = *want};
        ddpc_status st = b->create(want, t->set.seed, &d->splits);
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
    data_spec want = {0};
    const char *names[N_BUILTIN_TYPES + 33];
    DDPC_TRY(read_data_type(t, key_of(key, sizeof key, prefix, "type"), names, &want.type));
    if (want.type == TRANSLATION_TYPE) {
        k->data_type = "translation";
        return ddpc__trainer_load_translation(t, k, prefix);
    }
    if (want.type > TRANSLATION_TYPE) /* label_map below is refused for its datasets */
        DDPC_TRY(load_registered(t, k, prefix, names[want.type]));
    else
        DDPC_TRY(load_builtin(t, k, prefix, &want, loaded, n_loaded));
    key_of(key, sizeof key, prefix, "label_map");
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
