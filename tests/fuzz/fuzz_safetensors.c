// SPDX-License-Identifier: MIT
/* libFuzzer harness for ddpc_safetensors_open (src/ckpt/safetensors_read.c). Not part of the
 * CMake build:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_POSIX_C_SOURCE=200809L -Iinclude -Isrc \
 *     tests/fuzz/fuzz_safetensors.c src/ckpt/safetensors_read.c src/core/json.c \
 *     src/core/alloc.c src/core/status.c -o fuzz_safetensors
 * The input is written to a temporary file and opened; every tensor of an accepted file is read. */
#include <ddpc/safetensors.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[64];
    if (!path[0]) {
        snprintf(path, sizeof path, "/tmp/ddpc_fuzz_st_%d.safetensors", (int)getpid());
    }
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    ddpc_safetensors *st = NULL;
    if (ddpc_safetensors_open(&st, path) == DDPC_OK) {
        volatile uint8_t sink = 0;
        for (size_t i = 0; i < ddpc_safetensors_count(st); i++) {
            ddpc_st_info info;
            if (ddpc_safetensors_info(st, i, &info) == DDPC_OK && info.nbytes)
                sink ^= ((const uint8_t *)info.data)[info.nbytes - 1];
            ddpc_st_info again;
            (void)ddpc_safetensors_find(st, info.name, &again);
        }
        (void)ddpc_safetensors_metadata(st, "k");
        (void)sink;
    }
    ddpc_safetensors_close(st);
    return 0;
}
