// SPDX-License-Identifier: MIT
/* Tests for src/ckpt/safetensors_{write,read}.c: round trip, metadata, header padding, every
 * malformed-header case, a torn file, the failing allocator over open, and interop with a
 * hand-written Python reader/writer (tests/safetensors_interop.py, needs numpy). */
#include <ddpc/alloc.h>
#include <ddpc/rng.h>
#include <ddpc/safetensors.h>

#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

static char tmpdir[64];
static char path[256];

static const char *note = "quote\" backslash\\ tab\t \xc3\xa9";

/* Writes w (2, 3), b (3), empty (0, 4), scalar () with metadata epoch and note to `p`. */
static ddpc_status write_sample(const char *p)
{
    static const float w[6] = {0, 0.5f, 1, 1.5f, 2, 2.5f}, b[3] = {0, -1, -2}, s = 3.25f;
    ddpc_st_tensor t[4] = {
        {.name = "w", .ndim = 2, .shape = {2, 3}, .data = w},
        {.name = "b", .ndim = 1, .shape = {3}, .data = b},
        {.name = "empty", .ndim = 2, .shape = {0, 4}, .data = NULL},
        {.name = "scalar", .ndim = 0, .data = &s},
    };
    const char *keys[2] = {"epoch", "note"}, *values[2] = {"3", note};
    return ddpc_safetensors_write(p, t, 4, keys, values, 2);
}

static void test_round_trip(void)
{
    CHECK_EQ_INT(write_sample(path), DDPC_OK);
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    CHECK(access(tmp, F_OK) != 0);
    ddpc_safetensors *f = NULL;
    CHECK_EQ_INT(ddpc_safetensors_open(&f, path), DDPC_OK);
    if (!f)
        return;
    CHECK_EQ_INT(ddpc_safetensors_count(f), 4);
    const char *order[4] = {"w", "b", "empty", "scalar"};
    ddpc_st_info info;
    for (size_t i = 0; i < 4; i++) {
        CHECK_EQ_INT(ddpc_safetensors_info(f, i, &info), DDPC_OK);
        CHECK(strcmp(info.name, order[i]) == 0);
        CHECK(strcmp(info.dtype, "F32") == 0);
    }
    CHECK_EQ_INT(ddpc_safetensors_info(f, 4, &info), DDPC_EINVAL);
    CHECK_EQ_INT(ddpc_safetensors_find(f, "w", &info), DDPC_OK);
    CHECK_EQ_INT(info.ndim, 2);
    CHECK(info.shape[0] == 2 && info.shape[1] == 3);
    CHECK_EQ_INT(info.nbytes, 24);
    CHECK_NEAR(((const float *)info.data)[5], 2.5, 0);
    CHECK_EQ_INT(ddpc_safetensors_find(f, "scalar", &info), DDPC_OK);
    CHECK_EQ_INT(info.ndim, 0);
    CHECK_NEAR(*(const float *)info.data, 3.25, 0);
    CHECK_EQ_INT(ddpc_safetensors_find(f, "empty", &info), DDPC_OK);
    CHECK_EQ_INT(info.nbytes, 0);
    CHECK_EQ_INT(ddpc_safetensors_find(f, "nope", &info), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "no tensor named 'nope'");
    CHECK_STR_CONTAINS(ddpc_last_error(), path);
    CHECK(strcmp(ddpc_safetensors_metadata(f, "epoch"), "3") == 0);
    CHECK(strcmp(ddpc_safetensors_metadata(f, "note"), note) == 0);
    CHECK(ddpc_safetensors_metadata(f, "missing") == NULL);
    ddpc_safetensors_close(f);
    ddpc_safetensors_close(NULL);
}

static void test_header_is_padded_to_8(void)
{
    CHECK_EQ_INT(write_sample(path), DDPC_OK);
    FILE *fp = fopen(path, "rb");
    uint8_t b[8] = {0};
    CHECK(fp && fread(b, 1, 8, fp) == 8);
    if (fp)
        fclose(fp);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | b[i];
    CHECK_EQ_INT(n % 8, 0);
}

