// SPDX-License-Identifier: MIT
/* Collective conformance suite, run unchanged on every backend and world size: every collective x
 * dtype x op at sizes 0, 1, 7, 4099 (and >= 16 MiB for one dtype per element width, SUM and AVG),
 * in place and out of place, against a reference each rank computes locally (every rank can
 * generate every rank's input). Inputs are small multiples of 1/4, so sums are exact in every
 * dtype and the order of reduction cannot matter: any difference is a bug. Determinism on
 * non-exact data is checked across ranks and repeats.
 *
 *   comm_conformance [--backend B] [--quick]           one rank; its place comes from the env
 *   comm_conformance --spawn N [--backend B] [--quick] forks N ranks with torchrun-style env
 * --quick (implied under the sanitizers) leaves out the >= 16 MiB cases. */
#include "conformance_util.h"
#include "spawn.h"

#include <ddpc/alloc.h>
#include <ddpc/comm.h>
#include <ddpc/half.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BIG_BYTES ((size_t)16 << 20)

typedef struct {
    ddpc_pg *pg;
    int rank, world;
    int failures;
    bool quick;
} suite;

#define EXPECT(s, cond, ...)                                                                \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            fprintf(stderr, "rank %d: %s:%d: ", (s)->rank, __FILE__, __LINE__);             \
            fprintf(stderr, __VA_ARGS__);                                                   \
            fprintf(stderr, "\n");                                                          \
            (s)->failures++;                                                                \
        }                                                                                   \
    } while (0)

#define EXPECT_OK(s, st, what)                                                              \
    EXPECT(s, (st) == DDPC_OK, "%s failed: %s: %s", what, ddpc_status_name(st),            \
           ddpc_last_error())

static const size_t small_counts[] = {0, 1, 7, 4099};

static size_t big_count(ddpc_dtype dt) { return BIG_BYTES / ddpc_dtype_size(dt) + 3; }

/* Compares n elements bitwise; reports the first mismatch. */
static void expect_same(suite *s, const char *what, const void *got, const void *want, size_t n,
                        ddpc_dtype dt)
{
    size_t es = ddpc_dtype_size(dt);
    for (size_t i = 0; i < n; i++) {
        if (memcmp((const char *)got + i * es, (const char *)want + i * es, es) != 0) {
            EXPECT(s, 0, "%s: element %zu of %zu: got %.9g, want %.9g", what, i, n,
                   conf_get(got, i, dt), conf_get(want, i, dt));
            return;
        }
    }
}

static void check_all_reduce(suite *s, ddpc_dtype dt, ddpc_reduce_op op, size_t n, bool inplace)
{
    size_t es = ddpc_dtype_size(dt);
    char *send = ddpc_malloc(n * es + 1), *recv = ddpc_malloc(n * es + 1);
    char *want = ddpc_malloc(n * es + 1);
    conf_fill(send, n, dt, s->rank, 1);
    conf_reference_reduce(want, n, dt, op, s->world, 1, 0);
    char what[96];
    snprintf(what, sizeof what, "all_reduce %s %s n=%zu%s", ddpc_dtype_name(dt),
             ddpc_reduce_op_name(op), n, inplace ? " in place" : "");
    ddpc_status st = ddpc_pg_all_reduce(s->pg, send, inplace ? send : recv, n, dt, op);
    EXPECT_OK(s, st, what);
    if (st == DDPC_OK)
        expect_same(s, what, inplace ? send : recv, want, n, dt);
    ddpc_free(send);
    ddpc_free(recv);
    ddpc_free(want);
}

static void check_reduce_scatter(suite *s, ddpc_dtype dt, ddpc_reduce_op op, size_t n,
                                 bool inplace)
{
    size_t es = ddpc_dtype_size(dt), total = n * (size_t)s->world;
    char *send = ddpc_malloc(total * es + 1), *recv = ddpc_malloc(n * es + 1);
    char *want = ddpc_malloc(n * es + 1);
    conf_fill(send, total, dt, s->rank, 2);
    conf_reference_reduce(want, n, dt, op, s->world, 2, (size_t)s->rank * n);
    char what[96];
    snprintf(what, sizeof what, "reduce_scatter %s %s n=%zu%s", ddpc_dtype_name(dt),
             ddpc_reduce_op_name(op), n, inplace ? " in place" : "");
    void *out = inplace ? send + (size_t)s->rank * n * es : recv;
    ddpc_status st = ddpc_pg_reduce_scatter(s->pg, send, out, n, dt, op);
    EXPECT_OK(s, st, what);
    if (st == DDPC_OK)
        expect_same(s, what, out, want, n, dt);
    ddpc_free(send);
    ddpc_free(recv);
    ddpc_free(want);
}

