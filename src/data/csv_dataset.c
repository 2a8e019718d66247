// SPDX-License-Identifier: MIT
/* The CSV dataset: a header row naming the columns, then one sample per record; the label columns
 * are the targets (class labels, or float targets for regression and multi-label), every other
 * column a feature. Invariant: every cell is checked while the file is read, so the dataset holds
 * only finite numbers and an error names the file, the line and the column. */
#include "data/csv.h"
#include "data/dataset_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/fs.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LABELS 256

typedef struct {
    const char *path;
    ddpc_csv_targets kind;
    size_t n_cols;
    int label_of[MAX_LABELS]; /* the label columns, in the order `label` names them */
    int n_labels;
    bool *is_label; /* (n_cols) */
    char **names;   /* (n_cols) header names, for messages */
    /* Growing outputs. */
    float *x, *y; /* (rows, features), (rows, n_labels) */
    uint8_t *labels;
    int64_t rows, cap;
} csv_build;

/* s without leading and trailing spaces and tabs, in place. */
static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        s[--n] = '\0';
    return s;
}

static ddpc_status read_header(csv_build *b, ddpc__csv *r, const char *label)
{
    bool got;
    DDPC_TRY(ddpc__csv_next(r, &got));
    if (!got)
        return ddpc_errorf(DDPC_EFORMAT, "%s: the file is empty; a CSV needs a header row and data "
                                         "rows", b->path);
    b->n_cols = r->n_cells;
    b->names = ddpc_calloc(b->n_cols, sizeof *b->names);
    b->is_label = ddpc_calloc(b->n_cols, sizeof *b->is_label);
    if (!b->names || !b->is_label)
        return ddpc_errorf(DDPC_ENOMEM, "%s: out of memory for the header", b->path);
    for (size_t i = 0; i < b->n_cols; i++) {
        const char *name = trim(r->text + r->cell[i]);
        size_t n = strlen(name) + 1;
        if (!(b->names[i] = ddpc_malloc(n)))
            return ddpc_errorf(DDPC_ENOMEM, "%s: out of memory for the header", b->path);
        memcpy(b->names[i], name, n);
        for (size_t j = 0; j < i; j++)
            if (strcmp(b->names[j], name) == 0)
                return ddpc_errorf(DDPC_EFORMAT, "%s:%lld: column %zu repeats the name '%s' of "
                                   "column %zu", b->path, (long long)r->line, i + 1, name, j + 1);
    }
    /* The label names: comma-separated, each trimmed. */
    const char *p = label;
    while (p && *p) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        char want[256];
        snprintf(want, sizeof want, "%.*s", (int)(n < 255 ? n : 255), p);
        char *w = trim(want);
        p = e ? e + 1 : NULL;
        if (!*w)
            continue;
        int found = -1;
        for (size_t i = 0; i < b->n_cols && found < 0; i++)
            if (strcmp(b->names[i], w) == 0)
                found = (int)i;
        if (found < 0)
            return ddpc_errorf(DDPC_EFORMAT, "%s:%lld: no label column '%s' in the header",
                               b->path, (long long)r->line, w);
        if (b->is_label[found])
            return ddpc_errorf(DDPC_EINVAL, "%s: label column '%s' is named twice", b->path, w);
        if (b->n_labels == MAX_LABELS)
            return ddpc_errorf(DDPC_EINVAL, "%s: at most %d label columns", b->path, MAX_LABELS);
        b->is_label[found] = true;
        b->label_of[b->n_labels++] = found;
    }
    if (b->n_labels == 0)
        return ddpc_errorf(DDPC_EINVAL, "%s: no label column named (data.label)", b->path);
    if (b->kind == DDPC_CSV_CLASSES && b->n_labels != 1)
        return ddpc_errorf(DDPC_EINVAL, "%s: class labels come from one column, not %d (several "
                           "label columns need a regression or bce_logits loss)", b->path,
                           b->n_labels);
    if ((size_t)b->n_labels == b->n_cols)
        return ddpc_errorf(DDPC_EINVAL, "%s: every column is a label; no feature column is left",
                           b->path);
    return DDPC_OK;
}

static ddpc_status grow(csv_build *b)
{
    int64_t cap = b->cap ? 2 * b->cap : 1024, feat = (int64_t)b->n_cols - b->n_labels;
    float *x = ddpc_malloc((size_t)(cap * feat) * sizeof *x);
    float *y = b->kind == DDPC_CSV_CLASSES ? NULL
                                           : ddpc_malloc((size_t)(cap * b->n_labels) * sizeof *y);
    uint8_t *l = b->kind == DDPC_CSV_CLASSES ? ddpc_malloc((size_t)cap) : NULL;
    if (!x || (!y && !l)) {
        ddpc_free(x);
        ddpc_free(y);
        ddpc_free(l);
        return ddpc_errorf(DDPC_ENOMEM, "%s: out of memory for %lld rows", b->path,
                           (long long)cap);
    }
    if (b->rows) {
        memcpy(x, b->x, (size_t)(b->rows * feat) * sizeof *x);
        if (y)
            memcpy(y, b->y, (size_t)(b->rows * b->n_labels) * sizeof *y);
        if (l)
            memcpy(l, b->labels, (size_t)b->rows);
    }
    ddpc_free(b->x);
    ddpc_free(b->y);
    ddpc_free(b->labels);
    b->x = x, b->y = y, b->labels = l, b->cap = cap;
    return DDPC_OK;
}

