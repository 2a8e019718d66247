// SPDX-License-Identifier: MIT
/* Host staging (src/comm/staged.c) on the CPU: its copier is plain memcpy standing in for the
 * GPU's copies, so every path but the CUDA calls runs here. Forked ranks over shm check every
 * collective against the local reference in place and not (the host image must keep the
 * aliasing), world size 1 without a host backend, exactly one copy down and one up per collective
 * (none down on a broadcast's other ranks), a warm collective allocating nothing, and a failed
 * copy or a refused pinned allocation failing the group with the copier's message.
 * The same wrapper on a real GPU is tests/test_cuda_comm.c (run by tests/gpu/run.sh). */
#include "comm/device_impl.h"
#include "comm_shm_testutil.h"

typedef struct {
    int allocs, downs, ups;
    size_t down_bytes, up_bytes;
    bool fail_down, fail_alloc;
    const unsigned char *pinned; /* the latest pinned buffer, (pinned_bytes) */
    size_t pinned_bytes;
} fake_device;

static void *host_alloc(void *ctx, size_t bytes)
{
    fake_device *d = ctx;
    if (d->fail_alloc)
        return NULL;
    d->allocs++;
    d->pinned = ddpc_malloc(bytes);
    d->pinned_bytes = bytes;
    return (void *)d->pinned;
}

/* Every copy stays inside the pinned buffer, as cudaMemcpy insists on a real GPU. */
static bool in_pinned(const fake_device *d, const void *host, size_t bytes)
{
    const unsigned char *h = host;
    bool ok = h >= d->pinned && bytes <= d->pinned_bytes &&
              h - d->pinned <= (ptrdiff_t)(d->pinned_bytes - bytes);
    if (!ok)
        fprintf(stderr, "a copy of %zu bytes at offset %td leaves the %zu-byte pinned buffer\n",
                bytes, h - d->pinned, d->pinned_bytes);
    return ok;
}

static void host_free(void *ctx, void *p)
{
    (void)ctx;
    ddpc_free(p);
}

static ddpc_status down(void *ctx, void *host, const void *dev, size_t bytes)
{
    fake_device *d = ctx;
    if (d->fail_down)
        return ddpc_errorf(DDPC_EIO, "host staging: copying %zu bytes down from fake GPU failed",
                           bytes);
    d->downs++;
    d->down_bytes += bytes;
    CHECK(in_pinned(d, host, bytes));
    memcpy(host, dev, bytes);
    return DDPC_OK;
}

static ddpc_status up(void *ctx, void *dev, const void *host, size_t bytes)
{
    fake_device *d = ctx;
    d->ups++;
    d->up_bytes += bytes;
    CHECK(in_pinned(d, host, bytes));
    memcpy(dev, host, bytes);
    return DDPC_OK;
}

/* A group of env's ranks over shm (none for world size 1), staged through `dev`. */
static ddpc_pg *staged_pg(const ddpc_comm_env *e, fake_device *dev)
{
    const ddpc__pg_backend *ops = NULL;
    void *state = NULL;
    if (e->world_size > 1 && ddpc__shm_create(e, ddpc_time_now() + 20, &ops, &state) != DDPC_OK) {
        fprintf(stderr, "rank %d: shm: %s\n", e->rank, ddpc_last_error());
        return NULL;
    }
    ddpc__staging_copier c = {host_alloc, host_free, down, up, dev};
    ddpc_pg *pg = NULL;
    CHECK_EQ_INT(ddpc__staged_create(e->rank, e->world_size, ops, state, c, &ops, &state), DDPC_OK);
    CHECK_EQ_INT(ddpc__pg_create_with(e, DDPC_BACKEND_SHM, 20, ops, state, &pg), DDPC_OK);
    return pg;
}