static void check_broadcast(suite *s, ddpc_dtype dt, size_t n, int root)
{
    size_t es = ddpc_dtype_size(dt);
    char *buf = ddpc_malloc(n * es + 1), *want = ddpc_malloc(n * es + 1);
    conf_fill(buf, n, dt, s->rank, 3);
    conf_fill(want, n, dt, root, 3);
    char what[96];
    snprintf(what, sizeof what, "broadcast %s n=%zu root=%d", ddpc_dtype_name(dt), n, root);
    ddpc_status st = ddpc_pg_broadcast(s->pg, buf, n, dt, root);
    EXPECT_OK(s, st, what);
    if (st == DDPC_OK)
        expect_same(s, what, buf, want, n, dt);
    ddpc_free(buf);
    ddpc_free(want);
}

static void check_all_gather(suite *s, ddpc_dtype dt, size_t n, bool inplace)
{
    size_t es = ddpc_dtype_size(dt), total = n * (size_t)s->world;
    char *send = ddpc_malloc(n * es + 1), *recv = ddpc_malloc(total * es + 1);
    char *want = ddpc_malloc(total * es + 1);
    conf_fill(send, n, dt, s->rank, 4);
    for (int r = 0; r < s->world; r++)
        conf_fill(want + (size_t)r * n * es, n, dt, r, 4);
    const void *in = send;
    if (inplace) {
        memcpy(recv + (size_t)s->rank * n * es, send, n * es);
        in = recv + (size_t)s->rank * n * es;
    }
    char what[96];
    snprintf(what, sizeof what, "all_gather %s n=%zu%s", ddpc_dtype_name(dt), n,
             inplace ? " in place" : "");
    ddpc_status st = ddpc_pg_all_gather(s->pg, in, recv, n, dt);
    EXPECT_OK(s, st, what);
    if (st == DDPC_OK)
        expect_same(s, what, recv, want, total, dt);
    ddpc_free(send);
    ddpc_free(recv);
    ddpc_free(want);
}

/* Whether the >= 16 MiB case runs for dtype dt and op o. The big case is for what depends on the
 * message's size in bytes: blocks, shares and pipelining, which differ only by element width, so
 * one dtype per width (f32, f64, bf16) runs it; ops and the other dtypes are the same element-wise
 * kernels, checked at the small sizes (4099 elements span several of their 1024-element passes).
 * Of the ops, SUM and AVG (the only one to divide at the end); reduce_scatter's input is world x n,
 * so SUM alone. The full matrix took ~260 s at world 4 on a loaded 2-core machine; this, a third. */
static bool big_case(ddpc_dtype dt, ddpc_reduce_op o, bool scatter)
{
    bool width = dt == DDPC_DTYPE_F32 || dt == DDPC_DTYPE_F64 || dt == DDPC_DTYPE_BF16;
    return width && (o == DDPC_REDUCE_SUM || (!scatter && o == DDPC_REDUCE_AVG));
}

/* Every collective x dtype x op at the small sizes; at >= 16 MiB what big_case keeps. */
static void run_matrix(suite *s)
{
    for (int d = 0; d < DDPC_DTYPE_COUNT; d++) {
        ddpc_dtype dt = (ddpc_dtype)d;
        size_t counts[5];
        memcpy(counts, small_counts, sizeof small_counts);
        counts[4] = big_count(dt);
        int ncounts = s->quick || !big_case(dt, DDPC_REDUCE_SUM, false) ? 4 : 5;
        for (int c = 0; c < ncounts; c++) {
            size_t n = counts[c];
            bool big = c == 4;
            for (int o = 0; o < DDPC_REDUCE_COUNT; o++) {
                if (!big || big_case(dt, (ddpc_reduce_op)o, false)) {
                    check_all_reduce(s, dt, (ddpc_reduce_op)o, n, false);
                    check_all_reduce(s, dt, (ddpc_reduce_op)o, n, true);
                }
                if (!big || big_case(dt, (ddpc_reduce_op)o, true)) {
                    check_reduce_scatter(s, dt, (ddpc_reduce_op)o, n, false);
                    check_reduce_scatter(s, dt, (ddpc_reduce_op)o, n, true);
                }
            }
            for (int root = 0; root < s->world; root++)
                if (!big || root == s->world - 1)
                    check_broadcast(s, dt, n, root);
            check_all_gather(s, dt, n, false);
            check_all_gather(s, dt, n, true);
        }
    }
    EXPECT_OK(s, ddpc_pg_barrier(s->pg), "barrier");
}

