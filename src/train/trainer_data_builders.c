// SPDX-License-Identifier: MIT
/* The built-in data types, as a table of {name, read the keys, create the splits}: `data.*` (one
 * task) and `tasks.<i>.data.*` read the same keys through the same builder. A spec holds every key
 * a type read, so two tasks with equal specs share one copy of the datasets (trainer_data.c). */
#include "train/trainer_data.h"
#include "train/trainer_impl.h"

#include <ddpc/dataset_ops.h>

#include <assert.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    const char *name;
    /* Reads this type's keys under `prefix` ("data" or "tasks.<i>.data"). */
    ddpc_status (*read)(ddpc_trainer *t, const char *prefix, ddpc__data_spec *s);
    /* Builds the splits (the test split is labelled like the train split). */
    ddpc_status (*create)(const ddpc__data_spec *s, uint64_t seed, ddpc__data_splits *out);
} data_builder;

static ddpc_status read_fmnist(ddpc_trainer *t, const char *prefix, ddpc__data_spec *s)
{
    char key[96];
    return ddpc_config_string(t->cfg, ddpc_config_key(key, sizeof key, prefix, "path"),
                              DDPC__FMNIST_DIR, &s->path);
}

/* Debian ships Fashion-MNIST as train and test only, so validation uses the test split. */
static ddpc_status create_fmnist(const ddpc__data_spec *s, uint64_t seed, ddpc__data_splits *out)
{
    (void)seed;
    DDPC_TRY(ddpc_dataset_fmnist_create(&out->train, s->path, true));
    return ddpc_dataset_fmnist_create(&out->test, s->path, false);
}

static ddpc_status read_text(ddpc_trainer *t, const char *prefix, ddpc__data_spec *s)
{
    char key[96];
    DDPC_TRY(ddpc_config_int(t->cfg, "model.block_size", 128, 1, 1 << 16, &s->block));
    DDPC_TRY(ddpc_config_string(t->cfg, ddpc_config_key(key, sizeof key, prefix, "path"),
                                DDPC__FORTUNES_DIR, &s->path));
    return ddpc_config_float(t->cfg, ddpc_config_key(key, sizeof key, prefix, "val_fraction"), 0.1,
                             0.001, 0.999, &s->val_fraction);
}

/* Text has one held-out split: the last val_fraction of the corpus. */
static ddpc_status create_text(const ddpc__data_spec *s, uint64_t seed, ddpc__data_splits *out)
{
    (void)seed;
    DDPC_TRY(ddpc_dataset_text_create(&out->train, s->path, s->block, s->val_fraction, true));
    return ddpc_dataset_text_create(&out->test, s->path, s->block, s->val_fraction, false);
}

static ddpc_status read_synthetic_images(ddpc_trainer *t, const char *prefix, ddpc__data_spec *s)
{
    char key[96];
    DDPC_TRY(ddpc_config_int(t->cfg, ddpc_config_key(key, sizeof key, prefix, "size"), 1024, 1,
                             INT64_MAX, &s->size));
    return ddpc_config_int(t->cfg, ddpc_config_key(key, sizeof key, prefix, "classes"), 10, 2, 256,
                           &s->classes);
}

/* One seed for both splits: they share the labelling map and differ only in samples; the test
 * split is a quarter of the size. */
static ddpc_status create_synthetic_images(const ddpc__data_spec *s, uint64_t seed,
                                           ddpc__data_splits *out)
{
    DDPC_TRY(ddpc_dataset_synthetic_images_create(&out->train, s->size, 1, 28, 28, s->classes, seed,
                                                  true));
    return ddpc_dataset_synthetic_images_create(&out->test, s->size / 4 + 1, 1, 28, 28, s->classes,
                                                seed, false);
}

static ddpc_status read_synthetic_tokens(ddpc_trainer *t, const char *prefix, ddpc__data_spec *s)
{
    char key[96];
    DDPC_TRY(ddpc_config_int(t->cfg, "model.block_size", 128, 1, 1 << 16, &s->block));
    return ddpc_config_int(t->cfg, ddpc_config_key(key, sizeof key, prefix, "size"), 1 << 16, 2,
                           INT64_MAX, &s->size);
}