static void test_write_errors(void)
{
    float x = 1;
    ddpc_st_tensor dup[2] = {{.name = "a", .ndim = 1, .shape = {1}, .data = &x},
                             {.name = "a", .ndim = 1, .shape = {1}, .data = &x}};
    CHECK_EQ_INT(ddpc_safetensors_write(path, dup, 2, NULL, NULL, 0), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "duplicate tensor name 'a'");
    ddpc_st_tensor bad = {.name = "a", .ndim = 9, .data = &x};
    CHECK_EQ_INT(ddpc_safetensors_write(path, &bad, 1, NULL, NULL, 0), DDPC_EINVAL);
    ddpc_st_tensor meta = {.name = "__metadata__", .ndim = 0, .data = &x};
    CHECK_EQ_INT(ddpc_safetensors_write(path, &meta, 1, NULL, NULL, 0), DDPC_EINVAL);
    CHECK_EQ_INT(ddpc_safetensors_write("/nonexistent/dir/x.safetensors", dup, 1, NULL, NULL, 0),
                 DDPC_EIO);
    CHECK_STR_CONTAINS(ddpc_last_error(), "/nonexistent/dir/x.safetensors");
}

/* A file of the given header length field, header text and data bytes. */
static void write_raw_len(uint64_t hlen, const char *header, const void *data, size_t n)
{
    FILE *fp = fopen(path, "wb");
    CHECK(fp != NULL);
    if (!fp)
        return;
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(hlen >> (8 * i));
    fwrite(b, 1, 8, fp);
    fwrite(header, 1, strlen(header), fp);
    if (n)
        fwrite(data, 1, n, fp);
    fclose(fp);
}

static void write_raw(const char *header, size_t data_bytes)
{
    static const uint8_t zeros[256];
    write_raw_len(strlen(header), header, zeros, data_bytes);
}

/* Opens `path`, expecting `code` and a message containing `needle` and the path. */
static void expect_open(ddpc_status code, const char *needle, int line)
{
    ddpc_safetensors *f = NULL;
    ddpc_status s = ddpc_safetensors_open(&f, path);
    if (s != code || !strstr(ddpc_last_error(), needle) || !strstr(ddpc_last_error(), path)) {
        fprintf(stderr, "line %d: got %s \"%s\", want %s containing \"%s\"\n", line,
                ddpc_status_name(s), ddpc_last_error(), ddpc_status_name(code), needle);
        check_failures_in_test++;
    }
    CHECK(s == DDPC_OK || f == NULL);
    ddpc_safetensors_close(f);
}
#define EXPECT_OPEN(code, needle) expect_open(code, needle, __LINE__)

#define T(name, dtype, shape, b, e) \
    "\"" name "\":{\"dtype\":\"" dtype "\",\"shape\":" shape ",\"data_offsets\":[" b "," e "]}"

static void test_padding_and_other_dtypes(void)
{
    /* Spaces after the JSON; an F16 of 3 leaves the following F32 misaligned in the file. */
    write_raw("{" T("h", "F16", "[3]", "0", "6") "," T("f", "F32", "[2]", "6", "14") ","
              T("i", "I64", "[1]", "14", "22") "," T("bf", "BF16", "[1,1]", "22", "24") ","
              T("d", "F64", "[]", "24", "32") "," T("n", "I32", "[1]", "32", "36") "}       ",
              36);
    ddpc_safetensors *f = NULL;
    CHECK_EQ_INT(ddpc_safetensors_open(&f, path), DDPC_OK);
    if (!f)
        return;
    CHECK_EQ_INT(ddpc_safetensors_count(f), 6);
    ddpc_st_info info;
    CHECK_EQ_INT(ddpc_safetensors_find(f, "f", &info), DDPC_OK);
    CHECK(strcmp(info.dtype, "F32") == 0);
    CHECK_EQ_INT((uintptr_t)info.data % 4, 0);
    CHECK_EQ_INT(ddpc_safetensors_find(f, "i", &info), DDPC_OK);
    CHECK(strcmp(info.dtype, "I64") == 0);
    CHECK_EQ_INT((uintptr_t)info.data % 8, 0);
    CHECK_EQ_INT(ddpc_safetensors_find(f, "bf", &info), DDPC_OK);
    CHECK(strcmp(info.dtype, "BF16") == 0);
    CHECK_EQ_INT(info.nbytes, 2);
    ddpc_safetensors_close(f);
    /* An empty header object and no data is a valid (empty) file. */
    write_raw("{}      ", 0);
    CHECK_EQ_INT(ddpc_safetensors_open(&f, path), DDPC_OK);
    CHECK_EQ_INT(f ? ddpc_safetensors_count(f) : 99, 0);
    ddpc_safetensors_close(f);
}

