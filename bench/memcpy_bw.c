// SPDX-License-Identifier: MIT
/* memcpy_bw: single-thread memcpy bandwidth (bytes copied per second) at the sizes of the
 * collective sweep, the ceiling a one-copy shared-memory transport can approach on one core.
 * Both buffers are allocated once at the largest size, page aligned, and touched before timing;
 * each size is copied `warmup` times untimed, then at least `iters` times (more for small sizes,
 * until the timed batch lasts 20 ms) and the mean is reported. Build (as coll_bench.sh does):
 *   cc -std=c11 -O3 bench/memcpy_bw.c -o memcpy_bw
 * Usage: memcpy_bw [--min-bytes 4K] [--max-bytes 256M] [--step-factor 2] [--iters 20]
 *                  [--warmup 5] [--json] */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    size_t min_bytes, max_bytes;
    long factor, iters, warmup;
    int json;
} options;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* "4096", "4K", "256M", "1G" (powers of 1024, as nccl-tests reads -b/-e); 0 when malformed. */
static size_t parse_bytes(const char *s)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || s[0] == '-')
        return 0;
    unsigned long long mul = 1;
    switch (*end) {
    case 'K':
    case 'k':
        mul = 1ull << 10;
        end++;
        break;
    case 'M':
    case 'm':
        mul = 1ull << 20;
        end++;
        break;
    case 'G':
    case 'g':
        mul = 1ull << 30;
        end++;
        break;
    default:
        break;
    }
    if (*end != '\0' || v > (1ull << 40) / mul)
        return 0;
    return (size_t)(v * mul);
}

static long parse_long(const char *s, long lo, long hi)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < lo || v > hi)
        return lo - 1;
    return v;
}

/* Returns 0, or 2 after printing one usage line. */
static int parse_options(int argc, char **argv, options *o)
{
    *o = (options){
        .min_bytes = 4096, .max_bytes = 256u << 20, .factor = 2, .iters = 20, .warmup = 5};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (strcmp(a, "--json") == 0) {
            o->json = 1;
            continue;
        }
        if (!v) {
            bad = 1;
        } else if (strcmp(a, "--min-bytes") == 0) {
            bad = (o->min_bytes = parse_bytes(v)) == 0;
        } else if (strcmp(a, "--max-bytes") == 0) {
            bad = (o->max_bytes = parse_bytes(v)) == 0;
        } else if (strcmp(a, "--step-factor") == 0) {
            bad = (o->factor = parse_long(v, 2, 1024)) < 2;
        } else if (strcmp(a, "--iters") == 0) {
            bad = (o->iters = parse_long(v, 1, 1000000)) < 1;
        } else if (strcmp(a, "--warmup") == 0) {
            bad = (o->warmup = parse_long(v, 0, 1000000)) < 0;
        } else {
            bad = 1;
        }
        if (bad) {
            fprintf(stderr, "memcpy_bw: bad option '%s%s%s'\n", a, v ? " " : "", v ? v : "");
            return 2;
        }
        i++;
    }
    if (o->min_bytes > o->max_bytes) {
        fprintf(stderr, "memcpy_bw: --min-bytes %zu is larger than --max-bytes %zu\n", o->min_bytes,
                o->max_bytes);
        return 2;
    }
    return 0;
}

/* Mean seconds per memcpy of `n` bytes; the copies alternate direction so neither buffer's
 * content is dead, and one byte of the destination is read after each copy. */
static double time_copies(char *a, char *b, size_t n, const options *o)
{
    volatile char sink = 0;
    for (long i = 0; i < o->warmup; i++) {
        memcpy(i % 2 ? a : b, i % 2 ? b : a, n);
        sink = (i % 2 ? a : b)[n - 1];
    }
    long reps = o->iters;
    for (;;) {
        double t0 = now_s();
        for (long i = 0; i < reps; i++) {
            memcpy(i % 2 ? a : b, i % 2 ? b : a, n);
            sink = (i % 2 ? a : b)[n - 1];
        }
        double dt = now_s() - t0;
        if (dt >= 0.02 || reps >= (1L << 30))
            return dt / (double)reps;
        reps *= dt > 0.002 ? 2 : 10;
    }
    (void)sink;
}

int main(int argc, char **argv)
{
    options o;
    int rc = parse_options(argc, argv, &o);
    if (rc)
        return rc;
    /* Page-aligned, so the distance between source and destination is a multiple of 4 KiB:
     * glibc's heap placed small buffers 16 bytes off that and 4K aliasing cut the rate tenfold. */
    size_t cap = (o.max_bytes + 4095) & ~(size_t)4095;
    char *a = aligned_alloc(4096, cap), *b = aligned_alloc(4096, cap);
    if (!a || !b) {
        fprintf(stderr, "memcpy_bw: cannot allocate 2 x %zu bytes\n", o.max_bytes);
        free(a);
        free(b);
        return 1;
    }
    for (size_t i = 0; i < o.max_bytes; i++) {
        a[i] = (char)(i * 7u);
        b[i] = (char)(i * 3u);
    }
    if (!o.json) {
        printf("# memcpy_bw: one thread, mean of >= %ld copies after %ld warm-up copies\n", o.iters,
               o.warmup);
        printf("# %10s  %10s  %8s\n", "size", "time", "bw");
        printf("# %10s  %10s  %8s\n", "(B)", "(us)", "(GB/s)");
    }
    for (size_t n = o.min_bytes; n <= o.max_bytes;) {
        double t = time_copies(a, b, n, &o);
        double gbs = (double)n / t * 1e-9;
        if (o.json)
            printf("{\"bench\": \"memcpy\", \"size\": %zu, \"time_us\": %.3f, \"gbps\": %.3f}\n", n,
                   t * 1e6, gbs);
        else
            printf("  %10zu  %10.2f  %8.2f\n", n, t * 1e6, gbs);
        fflush(stdout);
        if (n > o.max_bytes / (size_t)o.factor)
            break;
        n *= (size_t)o.factor;
    }
    free(a);
    free(b);
    return 0;
}
