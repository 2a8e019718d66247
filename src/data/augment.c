// SPDX-License-Identifier: MIT
/* Training-time image augmentation inside the loader, as torchvision's RandomHorizontalFlip and
 * RandomCrop(size, padding=shift) do. Invariant: a sample's transform is a pure function of
 * (seed, epoch, global index), so it does not depend on the rank, the batch, the loader's worker
 * or a resume: N ranks x b see exactly the images 1 rank x N*b sees. */
#include "data/loader_impl.h"

#include <ddpc/rng.h>

#include <string.h>

/* The counter-based stream of epoch e's draws (three per sample: flip, dy, dx). */
#define AUGMENT_STREAM 0x61756776ULL /* "augv" */

/* Shifts plane p (h, w) by (dy, dx) into out, filling uncovered pixels with `fill`. */
static void shift_plane(float *out, const float *p, int64_t h, int64_t w, int64_t dy, int64_t dx,
                        float fill)
{
    for (int64_t y = 0; y < h; y++)
        for (int64_t x = 0; x < w; x++) {
            int64_t sy = y - dy, sx = x - dx;
            out[y * w + x] = sy >= 0 && sy < h && sx >= 0 && sx < w ? p[sy * w + sx] : fill;
        }
}

void ddpc__augment_images(float *x, const int64_t *idx, int64_t n, int64_t c, int64_t h, int64_t w,
                          const ddpc_loader_config *cfg, int64_t epoch, float *scratch)
{
    uint64_t stream = AUGMENT_STREAM + (uint64_t)epoch;
    for (int64_t i = 0; i < n; i++) {
        uint64_t at = 3 * (uint64_t)idx[i];
        bool flip = cfg->hflip && ddpc_rng_uniform_at(cfg->augment_seed, stream, at) < 0.5f;
        int64_t span = 2 * (int64_t)cfg->random_shift + 1, dy = 0, dx = 0;
        if (cfg->random_shift > 0) {
            dy = (int64_t)(ddpc_rng_uniform_at(cfg->augment_seed, stream, at + 1) * (float)span);
            dx = (int64_t)(ddpc_rng_uniform_at(cfg->augment_seed, stream, at + 2) * (float)span);
            dy = (dy < span ? dy : span - 1) - cfg->random_shift;
            dx = (dx < span ? dx : span - 1) - cfg->random_shift;
        }
        for (int64_t ch = 0; ch < c; ch++) {
            float *p = x + (i * c + ch) * h * w;
            if (flip)
                for (int64_t y = 0; y < h; y++)
                    for (int64_t a = 0, b = w - 1; a < b; a++, b--) {
                        float t = p[y * w + a];
                        p[y * w + a] = p[y * w + b];
                        p[y * w + b] = t;
                    }
            if (dy == 0 && dx == 0)
                continue;
            /* Padding takes the plane's minimum: the background of a normalised image, as
             * RandomCrop's zero padding is before normalisation. */
            float fill = p[0];
            for (int64_t k = 1; k < h * w; k++)
                fill = p[k] < fill ? p[k] : fill;
            shift_plane(scratch, p, h, w, dy, dx, fill);
            memcpy(p, scratch, (size_t)(h * w) * sizeof(float));
        }
    }
}