static void test_malformed_headers(void)
{
    static const uint8_t junk[8];
    FILE *fp = fopen(path, "wb"); /* 5 bytes: shorter than the length field */
    if (fp) {
        fwrite(junk, 1, 5, fp);
        fclose(fp);
    }
    EXPECT_OPEN(DDPC_EFORMAT, "too short for the 8-byte header length");
    write_raw_len(1000, "{}", NULL, 0);
    EXPECT_OPEN(DDPC_EFORMAT, "header length 1000 exceeds the 2 bytes after it");
    write_raw_len((uint64_t)1 << 40, "{}", NULL, 0);
    EXPECT_OPEN(DDPC_EFORMAT, "exceeds the 100000000-byte limit");
    write_raw_len(1, "{}", NULL, 0);
    EXPECT_OPEN(DDPC_EFORMAT, "too small");
    write_raw("{\"a\": }", 0);
    EXPECT_OPEN(DDPC_EFORMAT, "invalid JSON at byte 6");
    write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}", 4);
    EXPECT_OPEN(DDPC_EFORMAT, "invalid JSON");
    write_raw("[1, 2]", 0);
    EXPECT_OPEN(DDPC_EFORMAT, "header is not a JSON object");
    write_raw("{\"a\":[]}", 0);
    EXPECT_OPEN(DDPC_EFORMAT, "tensor 'a': entry is not a JSON object");
    write_raw("{" T("a", "F33", "[1]", "0", "4") "}", 4);
    EXPECT_OPEN(DDPC_EFORMAT, "tensor 'a': unknown dtype 'F33'");
    write_raw("{" T("a", "F32", "[2,3]", "0", "20") "}", 20);
    EXPECT_OPEN(DDPC_EFORMAT, "tensor 'a': shape of F32 needs 24 bytes but data_offsets [0, 20] "
                              "span 20");
    write_raw("{" T("a", "F32", "[4294967296,4294967296]", "0", "16") "}", 16);
    EXPECT_OPEN(DDPC_EFORMAT, "needs over");
    write_raw("{" T("a", "F32", "[1,-1]", "0", "4") "}", 4);
    EXPECT_OPEN(DDPC_EFORMAT, "shape dim 1 is not a non-negative integer");
    write_raw("{" T("a", "F32", "[1.5]", "0", "4") "}", 4);
    EXPECT_OPEN(DDPC_EFORMAT, "shape dim 0");
    write_raw("{" T("a", "F32", "[1,1,1,1,1,1,1,1,1]", "0", "4") "}", 4);
    EXPECT_OPEN(DDPC_EFORMAT, "at most 8 dims");
    write_raw("{" T("a", "F32", "[1]", "8", "4") "}", 8);
    EXPECT_OPEN(DDPC_EFORMAT, "end before they begin");
    write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4);
    EXPECT_OPEN(DDPC_EFORMAT, "\"data_offsets\" must be two non-negative integers");
    write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", 4);
    EXPECT_OPEN(DDPC_EFORMAT, "tensor 'a': unknown key 'x'");
    write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4);
    EXPECT_OPEN(DDPC_EFORMAT, "\"data_offsets\" must be");
}

/* Offsets out of bounds, overlapping, leaving gaps or trailing bytes; names and metadata. */
static void test_malformed_layout(void)
{
    write_raw("{" T("a", "F32", "[1]", "0", "4") "}", 2);
    EXPECT_OPEN(DDPC_EFORMAT, "tensor 'a': data_offsets [0, 4] lie outside the 2-byte data buffer");
    write_raw("{" T("a", "F32", "[2]", "0", "8") "," T("b", "F32", "[2]", "4", "12") "}", 12);
    EXPECT_OPEN(DDPC_EFORMAT, "tensors 'a' and 'b' overlap");
    write_raw("{" T("a", "F32", "[1]", "0", "4") "," T("b", "F32", "[1]", "8", "12") "}", 12);
    EXPECT_OPEN(DDPC_EFORMAT, "bytes [4, 8) of the data buffer belong to no tensor");
    write_raw("{" T("a", "F32", "[1]", "0", "4") "}", 8);
    EXPECT_OPEN(DDPC_EFORMAT, "the data buffer has 8 bytes but the tensors cover 4");
    write_raw("{" T("a", "F32", "[1]", "0", "4") "," T("a", "F32", "[1]", "4", "8") "}", 8);
    EXPECT_OPEN(DDPC_EFORMAT, "duplicate key 'a'");
    write_raw("{\"__metadata__\":{\"k\":1}}", 0);
    EXPECT_OPEN(DDPC_EFORMAT, "__metadata__ value of 'k' is not a string");
    write_raw("{\"__metadata__\":[]}", 0);
    EXPECT_OPEN(DDPC_EFORMAT, "__metadata__ is not a JSON object");
    write_raw("{\"a\xff\":{}}", 0);
    EXPECT_OPEN(DDPC_EFORMAT, "invalid UTF-8");
    snprintf(path + strlen(path), 8, ".nope");
    EXPECT_OPEN(DDPC_EIO, "cannot open");
    path[strlen(path) - 5] = '\0';
}

