// SPDX-License-Identifier: MIT
/* libFuzzer harness for the image decoders (src/data/image_png.c, image_jpeg.c behind
 * image_ops.c's probe). Built by tests/fuzz/run.sh with the library; seeds in
 * tests/fuzz/seeds/fuzz_image (PNG: palette, 16-bit RGB; JPEG: RGB, grey). An image that probes
 * is decoded into a buffer of exactly the probed size, so a decoder writing past it is caught,
 * then converted to planar grey and RGB at another size. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *copy = malloc(size ? size : 1); /* exactly sized, so ASan sees any overread */
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    ddpc__image_info info;
    /* Huge but valid headers are refused only at 2^28 pixels: skip decoding those here, to keep
     * the fuzzer's memory small. */
    if (ddpc__image_probe("fuzz", copy, size, &info) == DDPC_OK &&
        info.height * info.width <= (1 << 20)) {
        size_t n = (size_t)(info.height * info.width);
        uint8_t *out = malloc(n * (size_t)info.channels);
        float *scratch = malloc(n * sizeof *scratch);
        uint8_t planar[3 * 7 * 5];
        if (out && scratch && ddpc__image_decode("fuzz", copy, size, &info, out) == DDPC_OK) {
            ddpc__image_to_planar(out, info.height, info.width, info.channels, planar, 3, 7, 5,
                                  scratch);
            ddpc__image_to_planar(out, info.height, info.width, info.channels, planar, 1, 5, 7,
                                  scratch);
        }
        free(scratch);
        free(out);
    }
    free(copy);
    return 0;
}
