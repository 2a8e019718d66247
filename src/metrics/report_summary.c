// SPDX-License-Identifier: MIT
/* The summary table at the top of `ddpc report`'s page: how the run ended (final training and
 * evaluation loss and accuracy), how long it took, and how it ran (the last "run" record: ranks,
 * precision, ZeRO stage, device, config file), and where it resumed. Invariant: every value comes
 * from metrics.jsonl, read in file order with a "rerun" record starting the run over (its
 * earlier records are another run's), and a value no record carries is said to be missing,
 * never guessed. */
#include "metrics/report_impl.h"

#include <math.h>
#include <string.h>

static const ddpc__json *str_of(const ddpc__json *rec, const char *key)
{
    const ddpc__json *v = ddpc__json_get(rec, key);
    return v && v->type == DDPC__JSON_STRING ? v : NULL;
}

static bool num_of(const ddpc__json *rec, const char *key, double *out)
{
    const ddpc__json *v = ddpc__json_get(rec, key);
    if (!v || v->type != DDPC__JSON_NUMBER || !isfinite(v->number))
        return false;
    *out = v->number;
    return true;
}

static bool event_is(const ddpc__json *rec, const char *name)
{
    const ddpc__json *e = str_of(rec, "event");
    return e && strcmp(e->str, name) == 0;
}

/* Index of the first record of the run the page shows: after the last "rerun" record. */
static size_t first_of_run(const ddpc__report_data *d)
{
    size_t from = 0;
    for (size_t i = 0; i < d->n; i++)
        if (ddpc__report_is_rerun(d->rec[i]))
            from = i + 1;
    return from;
}

size_t ddpc__report_resumes(const ddpc__report_data *d, double *steps, size_t cap)
{
    size_t n = 0;
    for (size_t i = first_of_run(d); i < d->n && n < cap; i++)
        if (ddpc__report_is_resume(d->rec[i]))
            steps[n++] = ddpc__json_get(d->rec[i], "step")->number;
    return n;
}

/* Seconds the run took: each session's "end" wall time, or for a session that ended without
 * one (killed) its last logged time_s, summed over the sessions a resume or restart joined. */
static bool wall_time(const ddpc__report_data *d, double *total, int *sessions)
{
    double sum = 0, session = 0, v;
    bool any = false;
    *sessions = 1;
    for (size_t i = first_of_run(d); i < d->n; i++) {
        const ddpc__json *r = d->rec[i];
        if (ddpc__report_is_resume(r)) {
            sum += session;
            session = 0;
            ++*sessions;
        } else if (event_is(r, "end") && num_of(r, "wall_s", &v)) {
            session = v;
            any = true;
        } else if (ddpc__report_is_progress(r) && num_of(r, "time_s", &v)) {
            session = fmax(session, v);
            any = true;
        }
    }
    *total = sum + session;
    return any;
}

static void row_begin(FILE *f, const char *key, const char *label)
{
    fprintf(f, "<tr data-key=\"%s\"><th>", key);
    ddpc__html_escape(f, label);
    fputs("</th><td>", f);
}

static void row_text(FILE *f, const char *key, const char *label, const char *value)
{
    row_begin(f, key, label);
    ddpc__html_escape(f, value);
    fputs("</td></tr>\n", f);
}

static void missing(FILE *f, const char *key, const char *label, const char *why)
{
    row_begin(f, key, label);
    fputs("<span class=\"omit\">", f);
    ddpc__html_escape(f, why);
    fputs("</span></td></tr>\n", f);
}

static void row_value(FILE *f, const char *key, const char *label, const char *fmt, double v,
                      double step)
{
    char text[96];
    snprintf(text, sizeof text, fmt, v);
    row_begin(f, key, label);
    fprintf(f, "<span class=\"v\">%s</span> <span class=\"sub\">at step %.0f</span></td></tr>\n",
            text, step);
}