static void rank_conformance(const ddpc_comm_env *e, void *arg)
{
    (void)arg;
    fake_device dev = {0};
    ddpc_pg *pg = staged_pg(e, &dev);
    CHECK(pg != NULL);
    if (!pg)
        return;
    static const size_t sizes[] = {0, 1, 7, 4099};
    static const ddpc_dtype types[] = {DDPC_DTYPE_F32, DDPC_DTYPE_BF16, DDPC_DTYPE_F64,
                                       DDPC_DTYPE_I64};
    int salt = 0;
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++, salt++) {
            for (int op = 0; op < DDPC_REDUCE_COUNT; op++) {
                check_all_reduce(pg, sizes[i], types[t], op, (op + salt) % 2, salt);
                check_reduce_scatter(pg, sizes[i], types[t], op, (op + salt) % 2 == 0, salt);
            }
            check_gather_and_broadcast(pg, sizes[i], types[t], salt % 2, salt);
            check_gather_and_broadcast(pg, sizes[i], types[t], salt % 2 == 0, salt + 1);
        }
    CHECK_EQ_INT(ddpc_pg_barrier(pg), DDPC_OK);
    ddpc_pg_destroy(pg);
}

static void test_conformance_on_1_to_3_ranks(void)
{
    for (int w = 1; w <= 3; w++) {
        ddpc_comm_env e = base_env(w);
        e.master_port = free_port();
        int codes[16];
        run_ranks(w, &e, rank_conformance, NULL, 60, codes);
        expect_all_ok(w, codes);
    }
}

/* One copy down (the input) and one up (the output) per collective; a broadcast's other ranks
 * copy nothing down; a warm collective of the same size allocates no pinned memory. */
static void rank_copies(const ddpc_comm_env *e, void *arg)
{
    (void)arg;
    fake_device dev = {0};
    ddpc_pg *pg = staged_pg(e, &dev);
    if (!pg)
        return;
    int w = e->world_size;
    enum { N = 1000 };
    float *send = ddpc_malloc((size_t)w * N * sizeof(float));
    float *recv = ddpc_malloc((size_t)w * N * sizeof(float));
    for (int i = 0; i < w * N; i++)
        send[i] = (float)(i % 17);
    CHECK_EQ_INT(ddpc_pg_all_reduce(pg, send, recv, N, DDPC_DTYPE_F32, DDPC_REDUCE_SUM), DDPC_OK);
    CHECK_EQ_INT(dev.downs, 1);
    CHECK_EQ_INT(dev.ups, 1);
    CHECK_EQ_INT(dev.down_bytes, N * sizeof(float));
    CHECK_EQ_INT(dev.up_bytes, N * sizeof(float));
    int allocs = dev.allocs;
    CHECK_EQ_INT(ddpc_pg_all_reduce(pg, send, recv, N, DDPC_DTYPE_F32, DDPC_REDUCE_SUM), DDPC_OK);
    CHECK_EQ_INT(dev.allocs, allocs);
    /* all_gather: the small input down, the whole (w, N) output up */
    dev =
        (fake_device){.allocs = dev.allocs, .pinned = dev.pinned, .pinned_bytes = dev.pinned_bytes};
    CHECK_EQ_INT(ddpc_pg_all_gather(pg, send, recv, N, DDPC_DTYPE_F32), DDPC_OK);
    CHECK_EQ_INT(dev.down_bytes, N * sizeof(float));
    CHECK_EQ_INT(dev.up_bytes, (size_t)w * N * sizeof(float));
    /* reduce_scatter in place: the whole input down once, the own block up */
    dev =
        (fake_device){.allocs = dev.allocs, .pinned = dev.pinned, .pinned_bytes = dev.pinned_bytes};
    CHECK_EQ_INT(ddpc_pg_reduce_scatter(pg, send, send + (size_t)e->rank * N, N, DDPC_DTYPE_F32,
                                        DDPC_REDUCE_SUM),
                 DDPC_OK);
    CHECK_EQ_INT(dev.downs, 1);
    CHECK_EQ_INT(dev.down_bytes, (size_t)w * N * sizeof(float));
    CHECK_EQ_INT(dev.up_bytes, N * sizeof(float));
    dev =
        (fake_device){.allocs = dev.allocs, .pinned = dev.pinned, .pinned_bytes = dev.pinned_bytes};
    CHECK_EQ_INT(ddpc_pg_broadcast(pg, recv, N, DDPC_DTYPE_F32, 1), DDPC_OK);
    CHECK_EQ_INT(dev.downs, e->rank == 1 ? 1 : 0);
    CHECK_EQ_INT(dev.ups, 1);
    dev =
        (fake_device){.allocs = dev.allocs, .pinned = dev.pinned, .pinned_bytes = dev.pinned_bytes};
    CHECK_EQ_INT(ddpc_pg_barrier(pg), DDPC_OK);
    CHECK_EQ_INT(dev.downs + dev.ups, 0);
    ddpc_free(send);
    ddpc_free(recv);
    ddpc_pg_destroy(pg);
}