static void test_torn_file(void)
{
    CHECK_EQ_INT(write_sample(path), DDPC_OK);
    FILE *fp = fopen(path, "rb");
    static uint8_t buf[4096];
    size_t n = fp ? fread(buf, 1, sizeof buf, fp) : 0;
    if (fp)
        fclose(fp);
    CHECK(n > 100);
    size_t cuts[3] = {n - 4, 40, 6};
    const char *why[3] = {"lie outside", "header length", "too short"};
    for (int i = 0; i < 3; i++) {
        fp = fopen(path, "wb");
        if (fp) {
            fwrite(buf, 1, cuts[i], fp);
            fclose(fp);
        }
        EXPECT_OPEN(DDPC_EFORMAT, why[i]);
        CHECK_STR_CONTAINS(ddpc_last_error(), "truncated");
    }
}

static void test_failing_allocator(void)
{
    CHECK_EQ_INT(write_sample(path), DDPC_OK);
    int64_t live = ddpc_alloc_live();
    int failures = 0;
    for (int64_t k = 0; k < 1000; k++) {
        ddpc_safetensors *f = NULL;
        ddpc_alloc_fail_after(k);
        ddpc_status s = ddpc_safetensors_open(&f, path);
        ddpc_alloc_fail_after(-1);
        if (s == DDPC_OK) {
            CHECK_EQ_INT(ddpc_safetensors_count(f), 4);
            ddpc_safetensors_close(f);
            break;
        }
        failures++;
        CHECK_EQ_INT(s, DDPC_ENOMEM);
        CHECK(f == NULL);
        CHECK_EQ_INT(ddpc_alloc_live(), live);
    }
    CHECK(failures > 10);
    CHECK_EQ_INT(ddpc_alloc_live(), live);
    /* And over write: an injected failure is ENOMEM and leaves nothing behind. */
    for (int64_t k = 0; k < 50; k++) {
        ddpc_alloc_fail_after(k);
        ddpc_status s = write_sample(path);
        ddpc_alloc_fail_after(-1);
        CHECK(s == DDPC_OK || s == DDPC_ENOMEM);
        CHECK_EQ_INT(ddpc_alloc_live(), live);
    }
}

/* Seeded mutations of a valid file (length field, header bytes, truncation) open or fail with
 * DDPC_EFORMAT, never crash or leak. */
static void test_mutation_fuzz(void)
{
    CHECK_EQ_INT(write_sample(path), DDPC_OK);
    static uint8_t orig[4096], buf[4096];
    FILE *fp = fopen(path, "rb");
    size_t n = fp ? fread(orig, 1, sizeof orig, fp) : 0;
    if (fp)
        fclose(fp);
    int64_t live = ddpc_alloc_live();
    ddpc_rng r = ddpc_rng_make(7, 3);
    int opened = 0;
    for (int iter = 0; iter < 1500; iter++) {
        memcpy(buf, orig, n);
        size_t len = n;
        int edits = 1 + (int)ddpc_rng_below(&r, 3);
        for (int e = 0; e < edits; e++) {
            size_t at = (size_t)ddpc_rng_below(&r, len < 200 ? len : 200);
            uint64_t kind = ddpc_rng_below(&r, 8);
            if (kind == 0)
                len = at + 1;
            else
                buf[at] = kind == 1 ? (uint8_t)ddpc_rng_below(&r, 256)
                                    : (uint8_t)"0129[]{}\",: "[ddpc_rng_below(&r, 13)];
        }
        fp = fopen(path, "wb");
        if (!fp)
            break;
        fwrite(buf, 1, len, fp);
        fclose(fp);
        ddpc_safetensors *f = NULL;
        ddpc_status s = ddpc_safetensors_open(&f, path);
        CHECK(s == DDPC_OK || s == DDPC_EFORMAT);
        opened += s == DDPC_OK;
        ddpc_safetensors_close(f);
    }
    CHECK(opened < 1500);
    CHECK_EQ_INT(ddpc_alloc_live(), live);
}

