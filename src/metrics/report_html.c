// SPDX-License-Identifier: MIT
/* The page of `ddpc report`: the summary table (report_summary.c), then which charts, from which
 * keys, in what order, on one shared step axis with the resumes marked, and the notes for what is
 * missing. Invariant: the page is self-contained — inline CSS and SVG, no script, no URL —
 * and a chart whose keys no record carries is replaced by one line saying so, never drawn empty. */
#include "metrics/report_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/fs.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_SERIES 64

typedef struct {
    FILE *f;
    const ddpc__report_data *d;
    ddpc__series s[MAX_SERIES];
    size_t n;
    int charts, omitted;
    ddpc__step_axis steps; /* shared by the line charts: the loss chart's range, the resumes */
} page;

static bool any(const ddpc__json *r, const char *split, const char *task)
{
    (void)r, (void)split, (void)task;
    return true;
}

static bool progress(const ddpc__json *r, const char *split, const char *task)
{
    (void)split, (void)task;
    return ddpc__report_is_progress(r);
}

static bool str_is(const ddpc__json *v, const char *want)
{
    return want == NULL ? v == NULL : v && v->type == DDPC__JSON_STRING && !strcmp(v->str, want);
}

static bool eval_of(const ddpc__json *r, const char *split, const char *task)
{
    return ddpc__report_is_eval(r) && str_is(ddpc__json_get(r, "split"), split) &&
           str_is(ddpc__json_get(r, "task"), task);
}

static void reset(page *p)
{
    for (size_t i = 0; i < p->n; i++)
        ddpc__series_fini(&p->s[i]);
    memset(p->s, 0, sizeof p->s);
    p->n = 0;
}

/* Adds the series `path` of the records `keep` accepts, named `name`. */
static ddpc_status add(page *p, ddpc__report_pred keep, const char *split, const char *task,
                       const char *path, const char *name)
{
    if (p->n == MAX_SERIES)
        return DDPC_OK;
    ddpc__series *s = &p->s[p->n++];
    snprintf(s->name, sizeof s->name, "%s", name);
    return ddpc__report_series(p->d, keep, split, task, path, s);
}

static bool drawable(const page *p)
{
    for (size_t i = 0; i < p->n; i++)
        if (p->s[i].finite)
            return true;
    return false;
}

static void heading(page *p, const char *title)
{
    fputs("<section><h2>", p->f);
    ddpc__html_escape(p->f, title);
    fputs("</h2>", p->f);
}

static void omit(page *p, const char *title, const char *keys)
{
    fputs("<p class=\"omit\">", p->f);
    ddpc__html_escape(p->f, title);
    fputs(": not drawn, no record has ", p->f);
    ddpc__html_escape(p->f, keys);
    fputs(".</p>\n", p->f);
    p->omitted++;
}

/* Draws the collected series as lines (or stacked bars), or the note; then forgets them. */
static void chart(page *p, const char *title, const char *unit, const char *keys, bool stacked)
{
    if (!drawable(p)) {
        omit(p, title, keys);
    } else {
        heading(p, title);
        if (stacked)
            ddpc__svg_stacked(p->f, unit, p->s, p->n);
        else
            ddpc__svg_lines(p->f, unit, p->s, p->n, &p->steps);
        fputs("</section>\n", p->f);
        p->charts++;
    }
    reset(p);
}

/* Keys of the object `group` in the records keep accepts, first seen first (at most max). */
static size_t group_keys(const ddpc__report_data *d, ddpc__report_pred keep, const char *group,
                         const char **out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < d->n; i++) {
        const ddpc__json *g = keep(d->rec[i], NULL, NULL) ? ddpc__json_get(d->rec[i], group) : NULL;
        if (!g || g->type != DDPC__JSON_OBJECT)
            continue;
        for (size_t k = 0; k < g->count; k++) {
            size_t j = 0;
            while (j < n && strcmp(out[j], g->keys[k]) != 0)
                j++;
            if (j == n && n < max)
                out[n++] = g->keys[k];
        }
    }
    return n;
}