static void test_one_copy_each_way(void)
{
    ddpc_comm_env e = base_env(2);
    e.master_port = free_port();
    int codes[16];
    run_ranks(2, &e, rank_copies, NULL, 60, codes);
    expect_all_ok(2, codes);
}

/* An in-place reduce_scatter as a fresh group's first collective: on rank 0 send and recv are the
 * same pointer, and the pinned buffer must still hold the whole (w, count) input. */
static void rank_first_in_place(const ddpc_comm_env *e, void *arg)
{
    (void)arg;
    fake_device dev = {0};
    ddpc_pg *pg = staged_pg(e, &dev);
    if (!pg)
        return;
    enum { N = 7 };
    int w = e->world_size;
    float *x = ddpc_malloc((size_t)w * N * sizeof(float));
    for (int i = 0; i < w * N; i++)
        x[i] = (float)(i + e->rank);
    CHECK_EQ_INT(
        ddpc_pg_reduce_scatter(pg, x, x + (size_t)e->rank * N, N, DDPC_DTYPE_F32, DDPC_REDUCE_SUM),
        DDPC_OK);
    for (int i = 0; i < N; i++) /* sum over ranks r of (rank*N + i + r) */
        CHECK(x[e->rank * N + i] == (float)(w * (e->rank * N + i) + w * (w - 1) / 2));
    ddpc_free(x);
    ddpc_pg_destroy(pg);
}

static void test_first_in_place_reduce_scatter(void)
{
    for (int w = 2; w <= 4; w += 2) {
        ddpc_comm_env e = base_env(w);
        e.master_port = free_port();
        int codes[16];
        run_ranks(w, &e, rank_first_in_place, NULL, 60, codes);
        expect_all_ok(w, codes);
    }
}

/* A copy that fails, or pinned memory refused, fails the collective with the copier's message
 * and leaves the group failed (world size 1: no peer needs to take part). */
static void test_copy_failures(void)
{
    ddpc_comm_env e = base_env(1);
    fake_device dev = {.fail_alloc = true};
    ddpc_pg *pg = staged_pg(&e, &dev);
    float x[4] = {1, 2, 3, 4}, y[4];
    CHECK_EQ_INT(ddpc_pg_all_reduce(pg, x, x, 4, DDPC_DTYPE_F32, DDPC_REDUCE_SUM), DDPC_ENOMEM);
    CHECK_STR_CONTAINS(ddpc_last_error(), "no pinned host memory for 16 bytes");
    CHECK_EQ_INT(ddpc_pg_barrier(pg), DDPC_EPEER);
    CHECK_STR_CONTAINS(ddpc_pg_error(pg), "pinned");
    ddpc_pg_destroy(pg);

    dev = (fake_device){.fail_down = true};
    pg = staged_pg(&e, &dev);
    CHECK_EQ_INT(ddpc_pg_all_reduce(pg, x, y, 4, DDPC_DTYPE_F32, DDPC_REDUCE_SUM), DDPC_EIO);
    CHECK_STR_CONTAINS(ddpc_last_error(), "copying 16 bytes down");
    ddpc_pg_destroy(pg);

    dev = (fake_device){0};
    pg = staged_pg(&e, &dev);
    CHECK_EQ_INT(ddpc_pg_all_reduce(pg, x, y, 4, DDPC_DTYPE_F32, DDPC_REDUCE_SUM), DDPC_OK);
    CHECK(memcmp(x, y, sizeof x) == 0);
    ddpc_pg_destroy(pg);
}

static void test_nothing_left_in_dev_shm(void)
{
    expect_nothing_left_in_dev_shm(4);
}

int main(void)
{
    RUN_TEST(test_conformance_on_1_to_3_ranks);
    RUN_TEST(test_one_copy_each_way);
    RUN_TEST(test_first_in_place_reduce_scatter);
    RUN_TEST(test_copy_failures);
    RUN_TEST(test_nothing_left_in_dev_shm);
    return check_summary();
}
