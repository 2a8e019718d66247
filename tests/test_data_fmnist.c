// SPDX-License-Identifier: MIT
/* Tests for src/data/fmnist.c and src/data/idx.c: the real Fashion-MNIST (loaded once), and
 * malformed copies in a mkdtemp directory: truncated gzip, corrupt gzip, bad magic, bad dims,
 * count mismatch, label > 9, missing directory. */
#include <ddpc/alloc.h>
#include <ddpc/data.h>

#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

#include "check.h"

#define FMNIST_DIR "/usr/share/datasets/fashion-mnist"

static ddpc_dataset *train_set;
static char tmpdir[64];

static void test_train_shapes_and_labels(void)
{
    CHECK(train_set != NULL);
    if (!train_set)
        return;
    CHECK_EQ_INT(ddpc_dataset_kind_of(train_set), DDPC_DATASET_IMAGES);
    CHECK_EQ_INT(ddpc_dataset_size(train_set), 60000);
    CHECK_EQ_INT(ddpc_dataset_num_classes(train_set), 10);
    int64_t shape[3];
    ddpc_dataset_sample_shape(train_set, shape);
    CHECK_EQ_INT(shape[0], 1);
    CHECK_EQ_INT(shape[1], 28);
    CHECK_EQ_INT(shape[2], 28);
    const uint8_t *labels = ddpc_dataset_labels(train_set);
    const uint8_t first[5] = {9, 0, 0, 3, 0};
    for (int i = 0; i < 5; i++)
        CHECK_EQ_INT(labels[i], first[i]);
    int64_t counts[10] = {0};
    for (int64_t i = 0; i < 60000; i++)
        counts[labels[i]]++;
    for (int k = 0; k < 10; k++)
        CHECK_EQ_INT(counts[k], 6000);
    int64_t idx[2] = {0, 3};
    int32_t targets[2];
    CHECK_EQ_INT(ddpc_dataset_get_batch(train_set, idx, 2, NULL, NULL, targets), DDPC_OK);
    CHECK_EQ_INT(targets[0], 9);
    CHECK_EQ_INT(targets[1], 3);
}

static void test_test_split(void)
{
    ddpc_dataset *d = NULL;
    CHECK_EQ_INT(ddpc_dataset_fmnist_create(&d, FMNIST_DIR, false), DDPC_OK);
    if (!d)
        return;
    CHECK_EQ_INT(ddpc_dataset_size(d), 10000);
    const uint8_t first[5] = {9, 2, 1, 1, 6};
    for (int i = 0; i < 5; i++)
        CHECK_EQ_INT(ddpc_dataset_labels(d)[i], first[i]);
    ddpc_dataset_destroy(d);
}

/* The first train image's raw bytes, read straight from the file. */
static int raw_first_image(uint8_t raw[784])
{
    gzFile f = gzopen(FMNIST_DIR "/train-images-idx3-ubyte.gz", "rb");
    uint8_t header[16];
    int ok = f && gzread(f, header, 16) == 16 && gzread(f, raw, 784) == 784;
    if (f)
        gzclose(f);
    return ok;
}

static void test_pixel_normalisation(void)
{
    if (!train_set)
        return;
    uint8_t raw[784];
    CHECK(raw_first_image(raw));
    float x[784];
    int64_t zero = 0;
    CHECK_EQ_INT(ddpc_dataset_get_batch(train_set, &zero, 1, x, NULL, NULL), DDPC_OK);
    for (int j = 0; j < 784; j++)
        CHECK_NEAR(x[j], ((float)raw[j] / 255.0f - 0.2860f) / 0.3530f, 1e-6);
    /* Over the whole train set the normalised pixels have mean ~0 and std ~1. */
    enum { CHUNK = 500 };
    float *buf = malloc(sizeof(float) * CHUNK * 784);
    int64_t idx[CHUNK];
    double sum = 0, sumsq = 0;
    for (int64_t start = 0; start < 60000; start += CHUNK) {
        for (int i = 0; i < CHUNK; i++)
            idx[i] = start + i;
        CHECK_EQ_INT(ddpc_dataset_get_batch(train_set, idx, CHUNK, buf, NULL, NULL), DDPC_OK);
        for (int64_t j = 0; j < (int64_t)CHUNK * 784; j++) {
            sum += buf[j];
            sumsq += (double)buf[j] * buf[j];
        }
    }
    double n = 60000.0 * 784, mean = sum / n;
    CHECK_NEAR(mean, 0.0, 2e-3);
    CHECK_NEAR(sqrt(sumsq / n - mean * mean), 1.0, 2e-3);
    free(buf);
}

