// SPDX-License-Identifier: MIT
/* Tests for the shm backend's collectives: forked ranks (see comm_shm_testutil.h) check every
 * collective against a local reference (small and pipelined, in place or not, for 2-4 ranks),
 * bitwise repeatability with two groups at once, async work completing in order, the forced
 * cross-memory-attach paths, and nothing left in /dev/shm afterwards.
 * Rendezvous is in test_comm_shm_rdzv.c, failures in test_comm_shm_failure.c. */
#include "comm_shm_testutil.h"

/* Sanitizer builds run the same paths on smaller "large" messages (still many pipeline blocks). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
enum { BIG_SHIFT = 0 };
#else
enum { BIG_SHIFT = 3 };
#endif
#define BIG(n) ((size_t)(n) << BIG_SHIFT)

static void rank_collectives(const ddpc_comm_env *e, void *arg)
{
    (void)arg;
    ddpc_pg *pg = join(e);
    if (!pg)
        return;
    static const size_t sizes[] = {0, 1, 7, 4099, 70001};
    int salt = 0;
    for (int t = 0; t < DDPC_DTYPE_COUNT; t++)
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++, salt++) {
            for (int op = 0; op < DDPC_REDUCE_COUNT; op++) {
                check_all_reduce(pg, sizes[i], t, op, (op + salt) % 2, salt);
                check_reduce_scatter(pg, sizes[i], t, op, (op + salt) % 2 == 0, salt);
            }
            check_gather_and_broadcast(pg, sizes[i], t, salt % 2, salt);
        }
    CHECK_EQ_INT(ddpc_pg_barrier(pg), DDPC_OK);
    /* 16 MiB in release builds: many pipeline blocks, far more than the whole segment */
    check_all_reduce(pg, BIG(1u << 19), DDPC_DTYPE_F32, DDPC_REDUCE_SUM, false, 7);
    check_all_reduce(pg, BIG(1u << 18) + 3, DDPC_DTYPE_BF16, DDPC_REDUCE_AVG, true, 8);
    check_reduce_scatter(pg, BIG(1u << 17) + 5, DDPC_DTYPE_F64, DDPC_REDUCE_MAX, true, 9);
    check_gather_and_broadcast(pg, BIG(1u << 17) + 1, DDPC_DTYPE_F32, false, 10);
    ddpc_pg_destroy(pg);
}

static void test_collectives_by_port(void)
{
    for (int w = 2; w <= 4; w++) {
        ddpc_comm_env e = base_env(w);
        e.master_port = free_port();
        int codes[16];
        run_ranks(w, &e, rank_collectives, NULL, 60, codes);
        expect_all_ok(w, codes);
    }
}

/* ---- determinism, isolation, async ---- */

static void rank_repeatable(const ddpc_comm_env *e, void *arg)
{
    int salt = *(const int *)arg;
    ddpc_pg *pg = join(e);
    if (!pg)
        return;
    int w = ddpc_pg_world_size(pg);
    for (size_t count = 1000; count <= BIG(400000); count *= BIG(400)) {
        float *x = ddpc_malloc(count * 4), *a = ddpc_malloc(count * 4), *b = ddpc_malloc(count * 4);
        fill(x, count, DDPC_DTYPE_F32, e->rank, salt);
        for (size_t i = 0; i < count; i++)
            x[i] *= 1.0f + 1e-3f * (float)(i % 97); /* rounding differs by summation order */
        for (int rep = 0; rep < 50; rep++) {
            CHECK_EQ_INT(
                ddpc_pg_all_reduce(pg, x, rep ? b : a, count, DDPC_DTYPE_F32, DDPC_REDUCE_SUM),
                DDPC_OK);
            if (rep && memcmp(a, b, count * 4) != 0) {
                CHECK(!"all_reduce is not bitwise repeatable");
                break;
            }
            if (count > 1000 && rep == 2)
                break;
        }
        uint64_t h = 1469598103934665603ull, all[16];
        for (size_t i = 0; i < count * 4; i++)
            h = (h ^ ((unsigned char *)a)[i]) * 1099511628211ull;
        CHECK_EQ_INT(ddpc_pg_all_gather(pg, &h, all, 1, DDPC_DTYPE_I64), DDPC_OK);
        for (int k = 0; k < w; k++)
            CHECK(all[k] == h); /* every rank got the same bits */
        ddpc_free(x);
        ddpc_free(a);
        ddpc_free(b);
    }
    ddpc_pg_destroy(pg);
}

