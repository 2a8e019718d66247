// SPDX-License-Identifier: MIT
/* gemm_timer.c: an LD_PRELOAD shim that times every single-precision GEMM a process hands to
 * the BLAS, through either entry point: cblas_sgemm (ddpc) or the Fortran sgemm_ (PyTorch's
 * at::native::cpublas). At exit it appends one JSON line to the file named by GEMM_TIMER_OUT:
 * {"pid", "calls", "gemm_s", "gflop", "small_calls", "small_s"}. bench/ddp_bench.sh uses it to show how much of a step both
 * sides spend in the same OpenBLAS sgemm. Invariant: the real BLAS does every multiply; the shim
 * only reads the clock around it (two clock_gettime calls, ~50 ns, per GEMM).
 *
 *     cc -O2 -shared -fPIC bench/gemm_timer.c -o gemm_timer.so -ldl
 *     GEMM_TIMER_OUT=gemm.jsonl LD_PRELOAD=$PWD/gemm_timer.so COMMAND ...
 *
 * Seconds are summed over calling threads: with one thread per process (the benchmark's setting)
 * that is the process's time inside sgemm. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef void cblas_fn(int, int, int, int, int, int, float, const float *, int, const float *, int,
                      float, float *, int);
typedef void fortran_fn(const char *, const char *, const int *, const int *, const int *,
                        const float *, const float *, const int *, const float *, const int *,
                        const float *, float *, const int *);

/* GEMMs under this many multiply-adds count as small too (attention's per-head products are
 * ~2^19, the linear layers' >= 2^26): their packing and call overheads weigh more. */
#define SMALL_MACS (1 << 24)

static atomic_ullong total_ns, total_calls, small_ns, small_calls;
static _Atomic double total_flop;

static unsigned long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (unsigned long long)t.tv_sec * 1000000000ull + (unsigned long long)t.tv_nsec;
}

static void account(unsigned long long t0, double m, double n, double k)
{
    unsigned long long dt = now_ns() - t0;
    atomic_fetch_add(&total_ns, dt);
    atomic_fetch_add(&total_calls, 1);
    if (m * n * k < SMALL_MACS) {
        atomic_fetch_add(&small_ns, dt);
        atomic_fetch_add(&small_calls, 1);
    }
    double old = atomic_load(&total_flop);
    while (!atomic_compare_exchange_weak(&total_flop, &old, old + 2.0 * m * n * k))
        ;
}

/* The BLAS's own `name`: the next definition after this library, or, where the BLAS was loaded
 * into a local scope (Python extensions are dlopen'ed RTLD_LOCAL), the one in the already loaded
 * libblas.so.3 / libopenblas.so.0. Exits with a message when no BLAS is loaded. */
static void *real(const char *name)
{
    static const char *const libs[] = {"libblas.so.3", "libopenblas.so.0"};
    void *f = dlsym(RTLD_NEXT, name);
    for (size_t i = 0; !f && i < sizeof libs / sizeof libs[0]; i++) {
        void *h = dlopen(libs[i], RTLD_LAZY | RTLD_NOLOAD);
        if (h)
            f = dlsym(h, name);
    }
    if (!f) {
        fprintf(stderr, "gemm_timer: no %s after the shim: %s\n", name, dlerror());
        _exit(127);
    }
    return f;
}

void cblas_sgemm(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a,
                 int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    static cblas_fn *fn;
    if (!fn)
        fn = (cblas_fn *)real("cblas_sgemm");
    unsigned long long t0 = now_ns();
    fn(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    account(t0, m, n, k);
}

void sgemm_(const char *ta, const char *tb, const int *m, const int *n, const int *k,
            const float *alpha, const float *a, const int *lda, const float *b, const int *ldb,
            const float *beta, float *c, const int *ldc)
{
    static fortran_fn *fn;
    if (!fn)
        fn = (fortran_fn *)real("sgemm_");
    unsigned long long t0 = now_ns();
    fn(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    account(t0, *m, *n, *k);
}

/* One line per process that made at least one GEMM, appended in a single write. */
__attribute__((destructor)) static void report(void)
{
    const char *path = getenv("GEMM_TIMER_OUT");
    unsigned long long calls = atomic_load(&total_calls);
    if (!path || !*path || calls == 0)
        return;
    char line[256];
    int len = snprintf(line, sizeof line,
                       "{\"pid\": %ld, \"calls\": %llu, \"gemm_s\": %.6f, \"gflop\": %.3f, "
                       "\"small_calls\": %llu, \"small_s\": %.6f}\n",
                       (long)getpid(), calls, 1e-9 * (double)atomic_load(&total_ns),
                       1e-9 * atomic_load(&total_flop), atomic_load(&small_calls),
                       1e-9 * (double)atomic_load(&small_ns));
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (fd < 0)
        return;
    if (write(fd, line, (size_t)len) != len)
        fprintf(stderr, "gemm_timer: short write to %s\n", path);
    close(fd);
}