/* Many async collectives in flight, waited in reverse order, then a blocking one after them. */
static void run_async(suite *s)
{
    enum { K = 12, N = 4099 };
    float *bufs[K], *want = ddpc_malloc(N * sizeof(float));
    ddpc_work *work[K];
    conf_reference_reduce(want, N, DDPC_DTYPE_F32, DDPC_REDUCE_SUM, s->world, 5, 0);
    for (int k = 0; k < K; k++) {
        bufs[k] = ddpc_malloc(N * sizeof(float));
        conf_fill(bufs[k], N, DDPC_DTYPE_F32, s->rank, 5);
        ddpc_status st = k % 3 == 2 ? ddpc_pg_ibarrier(s->pg, &work[k])
                                    : ddpc_pg_iall_reduce(s->pg, bufs[k], bufs[k], N,
                                                          DDPC_DTYPE_F32, DDPC_REDUCE_SUM,
                                                          &work[k]);
        EXPECT_OK(s, st, "async issue");
        if (st != DDPC_OK)
            work[k] = NULL;
    }
    bool done = false;
    if (work[0]) {
        EXPECT_OK(s, ddpc_work_test(work[0], &done), "ddpc_work_test");
    }
    float one = 1.0f;
    EXPECT_OK(s, ddpc_pg_all_reduce(s->pg, &one, &one, 1, DDPC_DTYPE_F32, DDPC_REDUCE_SUM),
              "blocking all_reduce after async ones");
    EXPECT(s, one == (float)s->world, "blocking after async: got %g", one);
    for (int k = K - 1; k >= 0; k--) {
        if (!work[k])
            continue;
        /* The blocking collective above ran after every queued one, so all are done. */
        EXPECT_OK(s, ddpc_work_test(work[k], &done), "ddpc_work_test");
        EXPECT(s, done, "async work %d not done after a later blocking collective", k);
        EXPECT_OK(s, ddpc_work_wait(work[k]), "ddpc_work_wait");
        if (k % 3 != 2)
            expect_same(s, "async all_reduce", bufs[k], want, N, DDPC_DTYPE_F32);
        ddpc_work_destroy(work[k]);
    }
    /* Handles destroyed without an explicit wait. */
    for (int k = 0; k < 4; k++) {
        ddpc_work *w = NULL;
        EXPECT_OK(s, ddpc_pg_iall_gather(s->pg, &one, bufs[k], 1, DDPC_DTYPE_F32, &w), "iall_gather");
        ddpc_work_destroy(w);
    }
    for (int k = 0; k < K; k++)
        ddpc_free(bufs[k]);
    ddpc_free(want);
}

/* The shm backend's definition written out independently: every rank's input in rank order,
 * accumulated in f32 (bf16 widened), rounded once. want: (n). */
static void rank_order_sum(void *want, size_t n, ddpc_dtype dt, int world)
{
    size_t es = ddpc_dtype_size(dt);
    float *acc = ddpc_malloc(n * sizeof(float)), *x = ddpc_malloc(n * sizeof(float));
    void *in = ddpc_malloc(n * es);
    for (int r = 0; r < world; r++) {
        conf_fill_random(in, n, dt, r);
        if (dt == DDPC_DTYPE_BF16)
            ddpc_half_to_f32_array(x, in, n, 1);
        else
            memcpy(x, in, n * sizeof(float));
        for (size_t i = 0; i < n; i++)
            acc[i] = r == 0 ? x[i] : acc[i] + x[i];
    }
    if (dt == DDPC_DTYPE_BF16)
        ddpc_f32_to_half_array(want, acc, n, 1);
    else
        memcpy(want, acc, n * sizeof(float));
    ddpc_free(in);
    ddpc_free(x);
    ddpc_free(acc);
}

/* Non-exact f32/bf16 sums: identical bits on every rank and on a repeat, and equal to the
 * rank-order sum (where the order of reduction matters, every backend must keep shm's). */
