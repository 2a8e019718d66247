// SPDX-License-Identifier: MIT
/* ddpc allocation: every buffer goes through ddpc_malloc/ddpc_free, 64-byte aligned.
 * Tests can count live allocations and bytes (with their peak) and make the n-th future
 * allocation fail. Thread safe. */
#ifndef DDPC_ALLOC_H
#define DDPC_ALLOC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DDPC_ALIGNMENT 64

/* 64-byte aligned block of at least `size` bytes, or NULL (out of memory or an injected failure). */
void *ddpc_malloc(size_t size);
/* Like ddpc_malloc, zero-filled; NULL if count*size overflows. */
void *ddpc_calloc(size_t count, size_t size);
/* Frees a block from ddpc_malloc/ddpc_calloc; NULL is a no-op. */
void ddpc_free(void *p);

/* Number of successful allocations ever made, and of blocks not yet freed. */
int64_t ddpc_alloc_total(void);
int64_t ddpc_alloc_live(void);
/* Bytes requested by the blocks not yet freed, and the most there ever were at once (since the
 * start or the last ddpc_alloc_reset_peak); headers and alignment padding are not counted. */
int64_t ddpc_alloc_live_bytes(void);
int64_t ddpc_alloc_peak_bytes(void);
/* Starts a new peak from the bytes live now. */
void ddpc_alloc_reset_peak(void);
/* Test hook: the allocation after `n` more succeed returns NULL; n < 0 disables injection. */
void ddpc_alloc_fail_after(int64_t n);

#ifdef __cplusplus
}
#endif
#endif
