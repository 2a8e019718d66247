// SPDX-License-Identifier: MIT
/* Private to src/data: PNG (libpng) and JPEG (libjpeg-turbo) decoding of outside bytes into 8-bit
 * pixels, and the two conversions an image folder needs (ITU-R 601 grey, bilinear resize).
 * Invariant: a decoder never writes past the size its probe reported, and refuses an image whose
 * sides exceed DDPC__IMAGE_MAX_SIDE or pixels DDPC__IMAGE_MAX_PIXELS before decoding it. */
#ifndef DDPC_DATA_IMAGE_H
#define DDPC_DATA_IMAGE_H

#include <ddpc/status.h>

#include <stddef.h>
#include <stdint.h>

enum { DDPC__IMAGE_MAX_SIDE = 1 << 15 };
#define DDPC__IMAGE_MAX_PIXELS ((int64_t)1 << 28)

typedef enum { DDPC__IMAGE_PNG, DDPC__IMAGE_JPEG } ddpc__image_format;

typedef struct {
    ddpc__image_format format;
    int64_t height, width;
    int channels; /* what the decoder writes: 1 (grey) or 3 (RGB); alpha is dropped */
} ddpc__image_info;

/* Reads the header of the image in buf[0, len) (the format from its magic bytes, not the file's
 * name). DDPC_EFORMAT naming `name`: neither PNG nor JPEG, a corrupt header, a CMYK JPEG, or an
 * image over the limits above. */
ddpc_status ddpc__image_probe(const char *name, const uint8_t *buf, size_t len,
                              ddpc__image_info *info);

/* Decodes the image in buf[0, len) into out (height, width, info->channels), interleaved, 8 bits:
 * PNG palettes, low bit depths and transparency are expanded, 16-bit samples keep their high
 * byte (as Pillow's convert does), alpha is dropped. A corrupt or truncated file, or a libjpeg
 * warning (a premature end, say), is DDPC_EFORMAT naming `name` with the decoder's message.
 * `info` must be this buffer's probe. Thread safe. */
ddpc_status ddpc__image_decode(const char *name, const uint8_t *buf, size_t len,
                               const ddpc__image_info *info, uint8_t *out);
/* The two decoders behind it (image_png.c, image_jpeg.c), same contracts. */
ddpc_status ddpc__png_probe(const char *name, const uint8_t *buf, size_t len,
                            ddpc__image_info *info);
ddpc_status ddpc__png_decode(const char *name, const uint8_t *buf, size_t len,
                             const ddpc__image_info *info, uint8_t *out);
ddpc_status ddpc__jpeg_probe(const char *name, const uint8_t *buf, size_t len,
                             ddpc__image_info *info);
ddpc_status ddpc__jpeg_decode(const char *name, const uint8_t *buf, size_t len,
                              const ddpc__image_info *info, uint8_t *out);

/* out (c_out, oh, ow), planar, from in (h, w, c_in) interleaved: grey to RGB repeats the grey
 * value; RGB to grey is Pillow's convert('L') (ITU-R 601-2 luma in 16-bit fixed point:
 * (19595 R + 38470 G + 7471 B + 32768) >> 16); then, when (oh, ow) != (h, w), a bilinear resize
 * with half-pixel centres (torch.nn.functional.interpolate(mode='bilinear', align_corners=False,
 * antialias=False)): source y = (oy + 0.5) * h / oh - 0.5, clamped to [0, h - 1], likewise x, the
 * result rounded to the nearest integer. `scratch` holds h * w floats. */
void ddpc__image_to_planar(const uint8_t *in, int64_t h, int64_t w, int c_in, uint8_t *out,
                           int c_out, int64_t oh, int64_t ow, float *scratch);

#endif
