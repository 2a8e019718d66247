// SPDX-License-Identifier: MIT
/* SVG charts for `ddpc report`: line charts, stacked bars and horizontal bars, each one <svg>
 * element with its axes, ticks and legend and no script, so the page renders offline anywhere.
 * Invariant: only finite numbers reach the output (a gap or an empty series draws nothing), and
 * every text taken from the records is escaped. */
#include "metrics/report_impl.h"

#include <ddpc/alloc.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define W 520.0
#define PLOT_H 220.0
#define LEFT 64.0
#define RIGHT 16.0
#define TOP 22.0
#define AXIS_H 34.0  /* x tick labels and the axis title under the plot */
#define MAX_DOTS 60  /* series this short get a dot per point */
#define MAX_BARS 240 /* stacked bars drawn at most */

static const char *const palette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                      "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
#define PALETTE_N (sizeof palette / sizeof palette[0])

void ddpc__html_escape(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&':
            fputs("&amp;", f);
            break;
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        default:
            fputc(*s, f);
        }
    }
}

/* A tick label: 4 significant digits, k/M/G past 10^4. */
static void fmt_num(char *buf, size_t cap, double v)
{
    double a = fabs(v);
    if (a >= 1e9)
        snprintf(buf, cap, "%.3gG", v / 1e9);
    else if (a >= 1e6)
        snprintf(buf, cap, "%.3gM", v / 1e6);
    else if (a >= 1e4)
        snprintf(buf, cap, "%.3gk", v / 1e3);
    else
        snprintf(buf, cap, "%.4g", v);
}

/* A round tick spacing giving about `ticks` intervals over `range` (> 0). */
static double nice_step(double range, int ticks)
{
    double raw = range / ticks, mag = pow(10.0, floor(log10(raw))), f = raw / mag;
    return (f < 1.5 ? 1.0 : f < 3.0 ? 2.0 : f < 7.0 ? 5.0 : 10.0) * mag;
}

typedef struct {
    double lo, hi, step;
} axis;

static axis make_axis(double lo, double hi, bool round_out)
{
    if (!(hi > lo)) {
        double pad = fabs(lo) > 0 ? fabs(lo) * 0.1 : 1.0;
        lo -= pad;
        hi += pad;
    }
    axis a = {lo, hi, nice_step(hi - lo, 5)};
    if (round_out) {
        a.lo = floor(lo / a.step) * a.step;
        a.hi = ceil(hi / a.step) * a.step;
    }
    return a;
}

static double map(const axis *a, double v, double from, double to)
{
    return from + (v - a->lo) / (a->hi - a->lo) * (to - from);
}

static size_t legend_rows(const char *const *names, size_t n)
{
    double x = LEFT;
    size_t rows = n ? 1 : 0;
    for (size_t i = 0; i < n; i++) {
        double w = 24.0 + 7.0 * (double)strlen(names[i]);
        if (x + w > W && x > LEFT) {
            rows++;
            x = LEFT;
        }
        x += w;
    }
    return rows;
}

static void legend(FILE *f, const char *const *names, size_t n, double y0)
{
    double x = LEFT, y = y0;
    for (size_t i = 0; i < n; i++) {
        double w = 24.0 + 7.0 * (double)strlen(names[i]);
        if (x + w > W && x > LEFT) {
            x = LEFT;
            y += 16.0;
        }
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"10\" fill=\"%s\"/>", x,
                y - 9.0, palette[i % PALETTE_N]);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"lg\">", x + 14.0, y);
        ddpc__html_escape(f, names[i]);
        fputs("</text>", f);
        x += w;
    }
}

static void open_svg(FILE *f, size_t n_legend_rows)
{
    double h = TOP + PLOT_H + AXIS_H + 16.0 * (double)n_legend_rows + 6.0;
    fprintf(f,
            "<svg viewBox=\"0 0 %.0f %.0f\" width=\"%.0f\" "
            "height=\"%.0f\">",
            W, h, W, h);
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" class=\"plot\"/>", LEFT,
            TOP, W - LEFT - RIGHT, PLOT_H);
}

