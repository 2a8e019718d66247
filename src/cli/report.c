// SPDX-License-Identifier: MIT
/* `ddpc report RUN_DIR [--out FILE]`: writes RUN_DIR/report.html (or FILE) from the run's
 * metrics.jsonl and says what it wrote; skipped lines are a note on stderr, not an error. */
#include "cli/cli.h"

#include <ddpc/report.h>

#include <stdio.h>
#include <string.h>

static int usage_to(FILE *f, int rc)
{
    fprintf(f, "usage: ddpc report RUN_DIR [--out FILE]\n"
               "Writes RUN_DIR/metrics.jsonl's charts as one self-contained HTML page, "
               "RUN_DIR/report.html or FILE (docs/observability.md).\n");
    return rc;
}

static int usage(void)
{
    return usage_to(stderr, 2);
}

int ddpc_cli_report(int argc, char **argv)
{
    const char *run_dir = NULL, *out = NULL;
    for (int i = 0; i < argc; i++) {
        if (ddpc_cli_is_help(argv[i])) {
            return usage_to(stdout, 0);
        } else if (strcmp(argv[i], "--out") == 0) {
            if (i + 1 >= argc)
                return usage();
            out = argv[++i];
        } else if (strncmp(argv[i], "--", 2) == 0) {
            fprintf(stderr, "ddpc report: unknown option '%s'\n", argv[i]);
            return usage();
        } else if (run_dir) {
            return usage();
        } else {
            run_dir = argv[i];
        }
    }
    if (!run_dir)
        return usage();
    ddpc_report_summary s;
    if (ddpc_report_write(run_dir, out, &s) != DDPC_OK)
        return ddpc_cli_fail("report");
    if (s.torn_last)
        fprintf(stderr,
                "ddpc report: note: skipped the torn last line of %s/metrics.jsonl (the "
                "run was killed while writing it)\n",
                run_dir);
    if (s.skipped > (s.torn_last ? 1u : 0u))
        fprintf(stderr, "ddpc report: note: skipped %zu malformed line%s of %s/metrics.jsonl\n",
                s.skipped - (s.torn_last ? 1u : 0u), s.skipped == 1 ? "" : "s", run_dir);
    if (out)
        printf("wrote %s: %d charts from %zu records", out, s.charts, s.records);
    else
        printf("wrote %s/report.html: %d charts from %zu records", run_dir, s.charts, s.records);
    if (s.omitted)
        printf(" (%d left out: their keys are not in metrics.jsonl)", s.omitted);
    printf("\n");
    return 0;
}
