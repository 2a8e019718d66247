// SPDX-License-Identifier: MIT
/* Private pieces of `ddpc report`: the records of metrics.jsonl (report_read.c), series pulled
 * out of them (report_series.c), SVG charts (report_svg.c) and the page (report_html.c).
 * Invariant: a series' x (the step) strictly increases — a record whose step is not past the
 * last point supersedes the points at or after it, as TensorBoard does for a resumed run — and a
 * y of NaN (JSON null, or a non-finite value) is a gap in the line, never a point. */
#ifndef DDPC_METRICS_REPORT_IMPL_H
#define DDPC_METRICS_REPORT_IMPL_H

#include "core/json.h"

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
/* A "rerun" record (a run that continued nothing appended here), a "resume" or "restart" one. */
bool ddpc__report_is_rerun(const ddpc__json *rec);
bool ddpc__report_is_resume(const ddpc__json *rec);
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

/* The step axis the page's line charts share, so that evaluation and training points of a step
 * line up from chart to chart: its range (lo < hi, or both 0 for each chart's own) and the steps
 * a run resumed at, each drawn as a vertical marker. */
#define DDPC__REPORT_MAX_MARKS 32
typedef struct {
    double lo, hi;
    double mark[DDPC__REPORT_MAX_MARKS]; /* (n_marks) steps */
    size_t n_marks;
} ddpc__step_axis;

/* SVG charts, written to f as one <svg> element each, 520 user units wide. */
/* Lines: one <path class="line" data-key=NAME data-points=N> per series with points (a gap
 * starts a new subpath; N counts the points drawn), a dot per point when a series is short; the
 * x axis spans `steps` (NULL: the series' own range) and at least the points, and each resume
 * inside it is a <line class="resume" data-step=S>. */
void ddpc__svg_lines(FILE *f, const char *unit, const ddpc__series *s, size_t n,
                     const ddpc__step_axis *steps);
/* Stacked bars: one bar per step of series 0..n-1 (aligned by step), one <rect class="seg">
 * per positive component, coloured per series, with a legend. */
void ddpc__svg_stacked(FILE *f, const char *unit, const ddpc__series *s, size_t n);
/* Horizontal bars: one per (label, value), values in `unit`. */
void ddpc__svg_hbars(FILE *f, const char *unit, const char *const *labels, const double *values,
                     size_t n);
/* The summary table at the top of the page (report_summary.c): the final training and evaluation
 * loss and accuracy, wall time, world size, precision, ZeRO stage, device, config file and the
 * resumes, each a <tr data-key=KEY>; what metrics.jsonl does not record says so. */
void ddpc__report_summary(FILE *f, const ddpc__report_data *d);
/* The steps a run resumed or restarted at (after the last rerun), at most cap; returns how many. */
size_t ddpc__report_resumes(const ddpc__report_data *d, double *steps, size_t cap);
/* Writes s with &, <, >, " escaped. */
void ddpc__html_escape(FILE *f, const char *s);

#endif
