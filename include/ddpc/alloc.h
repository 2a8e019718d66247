/* ddpc allocation: every buffer goes through ddpc_malloc/ddpc_free, 64-byte aligned.
 * Tests can count live allocations and make the n-th future allocation fail. Thread safe. */
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
/* Test hook: the allocation after `n` more succeed returns NULL; n < 0 disables injection. */
void ddpc_alloc_fail_after(int64_t n);

#ifdef __cplusplus
}
#endif
#endif