/* One series per (split, task) of the evaluation records, for `key`, named "<split>[/<task>]/key"
 * as TensorBoard tags them. */
static ddpc_status add_evals(page *p, const char *key)
{
    for (size_t i = 0; i < p->d->n; i++) {
        const ddpc__json *r = p->d->rec[i];
        if (!ddpc__report_is_eval(r))
            continue;
        const char *split = ddpc__json_get(r, "split")->str;
        const ddpc__json *tv = ddpc__json_get(r, "task");
        const char *task = tv && tv->type == DDPC__JSON_STRING ? tv->str : NULL;
        char name[160];
        snprintf(name, sizeof name, "%s%s%s/%s", split, task ? "/" : "", task ? task : "", key);
        size_t j = 0;
        while (j < p->n && strcmp(p->s[j].name, name) != 0)
            j++;
        if (j == p->n)
            DDPC_TRY(add(p, eval_of, split, task, key, name));
    }
    return DDPC_OK;
}

/* Training and evaluation losses in one chart, whose step range the other line charts share:
 * an evaluation's point then sits over the training step it followed. */
static ddpc_status losses(page *p)
{
    const char *tasks[MAX_SERIES];
    size_t nt = group_keys(p->d, progress, "task_loss", tasks, MAX_SERIES - 1);
    DDPC_TRY(add(p, progress, NULL, NULL, "loss", "loss"));
    char path[160];
    for (size_t i = 0; i < nt; i++) {
        snprintf(path, sizeof path, "task_loss/%s", tasks[i]);
        DDPC_TRY(add(p, progress, NULL, NULL, path, path));
    }
    DDPC_TRY(add_evals(p, "eval_loss"));
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < p->n; i++)
        for (size_t k = 0; k < p->s[i].n; k++) {
            lo = fmin(lo, p->s[i].x[k]);
            hi = fmax(hi, p->s[i].x[k]);
        }
    if (lo < hi) {
        p->steps.lo = lo;
        p->steps.hi = hi;
    }
    chart(p, "Loss: training, and evaluation per split", "loss", "\"loss\" or \"eval_loss\"",
          false);
    return DDPC_OK;
}

static ddpc_status throughput(page *p)
{
    DDPC_TRY(add(p, progress, NULL, NULL, "samples_per_s", "samples/s"));
    chart(p, "Throughput", "samples/s", "\"samples_per_s\"", false);
    DDPC_TRY(add(p, progress, NULL, NULL, "tokens_per_s", "tokens/s"));
    if (p->s[0].n == 0) { /* a model without tokens (images) logs none: nothing is missing */
        reset(p);
        return DDPC_OK;
    }
    ddpc__series samples = {0};
    ddpc_status st = ddpc__report_series(p->d, progress, NULL, NULL, "samples_per_s", &samples);
    if (st != DDPC_OK) {
        ddpc__series_fini(&samples);
        return st;
    }
    /* One token per sample (images, as runs of older ddpc versions logged it): the same curve
     * again would say nothing. */
    bool same = samples.n == p->s[0].n && p->s[0].n > 0;
    for (size_t i = 0; same && i < samples.n; i++)
        same = samples.y[i] == p->s[0].y[i] || (isnan(samples.y[i]) && isnan(p->s[0].y[i]));
    ddpc__series_fini(&samples);
    if (same) {
        fputs("<p class=\"omit\">Tokens per second: the same as samples per second (one token "
              "per sample).</p>\n",
              p->f);
        reset(p);
        return DDPC_OK;
    }
    chart(p, "Tokens per second", "tokens/s", "\"tokens_per_s\"", false);
    return DDPC_OK;
}

static const char *const phase_order[] = {"data_s",         "forward_s",   "backward_s",
                                          "comm_exposed_s", "optimizer_s", "checkpoint_s",
                                          "other_s"};
#define N_PHASES (sizeof phase_order / sizeof phase_order[0])

/* The stacked chart of `group`'s keys ("phase": the host's clock; "gpu_phase": the device's,
 * drawn only where a run has them). */
