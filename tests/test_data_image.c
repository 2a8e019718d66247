// SPDX-License-Identifier: MIT
/* Tests for src/data/image_*.c and imagefolder*.c: the resize and the luma against hand
 * computations, the decoders on tests/fuzz/seeds/fuzz_image (a palette PNG, a 16-bit PNG, RGB
 * and grey JPEGs), refusals (a truncated JPEG, an oversized PNG header, bytes of neither format),
 * and a folder built in a mkdtemp directory: classes, labels, names, a held-out split's class
 * check, no leaks on any path, an allocation failing at each point. */
#include <ddpc/alloc.h>
#include <ddpc/data.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "check.h"
#include "data/image.h"

#include <jpeglib.h>

static char tmpdir[64];
static char seeds[512];

/* The file's bytes (malloc'd; *len its size), or NULL. */
static uint8_t *slurp(const char *name, size_t *len)
{
    char path[768];
    snprintf(path, sizeof path, "%s/%s", seeds, name);
    FILE *f = fopen(path, "rb");
    uint8_t *buf = malloc(1 << 16);
    *len = f && buf ? fread(buf, 1, 1 << 16, f) : 0;
    if (f)
        fclose(f);
    return buf;
}

static void test_resize_by_hand(void)
{
    /* 2x2 -> 4x4: source y for rows 0..3 is -0.25 (clamped to 0), 0.25, 0.75, 1.25 (row 1, and
     * row 1 again as its neighbour), likewise x; e.g. (1, 1) = 0.75 * (0.75*0 + 0.25*100) +
     * 0.25 * (0.75*200 + 0.25*50) = 59.375 -> 59, and (3, 1) = 162.5 -> 163 (halves round up). */
    const uint8_t in[4] = {0, 100, 200, 50};
    const uint8_t want[16] = {0, 25, 75, 100, 50, 59, 78, 88, 150, 128, 84, 63, 200, 163, 88, 50};
    uint8_t out[16];
    float scratch[4];
    ddpc__image_to_planar(in, 2, 2, 1, out, 1, 4, 4, scratch);
    for (int i = 0; i < 16; i++)
        CHECK_EQ_INT(out[i], want[i]);
    /* 4x4 -> 2x2: source 0.5 and 2.5, the mean of each 2x2 block: 2.5, 4.5, 10.5, 12.5 round up */
    uint8_t ramp[16], small[4];
    float s16[16];
    for (int i = 0; i < 16; i++)
        ramp[i] = (uint8_t)i;
    ddpc__image_to_planar(ramp, 4, 4, 1, small, 1, 2, 2, s16);
    const uint8_t want_small[4] = {3, 5, 11, 13};
    for (int i = 0; i < 4; i++)
        CHECK_EQ_INT(small[i], want_small[i]);
}

static void test_channels_by_hand(void)
{
    /* Pillow: Image.new('RGB', (3, 1)) of red, green, blue converts to 'L' as 76, 150, 29. */
    const uint8_t rgb[9] = {255, 0, 0, 0, 255, 0, 0, 0, 255};
    uint8_t grey[3], planar[9];
    float scratch[3];
    ddpc__image_to_planar(rgb, 1, 3, 3, grey, 1, 1, 3, scratch);
    CHECK_EQ_INT(grey[0], 76);
    CHECK_EQ_INT(grey[1], 150);
    CHECK_EQ_INT(grey[2], 29);
    ddpc__image_to_planar(rgb, 1, 3, 3, planar, 3, 1, 3, scratch); /* interleaved to planar */
    const uint8_t want[9] = {255, 0, 0, 0, 255, 0, 0, 0, 255};
    for (int i = 0; i < 9; i++)
        CHECK_EQ_INT(planar[i], want[i]);
    const uint8_t g[2] = {7, 9};
    uint8_t rep[6];
    ddpc__image_to_planar(g, 1, 2, 1, rep, 3, 1, 2, scratch); /* grey repeated */
    for (int i = 0; i < 6; i++)
        CHECK_EQ_INT(rep[i], g[i % 2]);
}