/* Horizontal grid lines and labels of the y axis; the unit beside the top one. */
static void y_ticks(FILE *f, const axis *a, const char *unit)
{
    char b[32];
    for (double v = ceil(a->lo / a->step) * a->step; v <= a->hi + a->step * 1e-6; v += a->step) {
        double y = map(a, v, TOP + PLOT_H, TOP);
        fmt_num(b, sizeof b, fabs(v) < a->step * 1e-9 ? 0.0 : v);
        fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>", LEFT,
                W - RIGHT, y, y);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"yt\">%s</text>", LEFT - 4.0, y + 4.0, b);
    }
    fprintf(f, "<text x=\"4\" y=\"%.1f\" class=\"unit\">", TOP - 9.0);
    ddpc__html_escape(f, unit);
    fputs("</text>", f);
}

static void x_title(FILE *f)
{
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"xt\">step</text>", (LEFT + W - RIGHT) / 2.0,
            TOP + PLOT_H + 30.0);
}

/* Dashed vertical lines at the steps a run resumed at, inside the x axis. */
static void resume_marks(FILE *f, const axis *ax, const ddpc__step_axis *steps)
{
    for (size_t i = 0; steps && i < steps->n_marks; i++) {
        double v = steps->mark[i];
        if (v < ax->lo || v > ax->hi)
            continue;
        double x = map(ax, v, LEFT, W - RIGHT);
        fprintf(f,
                "<line class=\"resume\" data-step=\"%.0f\" x1=\"%.1f\" x2=\"%.1f\" "
                "y1=\"%.1f\" y2=\"%.1f\"/><text x=\"%.1f\" y=\"%.1f\" class=\"mark\">"
                "resumed</text>",
                v, x, x, TOP, TOP + PLOT_H, x + 3.0, TOP + 10.0);
    }
}

void ddpc__svg_lines(FILE *f, const char *unit, const ddpc__series *s, size_t n,
                     const ddpc__step_axis *steps)
{
    double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
    if (steps && steps->lo < steps->hi) {
        xlo = steps->lo;
        xhi = steps->hi;
    }
    const char *names[64];
    size_t shown = 0;
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < s[i].n; k++) {
            if (!isfinite(s[i].y[k]))
                continue;
            xlo = fmin(xlo, s[i].x[k]);
            xhi = fmax(xhi, s[i].x[k]);
            ylo = fmin(ylo, s[i].y[k]);
            yhi = fmax(yhi, s[i].y[k]);
        }
        if (s[i].finite && shown < 64)
            names[shown++] = s[i].name;
    }
    if (!shown)
        return;
    axis ax = make_axis(xlo, xhi, false), ay = make_axis(ylo, yhi, true);
    open_svg(f, legend_rows(names, shown));
    y_ticks(f, &ay, unit);
    char b[32];
    for (double v = ceil(ax.lo / ax.step) * ax.step; v <= ax.hi + ax.step * 1e-6; v += ax.step) {
        fmt_num(b, sizeof b, v);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"xtick\">%s</text>",
                map(&ax, v, LEFT, W - RIGHT), TOP + PLOT_H + 14.0, b);
    }
    x_title(f);
    resume_marks(f, &ax, steps);
    size_t c = 0;
    for (size_t i = 0; i < n; i++) {
        if (!s[i].finite)
            continue;
        const char *col = palette[c++ % PALETTE_N];
        fputs("<path class=\"line\" data-key=\"", f);
        ddpc__html_escape(f, s[i].name);
        fprintf(f, "\" data-points=\"%zu\" stroke=\"%s\" d=\"", s[i].finite, col);
        bool up = true;
        for (size_t k = 0; k < s[i].n; k++) {
            if (!isfinite(s[i].y[k])) {
                up = true;
                continue;
            }
            fprintf(f, "%s%.1f %.1f", up ? (k ? " M" : "M") : " L",
                    map(&ax, s[i].x[k], LEFT, W - RIGHT), map(&ay, s[i].y[k], TOP + PLOT_H, TOP));
            up = false;
        }
        fputs("\"/>", f);
        if (s[i].finite <= MAX_DOTS)
            for (size_t k = 0; k < s[i].n; k++)
                if (isfinite(s[i].y[k]))
                    fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/>",
                            map(&ax, s[i].x[k], LEFT, W - RIGHT),
                            map(&ay, s[i].y[k], TOP + PLOT_H, TOP), col);
    }
    legend(f, names, shown, TOP + PLOT_H + AXIS_H + 14.0);
    fputs("</svg>\n", f);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The value of s at step x (NaN if absent); s.x increases. */
static double at_step(const ddpc__series *s, double x)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s->x[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < s->n && s->x[lo] == x ? s->y[lo] : NAN;
}