static ddpc_status create_synthetic_tokens(const ddpc__data_spec *s, uint64_t seed,
                                           ddpc__data_splits *out)
{
    DDPC_TRY(ddpc_dataset_synthetic_tokens_create(&out->train, s->size, 256, s->block, seed, true));
    return ddpc_dataset_synthetic_tokens_create(&out->test, s->size / 4 + s->block + 1, 256,
                                                s->block, seed, false);
}

static const char *const token_formats[] = {"llmc", "uint16", NULL}; /* ddpc_token_file_format */

/* tokens: llm.c / nanoGPT shards; data.train and data.val are required (a corpus tokenised by
 * someone else has no split to cut), data.test is optional. */
static ddpc_status read_tokens(ddpc_trainer *t, const char *prefix, ddpc__data_spec *s)
{
    char key[96];
    DDPC_TRY(ddpc_config_int(t->cfg, "model.block_size", 128, 1, 1 << 16, &s->block));
    DDPC_TRY(ddpc_config_int(t->cfg, "model.vocab_size", 256, 2, INT32_MAX, &s->classes));
    DDPC_TRY(ddpc_config_choice(t->cfg, ddpc_config_key(key, sizeof key, prefix, "format"), "llmc",
                                token_formats, &s->format));
    DDPC_TRY(ddpc_config_string(t->cfg, ddpc_config_key(key, sizeof key, prefix, "test"), NULL,
                                &s->test_path));
    const char *names[2] = {"train", "val"};
    const char **dst[2] = {&s->path, &s->val_path};
    for (int i = 0; i < 2; i++) {
        DDPC_TRY(ddpc_config_string(t->cfg, ddpc_config_key(key, sizeof key, prefix, names[i]),
                                    NULL, dst[i]));
        if (!*dst[i])
            return ddpc_errorf(DDPC_EINVAL,
                               "data.type tokens needs key '%s': a glob of token shard files "
                               "(llm.c's .bin, or raw uint16 with data.format: uint16)",
                               key);
    }
    return DDPC_OK;
}

/* Validation reads data.val; the final test reads data.test, or data.val when there is none. */
static ddpc_status create_tokens(const ddpc__data_spec *s, uint64_t seed, ddpc__data_splits *out)
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
static ddpc_status read_npy(ddpc_trainer *t, const char *prefix, ddpc__data_spec *s)
{
    static const char *const split[3] = {"train", "val", "test"};
    char key[96], name[16];
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "%s_x", split[i]);
        DDPC_TRY(ddpc_config_string(t->cfg, ddpc_config_key(key, sizeof key, prefix, name), NULL,
                                    &s->npy_x[i]));
        snprintf(name, sizeof name, "%s_y", split[i]);
        DDPC_TRY(ddpc_config_string(t->cfg, ddpc_config_key(key, sizeof key, prefix, name), NULL,
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
        return ddpc_errorf(DDPC_EINVAL, "%s: label %lld, but the train split's labels stop at %lld",
                           path, (long long)ddpc_dataset_num_classes(held) - 1,
                           (long long)ddpc_dataset_num_classes(train) - 1);
    return DDPC_OK;
}

/* Validation reads val (test without it); the final test reads test (val without it). */
static ddpc_status create_npy(const ddpc__data_spec *s, uint64_t seed, ddpc__data_splits *out)
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
static ddpc_status read_csv(ddpc_trainer *t, const char *prefix, ddpc__data_spec *s)
{
    static const char *const split[3] = {"train", "val", "test"};
    const char **dst[3] = {&s->path, &s->val_path, &s->test_path};
    char key[96];
    for (int i = 0; i < 3; i++)
        DDPC_TRY(ddpc_config_string(t->cfg, ddpc_config_key(key, sizeof key, prefix, split[i]),
                                    NULL, dst[i]));
    DDPC_TRY(ddpc_config_string(t->cfg, ddpc_config_key(key, sizeof key, prefix, "label"), NULL,
                                &s->label));
    if (!s->path || !s->label)
        return ddpc_errorf(DDPC_EINVAL,
                           "data.type csv needs keys '%s.train' (a CSV file with a "
                           "header row) and '%s.label' (its target column, or columns \"y1,y2\")",
                           prefix, prefix);
    if (!s->val_path && !s->test_path)
        return ddpc_errorf(DDPC_EINVAL,
                           "data.type csv needs a held-out split: key '%s.val' or "
                           "'%s.test'",
                           prefix, prefix);
    int loss;
    DDPC_TRY(ddpc_config_choice(t->cfg, "loss", "cross_entropy", ddpc_loss_names(), &loss));
    s->format = loss == DDPC_LOSS_CROSS_ENTROPY ? DDPC_CSV_CLASSES
                : loss == DDPC_LOSS_BCE_LOGITS  ? DDPC_CSV_PROBABILITIES
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
                           path, (long long)b[2], train_path, (long long)a[2]);
    if (ddpc_dataset_target_width(train) == 0)
        return check_classes(train, held, path);
    return DDPC_OK;
}

