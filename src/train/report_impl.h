// SPDX-License-Identifier: MIT
/* Private pieces of `ddpc report`: the records of metrics.jsonl (report_read.c), series pulled
 * out of them (report_series.c), SVG charts (report_svg.c) and the page (report_html.c).
 * Invariant: a series' x (the step) strictly increases — a record whose step is not past the
 * last point supersedes the points at or after it, as TensorBoard does for a resumed run — and a
 * y of NaN (JSON null, or a non-finite value) is a gap in the line, never a point. */
#ifndef DDPC_TRAIN_REPORT_IMPL_H
#define DDPC_TRAIN_REPORT_IMPL_H

#include "train/json.h"

#include <ddpc/report.h>

#include <stdio.h>

/* The records of one metrics.jsonl, in file order; each an OBJECT with a numeric "step". */
typedef struct {
    ddpc__json **rec; /* (n) owned */
    size_t n, cap;
    size_t skipped;        /* lines that were not such a record */
    bool torn_last;        /* the last of them had no newline: a killed writer */
    size_t first_bad_line; /* 1-based line number of the first skipped line, or 0 */
} ddpc__report_data;

/* Reads and parses `path`. DDPC_EIO "cannot read '<path>': <why>"; DDPC_ENOMEM. */
ddpc_status ddpc__report_read(ddpc__report_data *d, const char *path);
void ddpc__report_data_fini(ddpc__report_data *d);

/* The kind of a record: training progress (has "loss"), evaluation ("split"), other. */
bool ddpc__report_is_progress(const ddpc__json *rec);
bool ddpc__report_is_eval(const ddpc__json *rec);
/* The value at `path` ("key" or "group/name") of an object, or NULL. */
const ddpc__json *ddpc__report_lookup(const ddpc__json *rec, const char *path);

typedef struct {
    char name[160]; /* legend; also the data-key attribute */
    double *x, *y;  /* (n) steps and values; y NaN = gap */
    size_t n, cap;
    size_t finite; /* points with a finite y */
} ddpc__series;

/* Appends (x, y), superseding points at x or later (see the invariant). DDPC_ENOMEM. */
ddpc_status ddpc__series_push(ddpc__series *s, double x, double y);
void ddpc__series_fini(ddpc__series *s);

/* Fills `s` (zeroed by the caller, `name` set) with `path` of every record that `keep` accepts
 * (eval records with `split` and `task` equal, when given: NULL matches any). */
typedef bool (*ddpc__report_pred)(const ddpc__json *rec, const char *split, const char *task);
ddpc_status ddpc__report_series(const ddpc__report_data *d, ddpc__report_pred keep,
                                const char *split, const char *task, const char *path,
                                ddpc__series *s);

/* SVG charts, written to f as one <svg> element each, 520 user units wide. */
/* Lines: one <path class="line" data-key=NAME data-points=N> per series with points (a gap
 * starts a new subpath; N counts the points drawn), a dot per point when a series is short. */
void ddpc__svg_lines(FILE *f, const char *unit, const ddpc__series *s, size_t n);
/* Stacked bars: one bar per step of series 0..n-1 (aligned by step), one <rect class="seg">
 * per positive component, coloured per series, with a legend. */
void ddpc__svg_stacked(FILE *f, const char *unit, const ddpc__series *s, size_t n);
/* Horizontal bars: one per (label, value), values in `unit`. */
void ddpc__svg_hbars(FILE *f, const char *unit, const char *const *labels, const double *values,
                     size_t n);
/* Writes s with &, <, >, " escaped. */
void ddpc__html_escape(FILE *f, const char *s);

#endif
