// SPDX-License-Identifier: MIT
/* libFuzzer harness for SLURM's list parsers (src/comm/slurm_lists.c). Not part of the CMake build:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_POSIX_C_SOURCE=200809L -Iinclude -Isrc \
 *     tests/fuzz/fuzz_hostlist.c src/comm/slurm_lists.c src/core/status.c -o fuzz_hostlist
 * The input, cut at its first NUL, is parsed as a host list and as a tasks-per-node list; a host
 * list accepted by one entry point must be accepted by the other, and the first host must be a
 * non-empty name that fits. */
#include "comm/env_impl.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char text[4096];
    size_t n = size < sizeof text - 1 ? size : sizeof text - 1;
    memcpy(text, data, n);
    text[n] = '\0';
    char first[DDPC__HOSTNAME_MAX + 1];
    int count = 0, tasks = 0;
    ddpc_status a = ddpc__slurm_hostlist_first("FUZZ", text, first, sizeof first);
    ddpc_status b = ddpc__slurm_hostlist_count("FUZZ", text, &count);
    if ((a == DDPC_OK) != (b == DDPC_OK))
        abort();
    if (a == DDPC_OK && (first[0] == '\0' || strlen(first) > DDPC__HOSTNAME_MAX || count < 1))
        abort();
    char small[4];
    (void)ddpc__slurm_hostlist_first("FUZZ", text, small, sizeof small);
    for (int node = 0; node < 3; node++) {
        if (ddpc__slurm_tasks_on_node("FUZZ", text, node, &tasks) == DDPC_OK && tasks < 1)
            abort();
    }
    return 0;
}