/* Validation reads val (test without it); the final test reads test (val without it). */
static ddpc_status create_csv(const ddpc__data_spec *s, uint64_t seed, ddpc__data_splits *out)
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

static ddpc_status read_imagefolder(ddpc_trainer *t, const char *prefix, ddpc__data_spec *s)
{
    return ddpc__trainer_read_imagefolder(t, prefix, s->img_root, &s->img);
}

/* The splits as npy's: validation reads val (test without it), the final test test (or val). */
static ddpc_status create_imagefolder(const ddpc__data_spec *s, uint64_t seed,
                                      ddpc__data_splits *out)
{
    (void)seed;
    ddpc_dataset *ds[3] = {NULL, NULL, NULL};
    ddpc_status st =
        ddpc__trainer_create_imagefolder(s->img_root, &s->img, ds, out->note, sizeof out->note);
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
static const char *const builder_names[] = {
    "fmnist", "text", "synthetic_images", "synthetic_tokens", "tokens",
    "npy",    "csv",  "imagefolder",      "translation",      NULL};
static_assert(sizeof builders / sizeof builders[0] == DDPC__DATA_TRANSLATION,
              "builder_names lists every builder, then translation");

/* data.type among the built-ins and the types a program registered (ddpc_data_register), which
 * follow them: *type indexes names[]. */
ddpc_status ddpc__trainer_read_data_type(ddpc_trainer *t, const char *key, const char **names,
                                         int *type)
{
    for (int i = 0; i < DDPC__DATA_BUILTINS; i++)
        names[i] = builder_names[i];
    size_t n = ddpc_data_type_names(names + DDPC__DATA_BUILTINS, 32);
    for (size_t j = 0; j < n; j++)
        for (int i = 0; i < DDPC__DATA_BUILTINS; i++)
            if (strcmp(names[DDPC__DATA_BUILTINS + j], names[i]) == 0)
                return ddpc_errorf(DDPC_EINVAL,
                                   "data type '%s' is registered by the program but "
                                   "is a built-in type's name",
                                   names[i]);
    names[DDPC__DATA_BUILTINS + n] = NULL;
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

bool ddpc__data_same_spec(const ddpc__data_spec *a, const ddpc__data_spec *b)
{
    return a->type == b->type && a->size == b->size && a->classes == b->classes &&
           a->block == b->block && a->val_fraction == b->val_fraction && a->format == b->format &&
           same_string(a->path, b->path) && same_string(a->val_path, b->val_path) &&
           same_string(a->test_path, b->test_path) && same_strings(a->npy_x, b->npy_x, 3) &&
           same_strings(a->npy_y, b->npy_y, 3) && same_string(a->label, b->label) &&
           same_strings(a->img_root, b->img_root, 3) && same_image(&a->img, &b->img);
}

ddpc_status ddpc__trainer_read_data(ddpc_trainer *t, const char *prefix, ddpc__data_spec *s)
{
    return builders[s->type].read(t, prefix, s);
}

ddpc_status ddpc__data_create(const ddpc__data_spec *s, uint64_t seed, ddpc__data_splits *out)
{
    return builders[s->type].create(s, seed, out);
}
