// SPDX-License-Identifier: MIT
/* The progress bar (log.progress): on a terminal, rank 0 redraws one line in place — steps
 * done/total, epoch, loss, throughput, ETA — instead of printing a progress line every log_every
 * steps; anywhere else (a file, a pipe, `ddpc run`'s workers) the plain lines stay as they are.
 * Invariant: while the bar is drawn the cursor sits at the end of its line, so whoever prints
 * another line first calls ddpc__progress_clear; the finished bar ends with a newline. */
#include "train/trainer_impl.h"

#include <ddpc/timer.h>

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define REDRAW_S 0.1 /* at most 10 redraws a second: a terminal is slow */
#define BAR_CELLS 20

/* Decides once, at the first call, whether this run draws a bar. */
bool ddpc__progress_on(ddpc_trainer *t)
{
    ddpc__progress *p = &t->bar;
    if (!p->decided) {
        p->decided = true;
        int mode = t->set.progress;
        p->on =
            t->log && (mode == PROGRESS_BAR || (mode == PROGRESS_AUTO && isatty(fileno(t->log))));
        p->start = ddpc_time_now();
        p->start_step = ddpc_engine_step(t->engine);
        p->loss = NAN;
        p->last_draw = -INFINITY;
    }
    return p->on;
}

/* Columns of the terminal, or 100 where it does not say (a pipe under log.progress: bar). */
static int columns(FILE *f)
{
    struct winsize ws;
    if (ioctl(fileno(f), TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 40)
        return ws.ws_col;
    return 100;
}

static void fmt_duration(char *buf, size_t cap, double s)
{
    if (!isfinite(s) || s < 0) {
        snprintf(buf, cap, "--");
        return;
    }
    long v = lround(s);
    if (v >= 3600)
        snprintf(buf, cap, "%ldh%02ldm", v / 3600, v / 60 % 60);
    else if (v >= 60)
        snprintf(buf, cap, "%ldm%02lds", v / 60, v % 60);
    else
        snprintf(buf, cap, "%lds", v);
}

static void draw(ddpc_trainer *t)
{
    ddpc__progress *p = &t->bar;
    int64_t step = ddpc_engine_step(t->engine), total = t->total_steps;
    double frac = total > 0 ? (double)step / (double)total : 1.0;
    double spent = ddpc_time_now() - p->start;
    int64_t done = step - p->start_step;
    double eta = done > 0 ? spent / (double)done * (double)(total - step) : NAN;
    char bar[BAR_CELLS + 1], eta_s[32], loss_s[32], rate_s[48], line[512];
    int full = (int)(frac * BAR_CELLS);
    for (int i = 0; i < BAR_CELLS; i++)
        bar[i] = i < full ? '#' : '.';
    bar[BAR_CELLS] = '\0';
    fmt_duration(eta_s, sizeof eta_s, step >= total ? spent : eta);
    if (isnan(p->loss))
        snprintf(loss_s, sizeof loss_s, "--");
    else
        snprintf(loss_s, sizeof loss_s, fabs(p->loss) < 1e4 ? "%.4f" : "%.4g", p->loss);
    if (p->rate > 0)
        snprintf(rate_s, sizeof rate_s, "%.0f %s/s", p->rate, p->tokens ? "tok" : "samples");
    else
        snprintf(rate_s, sizeof rate_s, "-- %s/s", p->tokens ? "tok" : "samples");
    int n = snprintf(line, sizeof line,
                     "step %lld/%lld [%s] %3.0f%% | epoch %lld | loss %s | %s | %s %s",
                     (long long)step, (long long)total, bar, 100.0 * frac, (long long)p->epoch,
                     loss_s, rate_s, step >= total ? "took" : "ETA", eta_s);
    /* A line wider than the terminal wraps, and \r would then redraw only its last row. */
    int cols = columns(t->log) - 1;
    if (n > cols)
        n = cols;
    fprintf(t->log, "\r%.*s\033[K", n, line);
    fflush(t->log);
    p->drawn = true;
    p->last_draw = ddpc_time_now();
}

void ddpc__progress_update(ddpc_trainer *t, int64_t epoch, double loss, double rate, bool tokens)
{
    if (!ddpc__progress_on(t))
        return;
    ddpc__progress *p = &t->bar;
    p->epoch = epoch;
    p->loss = loss;
    p->rate = rate;
    p->tokens = tokens;
    draw(t);
}

void ddpc__progress_tick(ddpc_trainer *t, int64_t epoch)
{
    if (!ddpc__progress_on(t))
        return;
    t->bar.epoch = epoch;
    if (ddpc_time_now() - t->bar.last_draw >= REDRAW_S)
        draw(t);
}

void ddpc__progress_clear(ddpc_trainer *t)
{
    if (!t->bar.drawn)
        return;
    fputs("\r\033[K", t->log);
    t->bar.drawn = false;
    t->bar.last_draw = -INFINITY; /* the next tick draws it again */
}

void ddpc__progress_finish(ddpc_trainer *t)
{
    if (!ddpc__progress_on(t))
        return;
    draw(t);
    fputc('\n', t->log);
    t->bar.drawn = false;
    t->bar.on = false; /* what follows (the test evaluation, "done") is plain lines */
}
