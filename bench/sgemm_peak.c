// SPDX-License-Identifier: MIT
/* sgemm_peak: the machine's practical fp32 matmul ceiling, OpenBLAS (OpenMP build) cblas_sgemm
 * on square sizes, best of 5 after one warm-up; the denominator for ddpc's GFLOP/s.
 * Prints one JSON line. Build (as bench/step_bench.sh does):
 *   cc -O2 -fopenmp -I/usr/include/x86_64-linux-gnu/openblas-openmp sgemm_peak.c \
 *      /usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so -o sgemm_peak
 * Usage: sgemm_peak THREADS */
#define _POSIX_C_SOURCE 199309L
#include <cblas.h>
#include <omp.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Best GFLOP/s of 5 timed C = A B (n x n) after one untimed call; -1 if out of memory. */
static double best_gflops(int n)
{
    size_t len = (size_t)n * (size_t)n;
    float *a = malloc(len * sizeof *a), *b = malloc(len * sizeof *b), *c = malloc(len * sizeof *c);
    double best = -1.0;
    if (a && b && c) {
        for (size_t i = 0; i < len; i++) {
            a[i] = (float)((i * 7u) % 13u) * 0.01f;
            b[i] = (float)((i * 5u) % 11u) * 0.01f;
            c[i] = 0.0f;
        }
        for (int rep = 0; rep < 6; rep++) {
            double t0 = now_s();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n,
                        0.0f, c, n);
            double g = 2.0 * n * (double)n * n / (now_s() - t0) * 1e-9;
            if (rep > 0 && g > best)
                best = g;
        }
    }
    free(a);
    free(b);
    free(c);
    return best;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    if (threads < 1) {
        fprintf(stderr, "usage: sgemm_peak THREADS (>= 1)\n");
        return 2;
    }
    openblas_set_num_threads(threads);
    omp_set_num_threads(threads);
    static const int sizes[] = {512, 1024, 2048};
    double g[3], peak = 0.0;
    for (int i = 0; i < 3; i++) {
        g[i] = best_gflops(sizes[i]);
        if (g[i] < 0) {
            fprintf(stderr, "sgemm_peak: out of memory at n=%d\n", sizes[i]);
            return 1;
        }
        peak = g[i] > peak ? g[i] : peak;
    }
    printf("{\"sgemm_peak_gflops\": %.1f, \"threads\": %d, \"by_size\": "
           "{\"512\": %.1f, \"1024\": %.1f, \"2048\": %.1f}}\n",
           peak, threads, g[0], g[1], g[2]);
    return 0;
}
