/* Aligned allocation with counters and failure injection for tests.
 * Counters are atomics so any thread may allocate. */
#include <ddpc/alloc.h>

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static atomic_llong total_allocs;
static atomic_llong live_allocs;
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

void *ddpc_malloc(size_t size)
{
    if (injected_failure())
        return NULL;
    size_t rounded = (size + DDPC_ALIGNMENT - 1) / DDPC_ALIGNMENT * DDPC_ALIGNMENT;
    if (rounded == 0)
        rounded = DDPC_ALIGNMENT;
    void *p = aligned_alloc(DDPC_ALIGNMENT, rounded);
    if (p) {
        atomic_fetch_add(&total_allocs, 1);
        atomic_fetch_add(&live_allocs, 1);
    }
    return p;
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
    atomic_fetch_sub(&live_allocs, 1);
    free(p);
}

int64_t ddpc_alloc_total(void)
{
    return atomic_load(&total_allocs);
}

int64_t ddpc_alloc_live(void)
{
    return atomic_load(&live_allocs);
}

void ddpc_alloc_fail_after(int64_t n)
{
    atomic_store(&fail_countdown, n < 0 ? -1 : n);
}
