// SPDX-License-Identifier: MIT
/* libFuzzer harness for `ddpc report` (src/metrics/report_*.c): each input is a run directory's
 * metrics.jsonl, and a page is built from it. Not part of the CMake build:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_POSIX_C_SOURCE=200809L -Iinclude -Isrc \
 *     tests/fuzz/fuzz_report.c src/metrics/report_*.c src/core/json.c src/core/alloc.c \
 *     src/core/status.c -lm -o fuzz_report
 * Every input must give a page or one clean error; a crash found here becomes a case in
 * tests/test_train_report.c. */
#include <ddpc/report.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char dir[64], path[128];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/ddpc_fuzz_report_XXXXXX");
        if (!mkdtemp(dir))
            abort();
        snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    }
    FILE *f = fopen(path, "wb");
    if (!f)
        abort();
    fwrite(data, 1, size, f);
    fclose(f);
    ddpc_status st = ddpc_report_write(dir, NULL, NULL);
    if (st != DDPC_OK && st != DDPC_EFORMAT && st != DDPC_ENOMEM)
        abort();
    return 0;
}
