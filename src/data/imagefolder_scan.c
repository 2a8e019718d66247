// SPDX-License-Identifier: MIT
/* Listing an image folder: root/<class>/<file>, classes sorted by name and files by (class, name),
 * byte-wise as Python's sorted() orders UTF-8 names. Hidden entries (a leading '.') are skipped
 * silently, as torchvision's find_classes does for classes; a file counts as an image by its
 * extension, .png, .jpg or .jpeg in any case; every other visible entry of a class folder (a
 * text file, a sub-folder) is counted as skipped, so the run can say so once. */
#define _DEFAULT_SOURCE /* DT_* and strcasecmp */
#include "data/imagefolder_impl.h"

#include <ddpc/alloc.h>

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* A growable list of owned strings. */
typedef struct {
    char **s;
    int64_t n, cap;
} names;

static void names_free(names *v)
{
    for (int64_t i = 0; i < v->n; i++)
        ddpc_free(v->s[i]);
    ddpc_free(v->s);
    *v = (names){0};
}

static char *dup_join(const char *a, const char *b, const char *c)
{
    size_t la = strlen(a), lb = b ? strlen(b) : 0, lc = c ? strlen(c) : 0;
    char *s = ddpc_malloc(la + lb + lc + 3);
    if (s)
        snprintf(s, la + lb + lc + 3, "%s%s%s%s%s", a, b ? "/" : "", b ? b : "", c ? "/" : "",
                 c ? c : "");
    return s;
}

static ddpc_status names_push(names *v, char *s)
{
    if (!s)
        return ddpc_errorf(DDPC_ENOMEM, "image folder: out of memory for a file name");
    if (v->n == v->cap) {
        int64_t cap = v->cap ? 2 * v->cap : 64;
        char **grown = ddpc_malloc((size_t)cap * sizeof *grown);
        if (!grown) {
            ddpc_free(s);
            return ddpc_errorf(DDPC_ENOMEM, "image folder: out of memory for %lld names",
                               (long long)cap);
        }
        if (v->n)
            memcpy(grown, v->s, (size_t)v->n * sizeof *grown);
        ddpc_free(v->s);
        v->s = grown, v->cap = cap;
    }
    v->s[v->n++] = s;
    return DDPC_OK;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_image_name(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot && dot != name &&
           (strcasecmp(dot, ".png") == 0 || strcasecmp(dot, ".jpg") == 0 ||
            strcasecmp(dot, ".jpeg") == 0);
}

/* Whether dir/name is a directory (want_dir) or a regular file, symlinks followed. */
static bool is_kind(const char *dir, const char *name, bool want_dir)
{
    char *path = dup_join(dir, name, NULL);
    struct stat st;
    bool yes =
        path && stat(path, &st) == 0 && (want_dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode));
    ddpc_free(path);
    return yes;
}

/* The visible entries of dir that are folders (want_dir) or image files, sorted; *other counts
 * the rest. */
static ddpc_status read_dir(const char *dir, bool want_dir, names *out, int64_t *other)
{
    DIR *d = opendir(dir);
    if (!d)
        return ddpc_errorf(DDPC_EIO, "cannot read image folder '%s': %s", dir, strerror(errno));
    ddpc_status s = DDPC_OK;
    struct dirent *e;
    while (s == DDPC_OK && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        bool take = want_dir ? is_kind(dir, e->d_name, true)
                             : is_image_name(e->d_name) && is_kind(dir, e->d_name, false);
        if (take)
            s = names_push(out, dup_join(e->d_name, NULL, NULL));
        else if (other)
            (*other)++;
    }
    closedir(d);
    if (s == DDPC_OK && out->n > 1)
        qsort(out->s, (size_t)out->n, sizeof *out->s, by_name);
    return s;
}

void ddpc__image_list_free(ddpc__image_list *l)
{
    for (int64_t k = 0; k < l->n_classes; k++)
        ddpc_free(l->classes[k]);
    ddpc_free(l->classes);
    for (int64_t i = 0; i < l->n; i++)
        ddpc_free(l->paths[i]);
    ddpc_free(l->paths);
    ddpc_free(l->labels);
    *l = (ddpc__image_list){0};
}

/* Appends class k's files to the listing. */
static ddpc_status add_class(const char *root, ddpc__image_list *l, names *paths, int64_t k)
{
    char *dir = dup_join(root, l->classes[k], NULL);
    if (!dir)
        return ddpc_errorf(DDPC_ENOMEM, "image folder: out of memory for a path");
    names files = {0};
    ddpc_status s = read_dir(dir, false, &files, &l->skipped);
    if (s == DDPC_OK && files.n == 0)
        s = ddpc_errorf(DDPC_EFORMAT,
                        "%s: a class folder without images (.png, .jpg or .jpeg files)", dir);
    for (int64_t i = 0; s == DDPC_OK && i < files.n; i++)
        s = names_push(paths, dup_join(root, l->classes[k], files.s[i]));
    names_free(&files);
    ddpc_free(dir);
    return s;
}

ddpc_status ddpc__image_list_read(const char *root, ddpc__image_list *l)
{
    *l = (ddpc__image_list){0};
    names classes = {0}, paths = {0};
    ddpc_status s = read_dir(root, true, &classes, NULL);
    if (s == DDPC_OK && classes.n == 0)
        s = ddpc_errorf(DDPC_EFORMAT,
                        "%s: no class folders; an image folder holds one folder per class "
                        "(ROOT/<class>/*.png, *.jpg)",
                        root);
    if (s == DDPC_OK && classes.n > 256)
        s = ddpc_errorf(DDPC_EFORMAT, "%s: %lld class folders; at most 256 classes are read", root,
                        (long long)classes.n);
    l->classes = classes.s, l->n_classes = classes.n;
    classes = (names){0};
    int64_t *ends = s == DDPC_OK ? ddpc_malloc((size_t)l->n_classes * sizeof *ends) : NULL;
    if (s == DDPC_OK && !ends)
        s = ddpc_errorf(DDPC_ENOMEM, "image folder: out of memory");
    for (int64_t k = 0; s == DDPC_OK && k < l->n_classes; k++) {
        s = add_class(root, l, &paths, k);
        ends[k] = paths.n;
    }
    if (s == DDPC_OK && !(l->labels = ddpc_malloc((size_t)paths.n)))
        s = ddpc_errorf(DDPC_ENOMEM, "image folder: out of memory for %lld labels",
                        (long long)paths.n);
    for (int64_t k = 0, i = 0; s == DDPC_OK && k < l->n_classes; k++)
        for (; i < ends[k]; i++)
            l->labels[i] = (uint8_t)k;
    ddpc_free(ends);
    l->paths = paths.s, l->n = paths.n;
    if (s != DDPC_OK)
        ddpc__image_list_free(l);
    return s;
}