static void test_decode_seeds(void)
{
    const struct {
        const char *name;
        int format, h, w, c;
    } cases[] = {{"palette32.png", DDPC__IMAGE_PNG, 32, 32, 3},
                 {"rgb16bit32.png", DDPC__IMAGE_PNG, 32, 32, 3},
                 {"rgb32.jpg", DDPC__IMAGE_JPEG, 32, 32, 3},
                 {"grey16.jpg", DDPC__IMAGE_JPEG, 16, 16, 1}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        size_t len;
        uint8_t *buf = slurp(cases[k].name, &len);
        ddpc__image_info info;
        CHECK(len > 0);
        CHECK_EQ_INT(ddpc__image_probe(cases[k].name, buf, len, &info), DDPC_OK);
        CHECK_EQ_INT(info.format, cases[k].format);
        CHECK_EQ_INT(info.height, cases[k].h);
        CHECK_EQ_INT(info.width, cases[k].w);
        CHECK_EQ_INT(info.channels, cases[k].c);
        uint8_t *out = malloc((size_t)(info.height * info.width * info.channels));
        CHECK_EQ_INT(ddpc__image_decode(cases[k].name, buf, len, &info, out), DDPC_OK);
        free(out);
        free(buf);
    }
}

static void test_refusals(void)
{
    size_t len;
    uint8_t *buf = slurp("rgb32.jpg", &len);
    ddpc__image_info info;
    CHECK_EQ_INT(ddpc__image_probe("cut.jpg", buf, len, &info), DDPC_OK);
    uint8_t *out = malloc((size_t)(info.height * info.width * 3));
    CHECK_EQ_INT(ddpc__image_decode("cut.jpg", buf, len - 300, &info, out), DDPC_EFORMAT);
    CHECK_STR_CONTAINS(ddpc_last_error(), "cut.jpg: not a readable JPEG image: Premature end");
    free(out);
    free(buf);
    /* A valid IHDR of 40000 x 40000 pixels: refused by the side limit before any allocation. */
    uint8_t png[33] = {0x89, 'P', 'N', 'G',  '\r', '\n', 0x1a, '\n', 0,    0, 0, 13, 'I', 'H', 'D',
                       'R',  0,   0,   0x9c, 0x40, 0,    0,    0x9c, 0x40, 8, 2, 0,  0,   0};
    uLong crc = crc32(0, png + 12, 17);
    for (int i = 0; i < 4; i++)
        png[29 + i] = (uint8_t)(crc >> (24 - 8 * i));
    CHECK_EQ_INT(ddpc__image_probe("big.png", png, sizeof png, &info), DDPC_EFORMAT);
    CHECK_STR_CONTAINS(ddpc_last_error(), "big.png: not a readable PNG image");
    CHECK_EQ_INT(ddpc__image_probe("gif.png", (const uint8_t *)"GIF89a", 6, &info), DDPC_EFORMAT);
    CHECK_STR_CONTAINS(ddpc_last_error(), "gif.png: neither a PNG nor a JPEG image");
}

/* A 8x8 CMYK JPEG in memory (free() it). */
static uint8_t *cmyk_jpeg(size_t *len)
{
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr e;
    unsigned char *buf = NULL;
    unsigned long n = 0;
    c.err = jpeg_std_error(&e);
    jpeg_create_compress(&c);
    jpeg_mem_dest(&c, &buf, &n);
    c.image_width = 8, c.image_height = 8, c.input_components = 4, c.in_color_space = JCS_CMYK;
    jpeg_set_defaults(&c);
    jpeg_start_compress(&c, TRUE);
    unsigned char row[8 * 4] = {0};
    JSAMPROW r = row;
    while (c.next_scanline < 8)
        jpeg_write_scanlines(&c, &r, 1);
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    *len = n;
    return buf;
}

static void test_cmyk_refused(void)
{
    size_t len;
    uint8_t *buf = cmyk_jpeg(&len);
    ddpc__image_info info;
    CHECK_EQ_INT(ddpc__image_probe("ink.jpg", buf, len, &info), DDPC_EFORMAT);
    CHECK_STR_CONTAINS(ddpc_last_error(), "ink.jpg: JPEG image of 8x8 pixels: CMYK");
    free(buf);
}

static void put(const char *rel, const char *seed)
{
    char path[256];
    size_t len;
    uint8_t *buf = slurp(seed, &len);
    snprintf(path, sizeof path, "%s/%s", tmpdir, rel);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(buf, 1, len, f);
        fclose(f);
    }
    free(buf);
}