/* The last training loss, and the last evaluation's loss and accuracy, of the run. */
static void results(FILE *f, const ddpc__report_data *d, size_t from)
{
    const ddpc__json *train = NULL, *eval = NULL;
    double v;
    for (size_t i = from; i < d->n; i++) {
        const ddpc__json *r = d->rec[i];
        if (ddpc__report_is_progress(r) && num_of(r, "loss", &v))
            train = r;
        else if (ddpc__report_is_eval(r))
            eval = r;
    }
    if (train)
        row_value(f, "train_loss", "final training loss", "%.4f",
                  ddpc__json_get(train, "loss")->number, ddpc__json_get(train, "step")->number);
    else
        missing(f, "train_loss", "final training loss", "no training record");
    if (!eval) {
        missing(f, "eval_loss", "final evaluation loss", "no evaluation record");
        return;
    }
    char split[160];
    const ddpc__json *task = str_of(eval, "task");
    snprintf(split, sizeof split, "%s%s%s", str_of(eval, "split")->str, task ? "/" : "",
             task ? task->str : "");
    double step = ddpc__json_get(eval, "step")->number;
    char label[224];
    snprintf(label, sizeof label, "final evaluation loss (%s)", split);
    if (num_of(eval, "eval_loss", &v))
        row_value(f, "eval_loss", label, "%.4f", v, step);
    else
        missing(f, "eval_loss", label, "not a number");
    snprintf(label, sizeof label, "final accuracy (%s)", split);
    if (num_of(eval, "eval_accuracy", &v))
        row_value(f, "eval_accuracy", label, "%.2f%%", 100.0 * v, step);
    else
        missing(f, "eval_accuracy", label, "not a number");
}

/* How the run ran: the last "run" record's world, precision, ZeRO stage, device and config. */
static void setup(FILE *f, const ddpc__report_data *d, size_t from)
{
    const ddpc__json *run = NULL;
    for (size_t i = from; i < d->n; i++)
        if (event_is(d->rec[i], "run"))
            run = d->rec[i];
    static const char *const why = "not recorded (metrics of an older ddpc)";
    double v;
    char text[64];
    if (run && num_of(run, "world", &v)) {
        snprintf(text, sizeof text, "%.0f rank%s", v, v == 1 ? "" : "s");
        row_text(f, "world", "world size", text);
    } else {
        missing(f, "world", "world size", why);
    }
    const ddpc__json *s = run ? str_of(run, "precision") : NULL;
    if (s)
        row_text(f, "precision", "precision", s->str);
    else
        missing(f, "precision", "precision", why);
    if (run && num_of(run, "zero_stage", &v)) {
        snprintf(text, sizeof text, "%.0f", v);
        row_text(f, "zero_stage", "ZeRO stage", text);
    } else {
        missing(f, "zero_stage", "ZeRO stage", why);
    }
    if ((s = run ? str_of(run, "device") : NULL))
        row_text(f, "device", "device", s->str);
    if ((s = run ? str_of(run, "config") : NULL))
        row_text(f, "config", "config", s->str);
    else
        missing(f, "config", "config", why);
}

void ddpc__report_summary(FILE *f, const ddpc__report_data *d)
{
    size_t from = first_of_run(d);
    fputs("<table class=\"summary\">\n", f);
    results(f, d, from);
    double wall;
    int sessions;
    if (wall_time(d, &wall, &sessions)) {
        char text[96];
        long whole = lround(wall);
        int len = wall >= 60 ? snprintf(text, sizeof text, "%ldm %02lds", whole / 60, whole % 60)
                             : snprintf(text, sizeof text, "%.1f s", wall);
        if (sessions > 1)
            snprintf(text + len, sizeof text - (size_t)len, " in %d sessions", sessions);
        row_text(f, "wall_time", "wall time", text);
    } else {
        missing(f, "wall_time", "wall time", "no record has \"time_s\" or \"wall_s\"");
    }
    setup(f, d, from);
    double steps[DDPC__REPORT_MAX_MARKS];
    size_t n = ddpc__report_resumes(d, steps, DDPC__REPORT_MAX_MARKS);
    if (n) {
        row_begin(f, "resumed", "resumed at");
        for (size_t i = 0; i < n; i++)
            fprintf(f, "%sstep %.0f", i ? ", " : "", steps[i]);
        fputs("</td></tr>\n", f);
    }
    if (from > 0) /* said, since the earlier run's records are still in the file */
        row_text(f, "rerun", "earlier run",
                 "metrics.jsonl begins with an earlier run's records, which a rerun into this "
                 "run directory replaced: the page shows the last run");
    fputs("</table>\n", f);
}
