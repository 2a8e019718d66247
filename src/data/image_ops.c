// SPDX-License-Identifier: MIT
/* The format switch in front of the decoders (by magic bytes, as Pillow's Image.open) and the
 * conversion of a decoded image to planar pixels of the folder's channels and size.
 * Invariant: a grey or RGB value that needs no resize is copied exactly, so an image already of
 * the wanted size and channels keeps its bytes. */
#include "data/image.h"

#include <math.h>
#include <string.h>

static const uint8_t png_magic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
static const uint8_t jpeg_magic[3] = {0xff, 0xd8, 0xff};

ddpc_status ddpc__image_probe(const char *name, const uint8_t *buf, size_t len,
                              ddpc__image_info *info)
{
    if (len >= sizeof png_magic && memcmp(buf, png_magic, sizeof png_magic) == 0)
        return ddpc__png_probe(name, buf, len, info);
    if (len >= sizeof jpeg_magic && memcmp(buf, jpeg_magic, sizeof jpeg_magic) == 0)
        return ddpc__jpeg_probe(name, buf, len, info);
    return ddpc_errorf(DDPC_EFORMAT, "%s: neither a PNG nor a JPEG image (%zu bytes)", name, len);
}

ddpc_status ddpc__image_decode(const char *name, const uint8_t *buf, size_t len,
                               const ddpc__image_info *info, uint8_t *out)
{
    return info->format == DDPC__IMAGE_PNG ? ddpc__png_decode(name, buf, len, info, out)
                                           : ddpc__jpeg_decode(name, buf, len, info, out);
}

/* plane (h, w) = channel `ch` of out's channels, from in (h, w, c_in). */
static void take_plane(const uint8_t *in, int64_t hw, int c_in, int c_out, int ch, float *plane)
{
    for (int64_t i = 0; i < hw; i++) {
        const uint8_t *p = in + i * c_in;
        if (c_in == c_out)
            plane[i] = p[ch];
        else if (c_in == 1)
            plane[i] = p[0];
        else /* Pillow's rgb2l: ITU-R 601-2 luma, 16-bit fixed point, rounded */
            plane[i] = (float)((p[0] * 19595 + p[1] * 38470 + p[2] * 7471 + 0x8000) >> 16);
    }
}

/* out (oh, ow) = plane (h, w) resized bilinearly with half-pixel centres, rounded. */
static void resize_plane(const float *plane, int64_t h, int64_t w, uint8_t *out, int64_t oh,
                         int64_t ow)
{
    double sy_scale = (double)h / (double)oh, sx_scale = (double)w / (double)ow;
    for (int64_t oy = 0; oy < oh; oy++) {
        double sy = ((double)oy + 0.5) * sy_scale - 0.5;
        sy = sy < 0 ? 0 : sy;
        int64_t y0 = (int64_t)sy < h - 1 ? (int64_t)sy : h - 1, y1 = y0 + (y0 < h - 1);
        double fy = sy - (double)y0;
        for (int64_t ox = 0; ox < ow; ox++) {
            double sx = ((double)ox + 0.5) * sx_scale - 0.5;
            sx = sx < 0 ? 0 : sx;
            int64_t x0 = (int64_t)sx < w - 1 ? (int64_t)sx : w - 1, x1 = x0 + (x0 < w - 1);
            double fx = sx - (double)x0;
            double top = (1 - fx) * plane[y0 * w + x0] + fx * plane[y0 * w + x1];
            double bottom = (1 - fx) * plane[y1 * w + x0] + fx * plane[y1 * w + x1];
            double v = floor((1 - fy) * top + fy * bottom + 0.5);
            out[oy * ow + ox] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
        }
    }
}

void ddpc__image_to_planar(const uint8_t *in, int64_t h, int64_t w, int c_in, uint8_t *out,
                           int c_out, int64_t oh, int64_t ow, float *scratch)
{
    for (int ch = 0; ch < c_out; ch++) {
        take_plane(in, h * w, c_in, c_out, ch, scratch);
        uint8_t *o = out + (int64_t)ch * oh * ow;
        if (oh == h && ow == w)
            for (int64_t i = 0; i < h * w; i++)
                o[i] = (uint8_t)scratch[i];
        else
            resize_plane(scratch, h, w, o, oh, ow);
    }
}