/* "<python> <script> <mode> <file>" with the script beside this test's source. */
static int run_python(const char *mode, const char *file)
{
    char script[512], cmd[1400];
    const char *src = getenv("DDPC_SOURCE_DIR");
    if (src)
        snprintf(script, sizeof script, "%s/tests/safetensors_interop.py", src);
    else {
        snprintf(script, sizeof script, "%s", __FILE__);
        char *slash = strrchr(script, '/');
        snprintf(slash ? slash + 1 : script, 64, "safetensors_interop.py");
    }
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s' %s '%s'", script, mode, file);
    return system(cmd);
}

static void test_python_interop(void)
{
    if (system("/usr/bin/python3 -c 'import numpy' 2>/dev/null") != 0) {
        fprintf(stderr, "test_python_interop: /usr/bin/python3 with numpy is required for the "
                        "safetensors interop test (install python3-numpy)\n");
        CHECK(!"python3 with numpy available");
        return;
    }
    CHECK_EQ_INT(write_sample(path), DDPC_OK);
    CHECK_EQ_INT(run_python("check", path), 0);

    char pypath[300];
    snprintf(pypath, sizeof pypath, "%s/py.safetensors", tmpdir);
    CHECK_EQ_INT(run_python("make", pypath), 0);
    ddpc_safetensors *f = NULL;
    CHECK_EQ_INT(ddpc_safetensors_open(&f, pypath), DDPC_OK);
    if (!f) {
        fprintf(stderr, "%s\n", ddpc_last_error());
        unlink(pypath);
        return;
    }
    CHECK_EQ_INT(ddpc_safetensors_count(f), 4);
    ddpc_st_info info;
    CHECK_EQ_INT(ddpc_safetensors_info(f, 0, &info), DDPC_OK);
    CHECK(strcmp(info.name, "layer.weight") == 0);
    CHECK(info.ndim == 2 && info.shape[0] == 3 && info.shape[1] == 4);
    for (int i = 0; i < 12; i++)
        CHECK_NEAR(((const float *)info.data)[i], 0.25 * i, 0);
    CHECK_EQ_INT(ddpc_safetensors_find(f, "ids", &info), DDPC_OK);
    CHECK(strcmp(info.dtype, "I64") == 0);
    for (int i = 0; i < 5; i++)
        CHECK_EQ_INT(((const int64_t *)info.data)[i], 10 + i);
    CHECK_EQ_INT(ddpc_safetensors_find(f, "bias", &info), DDPC_OK);
    CHECK_NEAR(((const float *)info.data)[1], 2.5, 0);
    CHECK_EQ_INT(ddpc_safetensors_find(f, "half", &info), DDPC_OK);
    CHECK(strcmp(info.dtype, "F16") == 0 && info.nbytes == 6);
    CHECK(strcmp(ddpc_safetensors_metadata(f, "format"), "pt") == 0);
    CHECK(strcmp(ddpc_safetensors_metadata(f, "note"), "h\xc3\xa9llo \xf0\x9f\x98\x80") == 0);
    ddpc_safetensors_close(f);
    unlink(pypath);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ddpc_st_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        fprintf(stderr, "mkdtemp failed\n");
        return 1;
    }
    snprintf(path, sizeof path, "%s/m.safetensors", tmpdir);
    RUN_TEST(test_round_trip);
    RUN_TEST(test_header_is_padded_to_8);
    RUN_TEST(test_write_errors);
    RUN_TEST(test_padding_and_other_dtypes);
    RUN_TEST(test_malformed_headers);
    RUN_TEST(test_malformed_layout);
    RUN_TEST(test_torn_file);
    RUN_TEST(test_failing_allocator);
    RUN_TEST(test_mutation_fuzz);
    RUN_TEST(test_python_interop);
    unlink(path);
    rmdir(tmpdir);
    return check_summary();
}
