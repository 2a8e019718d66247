// SPDX-License-Identifier: MIT
/* libFuzzer harness for the CSV record reader (src/data/csv.c). Built by tests/fuzz/run.sh with
 * the library; alone:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_POSIX_C_SOURCE=200809L -Iinclude -Isrc \
 *     tests/fuzz/fuzz_csv.c src/data/csv.c src/core/alloc.c src/core/status.c -o fuzz_csv
 * Every cell of every record read is scanned to its NUL, so a cell offset or length past the
 * reader's text would be caught; line numbers must never go backwards. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/csv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *copy = malloc(size ? size : 1); /* exactly sized, so ASan sees any overrun */
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    ddpc__csv r;
    ddpc__csv_init(&r, "fuzz", copy, size);
    bool got = true;
    int64_t last = 0;
    while (ddpc__csv_next(&r, &got) == DDPC_OK && got) {
        if (r.line < last || r.n_cells == 0)
            abort();
        last = r.line;
        volatile size_t total = 0;
        for (size_t i = 0; i < r.n_cells; i++)
            total += strlen(r.text + r.cell[i]);
    }
    ddpc__csv_fini(&r);
    free(copy);
    return 0;
}
