// SPDX-License-Identifier: MIT
/* libFuzzer harness for the idx reader (src/data/idx.c), gzip'd or plain. Not part of the CMake
 * build:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_POSIX_C_SOURCE=200809L -Iinclude -Isrc \
 *     tests/fuzz/fuzz_idx.c src/data/idx.c src/core/alloc.c src/core/status.c -lz -o fuzz_idx
 * The input is written to a temporary file and read as a 1-dim and as a 3-dim idx file. */
#include <ddpc/alloc.h>

#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "data/idx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[64];
    if (!path[0])
        snprintf(path, sizeof path, "/tmp/ddpc_fuzz_idx_%d", (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    for (int ndim = 1; ndim <= 3; ndim += 2) {
        int64_t dims[3];
        uint8_t *buf = NULL;
        (void)ddpc__idx_read_u8(path, ndim, "fuzz", dims, &buf);
        ddpc_free(buf);
    }
    return 0;
}
