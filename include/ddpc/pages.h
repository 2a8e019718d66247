// SPDX-License-Identifier: MIT
/* ddpc pages: giving the physical memory of part of a buffer back to the OS while keeping its
 * addresses, and measuring what is resident. ZeRO stages 2 and 3 release the parts of the flat
 * gradient and parameter buffers a rank does not own, so their memory falls to the shard. */
#ifndef DDPC_PAGES_H
#define DDPC_PAGES_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Zeroes bytes [p, p + size) and returns the whole pages inside the range to the OS
 * (madvise MADV_DONTNEED): the range reads as zeros afterwards and holds no physical memory until
 * it is written again. p must lie in private anonymous memory (any ddpc_malloc block). */
void ddpc_pages_release(void *p, size_t size);
/* Bytes of the pages overlapping [p, p + size) that are resident in physical memory (mincore),
 * counted in whole pages; 0 when the kernel cannot tell. A released page that was read since
 * (mapped to the kernel's shared zero page) counts as resident although it costs nothing. */
size_t ddpc_pages_resident(const void *p, size_t size);

#ifdef __cplusplus
}
#endif
#endif
