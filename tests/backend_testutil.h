// SPDX-License-Identifier: MIT
/* Helpers for the CUDA-against-CPU kernel tests (tests/test_cuda_*.c): the CUDA table or a skip
 * (exit 77 with the reason when this build or machine has no GPU), device copies of host arrays,
 * poisoned device outputs, and the relative error of a device result against the CPU's.
 * Invariant: every device array a test reads back was poisoned with NaN first (bt_poison) unless
 * the kernel accumulates into it, so an element the kernel failed to write fails the comparison. */
#ifndef DDPC_TESTS_BACKEND_TESTUTIL_H
#define DDPC_TESTS_BACKEND_TESTUTIL_H

#include <ddpc/device.h>

#include "kernels_testutil.h"

/* Fails the test (printing the value) unless err <= tol; a NaN fails too. */
#define BT_CHECK_ERR(err, tol)                                                                     \
    do {                                                                                           \
        double check_e_ = (err);                                                                   \
        if (!(check_e_ <= (tol))) {                                                                \
            fprintf(stderr, "%s:%d: %s = %.3g exceeds %g\n", __FILE__, __LINE__, #err, check_e_,   \
                    (double)(tol));                                                                \
            check_failures_in_test++;                                                              \
        }                                                                                          \
    } while (0)

/* Runs stmt (a kernel's second call with its first call's shapes) and checks that table b
 * allocated nothing on the device for it. */
#define BT_CHECK_WARM(b, stmt)                                                                     \
    do {                                                                                           \
        uint64_t warm_a0_ = (b)->alloc_count();                                                    \
        stmt;                                                                                      \
        (b)->synchronize();                                                                        \
        CHECK_EQ_INT((b)->alloc_count(), warm_a0_);                                                \
    } while (0)

/* The CUDA table, or exit 77 saying why not. */
static inline const ddpc_kernel_table *bt_cuda_or_skip(void)
{
    char why[200] = "";
    if (ddpc_cuda_devices(why, sizeof why) <= 0) {
        printf("skipped: no GPU to test on: %s\n", why);
        exit(77);
    }
    const ddpc_kernel_table *b = NULL;
    if (ddpc_device_select(DDPC_DEVICE_CUDA, 0, &b) != DDPC_OK || !b ||
        b->kind != DDPC_DEVICE_CUDA) {
        fprintf(stderr, "a GPU is visible but the CUDA table could not be opened: %s\n",
                ddpc_last_error());
        exit(1);
    }
    printf("testing on %s\n", ddpc_device_describe(b));
    return b;
}

/* A device copy of host x (n floats). */
static inline float *bt_up(const ddpc_kernel_table *b, const float *x, int64_t n)
{
    float *d = b->alloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    if (!d)
        abort();
    if (n > 0)
        b->to_device(d, x, (size_t)n * sizeof(float));
    return d;
}

static inline void *bt_up_bytes(const ddpc_kernel_table *b, const void *x, size_t bytes)
{
    void *d = b->alloc(bytes ? bytes : 1);
    if (!d)
        abort();
    if (bytes)
        b->to_device(d, x, bytes);
    return d;
}

/* A fresh device array of n floats, every element NaN. */
static inline float *bt_poison(const ddpc_kernel_table *b, int64_t n)
{
    float *d = b->alloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    if (!d)
        abort();
    b->fill_f32(d, NAN, n > 0 ? n : 1);
    return d;
}

/* A host copy (ddpc_calloc'd) of device d (n floats). */
static inline float *bt_down(const ddpc_kernel_table *b, const float *d, int64_t n)
{
    float *h = tu_alloc(n);
    if (n > 0)
        b->to_host(h, d, (size_t)n * sizeof(float));
    return h;
}

/* Relative error of device array d against host reference ref (n floats), as tu_rel_err with
 * floor 1e-6; NaN anywhere in the device result gives +inf. Prints what it compared. */
static inline double bt_err(const ddpc_kernel_table *b, const char *what, const float *d,
                            const float *ref, int64_t n)
{
    float *h = bt_down(b, d, n);
    double e = 0.0;
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(h[i]) && isfinite(ref[i]))
            e = INFINITY;
    if (e == 0.0)
        e = tu_rel_err(h, ref, n, 1e-6);
    printf("  %-40s rel err %.3g\n", what, e);
    ddpc_free(h);
    return e;
}

#endif