static ddpc_status phases(page *p, const char *group, const char *title, const char *keys_note)
{
    const char *keys[MAX_SERIES];
    size_t n = group_keys(p->d, any, group, keys, MAX_SERIES);
    if (n == 0 && strcmp(group, "phase") != 0)
        return DDPC_OK;
    char path[160];
    /* The known phases in step order, then any others as they come. */
    for (size_t k = 0; k < N_PHASES; k++) {
        snprintf(path, sizeof path, "%s/%s", group, phase_order[k]);
        DDPC_TRY(add(p, any, NULL, NULL, path, phase_order[k]));
    }
    for (size_t i = 0; i < n; i++) {
        size_t k = 0;
        while (k < N_PHASES && strcmp(keys[i], phase_order[k]) != 0)
            k++;
        if (k < N_PHASES)
            continue;
        snprintf(path, sizeof path, "%s/%s", group, keys[i]);
        DDPC_TRY(add(p, any, NULL, NULL, path, keys[i]));
    }
    /* Absent phases take no legend entry. */
    size_t kept = 0;
    for (size_t i = 0; i < p->n; i++) {
        if (p->s[i].n == 0) {
            ddpc__series_fini(&p->s[i]);
            continue;
        }
        p->s[kept++] = p->s[i];
    }
    memset(p->s + kept, 0, (p->n - kept) * sizeof p->s[0]);
    p->n = kept;
    chart(p, title, "seconds", keys_note, true);
    return DDPC_OK;
}

static int cmp_rank(const void *a, const void *b)
{
    long x = strtol(*(const char *const *)a, NULL, 10),
         y = strtol(*(const char *const *)b, NULL, 10);
    return x < y ? -1 : x > y;
}

static ddpc_status step_times(page *p)
{
    const char *ranks[MAX_SERIES];
    size_t n = group_keys(p->d, any, "rank_step_s", ranks, MAX_SERIES);
    qsort(ranks, n, sizeof ranks[0], cmp_rank);
    char path[160], name[96];
    for (size_t i = 0; i < n; i++) {
        snprintf(path, sizeof path, "rank_step_s/%s", ranks[i]);
        snprintf(name, sizeof name, "rank %s", ranks[i]);
        DDPC_TRY(add(p, any, NULL, NULL, path, name));
    }
    chart(p, "Step time per rank", "seconds", "\"rank_step_s/<k>\"", false);
    DDPC_TRY(add(p, any, NULL, NULL, "step_s", "step_s"));
    DDPC_TRY(add(p, any, NULL, NULL, "comm_s", "comm_s"));
    chart(p, "Step and communication time", "seconds", "\"step_s\" or \"comm_s\"", false);
    return DDPC_OK;
}

static bool is_mem_key(const char *k)
{
    size_t n = strlen(k);
    return !strncmp(k, "mem_", 4) && n > 10 && !strcmp(k + n - 6, "_bytes");
}

/* A memory group ("mem": {...} or "memory": {...}) of a record, or NULL. */
static const ddpc__json *mem_group(const ddpc__json *rec)
{
    const ddpc__json *g = ddpc__json_get(rec, "mem");
    if (!g || g->type != DDPC__JSON_OBJECT)
        g = ddpc__json_get(rec, "memory");
    return g && g->type == DDPC__JSON_OBJECT ? g : NULL;
}

static bool has_memory(const ddpc__json *rec)
{
    for (size_t k = 0; k < rec->count; k++)
        if (is_mem_key(rec->keys[k]))
            return true;
    return mem_group(rec) != NULL;
}

