// SPDX-License-Identifier: MIT
/* JPEG decoding with libjpeg-turbo from a buffer in memory. libjpeg's default error handler exits
 * the process and its warnings (a premature end of the file, corrupt entropy data) only print and
 * go on with grey blocks: both are replaced, so either jumps back to the setjmp here with the
 * library's message and the image is refused. Pillow's defaults: islow IDCT, fancy upsampling. */
#include "data/image.h"

#include <stdio.h>

#include <jpeglib.h>
#include <setjmp.h>

typedef struct {
    struct jpeg_error_mgr mgr; /* first: libjpeg hands back a pointer to it */
    jmp_buf jump;
    char msg[JMSG_LENGTH_MAX];
} jpeg_fail;

static void on_error(j_common_ptr c)
{
    jpeg_fail *f = (jpeg_fail *)c->err;
    c->err->format_message(c, f->msg);
    longjmp(f->jump, 1);
}

/* Level -1 is a warning: the decoded pixels would be partly invented, so it is an error here.
 * Levels 0 and up are trace messages, dropped. */
static void on_message(j_common_ptr c, int level)
{
    if (level < 0)
        on_error(c);
}

/* Reads the header (out == NULL) or the whole image into out (h, w, info->channels). */
static ddpc_status jpeg_run(const char *name, const uint8_t *buf, size_t len,
                            ddpc__image_info *info, uint8_t *out)
{
    struct jpeg_decompress_struct c;
    jpeg_fail fail;
    c.err = jpeg_std_error(&fail.mgr);
    fail.mgr.error_exit = on_error;
    fail.mgr.emit_message = on_message;
    fail.msg[0] = '\0';
    if (setjmp(fail.jump)) {
        jpeg_destroy_decompress(&c);
        return ddpc_errorf(DDPC_EFORMAT, "%s: not a readable JPEG image: %s", name, fail.msg);
    }
    jpeg_create_decompress(&c);
    jpeg_mem_src(&c, buf, (unsigned long)len);
    jpeg_read_header(&c, TRUE);
    int64_t h = c.image_height, w = c.image_width;
    int channels = c.jpeg_color_space == JCS_GRAYSCALE                                ? 1
                   : c.jpeg_color_space == JCS_YCbCr || c.jpeg_color_space == JCS_RGB ? 3
                                                                                      : 0;
    const char *why = channels == 0 ? "CMYK or YCCK colours are not read"
                      : h > DDPC__IMAGE_MAX_SIDE || w > DDPC__IMAGE_MAX_SIDE ? "a side over 32768"
                      : h * w > DDPC__IMAGE_MAX_PIXELS                       ? "over 2^28 pixels"
                                                                             : NULL;
    if (why) {
        jpeg_destroy_decompress(&c);
        return ddpc_errorf(DDPC_EFORMAT, "%s: JPEG image of %lldx%lld pixels: %s", name,
                           (long long)w, (long long)h, why);
    }
    if (!out) {
        *info = (ddpc__image_info){
            .format = DDPC__IMAGE_JPEG, .height = h, .width = w, .channels = channels};
        jpeg_destroy_decompress(&c);
        return DDPC_OK;
    }
    c.out_color_space = info->channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_start_decompress(&c);
    if ((int64_t)c.output_height != info->height || (int64_t)c.output_width != info->width ||
        c.output_components != info->channels) {
        jpeg_destroy_decompress(&c);
        return ddpc_errorf(DDPC_EFORMAT, "%s: the JPEG image differs from its header", name);
    }
    while (c.output_scanline < c.output_height) {
        JSAMPROW row = out + (int64_t)c.output_scanline * info->width * info->channels;
        jpeg_read_scanlines(&c, &row, 1);
    }
    jpeg_finish_decompress(&c);
    jpeg_destroy_decompress(&c);
    return DDPC_OK;
}

ddpc_status ddpc__jpeg_probe(const char *name, const uint8_t *buf, size_t len,
                             ddpc__image_info *info)
{
    return jpeg_run(name, buf, len, info, NULL);
}

ddpc_status ddpc__jpeg_decode(const char *name, const uint8_t *buf, size_t len,
                              const ddpc__image_info *info, uint8_t *out)
{
    ddpc__image_info copy = *info;
    return jpeg_run(name, buf, len, &copy, out);
}
