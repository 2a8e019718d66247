// SPDX-License-Identifier: MIT
/* Helpers of the emulation tests (tests/test_*_emu.cpp): deterministic inputs, outputs poisoned
 * with NaN so an element a kernel never writes shows, and the two comparisons the issue asks for
 * (bit for bit, or max |a - ref| / max |ref|), each printing the first difference it finds. */
#ifndef DDPC_TESTS_EMU_TESTUTIL_H
#define DDPC_TESTS_EMU_TESTUTIL_H

#include <ddpc/device.h>
#include <ddpc/rng.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <vector>

/* n values in [-amp, amp), the same for the same seed. */
static inline std::vector<float> emu_rand(int64_t n, float amp, uint64_t seed)
{
    std::vector<float> v((size_t)n);
    for (int64_t i = 0; i < n; i++)
        v[(size_t)i] = amp * (2.0f * ddpc_rng_uniform_at(seed, 7, (uint64_t)i) - 1.0f);
    return v;
}

/* n NaN floats (all bits set). */
static inline std::vector<float> emu_poison(int64_t n)
{
    std::vector<float> v((size_t)n);
    memset(v.data(), 0xff, (size_t)n * sizeof(float));
    return v;
}

/* Whether a and ref (n elements of `size` bytes) hold the same bits; prints the first
 * difference. */
static inline bool emu_same_bits(const char *what, const void *a, const void *ref, int64_t n,
                                 size_t size)
{
    const unsigned char *x = (const unsigned char *)a, *y = (const unsigned char *)ref;
    for (int64_t i = 0; i < n; i++)
        if (memcmp(x + (size_t)i * size, y + (size_t)i * size, size) != 0) {
            uint64_t u = 0, v = 0;
            memcpy(&u, x + (size_t)i * size, size);
            memcpy(&v, y + (size_t)i * size, size);
            fprintf(stderr, "  %s: element %lld differs: 0x%llx, CPU 0x%llx\n", what, (long long)i,
                    (unsigned long long)u, (unsigned long long)v);
            return false;
        }
    return true;
}

/* max |a - ref| / max(|ref|, 1e-6) over n floats; +inf where a is NaN or inf and ref is not.
 * Prints it with `what`. */
static inline double emu_rel_err(const char *what, const float *a, const float *ref, int64_t n)
{
    double m = 0.0, s = 1e-6;
    int64_t worst = -1;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(a[i]) && isfinite(ref[i])) {
            fprintf(stderr, "  %s: element %lld is %g, CPU %g\n", what, (long long)i, a[i], ref[i]);
            return INFINITY;
        }
        const double d = fabs((double)a[i] - ref[i]);
        if (d > m) {
            m = d;
            worst = i;
        }
        s = fmax(s, fabs((double)ref[i]));
    }
    printf("  %s: rel err %.3g", what, m / s);
    if (worst >= 0)
        printf(" (worst element %lld: %.9g vs CPU %.9g)", (long long)worst, a[worst], ref[worst]);
    printf("\n");
    return m / s;
}

/* ddpc__cuda_blocks (src/kernels/cuda/cuda_impl.h): the grid the host side launches for n
 * elements; tests also launch fewer blocks so grid-stride loops go round. */
static inline unsigned emu_grid(int64_t n, int threads)
{
    int64_t b = (n + threads - 1) / threads;
    return (unsigned)(b < 1 ? 1 : b > 65535 * 16 ? 65535 * 16 : b);
}

/* The CPU's kernel table: the reference every emulated kernel is compared with. */
static inline const ddpc_kernel_table *emu_cpu(void)
{
    return ddpc_kernel_table_cpu();
}

#endif