static void test_two_groups_at_once_are_bitwise_repeatable(void)
{
    ddpc_comm_env e1 = base_env(2), e2 = base_env(2);
    e1.master_port = free_port();
    e2.master_port = free_port();
    int salt1 = 1, salt2 = 2, c1[16], c2[16];
    fflush(NULL);
    pid_t other = fork();
    if (other == 0) {
        check_failures_in_test = 0;
        run_ranks(2, &e2, rank_repeatable, &salt2, 60, c2);
        _exit(check_failures_in_test || c2[0] || c2[1]);
    }
    run_ranks(2, &e1, rank_repeatable, &salt1, 60, c1);
    expect_all_ok(2, c1);
    int status = 0;
    waitpid(other, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void rank_async(const ddpc_comm_env *e, void *arg)
{
    (void)arg;
    ddpc_pg *pg = join(e);
    if (!pg)
        return;
    enum { N = 24, COUNT = 20000 };
    int w = ddpc_pg_world_size(pg);
    float *buf = ddpc_malloc((size_t)N * COUNT * 4);
    ddpc_work *work[N];
    for (int i = 0; i < N; i++) {
        fill(buf + (size_t)i * COUNT, COUNT, DDPC_DTYPE_F32, e->rank, i);
        CHECK_EQ_INT(ddpc_pg_iall_reduce(pg, buf + (size_t)i * COUNT, buf + (size_t)i * COUNT,
                                         COUNT, DDPC_DTYPE_F32, DDPC_REDUCE_AVG, &work[i]),
                     DDPC_OK);
    }
    int64_t one = e->rank, sum = 0;
    CHECK_EQ_INT(ddpc_pg_all_reduce(pg, &one, &sum, 1, DDPC_DTYPE_I64, DDPC_REDUCE_SUM), DDPC_OK);
    CHECK_EQ_INT(sum, (int64_t)w * (w - 1) / 2);
    for (int i = 0; i < N; i++) {
        bool done = false;
        CHECK_EQ_INT(ddpc_work_test(work[i], &done), DDPC_OK);
        CHECK(done); /* the blocking call ran after all of them */
        CHECK_EQ_INT(ddpc_work_wait(work[i]), DDPC_OK);
        ddpc_work_destroy(work[i]);
        void *want = expected_reduce(w, COUNT, DDPC_DTYPE_F32, DDPC_REDUCE_AVG, i, 0);
        CHECK(same(buf + (size_t)i * COUNT, want, COUNT * 4, "async all_reduce", e->rank));
        ddpc_free(want);
    }
    CHECK_EQ_INT(ddpc_pg_seq(pg), N + 1);
    ddpc_free(buf);
    ddpc_pg_destroy(pg);
}

static void test_async_in_order(void)
{
    ddpc_comm_env e = base_env(3);
    set_run_id(&e, "async");
    int codes[16];
    run_ranks(3, &e, rank_async, NULL, 30, codes);
    expect_all_ok(3, codes);
}

/* The cross-memory-attach paths (off by default, see shm_rendezvous.c), forced on. */
static void rank_cma(const ddpc_comm_env *e, void *arg)
{
    (void)arg;
    ddpc_pg *pg = join(e);
    if (!pg)
        return;
    ddpc__shm_state *st = pg->state;
    if (!st->use_cma)
        fprintf(stderr, "rank %d: process_vm_readv refused here; pipeline paths only\n", e->rank);
    st->cma_min = 0;
    static const size_t sizes[] = {0, 1, 7, 4099, 100003};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        for (int t = 0; t < DDPC_DTYPE_COUNT; t += 2) {
            check_all_reduce(pg, sizes[i], t, (i + t) % DDPC_REDUCE_COUNT, i % 2, (int)i);
            check_reduce_scatter(pg, sizes[i], t, (i + t + 1) % DDPC_REDUCE_COUNT, i % 2 == 0,
                                 (int)i);
            check_gather_and_broadcast(pg, sizes[i], t, i % 2, (int)i + t);
        }
    }
    check_all_reduce(pg, BIG(1u << 18), DDPC_DTYPE_F32, DDPC_REDUCE_SUM, true, 11);
    ddpc_pg_destroy(pg);
}

static void test_cross_memory_attach_paths(void)
{
    ddpc_comm_env e = base_env(3);
    e.master_port = free_port();
    int codes[16];
    run_ranks(3, &e, rank_cma, NULL, 60, codes);
    expect_all_ok(3, codes);
}

/* ---- /dev/shm ---- */

static void test_nothing_left_in_dev_shm(void)
{
    expect_nothing_left_in_dev_shm(6);
}

int main(void)
{
    RUN_TEST(test_collectives_by_port);
    RUN_TEST(test_two_groups_at_once_are_bitwise_repeatable);
    RUN_TEST(test_async_in_order);
    RUN_TEST(test_cross_memory_attach_paths);
    RUN_TEST(test_nothing_left_in_dev_shm);
    return check_summary();
}
