// SPDX-License-Identifier: MIT
/* Aligned allocation with counters and failure injection for tests.
 * Every block carries a DDPC_ALIGNMENT-byte header holding its requested size, so ddpc_free can
 * take it off the live byte count; the caller sees the aligned address just past the header.
 * Counters are atomics so any thread may allocate. */
#include <ddpc/alloc.h>

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static atomic_llong total_allocs;
static atomic_llong live_allocs;
static atomic_llong live_bytes;
static atomic_llong peak_bytes;
static atomic_llong fail_countdown = -1;

static int injected_failure(void)
{
    long long left = atomic_load(&fail_countdown);
    while (left >= 0) {
        if (atomic_compare_exchange_weak(&fail_countdown, &left, left - 1))
            return left == 0;
    }
    return 0;
}

/* Raises the peak to at least `now` (a lost race retries with the newer peak). */
static void raise_peak(long long now)
{
    long long peak = atomic_load(&peak_bytes);
    while (now > peak && !atomic_compare_exchange_weak(&peak_bytes, &peak, now)) {
    }
}

void *ddpc_malloc(size_t size)
{
    if (injected_failure())
        return NULL;
    if (size > SIZE_MAX - 2 * DDPC_ALIGNMENT)
        return NULL;
    size_t rounded = (size + DDPC_ALIGNMENT - 1) / DDPC_ALIGNMENT * DDPC_ALIGNMENT;
    char *base = aligned_alloc(DDPC_ALIGNMENT, rounded + DDPC_ALIGNMENT);
    if (!base)
        return NULL;
    memcpy(base, &size, sizeof size);
    atomic_fetch_add(&total_allocs, 1);
    atomic_fetch_add(&live_allocs, 1);
    raise_peak(atomic_fetch_add(&live_bytes, (long long)size) + (long long)size);
    return base + DDPC_ALIGNMENT;
}

void *ddpc_calloc(size_t count, size_t size)
{
    if (size != 0 && count > SIZE_MAX / size)
        return NULL;
    void *p = ddpc_malloc(count * size);
    if (p)
        memset(p, 0, count * size);
    return p;
}

void ddpc_free(void *p)
{
    if (!p)
        return;
    char *base = (char *)p - DDPC_ALIGNMENT;
    size_t size;
    memcpy(&size, base, sizeof size);
    atomic_fetch_sub(&live_allocs, 1);
    atomic_fetch_sub(&live_bytes, (long long)size);
    free(base);
}

int64_t ddpc_alloc_total(void)
{
    return atomic_load(&total_allocs);
}

int64_t ddpc_alloc_live(void)
{
    return atomic_load(&live_allocs);
}

int64_t ddpc_alloc_live_bytes(void)
{
    return atomic_load(&live_bytes);
}

int64_t ddpc_alloc_peak_bytes(void)
{
    return atomic_load(&peak_bytes);
}

void ddpc_alloc_reset_peak(void)
{
    atomic_store(&peak_bytes, atomic_load(&live_bytes));
}

void ddpc_alloc_fail_after(int64_t n)
{
    atomic_store(&fail_countdown, n < 0 ? -1 : n);
}