static void run_determinism(suite *s)
{
    const ddpc_dtype dts[2] = {DDPC_DTYPE_F32, DDPC_DTYPE_BF16};
    for (int d = 0; d < 2; d++) {
        size_t n = 300007, es = ddpc_dtype_size(dts[d]);
        char *a = ddpc_malloc(n * es), *b = ddpc_malloc(n * es);
        conf_fill_random(a, n, dts[d], s->rank);
        memcpy(b, a, n * es);
        EXPECT_OK(s, ddpc_pg_all_reduce(s->pg, a, a, n, dts[d], DDPC_REDUCE_SUM), "determinism 1");
        EXPECT_OK(s, ddpc_pg_all_reduce(s->pg, b, b, n, dts[d], DDPC_REDUCE_SUM), "determinism 2");
        EXPECT(s, memcmp(a, b, n * es) == 0, "repeat of a %s sum differs", ddpc_dtype_name(dts[d]));
        char *want = ddpc_malloc(n * es);
        rank_order_sum(want, n, dts[d], s->world);
        expect_same(s, "non-exact sum against the rank-order sum", a, want, n, dts[d]);
        ddpc_free(want);
        int64_t h = (int64_t)conf_hash(a, n * es), *all = ddpc_malloc(sizeof(int64_t) * s->world);
        EXPECT_OK(s, ddpc_pg_all_gather(s->pg, &h, all, 1, DDPC_DTYPE_I64), "hash gather");
        for (int r = 0; r < s->world; r++)
            EXPECT(s, all[r] == h, "rank %d's %s sum differs from rank %d's", r,
                   ddpc_dtype_name(dts[d]), s->rank);
        ddpc_free(all);
        ddpc_free(a);
        ddpc_free(b);
    }
}

static int run_rank(ddpc_backend backend, bool quick)
{
    ddpc_comm_env env;
    if (ddpc_comm_env_discover(&env) != DDPC_OK) {
        fprintf(stderr, "comm_conformance: %s\n", ddpc_last_error());
        return 1;
    }
    ddpc_pg_config cfg = ddpc_pg_config_default();
    cfg.backend = backend;
    cfg.timeout_s = 60;
    suite s = {.rank = env.rank, .world = env.world_size, .quick = quick};
    if (ddpc_pg_create(&env, &cfg, &s.pg) != DDPC_OK) {
        fprintf(stderr, "rank %d: ddpc_pg_create: %s\n", env.rank, ddpc_last_error());
        return 1;
    }
    run_matrix(&s);
    run_async(&s);
    run_determinism(&s);
    ddpc_pg_destroy(s.pg);
    if (s.failures == 0 && s.rank == 0)
        printf("conformance: backend %s, world %d: all passed\n", ddpc_backend_name(backend),
               s.world);
    return s.failures == 0 ? 0 : 1;
}

typedef struct {
    ddpc_backend backend;
    bool quick;
} options;

static int spawned_rank(int rank, int world, void *ctx)
{
    (void)rank, (void)world; /* the rank reads its place from the environment spawn_ranks set */
    const options *o = ctx;
    return run_rank(o->backend, o->quick);
}

int main(int argc, char **argv)
{
    ddpc_backend backend = DDPC_BACKEND_AUTO;
    int spawn = 0;
    bool quick = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc) {
            if (ddpc_backend_parse(argv[++i], &backend) != DDPC_OK) {
                fprintf(stderr, "comm_conformance: %s\n", ddpc_last_error());
                return 2;
            }
        } else if (strcmp(argv[i], "--spawn") == 0 && i + 1 < argc) {
            spawn = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--quick") == 0) {
            quick = true;
        } else {
            fprintf(stderr, "usage: comm_conformance [--backend B] [--spawn N] [--quick]\n");
            return 2;
        }
    }
    /* Under the sanitizers (make test-sanitize / test-tsan set DDPC_SANITIZE) the >= 16 MiB cases
     * would take minutes; the release build runs them, the sanitizers check the smaller ones. */
    if (getenv("DDPC_SANITIZE"))
        quick = true;
    if (spawn > 0) {
        options opt = {backend, quick};
        /* A backstop for a hang the collectives' own 60 s timeouts miss, not a timing: world 4
         * took 125 s beside two CPU hogs on a loaded 2-core machine (tests/tests.cmake). */
        return spawn_ranks(spawn, 300.0, spawned_rank, &opt);
    }
    return run_rank(backend, quick);
}
