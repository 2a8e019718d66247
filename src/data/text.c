// SPDX-License-Identifier: MIT
/* Byte-level text dataset: one file, or a directory's regular files sorted by name (skipping
 * *.dat index files, symlinks and subdirectories) concatenated, split into train | held-out.
 * Invariant: the dataset keeps only its split's bytes as a u8 stream; vocabulary is 256. */
#include "data/dataset_impl.h"

#include <ddpc/alloc.h>

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct {
    char **paths; /* (count) full paths, sorted */
    size_t count, cap;
} path_list;

static void path_list_free(path_list *l)
{
    for (size_t i = 0; i < l->count; i++)
        ddpc_free(l->paths[i]);
    ddpc_free(l->paths);
}

/* Appends dir/name (or just dir when name is NULL). */
static ddpc_status path_list_add(path_list *l, const char *dir, const char *name)
{
    if (l->count == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        char **p = ddpc_malloc(cap * sizeof *p);
        if (!p)
            return ddpc_errorf(DDPC_ENOMEM, "%s: out of memory listing files", dir);
        if (l->count)
            memcpy(p, l->paths, l->count * sizeof *p);
        ddpc_free(l->paths);
        l->paths = p;
        l->cap = cap;
    }
    size_t len = strlen(dir) + (name ? strlen(name) + 1 : 0) + 1;
    char *s = ddpc_malloc(len);
    if (!s)
        return ddpc_errorf(DDPC_ENOMEM, "%s: out of memory listing files", dir);
    if (name)
        snprintf(s, len, "%s/%s", dir, name);
    else
        snprintf(s, len, "%s", dir);
    l->paths[l->count++] = s;
    return DDPC_OK;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool skipped_name(const char *name)
{
    size_t len = strlen(name);
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return true;
    return len >= 4 && strcmp(name + len - 4, ".dat") == 0;
}

/* The directory's regular files (not symlinks, not *.dat), sorted by name. */
static ddpc_status list_dir(const char *dir, path_list *l)
{
    DIR *dp = opendir(dir);
    if (!dp)
        return ddpc_errorf(DDPC_EIO, "%s: cannot open directory: %s", dir, strerror(errno));
    ddpc_status s = DDPC_OK;
    struct dirent *e;
    while (s == DDPC_OK && (e = readdir(dp)) != NULL) {
        if (skipped_name(e->d_name))
            continue;
        s = path_list_add(l, dir, e->d_name);
        if (s != DDPC_OK)
            break;
        struct stat st;
        if (lstat(l->paths[l->count - 1], &st) != 0 || !S_ISREG(st.st_mode))
            ddpc_free(l->paths[--l->count]);
    }
    closedir(dp);
    if (s == DDPC_OK && l->count > 1)
        qsort(l->paths, l->count, sizeof *l->paths, cmp_str);
    return s;
}

/* Appends the whole file to buf at *used, not past cap bytes. */
static ddpc_status read_file(const char *path, uint8_t *buf, size_t cap, size_t *used)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return ddpc_errorf(DDPC_EIO, "%s: cannot open: %s", path, strerror(errno));
    size_t got = fread(buf + *used, 1, cap - *used, f);
    int err = ferror(f);
    int more = (got == cap - *used) && fgetc(f) != EOF;
    fclose(f);
    if (err)
        return ddpc_errorf(DDPC_EIO, "%s: read failed", path);
    if (more)
        return ddpc_errorf(DDPC_EIO, "%s: file grew while being read", path);
    *used += got;
    return DDPC_OK;
}

/* Concatenates the files into one ddpc_malloc'd buffer of *len bytes. */
static ddpc_status read_all(const char *what, const path_list *l, uint8_t **out, size_t *len)
{
    size_t total = 0;
    for (size_t i = 0; i < l->count; i++) {
        struct stat st;
        if (stat(l->paths[i], &st) != 0)
            return ddpc_errorf(DDPC_EIO, "%s: cannot stat: %s", l->paths[i], strerror(errno));
        total += (size_t)st.st_size;
    }
    if (total == 0)
        return ddpc_errorf(DDPC_EINVAL, "%s: no text: %zu file(s) holding 0 bytes", what,
                           l->count);
    uint8_t *buf = ddpc_malloc(total);
    if (!buf)
        return ddpc_errorf(DDPC_ENOMEM, "%s: out of memory for %zu bytes of text", what, total);
    size_t used = 0;
    for (size_t i = 0; i < l->count; i++) {
        ddpc_status s = read_file(l->paths[i], buf, total, &used);
        if (s != DDPC_OK) {
            ddpc_free(buf);
            return s;
        }
    }
    *out = buf;
    *len = used;
    return DDPC_OK;
}

static ddpc_status collect(const char *path, path_list *l)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return ddpc_errorf(DDPC_EIO, "%s: cannot open: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode))
        return list_dir(path, l);
    return path_list_add(l, path, NULL);
}

/* Keeps the requested split of buf[0, len) at the front of buf; *n receives its length. */
static void select_split(uint8_t *buf, size_t len, double val_fraction, bool train, size_t *n)
{
    size_t n_train = (size_t)((double)len * (1.0 - val_fraction));
    if (n_train > len)
        n_train = len;
    if (train) {
        *n = n_train;
        return;
    }
    memmove(buf, buf + n_train, len - n_train);
    *n = len - n_train;
}

ddpc_status ddpc_dataset_text_create(ddpc_dataset **out, const char *path, int64_t block_size,
                                     double val_fraction, bool train)
{
    *out = NULL;
    if (!path)
        return ddpc_errorf(DDPC_EINVAL, "text dataset: path is NULL");
    if (!(val_fraction >= 0.0 && val_fraction < 1.0))
        return ddpc_errorf(DDPC_EINVAL, "%s: val_fraction %g is outside [0, 1)", path,
                           val_fraction);
    if (block_size < 1)
        return ddpc_errorf(DDPC_EINVAL, "%s: block_size must be >= 1, got %lld", path,
                           (long long)block_size);
    path_list l = {0};
    uint8_t *buf = NULL;
    size_t len = 0;
    ddpc_status s = collect(path, &l);
    if (s == DDPC_OK)
        s = read_all(path, &l, &buf, &len);
    path_list_free(&l);
    if (s != DDPC_OK)
        return s;
    ddpc_dataset *d = ddpc__dataset_alloc(DDPC_DATASET_TOKENS);
    if (!d) {
        ddpc_free(buf);
        return ddpc_errorf(DDPC_ENOMEM, "%s: out of memory for the dataset", path);
    }
    size_t n = 0;
    select_split(buf, len, val_fraction, train, &n);
    d->tok_u8 = buf;
    d->n_tokens = (int64_t)n;
    d->classes = 256;
    char what[4200];
    snprintf(what, sizeof what, "%s (%s split)", path, train ? "train" : "held-out");
    if ((s = ddpc__dataset_set_windows(d, block_size, what)) != DDPC_OK) {
        ddpc_dataset_destroy(d);
        return s;
    }
    *out = d;
    return DDPC_OK;
}
