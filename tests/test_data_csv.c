// SPDX-License-Identifier: MIT
/* Tests for src/data/csv.c and csv_dataset.c: RFC 4180 quoting (commas, "" and a line break
 * inside quotes, which moves later line numbers on), CRLF and lone-CR line ends, blank lines,
 * spaces around numbers; the dataset's features in column order without the label columns, class labels, float
 * targets of several columns in the order `label` names them, and the batch accessors; every
 * malformed file refused naming file, line and column; a label_map refused on float targets. */
#include <ddpc/alloc.h>
#include <ddpc/data.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

static char dir[] = "/tmp/ddpc_test_csv_XXXXXX";

/* Writes text to dir/name; returns the path (static buffer per call slot). */
static const char *file(const char *name, const char *text)
{
    static char paths[8][512];
    static int slot;
    char *p = paths[slot++ % 8];
    snprintf(p, 512, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (!f)
        abort();
    fputs(text, f);
    fclose(f);
    return p;
}

static void test_quoting_and_line_ends(void)
{
    const char *p = file("q.csv", "\"a\",\"b, quoted\",\"the \"\"y\"\"\",c\r\n"
                                  " 1.5 ,2,3,\"4\"\r\n"
                                  "\r\n"
                                  "5,6e-1,7,-8\r"
                                  "9,10,11,12\n");
    ddpc_dataset *d = NULL;
    CHECK_EQ_INT(ddpc_dataset_csv_create(&d, p, "the \"y\"", DDPC_CSV_VALUES), DDPC_OK);
    if (!d)
        return;
    CHECK_EQ_INT(ddpc_dataset_size(d), 3);
    int64_t shape[3];
    ddpc_dataset_sample_shape(d, shape);
    CHECK(shape[0] == 1 && shape[1] == 1 && shape[2] == 3);
    CHECK_EQ_INT(ddpc_dataset_target_width(d), 1);
    CHECK_EQ_INT(ddpc_dataset_num_classes(d), 1);
    int64_t idx[3] = {2, 0, 1};
    float x[9], y[3];
    int32_t never[3] = {-7, -7, -7};
    CHECK_EQ_INT(ddpc_dataset_get_batch(d, idx, 3, x, NULL, never), DDPC_OK);
    CHECK(never[0] == -7); /* float targets are not written as labels */
    CHECK_EQ_INT(ddpc_dataset_get_float_targets(d, idx, 3, y), DDPC_OK);
    const float want_x[9] = {9, 10, 12, 1.5f, 2, 4, 5, 0.6f, -8};
    const float want_y[3] = {11, 3, 7};
    CHECK(memcmp(x, want_x, sizeof x) == 0);
    CHECK(memcmp(y, want_y, sizeof y) == 0);
    int64_t out_of_range = 3;
    CHECK_EQ_INT(ddpc_dataset_get_float_targets(d, &out_of_range, 1, y), DDPC_EINVAL);
    ddpc_dataset *v = NULL;
    int64_t map[1] = {0};
    CHECK_EQ_INT(ddpc_dataset_relabel_create(&v, d, map, 1), DDPC_EINVAL);
    ddpc_dataset_destroy(d);
}

static void test_several_targets_and_classes(void)
{
    const char *p = file("m.csv", "f1,t1,f2,t2\n1,0.5,2,1\n3,0,4,0.25\n");
    ddpc_dataset *d = NULL;
    /* Targets in the order named, not the file's. */
    CHECK_EQ_INT(ddpc_dataset_csv_create(&d, p, "t2, t1", DDPC_CSV_PROBABILITIES), DDPC_OK);
    if (d) {
        int64_t idx[2] = {0, 1};
        float y[4];
        CHECK_EQ_INT(ddpc_dataset_target_width(d), 2);
        CHECK_EQ_INT(ddpc_dataset_get_float_targets(d, idx, 2, y), DDPC_OK);
        CHECK(y[0] == 1.0f && y[1] == 0.5f && y[2] == 0.25f && y[3] == 0.0f);
        ddpc_dataset_destroy(d);
    }
    p = file("c.csv", "x,label\n1,0\n2,4\n3,2\n");
    CHECK_EQ_INT(ddpc_dataset_csv_create(&d, p, "label", DDPC_CSV_CLASSES), DDPC_OK);
    if (d) {
        int64_t idx[3] = {0, 1, 2};
        int32_t t[3];
        float x[3];
        CHECK_EQ_INT(ddpc_dataset_target_width(d), 0);
        CHECK_EQ_INT(ddpc_dataset_num_classes(d), 5);
        CHECK_EQ_INT(ddpc_dataset_get_batch(d, idx, 3, x, NULL, t), DDPC_OK);
        CHECK(t[0] == 0 && t[1] == 4 && t[2] == 2 && x[1] == 2.0f);
        CHECK_EQ_INT(ddpc_dataset_get_float_targets(d, idx, 1, x), DDPC_EINVAL);
        ddpc_dataset_destroy(d);
    }
}

/* A file that must be refused with `code` and a message containing want. */
static void refused(const char *name, const char *text, const char *label, ddpc_csv_targets k,
                    ddpc_status code, const char *want)
{
    const char *p = file(name, text);
    ddpc_dataset *d = (ddpc_dataset *)1;
    CHECK_EQ_INT(ddpc_dataset_csv_create(&d, p, label, k), code);
    CHECK(d == NULL);
    char expect[600];
    snprintf(expect, sizeof expect, "%s%s", strchr(want, '@') ? "" : p, want + (*want == '@'));
    CHECK_STR_CONTAINS(ddpc_last_error(), expect);
}

static void test_errors(void)
{
    ddpc_csv_targets V = DDPC_CSV_VALUES;
    refused("e1.csv", "", "y", V, DDPC_EFORMAT, ": the file is empty");
    refused("e2.csv", "\n\n", "y", V, DDPC_EFORMAT, ": the file is empty");
    refused("e3.csv", "x,y\n", "y", V, DDPC_EFORMAT, ": a header row and no data rows");
    refused("e4.csv", "x,y\n1,2\n3\n", "y", V, DDPC_EFORMAT, ":3: 1 fields, but the header has 2");
    refused("e5.csv", "x,y\n1,2\n3,4,5\n", "y", V, DDPC_EFORMAT, ":3: 3 fields");
    refused("e6.csv", "x,y\n1,2\n3,x4\n", "y", V, DDPC_EFORMAT,
            ":3: column 2 ('y'): 'x4' is not a number");
    refused("e7.csv", "x,y\n1,nan\n", "y", V, DDPC_EFORMAT,
            ":2: column 2 ('y'): 'nan' is not a finite number");
    refused("e8.csv", "x,y\n1,1e999\n", "y", V, DDPC_EFORMAT,
            ":2: column 2 ('y'): '1e999' is not a finite number");
    refused("e9.csv", "x,y\n1,2\n", "z", V, DDPC_EFORMAT, ":1: no label column 'z' in the header");
    refused("e10.csv", "x,y\n1,2\n", "", V, DDPC_EINVAL, ": no label column named");
    refused("e11.csv", "y\n1\n", "y", V, DDPC_EINVAL, ": every column is a label");
    refused("e12.csv", "x,x\n1,2\n", "x", V, DDPC_EFORMAT, ":1: column 2 repeats the name 'x'");
    refused("e13.csv", "x,y\n1,2\n\"3\"4,5\n", "y", V, DDPC_EFORMAT,
            ":3: a quoted field must end at a comma or the line's end");
    /* A line break inside a quoted header name moves the lines on; an unclosed quote is named at
     * the line it opened on. */
    refused("e14.csv", "\"x\nx\",y\n1,2\n3,\"4\n", "y", V, DDPC_EFORMAT,
            ":4: a quote opened here is never closed");
    refused("e15.csv", "x,y\n1,256\n", "y", DDPC_CSV_CLASSES, DDPC_EFORMAT,
            ":2: column 2 ('y'): label 256 is not a class");
    refused("e16.csv", "x,y\n1,-1\n", "y", DDPC_CSV_CLASSES, DDPC_EFORMAT,
            ":2: column 2 ('y'): label -1 is not a class");
    refused("e17.csv", "x,y\n1,1.01\n", "y", DDPC_CSV_PROBABILITIES, DDPC_EFORMAT,
            ":2: column 2 ('y'): target 1.01 is outside [0, 1]");
    refused("e18.csv", "x,y,z\n1,1,1\n", "y,z", DDPC_CSV_CLASSES, DDPC_EINVAL,
            ": class labels come from one column, not 2");
    ddpc_dataset *d = NULL;
    CHECK_EQ_INT(ddpc_dataset_csv_create(&d, "/nonexistent/x.csv", "y", V), DDPC_EIO);
    CHECK_STR_CONTAINS(ddpc_last_error(), "/nonexistent/x.csv");
}

int main(void)
{
    if (!mkdtemp(dir))
        return 1;
    RUN_TEST(test_quoting_and_line_ends);
    RUN_TEST(test_several_targets_and_classes);
    RUN_TEST(test_errors);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return check_summary();
}
