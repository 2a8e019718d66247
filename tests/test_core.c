// SPDX-License-Identifier: MIT
/* Tests for src/core: status table, error messages, allocator hooks, counter-based RNG. */
#include <ddpc/alloc.h>
#include <ddpc/rng.h>
#include <ddpc/status.h>

#include "check.h"

static void test_status_names(void)
{
    CHECK(strcmp(ddpc_status_name(DDPC_OK), "DDPC_OK") == 0);
    CHECK(strcmp(ddpc_status_name(DDPC_ETIMEOUT), "DDPC_ETIMEOUT") == 0);
    CHECK(strcmp(ddpc_status_name((ddpc_status)-99), "DDPC_UNKNOWN") == 0);
}

static void test_errorf_sets_message(void)
{
    ddpc_status s = ddpc_errorf(DDPC_EINVAL, "bad key '%s' at line %d", "lr", 3);
    CHECK_EQ_INT(s, DDPC_EINVAL);
    CHECK(strcmp(ddpc_last_error(), "bad key 'lr' at line 3") == 0);
    ddpc_clear_error();
    CHECK(ddpc_last_error()[0] == '\0');
}

static void test_alloc_alignment_and_counts(void)
{
    int64_t live = ddpc_alloc_live();
    float *p = ddpc_malloc(100);
    CHECK(p != NULL);
    CHECK(((uintptr_t)p % DDPC_ALIGNMENT) == 0);
    CHECK_EQ_INT(ddpc_alloc_live(), live + 1);
    ddpc_free(p);
    ddpc_free(NULL);
    CHECK_EQ_INT(ddpc_alloc_live(), live);
    CHECK(ddpc_calloc(SIZE_MAX / 2, 4) == NULL);
}

static void test_alloc_byte_counters(void)
{
    int64_t base = ddpc_alloc_live_bytes();
    ddpc_alloc_reset_peak();
    CHECK_EQ_INT(ddpc_alloc_peak_bytes(), base);
    char *a = ddpc_malloc(1000);
    float *b = ddpc_calloc(10, sizeof(float));
    CHECK(a && b);
    CHECK(((uintptr_t)b % DDPC_ALIGNMENT) == 0);
    CHECK_EQ_INT(ddpc_alloc_live_bytes(), base + 1040);
    ddpc_free(a);
    CHECK_EQ_INT(ddpc_alloc_live_bytes(), base + 40);
    CHECK_EQ_INT(ddpc_alloc_peak_bytes(), base + 1040);
    ddpc_alloc_reset_peak();
    CHECK_EQ_INT(ddpc_alloc_peak_bytes(), base + 40);
    ddpc_free(b);
    CHECK_EQ_INT(ddpc_alloc_live_bytes(), base);
    CHECK_EQ_INT(ddpc_alloc_peak_bytes(), base + 40);
}

static void test_alloc_failure_injection(void)
{
    ddpc_alloc_fail_after(1);
    void *a = ddpc_malloc(8);
    void *b = ddpc_malloc(8);
    void *c = ddpc_malloc(8);
    CHECK(a != NULL);
    CHECK(b == NULL);
    CHECK(c != NULL);
    ddpc_free(a);
    ddpc_free(c);
    ddpc_alloc_fail_after(-1);
}

static void test_rng_is_counter_based(void)
{
    ddpc_rng r = ddpc_rng_make(42, 7);
    uint64_t first[4];
    for (int i = 0; i < 4; i++)
        first[i] = ddpc_rng_next(&r);
    for (int i = 0; i < 4; i++)
        CHECK(first[i] == ddpc_rng_at(42, 7, (uint64_t)i));
    CHECK(ddpc_rng_at(42, 7, 0) != ddpc_rng_at(42, 8, 0));
    CHECK(ddpc_rng_at(42, 7, 0) != ddpc_rng_at(43, 7, 0));
}

static void test_rng_distributions(void)
{
    ddpc_rng r = ddpc_rng_make(1, 0);
    double sum = 0, sumsq = 0, usum = 0;
    int n = 200000;
    for (int i = 0; i < n; i++) {
        float z = ddpc_rng_normal(&r);
        sum += z;
        sumsq += (double)z * z;
        float u = ddpc_rng_uniform(&r);
        CHECK(u >= 0.0f && u < 1.0f);
        usum += u;
    }
    CHECK_NEAR(sum / n, 0.0, 0.01);
    CHECK_NEAR(sumsq / n, 1.0, 0.02);
    CHECK_NEAR(usum / n, 0.5, 0.01);
    int64_t idx[10];
    for (int i = 0; i < 10; i++)
        idx[i] = i;
    ddpc_rng_shuffle(&r, idx, 10);
    int seen[10] = {0};
    for (int i = 0; i < 10; i++)
        seen[idx[i]]++;
    for (int i = 0; i < 10; i++)
        CHECK_EQ_INT(seen[i], 1);
    for (int i = 0; i < 1000; i++)
        CHECK(ddpc_rng_below(&r, 3) < 3);
}

int main(void)
{
    RUN_TEST(test_status_names);
    RUN_TEST(test_errorf_sets_message);
    RUN_TEST(test_alloc_alignment_and_counts);
    RUN_TEST(test_alloc_byte_counters);
    RUN_TEST(test_alloc_failure_injection);
    RUN_TEST(test_rng_is_counter_based);
    RUN_TEST(test_rng_distributions);
    return check_summary();
}