static void test_get_batch_bounds(void)
{
    if (!train_set)
        return;
    float x[784 * 2];
    int32_t t[2];
    int64_t bad[2] = {0, 60000};
    CHECK_EQ_INT(ddpc_dataset_get_batch(train_set, bad, 2, x, NULL, t), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "60000");
    int64_t neg = -1;
    CHECK_EQ_INT(ddpc_dataset_get_batch(train_set, &neg, 1, x, NULL, t), DDPC_EINVAL);
    CHECK_EQ_INT(ddpc_dataset_get_batch(train_set, NULL, -1, x, NULL, t), DDPC_EINVAL);
    CHECK_EQ_INT(ddpc_dataset_get_batch(train_set, NULL, 0, x, NULL, t), DDPC_OK);
}

static void test_missing_dir_names_path(void)
{
    ddpc_dataset *d = (ddpc_dataset *)1;
    CHECK_EQ_INT(ddpc_dataset_fmnist_create(&d, "/nonexistent/fmnist", true), DDPC_EIO);
    CHECK(d == NULL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "/nonexistent/fmnist/train-");
    CHECK_STR_CONTAINS(ddpc_last_error(), "-ubyte.gz");
    CHECK_STR_CONTAINS(ddpc_last_error(), "No such file");
}

/* Copies the first `limit` bytes (all if < 0) of FMNIST_DIR/name to tmpdir/name. */
static void copy_prefix(const char *name, long limit)
{
    char src[512], dst[512];
    snprintf(src, sizeof src, "%s/%s", FMNIST_DIR, name);
    snprintf(dst, sizeof dst, "%s/%s", tmpdir, name);
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    CHECK(in && out);
    char buf[65536];
    long done = 0;
    size_t got;
    while (in && out && (limit < 0 || done < limit) && (got = fread(buf, 1, sizeof buf, in)) > 0) {
        if (limit >= 0 && done + (long)got > limit)
            got = (size_t)(limit - done);
        fwrite(buf, 1, got, out);
        done += (long)got;
    }
    if (in)
        fclose(in);
    if (out)
        fclose(out);
}

static void test_truncated_gzip(void)
{
    copy_prefix("train-labels-idx1-ubyte.gz", -1);
    copy_prefix("train-images-idx3-ubyte.gz", 100000);
    ddpc_dataset *d = NULL;
    CHECK_EQ_INT(ddpc_dataset_fmnist_create(&d, tmpdir, true), DDPC_EFORMAT);
    CHECK(d == NULL);
    char expect[256];
    snprintf(expect, sizeof expect, "%s/train-images-idx3-ubyte.gz: truncated: expected 47040000 "
             "pixel bytes, got ", tmpdir);
    CHECK_STR_CONTAINS(ddpc_last_error(), expect);
}

/* Writes a small gzip'd idx file tmpdir/<split>-<kind>-ubyte.gz with the given header words. */
static void write_idx(const char *name, const uint32_t *words, int n_words, const uint8_t *payload,
                      size_t len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    gzFile f = gzopen(path, "wb");
    CHECK(f != NULL);
    for (int i = 0; i < n_words; i++) {
        uint8_t be[4] = {(uint8_t)(words[i] >> 24), (uint8_t)(words[i] >> 16),
                         (uint8_t)(words[i] >> 8), (uint8_t)words[i]};
        gzwrite(f, be, 4);
    }
    if (len)
        gzwrite(f, payload, (unsigned)len);
    gzclose(f);
}

/* A 3-sample t10k set in tmpdir, with the image magic, rows and label count/values given. */
static void write_small(uint32_t img_magic, uint32_t rows, uint32_t n_labels, uint8_t bad_label)
{
    static uint8_t pixels[3 * 28 * 28];
    uint8_t labels[4] = {1, 2, bad_label, 4};
    uint32_t ih[4] = {img_magic, 3, rows, 28}, lh[2] = {0x801, n_labels};
    write_idx("t10k-images-idx3-ubyte.gz", ih, 4, pixels, 3 * rows * 28);
    write_idx("t10k-labels-idx1-ubyte.gz", lh, 2, labels, n_labels);
}

