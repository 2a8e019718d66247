// SPDX-License-Identifier: MIT
/* libFuzzer harness for the .npy parser (src/data/npy.c). Built by tests/fuzz/run.sh with the
 * library; alone:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_POSIX_C_SOURCE=200809L -Iinclude -Isrc \
 *     tests/fuzz/fuzz_npy.c src/data/npy.c src/core/status.c -o fuzz_npy
 * A parsed array's every element is read, so a data range past the input would be caught. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *copy = malloc(size ? size : 1); /* exactly sized, so ASan sees any overrun */
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    ddpc__npy_array a;
    if (ddpc__npy_parse("fuzz", copy, size, &a) == DDPC_OK) {
        volatile double sum = 0;
        for (int64_t i = 0; i < a.count; i++)
            sum += ddpc__npy_get(&a, i);
    }
    free(copy);
    return 0;
}