void ddpc__svg_stacked(FILE *f, const char *unit, const ddpc__series *s, size_t n)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += s[i].n;
    double *steps = total ? ddpc_malloc(total * sizeof *steps) : NULL;
    if (!steps)
        return;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < s[i].n; k++)
            steps[m++] = s[i].x[k];
    qsort(steps, m, sizeof *steps, cmp_double);
    size_t bars = 0;
    for (size_t k = 0; k < m; k++)
        if (k == 0 || steps[k] != steps[bars - 1])
            steps[bars++] = steps[k];
    /* A long run: every stride-th logged step, so a bar stays wider than a pixel. */
    size_t stride = (bars + MAX_BARS - 1) / MAX_BARS;
    if (stride > 1) {
        size_t kept = 0;
        for (size_t k = 0; k < bars; k += stride)
            steps[kept++] = steps[k];
        bars = kept;
    }
    double top = 0;
    for (size_t b = 0; b < bars; b++) {
        double sum = 0;
        for (size_t i = 0; i < n; i++) {
            double v = at_step(&s[i], steps[b]);
            sum += isfinite(v) && v > 0 ? v : 0;
        }
        top = fmax(top, sum);
    }
    const char *names[64];
    size_t nn = n < 64 ? n : 64;
    for (size_t i = 0; i < nn; i++)
        names[i] = s[i].name;
    axis ay = make_axis(0.0, top > 0 ? top : 1.0, true);
    ay.lo = 0;
    open_svg(f, legend_rows(names, nn));
    y_ticks(f, &ay, unit);
    double slot = (W - LEFT - RIGHT) / (double)bars, bw = fmin(slot * 0.8, 28.0);
    size_t every = bars / 8 + 1; /* about 8 step labels */
    char b[32];
    for (size_t k = 0; k < bars; k++) {
        double x = LEFT + slot * ((double)k + 0.5);
        if (k % every == 0) {
            fmt_num(b, sizeof b, steps[k]);
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"xtick\">%s</text>", x,
                    TOP + PLOT_H + 14.0, b);
        }
        double y = TOP + PLOT_H;
        fprintf(f, "<g class=\"bar\" data-step=\"%.0f\">", steps[k]);
        for (size_t i = 0; i < n; i++) {
            double v = at_step(&s[i], steps[k]);
            if (!(isfinite(v) && v > 0))
                continue;
            double h = map(&ay, v, 0.0, PLOT_H) - map(&ay, 0.0, 0.0, PLOT_H);
            y -= h;
            fprintf(f, "<rect class=\"seg\" data-key=\"");
            ddpc__html_escape(f, s[i].name);
            fprintf(f, "\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\"/>",
                    x - bw / 2.0, y, bw, h, palette[i % PALETTE_N]);
        }
        fputs("</g>", f);
    }
    x_title(f);
    if (stride > 1)
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"yt\">1 in %zu logged steps</text>",
                W - RIGHT, TOP - 9.0, stride);
    legend(f, names, nn, TOP + PLOT_H + AXIS_H + 14.0);
    fputs("</svg>\n", f);
    ddpc_free(steps);
}

void ddpc__svg_hbars(FILE *f, const char *unit, const char *const *labels, const double *values,
                     size_t n)
{
    const double label_w = 170.0, row = 22.0, value_w = 90.0;
    double top = 0;
    for (size_t i = 0; i < n; i++)
        top = fmax(top, isfinite(values[i]) ? values[i] : 0);
    double h = row * (double)n + 12.0, span = W - label_w - value_w;
    fprintf(f,
            "<svg viewBox=\"0 0 %.0f %.0f\" width=\"%.0f\" "
            "height=\"%.0f\">",
            W, h, W, h);
    char b[32];
    for (size_t i = 0; i < n; i++) {
        double y = 6.0 + row * (double)i, v = isfinite(values[i]) ? values[i] : 0;
        double w = top > 0 ? span * v / top : 0;
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"yt\">", label_w - 6.0, y + 14.0);
        ddpc__html_escape(f, labels[i]);
        fprintf(f,
                "</text><rect class=\"hbar\" x=\"%.1f\" y=\"%.1f\" width=\"%.2f\" "
                "height=\"%.1f\" fill=\"%s\"/>",
                label_w, y + 3.0, w, row - 6.0, palette[i % PALETTE_N]);
        fmt_num(b, sizeof b, v);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"lg\">%s ", label_w + w + 6.0, y + 14.0, b);
        ddpc__html_escape(f, unit);
        fputs("</text>", f);
    }
    fputs("</svg>\n", f);
}
