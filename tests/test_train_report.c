// SPDX-License-Identifier: MIT
/* Tests for src/metrics/report_*.c: a series keeps increasing steps (a replayed step supersedes),
 * nulls are gaps; metrics.jsonl with malformed and torn lines is read around them; the page has
 * one path point per logged value and stacked bars per phase record; a missing run directory or
 * metrics file is one error naming the path; an unwritable page leaves no temporary file; a
 * failing allocator never leaks and reports DDPC_ENOMEM. The summary table holds the final
 * losses and accuracy; a resume is a marker on the charts, and a rerun starts the page over. */
#include <ddpc/alloc.h>
#include <ddpc/report.h>

#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "metrics/report_impl.h"

static char dir[256];

static void write_file(const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* The whole of dir/name, malloc'd ("" if absent). */
static char *read_text(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    char *buf = calloc(1, 1 << 20);
    if (f) {
        size_t n = fread(buf, 1, (1 << 20) - 1, f);
        buf[n] = '\0';
        fclose(f);
    }
    return buf;
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

static void test_series_supersede(void)
{
    ddpc__series s = {.name = "loss"};
    double steps[] = {5, 10, 15, 20};
    for (int i = 0; i < 4; i++)
        CHECK_EQ_INT(ddpc__series_push(&s, steps[i], i == 1 ? NAN : 1.0 / steps[i]), DDPC_OK);
    CHECK_EQ_INT(s.n, 4);
    CHECK_EQ_INT(s.finite, 3);
    CHECK_EQ_INT(ddpc__series_push(&s, 15, 2.0), DDPC_OK); /* a resumed run replays step 15 */
    CHECK_EQ_INT(s.n, 3);
    CHECK_EQ_INT(s.finite, 2);
    CHECK_NEAR(s.y[2], 2.0, 0);
    CHECK_EQ_INT(ddpc__series_push(&s, 1, 3.0), DDPC_OK); /* a restart from scratch */
    CHECK_EQ_INT(s.n, 1);
    CHECK_EQ_INT(s.finite, 1);
    ddpc__series_fini(&s);
}

static const char *metrics =
    "{\"step\": 1, \"mem_params_bytes\": 1048576, \"mem_rss_bytes\": 2097152}\n"
    "{\"step\": 5, \"epoch\": 0, \"loss\": 2.0, \"lr\": 0.1, \"samples_per_s\": 100.0, "
    "\"phase\": {\"data_s\": 0.01, \"forward_s\": 0.02, \"backward_s\": 0.04}, "
    "\"rank_step_s\": {\"0\": 0.07, \"1\": 0.08}}\n"
    "not json at all\n"
    "{\"step\": 10, \"epoch\": 0, \"loss\": null, \"lr\": 0.05, \"samples_per_s\": 110.0, "
    "\"phase\": {\"data_s\": 0.01, \"forward_s\": 0.02, \"backward_s\": 0.04}, "
    "\"rank_step_s\": {\"0\": 0.07, \"1\": 0.08}}\n"
    "{\"step\": 15, \"epoch\": 0, \"loss\": 1.5, \"lr\": 0.01, \"samples_per_s\": 120.0, "
    "\"phase\": {\"data_s\": 0.01, \"forward_s\": 0.02, \"backward_s\": 0.04, \"x_s\": 0.1}, "
    "\"gpu_phase\": {\"forward_s\": 0.015, \"backward_s\": 0.03, \"other_s\": 0.02}, "
    "\"rank_step_s\": {\"0\": 0.07, \"1\": 0.08}}\n"
    "{\"step\": 15, \"split\": \"val\", \"eval_loss\": 1.4, \"eval_accuracy\": 0.6}\n"
    "{\"step\": 15, \"mem_rss_bytes\": 3145728, \"mem\": {\"act_bytes\": 1048576}}\n"
    "{\"step\": 20, \"epoch\": 0, \"loss\": 1.";

static void test_read(void)
{
    write_file("metrics.jsonl", metrics);
    char path[512];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    ddpc__report_data d;
    CHECK_EQ_INT(ddpc__report_read(&d, path), DDPC_OK);
    CHECK_EQ_INT(d.n, 6);
    CHECK_EQ_INT(d.skipped, 2);
    CHECK(d.torn_last);
    CHECK_EQ_INT(d.first_bad_line, 3);
    CHECK(ddpc__report_is_progress(d.rec[1]) && !ddpc__report_is_eval(d.rec[1]));
    CHECK(ddpc__report_is_eval(d.rec[4]) && !ddpc__report_is_progress(d.rec[4]));
    const ddpc__json *v = ddpc__report_lookup(d.rec[1], "phase/forward_s");
    CHECK(v && v->type == DDPC__JSON_NUMBER && v->number == 0.02);
    CHECK(ddpc__report_lookup(d.rec[1], "phase/none") == NULL);
    ddpc__report_data_fini(&d);
}

static void test_page(void)
{
    write_file("metrics.jsonl", metrics);
    ddpc_report_summary s;
    CHECK_EQ_INT(ddpc_report_write(dir, NULL, &s), DDPC_OK);
    CHECK_EQ_INT(s.records, 6);
    CHECK_EQ_INT(s.skipped, 2);
    CHECK(s.torn_last);
    CHECK(s.charts >= 6 && s.omitted >= 1);
    char *html = read_text("report.html");
    CHECK_STR_CONTAINS(html, "data-key=\"loss\" data-points=\"2\"");
    CHECK_STR_CONTAINS(html, "data-key=\"lr\" data-points=\"3\"");
    CHECK_STR_CONTAINS(html, "data-key=\"val/eval_loss\" data-points=\"1\"");
    CHECK_STR_CONTAINS(html, "data-key=\"val/eval_accuracy\" data-points=\"1\"");
    CHECK_STR_CONTAINS(html, "<tr data-key=\"train_loss\"><th>final training loss</th><td><span "
                             "class=\"v\">1.5000</span> <span class=\"sub\">at step 15</span>");
    CHECK_STR_CONTAINS(html, "<th>final evaluation loss (val)</th><td><span class=\"v\">1.4000");
    CHECK_STR_CONTAINS(html, "<th>final accuracy (val)</th><td><span class=\"v\">60.00%");
    CHECK_STR_CONTAINS(html, "<th>world size</th><td><span class=\"omit\">not recorded");
    CHECK_EQ_INT(count(html, "class=\"resume\""), 0);
    CHECK_STR_CONTAINS(html, "data-key=\"rank 1\" data-points=\"3\"");
    CHECK_EQ_INT(count(html, "<g class=\"bar\""), 3 + 1); /* + the GPU chart's (below) */
    CHECK_EQ_INT(count(html, "class=\"seg\" data-key=\"backward_s\""), 3 + 1);
    CHECK_EQ_INT(count(html, "class=\"seg\" data-key=\"x_s\""), 1); /* an unknown phase too */
    /* A GPU run's device-time phases: a chart of their own, from the records that have them. */
    CHECK_STR_CONTAINS(html, "<h2>Where a step's time goes on the GPU (device time)</h2>");
    CHECK_EQ_INT(count(html, "class=\"seg\" data-key=\"other_s\""), 1);
    CHECK_STR_CONTAINS(html, "Gradient norm (before clipping): not drawn");
    CHECK_STR_CONTAINS(html, ">mem/act_bytes</text>"); /* the last memory record, nested keys */
    CHECK_EQ_INT(count(html, ">mem_params_bytes</text>"), 0);
    CHECK_STR_CONTAINS(html, "<h2>Memory over the run</h2>");
    CHECK_STR_CONTAINS(html, "data-key=\"mem_rss_bytes\" data-points=\"2\"");
    CHECK_STR_CONTAINS(html, "the last line was torn");
    CHECK_EQ_INT(count(html, "http"), 0);
    CHECK_EQ_INT(count(html, "<script"), 0);
    CHECK_EQ_INT(count(html, "nan"), 0);
    free(html);
}

/* A resumed session, then a rerun: the marker and the summary of the last run only. */
static void test_resume_and_rerun(void)
{
    const char *run = "{\"step\": 0, \"event\": \"run\", \"world\": 2, \"zero_stage\": 1, "
                      "\"precision\": \"bf16\", \"device\": \"cpu\", \"config\": \"c.yaml\"}\n";
    char text[4096];
    snprintf(text, sizeof text,
             "%s{\"step\": 5, \"loss\": 2.0, \"time_s\": 3.0}\n"
             "{\"step\": 10, \"loss\": 1.8, \"time_s\": 6.0}\n"
             "{\"step\": 5, \"event\": \"resume\", \"restart\": 0, \"checkpoint\": \"c\"}\n"
             "%s{\"step\": 10, \"loss\": 1.7, \"time_s\": 2.5}\n"
             "{\"step\": 10, \"event\": \"end\", \"wall_s\": 4.0}\n",
             run, run);
    write_file("metrics.jsonl", text);
    CHECK_EQ_INT(ddpc_report_write(dir, NULL, NULL), DDPC_OK);
    char *html = read_text("report.html");
    CHECK_STR_CONTAINS(html, "data-key=\"loss\" data-points=\"2\""); /* 5, then 10 replayed */
    CHECK_EQ_INT(count(html, "<line class=\"resume\" data-step=\"5\""), 1);
    CHECK_STR_CONTAINS(html, "<th>resumed at</th><td>step 5</td>");
    CHECK_STR_CONTAINS(html, "<th>wall time</th><td>10.0 s in 2 sessions</td>"); /* 6 + 4 */
    CHECK_STR_CONTAINS(html, "<th>world size</th><td>2 ranks</td>");
    CHECK_STR_CONTAINS(html, "<th>precision</th><td>bf16</td>");
    CHECK_STR_CONTAINS(html, "<th>ZeRO stage</th><td>1</td>");
    CHECK_STR_CONTAINS(html, "<th>config</th><td>c.yaml</td>");
    free(html);
    /* A rerun appended: only its points, no marker, its own wall time. */
    size_t len = strlen(text);
    snprintf(text + len, sizeof text - len,
             "{\"step\": 0, \"event\": \"rerun\"}\n%s{\"step\": 5, \"loss\": 3.0, "
             "\"time_s\": 1.5}\n",
             run);
    write_file("metrics.jsonl", text);
    CHECK_EQ_INT(ddpc_report_write(dir, NULL, NULL), DDPC_OK);
    html = read_text("report.html");
    CHECK_STR_CONTAINS(html, "data-key=\"loss\" data-points=\"1\"");
    CHECK_EQ_INT(count(html, "class=\"resume\""), 0);
    CHECK_EQ_INT(count(html, "<th>resumed at</th>"), 0);
    CHECK_STR_CONTAINS(html, "<th>wall time</th><td>1.5 s</td>");
    CHECK_STR_CONTAINS(html, "<tr data-key=\"rerun\">");
    free(html);
}

static void test_errors(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/none", dir);
    CHECK_EQ_INT(ddpc_report_write(path, NULL, NULL), DDPC_EIO);
    CHECK_STR_CONTAINS(ddpc_last_error(), "run directory '");
    CHECK_STR_CONTAINS(ddpc_last_error(), "/none' does not exist");
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    unlink(path);
    CHECK_EQ_INT(ddpc_report_write(dir, NULL, NULL), DDPC_EIO);
    CHECK_STR_CONTAINS(ddpc_last_error(), "/metrics.jsonl' does not exist");
    write_file("metrics.jsonl", "garbage\n{\"no_step\": 1}\n");
    CHECK_EQ_INT(ddpc_report_write(dir, NULL, NULL), DDPC_EFORMAT);
    CHECK_STR_CONTAINS(ddpc_last_error(), "holds no metrics record (2 lines skipped)");
    write_file("metrics.jsonl", metrics);
    snprintf(path, sizeof path, "%s/no/such/dir/r.html", dir);
    CHECK_EQ_INT(ddpc_report_write(dir, path, NULL), DDPC_EIO);
    CHECK_STR_CONTAINS(ddpc_last_error(), "cannot write '");
}

/* n phase records: past 64, series grow past their first buffers; past 240, bars are thinned. */
static void write_long(int n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    for (int i = 1; i <= n; i++)
        fprintf(f,
                "{\"step\": %d, \"loss\": %g, \"phase\": {\"data_s\": 0.01, \"forward_s\": "
                "0.02}, \"rank_step_s\": {\"0\": 0.03, \"1\": 0.031}}\n",
                i, 1.0 / i);
    fclose(f);
}

static void test_long_run(void)
{
    write_long(600);
    CHECK_EQ_INT(ddpc_report_write(dir, NULL, NULL), DDPC_OK);
    char *html = read_text("report.html");
    CHECK_STR_CONTAINS(html, "data-key=\"loss\" data-points=\"600\"");
    CHECK_EQ_INT(count(html, "<g class=\"bar\""), 200);
    CHECK_STR_CONTAINS(html, "1 in 3 logged steps");
    CHECK_EQ_INT(count(html, "<circle"), 0); /* no dots on long curves */
    CHECK_EQ_INT(count(html, "on the GPU"), 0); /* a CPU run: no device-time chart, no note */
    free(html);
}

static void test_failing_allocator(void)
{
    write_long(70);
    int64_t live = ddpc_alloc_live();
    int failures = 0;
    for (int64_t k = 0; k < 100000; k++) {
        ddpc_alloc_fail_after(k);
        ddpc_status s = ddpc_report_write(dir, NULL, NULL);
        ddpc_alloc_fail_after(-1);
        CHECK_EQ_INT(ddpc_alloc_live(), live);
        if (s == DDPC_OK)
            break;
        CHECK_EQ_INT(s, DDPC_ENOMEM);
        failures++;
    }
    CHECK(failures > 10);
    /* A failed page leaves no temporary file (report.html.tmp-XXXXXX, ddpc_fs_out). */
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    for (struct dirent *e; d && (e = readdir(d));)
        CHECK(strncmp(e->d_name, "report.html.tmp", 15) != 0);
    if (d)
        closedir(d);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/ddpc_report_XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    RUN_TEST(test_series_supersede);
    RUN_TEST(test_read);
    RUN_TEST(test_page);
    RUN_TEST(test_resume_and_rerun);
    RUN_TEST(test_errors);
    RUN_TEST(test_long_run);
    RUN_TEST(test_failing_allocator);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return check_summary();
}
