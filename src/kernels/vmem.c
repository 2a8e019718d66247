// SPDX-License-Identifier: MIT
/* Granule bookkeeping of releasable memory (vmem.h): which granules a release may unmap (those
 * wholly inside the range) and which a back must map (every one the range touches). Runs of
 * neighbouring granules go to the device in one call each. */
#include "kernels/vmem.h"

#include <ddpc/alloc.h>

#include <string.h>

ddpc_status ddpc__vmem_init(ddpc__vmem *v, void *base, size_t bytes, size_t granule)
{
    size_t n = bytes / granule;
    *v = (ddpc__vmem){.base = base, .bytes = bytes, .granule = granule, .n_backed = n};
    v->backed = ddpc_malloc(n ? n : 1);
    if (!v->backed)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for a table of %zu granules", n);
    memset(v->backed, 1, n);
    return DDPC_OK;
}

void ddpc__vmem_fini(ddpc__vmem *v)
{
    ddpc_free(v->backed);
    v->backed = NULL;
}

bool ddpc__vmem_contains(const ddpc__vmem *v, const void *p)
{
    const char *c = p;
    return c >= v->base && c < v->base + v->bytes;
}

/* Unmaps the backed granules [g0, g1) in runs; stops at the first failure. */
static ddpc_status unmap_granules(ddpc__vmem *v, const ddpc__vmem_ops *ops, size_t g0, size_t g1)
{
    for (size_t g = g0; g < g1;) {
        if (!v->backed[g]) {
            g++;
            continue;
        }
        size_t e = g;
        while (e < g1 && v->backed[e])
            v->backed[e++] = 0;
        v->n_backed -= e - g;
        DDPC_TRY(ops->unmap(ops->ctx, v->base + g * v->granule, (e - g) * v->granule, g));
        g = e;
    }
    return DDPC_OK;
}

/* Zeroes [a, b) within one granule when that granule is backed (else it reads zero already). */
static void zero_if_backed(const ddpc__vmem *v, const ddpc__vmem_ops *ops, size_t a, size_t b)
{
    if (a < b && v->backed[a / v->granule])
        ops->zero(ops->ctx, v->base + a, b - a);
}

ddpc_status ddpc__vmem_release(ddpc__vmem *v, const ddpc__vmem_ops *ops, void *p, size_t bytes)
{
    if (!bytes)
        return DDPC_OK;
    size_t a = (size_t)((char *)p - v->base), b = a + bytes, gs = v->granule;
    size_t first = (a + gs - 1) / gs, last = b / gs; /* whole granules [first, last) */
    if (first >= last) { /* no whole granule inside: one or two partial ones */
        size_t mid = a / gs == (b - 1) / gs ? b : (a / gs + 1) * gs;
        zero_if_backed(v, ops, a, mid);
        zero_if_backed(v, ops, mid, b);
        return DDPC_OK;
    }
    zero_if_backed(v, ops, a, first * gs);
    zero_if_backed(v, ops, last * gs, b);
    return unmap_granules(v, ops, first, last);
}

ddpc_status ddpc__vmem_back(ddpc__vmem *v, const ddpc__vmem_ops *ops, void *p, size_t bytes)
{
    if (!bytes)
        return DDPC_OK;
    size_t a = (size_t)((char *)p - v->base), gs = v->granule;
    size_t g1 = (a + bytes + gs - 1) / gs;
    for (size_t g = a / gs; g < g1;) {
        if (v->backed[g]) {
            g++;
            continue;
        }
        size_t e = g;
        while (e < g1 && !v->backed[e])
            e++;
        DDPC_TRY(ops->map(ops->ctx, v->base + g * gs, (e - g) * gs, g));
        memset(v->backed + g, 1, e - g);
        v->n_backed += e - g;
        g = e;
    }
    return DDPC_OK;
}

bool ddpc__vmem_is_backed(const ddpc__vmem *v, const void *p, size_t bytes)
{
    if (!bytes)
        return true;
    size_t a = (size_t)((const char *)p - v->base), gs = v->granule;
    for (size_t g = a / gs; g < (a + bytes + gs - 1) / gs; g++)
        if (!v->backed[g])
            return false;
    return true;
}

void ddpc__vmem_read(const ddpc__vmem *v, void *host_dst, const void *src, size_t bytes,
                     void (*copy)(void *dst, const void *src, size_t n))
{
    size_t a = (size_t)((const char *)src - v->base), end = a + bytes, gs = v->granule;
    char *dst = host_dst;
    while (a < end) {
        bool on = v->backed[a / gs];
        size_t e = (a / gs + 1) * gs;
        while (e < end && v->backed[e / gs] == on)
            e += gs;
        if (e > end)
            e = end;
        if (on)
            copy(dst, v->base + a, e - a);
        else
            memset(dst, 0, e - a);
        dst += e - a;
        a = e;
    }
}