/* Peaks over the run, when more than one record has them (after warm-up, at the end). */
static ddpc_status memory_over_time(page *p)
{
    static const char *const keys[] = {"mem_alloc_peak_bytes", "mem_rss_peak_bytes",
                                       "mem_rss_bytes"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        DDPC_TRY(add(p, any, NULL, NULL, keys[i], keys[i]));
    bool several = false;
    for (size_t i = 0; i < p->n; i++) {
        several = several || p->s[i].finite > 1;
        for (size_t k = 0; k < p->s[i].n; k++)
            p->s[i].y[k] /= 1024.0 * 1024.0;
    }
    if (several)
        chart(p, "Memory over the run", "MiB", "", false);
    reset(p);
    return DDPC_OK;
}

/* The last record with memory keys, as bars in MiB. */
static ddpc_status memory(page *p)
{
    const ddpc__json *last = NULL;
    for (size_t i = 0; i < p->d->n; i++)
        if (has_memory(p->d->rec[i]))
            last = p->d->rec[i];
    if (!last) {
        omit(p, "Memory", "\"mem_*_bytes\" keys");
        return DDPC_OK;
    }
    char labels[MAX_SERIES][96];
    const char *names[MAX_SERIES];
    double mib[MAX_SERIES];
    size_t n = 0;
    for (size_t k = 0; k < last->count && n < MAX_SERIES; k++) {
        const ddpc__json *v = &last->items[k];
        if (!is_mem_key(last->keys[k]) || v->type != DDPC__JSON_NUMBER)
            continue;
        snprintf(labels[n], sizeof labels[n], "%s", last->keys[k]);
        mib[n++] = v->number / (1024.0 * 1024.0);
    }
    const ddpc__json *g = mem_group(last);
    for (size_t k = 0; g && k < g->count && n < MAX_SERIES; k++) {
        if (g->items[k].type != DDPC__JSON_NUMBER)
            continue;
        snprintf(labels[n], sizeof labels[n], "%.40s/%.40s",
                 ddpc__json_get(last, "mem") == g ? "mem" : "memory", g->keys[k]);
        mib[n++] = g->items[k].number / (1024.0 * 1024.0);
    }
    for (size_t i = 0; i < n; i++)
        names[i] = labels[i];
    heading(p, "Memory");
    fprintf(p->f, "<p class=\"sub\">rank 0, the record of step %.0f</p>",
            ddpc__json_get(last, "step")->number);
    ddpc__svg_hbars(p->f, "MiB", names, mib, n);
    fputs("</section>\n", p->f);
    p->charts++;
    return memory_over_time(p);
}

/* The charts fill the page's width: a grid of columns at least 460 px wide, each SVG scaled to its
 * column (its viewBox keeps the proportions); notes span the whole row. */
static const char *const css =
    "body{font-family:sans-serif;margin:12px 16px;color:#222;background:#fafafa}"
    "h1{font-size:20px}h2{font-size:15px;margin:4px 0}"
    "main{display:grid;grid-template-columns:repeat(auto-fill,minmax(460px,1fr));gap:10px}"
    "section{background:#fff;border:1px solid #ddd;padding:8px;min-width:0}"
    "section svg{display:block;width:100%;height:auto}"
    "main>.omit{grid-column:1/-1;margin:0}"
    ".summary{border-collapse:collapse;background:#fff;border:1px solid #ddd;margin:8px 0 12px;"
    "width:100%}.summary th,.summary td{text-align:left;padding:4px 10px;"
    "border-bottom:1px solid #eee;font-size:14px}.summary th{width:16em;font-weight:normal;"
    "color:#555}.summary .v{font-weight:bold}"
    ".omit,.note{color:#666;font-size:13px}.sub{color:#666;font-size:12px;margin:2px 0}"
    "svg text{font-size:11px;fill:#333}.plot{fill:#fff;stroke:#bbb}.grid{stroke:#eee}"
    ".line{fill:none;stroke-width:1.6}.yt{text-anchor:end}.xtick,.xt{text-anchor:middle}"
    ".resume{stroke:#555;stroke-width:1;stroke-dasharray:4 3}svg text.mark{fill:#555;"
    "font-size:10px}";

static void summary_line(page *p, const char *run_dir, const char *metrics)
{
    const ddpc__report_data *d = p->d;
    double first = d->rec[0]->count ? ddpc__json_get(d->rec[0], "step")->number : 0, last = first;
    for (size_t i = 0; i < d->n; i++)
        last = fmax(last, ddpc__json_get(d->rec[i], "step")->number);
    fputs("<h1>ddpc report: ", p->f);
    ddpc__html_escape(p->f, run_dir);
    fprintf(p->f, "</h1>\n<p class=\"note\">%zu records of ", d->n);
    ddpc__html_escape(p->f, metrics);
    fprintf(p->f, ", steps %.0f to %.0f.", first, last);
    if (d->skipped) {
        fprintf(p->f, " %zu line%s skipped (first: line %zu)%s.", d->skipped,
                d->skipped == 1 ? "" : "s", d->first_bad_line,
                d->torn_last ? "; the last line was torn, as a killed run leaves it" : "");
    }
    fputs("</p>\n", p->f);
}

static ddpc_status write_page(page *p, const char *run_dir, const char *metrics)
{
    fputs("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>ddpc report</title><style>",
          p->f);
    fputs(css, p->f);
    fputs("</style></head><body>\n", p->f);
    summary_line(p, run_dir, metrics);
    ddpc__report_summary(p->f, p->d);
    fputs("<main>\n", p->f);
    p->steps.n_marks = ddpc__report_resumes(p->d, p->steps.mark, DDPC__REPORT_MAX_MARKS);
    DDPC_TRY(losses(p));
    DDPC_TRY(add_evals(p, "eval_accuracy"));
    chart(p, "Evaluation accuracy", "accuracy", "\"eval_accuracy\"", false);
    DDPC_TRY(add(p, progress, NULL, NULL, "lr", "lr"));
    chart(p, "Learning rate", "lr", "\"lr\"", false);
    DDPC_TRY(throughput(p));
    DDPC_TRY(phases(p, "phase", "Where a step's time goes (per logged step)",
                    "\"phase/*\" keys"));
    DDPC_TRY(phases(p, "gpu_phase", "Where a step's time goes on the GPU (device time)",
                    "\"gpu_phase/*\" keys"));
    DDPC_TRY(step_times(p));
    DDPC_TRY(add(p, progress, NULL, NULL, "data_wait_s", "data_wait_s"));
    chart(p, "Waiting for data (per logging window)", "seconds", "\"data_wait_s\"", false);
    DDPC_TRY(add(p, progress, NULL, NULL, "grad_norm", "grad_norm"));
    chart(p, "Gradient norm (before clipping)", "norm", "\"grad_norm\"", false);
    DDPC_TRY(memory(p));
    fputs("</main>\n</body></html>\n", p->f);
    return DDPC_OK;
}

ddpc_status ddpc_report_write(const char *run_dir, const char *out_path,
                              ddpc_report_summary *summary)
{
    struct stat st;
    if (stat(run_dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return ddpc_errorf(DDPC_EIO, "run directory '%s' does not exist", run_dir);
    char metrics[1100], out[1100];
    snprintf(metrics, sizeof metrics, "%s/metrics.jsonl", run_dir);
    if (stat(metrics, &st) != 0)
        return ddpc_errorf(DDPC_EIO, "'%s' does not exist: the run has logged no metrics", metrics);
    snprintf(out, sizeof out, "%s", out_path ? out_path : "");
    if (!out_path)
        snprintf(out, sizeof out, "%s/report.html", run_dir);
    page p = {0};
    ddpc__report_data d;
    DDPC_TRY(ddpc__report_read(&d, metrics));
    p.d = &d;
    ddpc_status rc = DDPC_OK;
    if (d.n == 0) {
        rc = ddpc_errorf(DDPC_EFORMAT, "'%s' holds no metrics record (%zu lines skipped)", metrics,
                         d.skipped);
        goto done;
    }
    ddpc_fs_out o;
    if ((rc = ddpc_fs_out_open(&o, out, NULL)) != DDPC_OK)
        goto done;
    p.f = o.f;
    rc = write_page(&p, run_dir, metrics);
    reset(&p);
    if (rc != DDPC_OK)
        (void)ddpc_fs_out_commit(&o, true);
    else
        rc = ddpc_fs_out_commit(&o, false);
    if (summary)
        *summary = (ddpc_report_summary){.records = d.n,
                                         .skipped = d.skipped,
                                         .torn_last = d.torn_last,
                                         .charts = p.charts,
                                         .omitted = p.omitted};
done:
    ddpc__report_data_fini(&d);
    return rc;
}
