// SPDX-License-Identifier: MIT
/* A stand-in device's memory for tests that run a device's code paths on the CPU (the CPU kernel
 * table copied with kind cuda): the CPU table's allocations, each one tracked while it lives, so
 * that a member can tell the stand-in's memory from the host's, as a GPU would (an array from the
 * host handed to a kernel, or device memory the host read, works on the CPU and breaks there).
 * Set a table's alloc, free and alloc_count to these. */
#ifndef DDPC_TESTS_STANDIN_MEMORY_TESTUTIL_H
#define DDPC_TESTS_STANDIN_MEMORY_TESTUTIL_H

#include <ddpc/device.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { STANDIN_MAX_BLOCKS = 4096 };
typedef struct {
    const char *p;
    size_t bytes;
} standin_block;
static standin_block standin_blocks[STANDIN_MAX_BLOCKS];
static size_t standin_n_blocks;
static uint64_t standin_alloc_calls; /* every allocation made, as a device counts them */

static inline void *standin_alloc(size_t bytes)
{
    standin_alloc_calls++;
    void *p = ddpc_kernel_table_cpu()->alloc(bytes);
    if (p && standin_n_blocks < STANDIN_MAX_BLOCKS)
        standin_blocks[standin_n_blocks++] = (standin_block){p, bytes ? bytes : 1};
    return p;
}

static inline void standin_free(void *p)
{
    for (size_t i = 0; p && i < standin_n_blocks; i++)
        if (standin_blocks[i].p == p) {
            standin_blocks[i] = standin_blocks[--standin_n_blocks];
            break;
        }
    ddpc_kernel_table_cpu()->free(p);
}

static inline uint64_t standin_alloc_count(void)
{
    return standin_alloc_calls;
}

/* Whether the bytes at p lie in one live allocation of the stand-in. */
static inline bool standin_holds(const void *p, size_t bytes)
{
    const char *a = (const char *)p, *b = a + bytes;
    for (size_t i = 0; i < standin_n_blocks; i++)
        if (a >= standin_blocks[i].p && b <= standin_blocks[i].p + standin_blocks[i].bytes)
            return true;
    return false;
}

#endif