static void test_folder(void)
{
    char root[128], path[192];
    const char *dirs[] = {"train", "train/b_cls", "train/a_cls", "val", "val/a_cls", "val/c_cls"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", tmpdir, dirs[i]);
        mkdir(path, 0700);
    }
    put("train/a_cls/2.png", "palette32.png");
    put("train/a_cls/1.jpg", "rgb32.jpg");
    put("train/b_cls/x.JPEG", "rgb32.jpg");
    put("train/b_cls/notes.txt", "grey16.jpg");
    put("val/a_cls/1.png", "palette32.png");
    put("val/c_cls/1.png", "palette32.png");
    int64_t live = ddpc_alloc_live();
    ddpc_imagefolder_config cfg = ddpc_imagefolder_config_default();
    ddpc_imagefolder_info info;
    ddpc_dataset *d = NULL, *v = NULL;
    snprintf(root, sizeof root, "%s/train", tmpdir);
    CHECK_EQ_INT(ddpc_dataset_imagefolder_create(&d, root, &cfg, NULL, &info), DDPC_OK);
    if (!d)
        return;
    CHECK_EQ_INT(ddpc_dataset_size(d), 3);
    CHECK_EQ_INT(ddpc_dataset_num_classes(d), 2);
    CHECK(strcmp(ddpc_dataset_class_name(d, 0), "a_cls") == 0);
    CHECK(strcmp(ddpc_dataset_class_name(d, 1), "b_cls") == 0);
    CHECK(ddpc_dataset_class_name(d, 2) == NULL);
    CHECK_EQ_INT(info.skipped, 1);
    CHECK_EQ_INT(info.bytes, 3 * 3 * 32 * 32);
    const uint8_t *labels = ddpc_dataset_labels(d);
    CHECK(labels[0] == 0 && labels[1] == 0 && labels[2] == 1); /* 1.jpg, 2.png, x.JPEG */
    float x[3 * 32 * 32];
    int64_t i = 1;
    CHECK_EQ_INT(ddpc_dataset_get_batch(d, &i, 1, x, NULL, NULL), DDPC_OK);
    for (int j = 0; j < 3 * 32 * 32; j++)
        CHECK(x[j] >= 0.0f && x[j] <= 1.0f); /* ToTensor alone by default */
    snprintf(root, sizeof root, "%s/val", tmpdir);
    CHECK_EQ_INT(ddpc_dataset_imagefolder_create(&v, root, &cfg, d, NULL), DDPC_EFORMAT);
    CHECK_STR_CONTAINS(ddpc_last_error(), "val: no class folder 'b_cls'");
    /* The pixels do not depend on the decoding threads. */
    ddpc_dataset *one = NULL;
    snprintf(root, sizeof root, "%s/train", tmpdir);
    cfg.threads = 1;
    CHECK_EQ_INT(ddpc_dataset_imagefolder_create(&one, root, &cfg, NULL, NULL), DDPC_OK);
    cfg.threads = 3;
    CHECK_EQ_INT(ddpc_dataset_imagefolder_create(&v, root, &cfg, NULL, NULL), DDPC_OK);
    float a[3 * 3 * 32 * 32], b[3 * 3 * 32 * 32];
    const int64_t all[3] = {0, 1, 2};
    if (one && v) {
        CHECK_EQ_INT(ddpc_dataset_get_batch(one, all, 3, a, NULL, NULL), DDPC_OK);
        CHECK_EQ_INT(ddpc_dataset_get_batch(v, all, 3, b, NULL, NULL), DDPC_OK);
        CHECK(memcmp(a, b, sizeof a) == 0);
    }
    ddpc_dataset_destroy(one);
    ddpc_dataset_destroy(v);
    cfg.threads = 0;
    ddpc_dataset_destroy(d);
    CHECK_EQ_INT(ddpc_alloc_live(), live);
    /* Every allocation failing in turn: an error, never a crash or a leak. */
    snprintf(root, sizeof root, "%s/train", tmpdir);
    for (int64_t n = 0; n < 200; n++) {
        ddpc_alloc_fail_after(n);
        ddpc_status s = ddpc_dataset_imagefolder_create(&d, root, &cfg, NULL, NULL);
        ddpc_alloc_fail_after(-1);
        ddpc_dataset_destroy(d);
        CHECK_EQ_INT(ddpc_alloc_live(), live);
        if (s == DDPC_OK)
            break;
        CHECK_EQ_INT(s, DDPC_ENOMEM);
    }
}

int main(void)
{
    const char *src = getenv("DDPC_SOURCE_DIR");
    snprintf(seeds, sizeof seeds, "%s/tests/fuzz/seeds/fuzz_image", src ? src : ".");
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ddpc_image_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        fprintf(stderr, "mkdtemp failed\n");
        return 1;
    }
    RUN_TEST(test_resize_by_hand);
    RUN_TEST(test_channels_by_hand);
    RUN_TEST(test_decode_seeds);
    RUN_TEST(test_refusals);
    RUN_TEST(test_cmyk_refused);
    RUN_TEST(test_folder);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    return check_summary();
}