static ddpc_status load_small(void)
{
    ddpc_dataset *d = NULL;
    ddpc_status s = ddpc_dataset_fmnist_create(&d, tmpdir, false);
    ddpc_dataset_destroy(d);
    return s;
}

static void test_malformed_small_files(void)
{
    write_small(0x803, 28, 3, 3);
    CHECK_EQ_INT(load_small(), DDPC_OK);

    write_small(0x804, 28, 3, 3);
    CHECK_EQ_INT(load_small(), DDPC_EFORMAT);
    CHECK_STR_CONTAINS(ddpc_last_error(), "t10k-images-idx3-ubyte.gz: bad magic 0x00000804");

    write_small(0x803, 27, 3, 3);
    CHECK_EQ_INT(load_small(), DDPC_EFORMAT);
    CHECK_STR_CONTAINS(ddpc_last_error(), "t10k-images-idx3-ubyte.gz: images are 27x28");

    write_small(0x803, 28, 4, 3);
    CHECK_EQ_INT(load_small(), DDPC_EFORMAT);
    CHECK_STR_CONTAINS(ddpc_last_error(), "3 images but");
    CHECK_STR_CONTAINS(ddpc_last_error(), "has 4 labels");

    write_small(0x803, 28, 3, 10);
    CHECK_EQ_INT(load_small(), DDPC_EFORMAT);
    CHECK_STR_CONTAINS(ddpc_last_error(), "t10k-labels-idx1-ubyte.gz: label 10 at index 2");

    /* Trailing bytes after the promised payload. */
    uint32_t lh[2] = {0x801, 2};
    uint8_t labels[3] = {1, 2, 3};
    write_small(0x803, 28, 3, 3);
    write_idx("t10k-labels-idx1-ubyte.gz", lh, 2, labels, 3);
    CHECK_EQ_INT(load_small(), DDPC_EFORMAT);
    CHECK_STR_CONTAINS(ddpc_last_error(), "trailing data");
}

static void test_corrupt_gzip(void)
{
    /* Flip bytes inside the deflate stream of a copy of the real labels file. */
    write_small(0x803, 28, 3, 3);
    copy_prefix("t10k-labels-idx1-ubyte.gz", -1);
    char path[512];
    snprintf(path, sizeof path, "%s/t10k-labels-idx1-ubyte.gz", tmpdir);
    FILE *f = fopen(path, "r+b");
    CHECK(f != NULL);
    if (!f)
        return;
    fseek(f, 2000, SEEK_SET);
    uint8_t junk[64];
    for (int i = 0; i < 64; i++)
        junk[i] = (uint8_t)(i * 37 + 11);
    fwrite(junk, 1, sizeof junk, f);
    fclose(f);
    CHECK_EQ_INT(load_small(), DDPC_EFORMAT);
    CHECK_STR_CONTAINS(ddpc_last_error(), path);
    CHECK_STR_CONTAINS(ddpc_last_error(), "corrupt gzip data");
}

static void test_no_leaks(void)
{
    /* Only the train set remains: its struct, labels and pixels. */
    CHECK_EQ_INT(ddpc_alloc_live(), train_set ? 3 : 0);
}

static void remove_tmpdir(void)
{
    const char *names[] = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                           "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"};
    char path[512];
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", tmpdir, names[i]);
        unlink(path);
    }
    rmdir(tmpdir);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ddpc_fmnist_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        fprintf(stderr, "mkdtemp failed\n");
        return 1;
    }
    if (ddpc_dataset_fmnist_create(&train_set, FMNIST_DIR, true) != DDPC_OK)
        fprintf(stderr, "loading %s: %s\n", FMNIST_DIR, ddpc_last_error());
    RUN_TEST(test_train_shapes_and_labels);
    RUN_TEST(test_test_split);
    RUN_TEST(test_pixel_normalisation);
    RUN_TEST(test_get_batch_bounds);
    RUN_TEST(test_missing_dir_names_path);
    RUN_TEST(test_truncated_gzip);
    RUN_TEST(test_malformed_small_files);
    RUN_TEST(test_corrupt_gzip);
    RUN_TEST(test_no_leaks);
    ddpc_dataset_destroy(train_set);
    remove_tmpdir();
    return check_summary();
}
