// SPDX-License-Identifier: MIT
/* The built-in data types (trainer_data_builders.c) as the task table (trainer_data.c) sees them:
 * a type's keys read into a spec, and the splits built from it. Two tasks whose specs are the same
 * share one copy of the datasets. Type numbers index the names: the built-ins, "translation"
 * (built by trainer_translation.c), then the types a program registered. */
#ifndef DDPC_TRAIN_TRAINER_DATA_H
#define DDPC_TRAIN_TRAINER_DATA_H

#include <ddpc/data.h>
#include <ddpc/train.h>

#include <stdbool.h>
#include <stdint.h>

#define DDPC__DATA_TRANSLATION 8                         /* its type number */
#define DDPC__DATA_BUILTINS (DDPC__DATA_TRANSLATION + 1) /* and the table's before it */
#define DDPC__DATA_NAMES_MAX (DDPC__DATA_BUILTINS + 33)  /* names[] room, with registered ones */

/* One dataset's keys. */
typedef struct {
    int type; /* the data type's number */
    const char *path;
    const char *val_path, *test_path; /* tokens: the held-out splits' patterns */
    const char *npy_x[3], *npy_y[3];  /* npy: train, val, test; a held-out split may be NULL */
    const char *img_root[3];          /* imagefolder: train, val, test; as npy */
    ddpc_imagefolder_config img;
    int64_t size, classes, block;
    int format;        /* tokens: ddpc_token_file_format; csv: ddpc_csv_targets */
    const char *label; /* csv: the target columns */
    double val_fraction;
} ddpc__data_spec;

/* A type's splits: train and test always; valid when it has its own validation split. */
typedef struct {
    ddpc_dataset *train, *test, *valid;
    char note[512]; /* lines for the run's log, about what was read */
} ddpc__data_splits;

/* data.type (at `key`) among the built-ins and the registered types: names[] (room for
 * DDPC__DATA_NAMES_MAX) gets every name, NULL-terminated, and *type the chosen one's number. */
ddpc_status ddpc__trainer_read_data_type(ddpc_trainer *t, const char *key, const char **names,
                                         int *type);
/* A built-in type's (s->type < DDPC__DATA_TRANSLATION) keys under `prefix` into s; its splits
 * from them (the test split labelled like the train split; the caller owns what was made, also
 * on failure); whether two specs load the same datasets. */
ddpc_status ddpc__trainer_read_data(ddpc_trainer *t, const char *prefix, ddpc__data_spec *s);
ddpc_status ddpc__data_create(const ddpc__data_spec *s, uint64_t seed, ddpc__data_splits *out);
bool ddpc__data_same_spec(const ddpc__data_spec *a, const ddpc__data_spec *b);

/* trainer_data_image.c: data.type imagefolder under `prefix`: reads the keys into roots (train,
 * val, test; a held-out one may be NULL) and c; builds out (train, val, test; NULL where no root),
 * appending a line per split (images, shape, bytes, skipped entries) to note. */
ddpc_status ddpc__trainer_read_imagefolder(ddpc_trainer *t, const char *prefix,
                                           const char *roots[3], ddpc_imagefolder_config *c);
ddpc_status ddpc__trainer_create_imagefolder(const char *const roots[3],
                                             const ddpc_imagefolder_config *c, ddpc_dataset *out[3],
                                             char *note, size_t cap);

#endif
