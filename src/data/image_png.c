// SPDX-License-Identifier: MIT
/* PNG decoding with libpng's classic interface, from a buffer in memory. libpng reports errors by
 * calling an error function that must not return: ours keeps the message and jumps back to the
 * setjmp in png_run, which then destroys the read struct. Warnings (an unknown sRGB profile, a bad
 * CRC in an ancillary chunk) are dropped, as Pillow drops them; a truncated stream is an error. */
#include "data/image.h"

#include <ddpc/alloc.h>

#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    const uint8_t *buf;
    size_t len, pos;
    char msg[160]; /* libpng's message, when it failed */
} png_src;

static void on_error(png_structp png, png_const_charp msg)
{
    png_src *s = png_get_error_ptr(png);
    snprintf(s->msg, sizeof s->msg, "%s", msg);
    png_longjmp(png, 1);
}

static void on_warning(png_structp png, png_const_charp msg)
{
    (void)png, (void)msg;
}

static void on_read(png_structp png, png_bytep data, size_t n)
{
    png_src *s = png_get_io_ptr(png);
    if (n > s->len - s->pos)
        png_error(png, "the file ends early (truncated)");
    memcpy(data, s->buf + s->pos, n);
    s->pos += n;
}

/* Sets the transforms to 8-bit grey or RGB without alpha; returns the channels that yields. */
static int set_transforms(png_structp png, png_infop info)
{
    int type = png_get_color_type(png, info), depth = png_get_bit_depth(png, info);
    if (type == PNG_COLOR_TYPE_PALETTE)
        png_set_palette_to_rgb(png);
    if (type == PNG_COLOR_TYPE_GRAY && depth < 8)
        png_set_expand_gray_1_2_4_to_8(png);
    if (depth == 16)
        png_set_strip_16(png); /* the high byte, as Pillow's 16-bit unpackers keep */
    png_set_strip_alpha(png);  /* also drops a tRNS chunk's transparency */
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    return png_get_channels(png, info);
}

/* Reads the header (out == NULL) or the whole image into out (h, w, info->channels). */
static ddpc_status png_run(const char *name, const uint8_t *buf, size_t len, ddpc__image_info *info,
                           uint8_t *out)
{
    png_src src = {.buf = buf, .len = len};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, on_error, on_warning);
    png_infop pinfo = png ? png_create_info_struct(png) : NULL;
    if (!pinfo) {
        png_destroy_read_struct(png ? &png : NULL, NULL, NULL);
        return ddpc_errorf(DDPC_ENOMEM, "%s: out of memory for the PNG decoder", name);
    }
    /* Set before the jump point, only read after it: no volatile needed. */
    png_bytep *rows = NULL;
    if (out) {
        rows = ddpc_malloc((size_t)info->height * sizeof *rows);
        if (!rows) {
            png_destroy_read_struct(&png, &pinfo, NULL);
            return ddpc_errorf(DDPC_ENOMEM, "%s: out of memory for %lld row pointers", name,
                               (long long)info->height);
        }
        for (int64_t y = 0; y < info->height; y++)
            rows[y] = out + y * info->width * info->channels;
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, &pinfo, NULL);
        ddpc_free(rows);
        return ddpc_errorf(DDPC_EFORMAT, "%s: not a readable PNG image: %s", name, src.msg);
    }
    png_set_read_fn(png, &src, on_read);
    png_set_user_limits(png, DDPC__IMAGE_MAX_SIDE, DDPC__IMAGE_MAX_SIDE);
    png_read_info(png, pinfo);
    int64_t w = png_get_image_width(png, pinfo), h = png_get_image_height(png, pinfo);
    int channels = set_transforms(png, pinfo);
    if (channels != 1 && channels != 3)
        png_error(png, "an unexpected channel count after the transforms");
    if (h * w > DDPC__IMAGE_MAX_PIXELS)
        png_error(png, "more than 2^28 pixels");
    if (!out) {
        *info = (ddpc__image_info){
            .format = DDPC__IMAGE_PNG, .height = h, .width = w, .channels = channels};
    } else {
        if (h != info->height || w != info->width || channels != info->channels)
            png_error(png, "the image differs from its probe");
        png_read_image(png, rows);
        png_read_end(png, NULL);
    }
    png_destroy_read_struct(&png, &pinfo, NULL);
    ddpc_free(rows);
    return DDPC_OK;
}

ddpc_status ddpc__png_probe(const char *name, const uint8_t *buf, size_t len,
                            ddpc__image_info *info)
{
    return png_run(name, buf, len, info, NULL);
}

ddpc_status ddpc__png_decode(const char *name, const uint8_t *buf, size_t len,
                             const ddpc__image_info *info, uint8_t *out)
{
    ddpc__image_info copy = *info;
    return png_run(name, buf, len, &copy, out);
}
