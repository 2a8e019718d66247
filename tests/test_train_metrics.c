// SPDX-License-Identifier: MIT
/* The typed metrics sink and its JSONL writer: today's line format for finite values, nested
 * "group/name" keys, null for NaN and infinities (the line still parses as JSON), escaped strings,
 * append versus truncate, a write error (/dev/full) reported with the path and sticky, and no
 * allocation per record. */
#include "check.h"

#include "core/json.h"

#include <ddpc/alloc.h>
#include <ddpc/metrics.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[] = "/tmp/ddpc_test_metrics_XXXXXX";

static char *slurp(const char *path)
{
    static char buf[8192];
    check_read_file(path, buf, sizeof buf);
    return buf;
}

static void test_format_and_nesting(void)
{
    char path[256];
    snprintf(path, sizeof path, "%s/a.jsonl", dir);
    ddpc_metrics *m = NULL;
    CHECK_EQ_INT(ddpc_metrics_create(&m), DDPC_OK);
    CHECK_EQ_INT(ddpc_metrics_add_jsonl(m, path, false), DDPC_OK);
    ddpc_metrics_begin(m, 4);
    ddpc_metrics_i64(m, "epoch", 0);
    ddpc_metrics_f64(m, "loss", 2.30631, 6);
    ddpc_metrics_f64(m, "task_loss/fine", 0.5, 6);
    ddpc_metrics_f64(m, "task_loss/coarse", 0.25, 6);
    ddpc_metrics_f64(m, "lr", 0.01, -1);
    ddpc_metrics_f64(m, "samples_per_s", 1234.56, 1);
    ddpc_metrics_str(m, "split", "te\"st\n");
    CHECK_EQ_INT(ddpc_metrics_end(m), DDPC_OK);
    ddpc_metrics_destroy(m);
    const char *want = "{\"step\": 4, \"epoch\": 0, \"loss\": 2.306310, \"task_loss\": {\"fine\": "
                       "0.500000, \"coarse\": 0.250000}, \"lr\": 0.01, \"samples_per_s\": 1234.6, "
                       "\"split\": \"te\\\"st\\u000a\"}\n";
    CHECK(strcmp(slurp(path), want) == 0);
    if (strcmp(slurp(path), want) != 0)
        fprintf(stderr, "got  %swant %s", slurp(path), want);
}

static void test_nonfinite_is_null(void)
{
    char path[256];
    snprintf(path, sizeof path, "%s/nan.jsonl", dir);
    ddpc_metrics *m = NULL;
    CHECK_EQ_INT(ddpc_metrics_create(&m), DDPC_OK);
    CHECK_EQ_INT(ddpc_metrics_add_jsonl(m, path, false), DDPC_OK);
    ddpc_metrics_begin(m, 1);
    ddpc_metrics_f64(m, "loss", NAN, 6);
    ddpc_metrics_f64(m, "grad_norm", INFINITY, -1);
    ddpc_metrics_f64(m, "x", -INFINITY, 3);
    CHECK_EQ_INT(ddpc_metrics_end(m), DDPC_OK);
    ddpc_metrics_destroy(m);
    const char *text = slurp(path);
    CHECK(strcmp(text, "{\"step\": 1, \"loss\": null, \"grad_norm\": null, \"x\": null}\n") == 0);
    ddpc__json *v = NULL;
    CHECK_EQ_INT(ddpc__json_parse(&v, text, strlen(text), path), DDPC_OK);
    ddpc__json_free(v);
}

static void test_append_and_truncate(void)
{
    char path[256];
    snprintf(path, sizeof path, "%s/b.jsonl", dir);
    for (int round = 0; round < 3; round++) {
        ddpc_metrics *m = NULL;
        CHECK_EQ_INT(ddpc_metrics_create(&m), DDPC_OK);
        CHECK_EQ_INT(ddpc_metrics_add_jsonl(m, path, round > 0 && round < 2), DDPC_OK);
        ddpc_metrics_begin(m, round);
        CHECK_EQ_INT(ddpc_metrics_end(m), DDPC_OK);
        ddpc_metrics_destroy(m);
        if (round == 1)
            CHECK(strcmp(slurp(path), "{\"step\": 0}\n{\"step\": 1}\n") == 0);
    }
    CHECK(strcmp(slurp(path), "{\"step\": 2}\n") == 0); /* round 2 truncated */
}

static void test_write_error_is_reported(void)
{
    ddpc_metrics *m = NULL;
    CHECK_EQ_INT(ddpc_metrics_create(&m), DDPC_OK);
    CHECK_EQ_INT(ddpc_metrics_add_jsonl(m, "/dev/full", true), DDPC_OK);
    for (int i = 0; i < 2; i++) { /* sticky: the second record fails too */
        ddpc_metrics_begin(m, i);
        ddpc_metrics_f64(m, "loss", 1.0, 6);
        CHECK_EQ_INT(ddpc_metrics_end(m), DDPC_EIO);
        CHECK_STR_CONTAINS(ddpc_last_error(), "cannot write '/dev/full'");
        CHECK_STR_CONTAINS(ddpc_last_error(), "No space left");
    }
    ddpc_metrics_destroy(m);
    CHECK_EQ_INT(ddpc_metrics_create(&m), DDPC_OK);
    CHECK_EQ_INT(ddpc_metrics_add_jsonl(m, "/nonexistent/dir/m.jsonl", false), DDPC_EIO);
    CHECK_STR_CONTAINS(ddpc_last_error(), "/nonexistent/dir/m.jsonl");
    ddpc_metrics_destroy(m);
}

static void test_no_allocation_per_record(void)
{
    char path[256];
    snprintf(path, sizeof path, "%s/c.jsonl", dir);
    ddpc_metrics *m = NULL;
    CHECK_EQ_INT(ddpc_metrics_create(&m), DDPC_OK);
    CHECK_EQ_INT(ddpc_metrics_add_jsonl(m, path, false), DDPC_OK);
    int64_t before = ddpc_alloc_total();
    for (int i = 0; i < 100; i++) {
        ddpc_metrics_begin(m, i);
        ddpc_metrics_f64(m, "loss", 1.0 / (i + 1), 6);
        ddpc_metrics_str(m, "split", "val");
        CHECK_EQ_INT(ddpc_metrics_end(m), DDPC_OK);
    }
    CHECK_EQ_INT(ddpc_alloc_total(), before);
    /* Fields past the maximum are dropped, not overflowed. */
    ddpc_metrics_begin(m, 0);
    for (int i = 0; i < DDPC_METRICS_MAX_FIELDS + 5; i++)
        ddpc_metrics_i64(m, "k", i);
    CHECK_EQ_INT(ddpc_metrics_end(m), DDPC_OK);
    ddpc_metrics_destroy(m);
    ddpc_metrics_destroy(NULL);
}

int main(void)
{
    if (!mkdtemp(dir))
        return 1;
    RUN_TEST(test_format_and_nesting);
    RUN_TEST(test_nonfinite_is_null);
    RUN_TEST(test_append_and_truncate);
    RUN_TEST(test_write_error_is_reported);
    RUN_TEST(test_no_allocation_per_record);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        return 1;
    return check_summary();
}