/* Cell `col` of the record at `line` as a finite number. */
static ddpc_status number(const csv_build *b, int64_t line, size_t col, char *cell, double *out)
{
    char *s = trim(cell), *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*s == '\0' || *end != '\0' || !isfinite(v) || errno == ERANGE)
        return ddpc_errorf(DDPC_EFORMAT, "%s:%lld: column %zu ('%s'): '%s' is not a %snumber",
                           b->path, (long long)line, col + 1, b->names[col], s,
                           *s && *end == '\0' ? "finite " : "");
    *out = v;
    return DDPC_OK;
}

static ddpc_status read_row(csv_build *b, ddpc__csv *r)
{
    if (r->n_cells != b->n_cols)
        return ddpc_errorf(DDPC_EFORMAT, "%s:%lld: %zu fields, but the header has %zu", b->path,
                           (long long)r->line, r->n_cells, b->n_cols);
    if (b->rows == b->cap)
        DDPC_TRY(grow(b));
    int64_t feat = (int64_t)b->n_cols - b->n_labels;
    float *x = b->x + b->rows * feat;
    for (size_t c = 0; c < b->n_cols; c++) { /* in column order: the first bad cell is named */
        double v = 0.0;
        DDPC_TRY(number(b, r->line, c, r->text + r->cell[c], &v));
        if (!b->is_label[c])
            *x++ = (float)v;
    }
    for (int k = 0; k < b->n_labels; k++) {
        int c = b->label_of[k];
        double v = 0.0; /* parsed above already: this cannot fail */
        DDPC_TRY(number(b, r->line, (size_t)c, r->text + r->cell[c], &v));
        if (b->kind == DDPC_CSV_CLASSES) {
            if (v != floor(v) || v < 0 || v > 255)
                return ddpc_errorf(DDPC_EFORMAT, "%s:%lld: column %d ('%s'): label %g is not a "
                                   "class, a whole number in [0, 255]", b->path,
                                   (long long)r->line, c + 1, b->names[c], v);
            b->labels[b->rows] = (uint8_t)v;
            continue;
        }
        if (b->kind == DDPC_CSV_PROBABILITIES && (v < 0 || v > 1))
            return ddpc_errorf(DDPC_EFORMAT, "%s:%lld: column %d ('%s'): target %g is outside "
                               "[0, 1] (bce_logits takes labels 0/1 or probabilities)", b->path,
                               (long long)r->line, c + 1, b->names[c], v);
        b->y[b->rows * b->n_labels + k] = (float)v;
    }
    b->rows++;
    return DDPC_OK;
}

static void build_free(csv_build *b)
{
    for (size_t i = 0; b->names && i < b->n_cols; i++)
        ddpc_free(b->names[i]);
    ddpc_free(b->names);
    ddpc_free(b->is_label);
    ddpc_free(b->x);
    ddpc_free(b->y);
    ddpc_free(b->labels);
}

static ddpc_status parse(csv_build *b, const char *text, size_t len, const char *label)
{
    ddpc__csv r;
    ddpc__csv_init(&r, b->path, text, len);
    ddpc_status st = read_header(b, &r, label);
    bool got = true;
    while (st == DDPC_OK && (st = ddpc__csv_next(&r, &got)) == DDPC_OK && got)
        st = read_row(b, &r);
    if (st == DDPC_OK && b->rows == 0)
        st = ddpc_errorf(DDPC_EFORMAT, "%s: a header row and no data rows", b->path);
    ddpc__csv_fini(&r);
    return st;
}

ddpc_status ddpc_dataset_csv_create(ddpc_dataset **out, const char *path, const char *label,
                                    ddpc_csv_targets targets)
{
    *out = NULL;
    if ((unsigned)targets > DDPC_CSV_PROBABILITIES)
        return ddpc_errorf(DDPC_EINVAL, "%s: unknown kind of CSV targets %d", path, (int)targets);
    char *text = NULL;
    size_t len = 0;
    DDPC_TRY(ddpc_read_regular_file(path, "CSV file", 0, NULL, &text, &len));
    csv_build b = {.path = path, .kind = targets};
    ddpc_status st = parse(&b, text, len, label);
    ddpc_free(text);
    ddpc_dataset *d = st == DDPC_OK ? ddpc__dataset_alloc(DDPC_DATASET_IMAGES) : NULL;
    if (st == DDPC_OK && !d)
        st = ddpc_errorf(DDPC_ENOMEM, "%s: out of memory for the dataset", path);
    if (st != DDPC_OK) {
        build_free(&b);
        return st;
    }
    d->n = b.rows;
    d->shape[0] = d->shape[1] = 1;
    d->shape[2] = (int64_t)b.n_cols - b.n_labels;
    d->pix_f32 = b.x;
    d->labels = b.labels;
    d->ftargets = b.y;
    b.x = b.y = NULL;
    b.labels = NULL;
    if (targets == DDPC_CSV_CLASSES) {
        int64_t top = 0;
        for (int64_t i = 0; i < d->n; i++)
            top = d->labels[i] > top ? d->labels[i] : top;
        d->classes = top + 1 > 2 ? top + 1 : 2;
    } else {
        d->target_width = b.n_labels;
        d->classes = b.n_labels;
    }
    build_free(&b);
    *out = d;
    return DDPC_OK;
}
