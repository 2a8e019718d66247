// SPDX-License-Identifier: MIT
/* Page release and residency over ordinary heap buffers. Only whole pages strictly inside the
 * range are released, so a neighbour sharing an edge page (another buffer, the allocator's
 * header) is never touched; the partial edges are zeroed with memset instead. */
#define _DEFAULT_SOURCE
#include <ddpc/alloc.h>
#include <ddpc/pages.h>

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static size_t page_size(void)
{
    long ps = sysconf(_SC_PAGESIZE);
    return ps > 0 ? (size_t)ps : 4096;
}

void ddpc_pages_release(void *p, size_t size)
{
    if (!p || size == 0)
        return;
    size_t ps = page_size();
    uintptr_t a = (uintptr_t)p, end = a + size;
    uintptr_t first = (a + ps - 1) / ps * ps, last = end / ps * ps;
    if (first >= last) { /* no whole page inside */
        memset(p, 0, size);
        return;
    }
    memset(p, 0, first - a);
    memset((void *)last, 0, end - last);
    /* Private anonymous memory: the pages come back zero-filled on the next touch. Should the
     * advice fail, zero them by hand so the contract (reads as zeros) still holds. */
    if (madvise((void *)first, last - first, MADV_DONTNEED) != 0)
        memset((void *)first, 0, last - first);
}

size_t ddpc_pages_resident(const void *p, size_t size)
{
    if (!p || size == 0)
        return 0;
    size_t ps = page_size();
    uintptr_t first = (uintptr_t)p / ps * ps, end = (uintptr_t)p + size;
    size_t pages = (end - first + ps - 1) / ps, resident = 0;
    unsigned char vec[4096];
    for (size_t done = 0; done < pages;) {
        size_t k = pages - done < sizeof vec ? pages - done : sizeof vec;
        if (mincore((void *)(first + done * ps), k * ps, vec) != 0)
            return 0;
        for (size_t i = 0; i < k; i++)
            resident += vec[i] & 1;
        done += k;
    }
    return resident * ps;
}
