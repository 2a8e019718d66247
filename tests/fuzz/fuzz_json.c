// SPDX-License-Identifier: MIT
/* libFuzzer harness for the JSON header parser (src/core/json.c). Not part of the CMake build:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_POSIX_C_SOURCE=200809L -Iinclude -Isrc \
 *     tests/fuzz/fuzz_json.c src/core/json.c src/core/alloc.c src/core/status.c -o fuzz_json
 * Every input must parse or fail cleanly; a crash found here becomes a case in tests/test_json.c. */
#include <stddef.h>
#include <stdint.h>

#include "core/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ddpc__json *v = NULL;
    if (ddpc__json_parse(&v, (const char *)data, size, "fuzz") == DDPC_OK)
        (void)ddpc__json_check_unique_keys(v, "fuzz");
    ddpc__json_free(v);
    return 0;
}
