// SPDX-License-Identifier: MIT
/* ddpc report: a run directory's metrics.jsonl as one self-contained HTML page (inline SVG, no
 * scripts, no network): a summary table of the run, loss and evaluation curves, learning rate,
 * throughput, the per-step phase breakdown, per-rank step times and memory. A chart whose keys no record carries is left out
 * with a one-line note. One thread at a time. */
#ifndef DDPC_REPORT_H
#define DDPC_REPORT_H

#include <ddpc/status.h>

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a report was made from. */
typedef struct {
    size_t records; /* JSON records read from metrics.jsonl */
    size_t skipped; /* lines skipped: malformed, or the torn last line of a killed run */
    bool torn_last; /* the last line was cut short (the run was killed while writing it) */
    int charts;     /* charts drawn */
    int omitted;    /* charts left out for want of their keys */
} ddpc_report_summary;

/* Reads `run_dir`/metrics.jsonl and writes the page to `out_path` (NULL: `run_dir`/report.html),
 * atomically (a temporary file renamed over it). `summary` may be NULL. DDPC_EIO naming the path
 * when the directory or metrics.jsonl is missing or unreadable, or the page cannot be written;
 * DDPC_EFORMAT when metrics.jsonl holds no record at all; DDPC_ENOMEM. */
ddpc_status ddpc_report_write(const char *run_dir, const char *out_path,
                              ddpc_report_summary *summary);

#ifdef __cplusplus
}
#endif
#endif
