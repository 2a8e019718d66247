// SPDX-License-Identifier: MIT
/* Tests for src/data/text.c: a mkdtemp directory of text files plus a *.dat file, a symlink and a
 * subdirectory that must be skipped; split sizes, window contents, held-out split, errors; and
 * the installed fortunes directory as a smoke test. */
#include <ddpc/alloc.h>
#include <ddpc/data.h>

#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

static char tmpdir[64];

static void path_in(char *buf, size_t size, const char *name)
{
    snprintf(buf, size, "%s/%s", tmpdir, name);
}

static void write_text(const char *name, const char *text)
{
    char path[256];
    path_in(path, sizeof path, name);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* b.txt + a.txt (read as a.txt then b.txt) = "0123456789" "abcdefghij" (20 bytes), plus
 * skipped files: c.dat, a link to a.txt, and a subdirectory holding a file. */
static void make_corpus(void)
{
    write_text("b.txt", "abcdefghij");
    write_text("a.txt", "0123456789");
    write_text("c.dat", "DATDATDAT");
    char target[256], link[256], sub[256];
    path_in(target, sizeof target, "a.txt");
    path_in(link, sizeof link, "a.u8");
    CHECK(symlink(target, link) == 0);
    path_in(sub, sizeof sub, "sub");
    CHECK(mkdir(sub, 0700) == 0);
    write_text("sub/x.txt", "SUBDIR");
}

static void test_dir_train_split_windows(void)
{
    ddpc_dataset *d = NULL;
    /* 20 bytes, val 0.25: train = first 15 bytes "0123456789abcde"; T = 4 -> (15-1)/4 = 3. */
    CHECK_EQ_INT(ddpc_dataset_text_create(&d, tmpdir, 4, 0.25, true), DDPC_OK);
    if (!d)
        return;
    CHECK_EQ_INT(ddpc_dataset_kind_of(d), DDPC_DATASET_TOKENS);
    CHECK_EQ_INT(ddpc_dataset_size(d), 3);
    CHECK_EQ_INT(ddpc_dataset_num_classes(d), 256);
    CHECK(ddpc_dataset_labels(d) == NULL);
    int64_t shape[3];
    ddpc_dataset_sample_shape(d, shape);
    CHECK_EQ_INT(shape[0], 4);
    int64_t idx[3] = {2, 0, 1};
    int32_t tok[12], tgt[12];
    CHECK_EQ_INT(ddpc_dataset_get_batch(d, idx, 3, NULL, tok, tgt), DDPC_OK);
    const char *want_tok = "89ab" "0123" "4567", *want_tgt = "9abc" "1234" "5678";
    for (int i = 0; i < 12; i++) {
        CHECK_EQ_INT(tok[i], want_tok[i]);
        CHECK_EQ_INT(tgt[i], want_tgt[i]);
    }
    int64_t out_of_range = 3;
    CHECK_EQ_INT(ddpc_dataset_get_batch(d, &out_of_range, 1, NULL, tok, tgt), DDPC_EINVAL);
    ddpc_dataset_destroy(d);
}

static void test_dir_val_split(void)
{
    ddpc_dataset *d = NULL;
    /* held-out = last 5 bytes "fghij"; T = 2 -> (5-1)/2 = 2 samples. */
    CHECK_EQ_INT(ddpc_dataset_text_create(&d, tmpdir, 2, 0.25, false), DDPC_OK);
    if (!d)
        return;
    CHECK_EQ_INT(ddpc_dataset_size(d), 2);
    int64_t idx[2] = {0, 1};
    int32_t tok[4], tgt[4];
    CHECK_EQ_INT(ddpc_dataset_get_batch(d, idx, 2, NULL, tok, tgt), DDPC_OK);
    for (int i = 0; i < 4; i++) {
        CHECK_EQ_INT(tok[i], "fghi"[i]);
        CHECK_EQ_INT(tgt[i], "ghij"[i]);
    }
    ddpc_dataset_destroy(d);
    /* 5 bytes cannot hold a window of block_size + 1 = 6. */
    CHECK_EQ_INT(ddpc_dataset_text_create(&d, tmpdir, 5, 0.25, false), DDPC_EINVAL);
    CHECK(d == NULL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "held-out split");
    CHECK_STR_CONTAINS(ddpc_last_error(), "block_size+1 = 6");
    /* val_fraction 0 leaves the held-out split empty. */
    CHECK_EQ_INT(ddpc_dataset_text_create(&d, tmpdir, 1, 0.0, false), DDPC_EINVAL);
}

static void test_single_file(void)
{
    char path[256];
    path_in(path, sizeof path, "b.txt");
    ddpc_dataset *d = NULL;
    CHECK_EQ_INT(ddpc_dataset_text_create(&d, path, 3, 0.0, true), DDPC_OK);
    if (!d)
        return;
    CHECK_EQ_INT(ddpc_dataset_size(d), 3); /* (10 - 1) / 3 */
    int64_t last = 2;
    int32_t tgt[3];
    CHECK_EQ_INT(ddpc_dataset_get_batch(d, &last, 1, NULL, NULL, tgt), DDPC_OK);
    CHECK_EQ_INT(tgt[0], 'h');
    CHECK_EQ_INT(tgt[2], 'j');
    ddpc_dataset_destroy(d);
}

static void test_errors(void)
{
    ddpc_dataset *d = NULL;
    CHECK_EQ_INT(ddpc_dataset_text_create(&d, "/nonexistent/corpus.txt", 8, 0.1, true), DDPC_EIO);
    CHECK_STR_CONTAINS(ddpc_last_error(), "/nonexistent/corpus.txt");
    CHECK_EQ_INT(ddpc_dataset_text_create(&d, tmpdir, 8, 1.0, true), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "val_fraction");
    CHECK_EQ_INT(ddpc_dataset_text_create(&d, tmpdir, 0, 0.1, true), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "block_size");
    char empty[256];
    path_in(empty, sizeof empty, "sub/empty");
    CHECK(mkdir(empty, 0700) == 0);
    CHECK_EQ_INT(ddpc_dataset_text_create(&d, empty, 8, 0.1, true), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), empty);
    CHECK_STR_CONTAINS(ddpc_last_error(), "no text");
    rmdir(empty);
    CHECK(d == NULL);
}

