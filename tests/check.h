// SPDX-License-Identifier: MIT
/* Minimal test harness: each tests/test_*.c is one process holding several test functions.
 * Assertions print both expressions and their values; main ends with check_summary(), which
 * prints "N passed, N failed" and returns the exit status. */
#ifndef DDPC_TESTS_CHECK_H
#define DDPC_TESTS_CHECK_H

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_failures_in_test;
static int check_tests_passed;
static int check_tests_failed;

#define CHECK(cond)                                                             \
    do {                                                                        \
        if (!(cond)) {                                                          \
            fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
            check_failures_in_test++;                                           \
        }                                                                       \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                      \
    do {                                                                        \
        long long check_a_ = (long long)(a), check_b_ = (long long)(b);         \
        if (check_a_ != check_b_) {                                             \
            fprintf(stderr, "%s:%d: %s == %s failed: %lld vs %lld\n", __FILE__, \
                    __LINE__, #a, #b, check_a_, check_b_);                      \
            check_failures_in_test++;                                           \
        }                                                                       \
    } while (0)

/* |a - b| <= tol * max(1, |b|): relative for large values, absolute near zero. */
#define CHECK_NEAR(a, b, tol)                                                   \
    do {                                                                        \
        double check_a_ = (double)(a), check_b_ = (double)(b);                  \
        double check_s_ = fabs(check_b_) > 1.0 ? fabs(check_b_) : 1.0;          \
        if (!(fabs(check_a_ - check_b_) <= (tol) * check_s_)) {                 \
            fprintf(stderr, "%s:%d: %s ~= %s failed: %.9g vs %.9g (tol %g)\n",  \
                    __FILE__, __LINE__, #a, #b, check_a_, check_b_, (double)(tol)); \
            check_failures_in_test++;                                           \
        }                                                                       \
    } while (0)

#define CHECK_STR_CONTAINS(hay, needle)                                         \
    do {                                                                        \
        const char *check_h_ = (hay), *check_n_ = (needle);                     \
        if (!check_h_ || !strstr(check_h_, check_n_)) {                         \
            fprintf(stderr, "%s:%d: \"%s\" does not contain \"%s\"\n", __FILE__, \
                    __LINE__, check_h_ ? check_h_ : "(null)", check_n_);        \
            check_failures_in_test++;                                           \
        }                                                                       \
    } while (0)

#define RUN_TEST(fn)                                                            \
    do {                                                                        \
        check_failures_in_test = 0;                                             \
        fn();                                                                   \
        if (check_failures_in_test) {                                           \
            fprintf(stderr, "FAIL %s\n", #fn);                                  \
            check_tests_failed++;                                               \
        } else {                                                                \
            printf("ok   %s\n", #fn);                                           \
            check_tests_passed++;                                               \
        }                                                                       \
    } while (0)

/* Reads at most cap - 1 bytes of the file at path into buf, NUL-terminated ("" if unreadable). */
static inline void check_read_file(const char *path, char *buf, size_t cap)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    fclose(f);
}

/* Whether process pid has ended: no /proc entry, or a zombie (or dead) waiting to be reaped. */
static inline bool check_process_gone(long pid)
{
    char path[64], stat[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    check_read_file(path, stat, sizeof stat);
    const char *p = strrchr(stat, ')');
    return !p || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X';
}

static inline int check_summary(void)
{
    printf("%d passed, %d failed\n", check_tests_passed, check_tests_failed);
    return check_tests_failed ? 1 : 0;
}

#endif