static void test_fortunes_smoke(void)
{
    ddpc_dataset *d = NULL;
    CHECK_EQ_INT(ddpc_dataset_text_create(&d, "/usr/share/games/fortunes", 64, 0.1, true), DDPC_OK);
    if (!d)
        return;
    CHECK(ddpc_dataset_size(d) > 10000);
    int64_t idx[2] = {0, ddpc_dataset_size(d) - 1};
    int32_t tok[128], tgt[128];
    CHECK_EQ_INT(ddpc_dataset_get_batch(d, idx, 2, NULL, tok, tgt), DDPC_OK);
    for (int i = 0; i < 128; i++)
        CHECK(tok[i] >= 0 && tok[i] < 256 && tgt[i] >= 0 && tgt[i] < 256);
    for (int i = 0; i < 63; i++)
        CHECK_EQ_INT(tgt[i], tok[i + 1]);
    ddpc_dataset_destroy(d);
}

static void test_no_leaks(void)
{
    CHECK_EQ_INT(ddpc_alloc_live(), 0);
}

static void remove_corpus(void)
{
    const char *names[] = {"sub/x.txt", "sub", "a.txt", "b.txt", "c.dat", "a.u8"};
    char path[256];
    for (int i = 0; i < 6; i++) {
        path_in(path, sizeof path, names[i]);
        if (unlink(path) != 0)
            rmdir(path);
    }
    rmdir(tmpdir);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ddpc_text_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        fprintf(stderr, "mkdtemp failed\n");
        return 1;
    }
    make_corpus();
    RUN_TEST(test_dir_train_split_windows);
    RUN_TEST(test_dir_val_split);
    RUN_TEST(test_single_file);
    RUN_TEST(test_errors);
    RUN_TEST(test_fortunes_smoke);
    RUN_TEST(test_no_leaks);
    remove_corpus();
    return check_summary();
}
