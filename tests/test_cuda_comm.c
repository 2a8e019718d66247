// SPDX-License-Identifier: MIT
/* Process groups on GPU buffers, on a real GPU: the conformance checks of comm_shm_testutil.h
 * (every collective, dtype and reduction, in place and not, sizes 0 to 1 MiB) with inputs copied
 * up and results copied down, bitwise against the same host references the CPU backends meet.
 * One rank on nccl; two and four ranks sharing GPU 0 staged through host memory over shm (AUTO's
 * choice, since NCCL refuses a shared GPU; with two GPUs AUTO must pick nccl instead); one rank
 * staged without a host backend; explicit nccl on a shared GPU refused in one line; async work on
 * the comm thread; a host pointer refused by nccl. Ranks are forked children and the parent never
 * touches CUDA (a child of a process that initialised CUDA cannot use it). Skips (exit 77,
 * saying why) without a GPU. Run by tests/gpu/run.sh's comm part. */
#include "comm_shm_testutil.h"
#include "gpu_count_testutil.h"

#include <ddpc/device.h>

static const ddpc_kernel_table *gpu; /* this child's GPU */

typedef struct {
    ddpc_backend backend;
    const char *note; /* what ddpc_pg_device_note must contain */
    bool quick;       /* one size per collective, for the extra scenarios */
} scenario;

static void *dev_copy(const void *host, size_t bytes)
{
    void *d = gpu->alloc(bytes + 64);
    if (bytes)
        gpu->to_device(d, host, bytes);
    return d;
}

static void *host_copy(const void *dev, size_t bytes)
{
    void *h = ddpc_malloc(bytes + 1);
    if (bytes)
        gpu->to_host(h, dev, bytes);
    return h;
}

static void dev_all_reduce(ddpc_pg *pg, size_t count, ddpc_dtype t, ddpc_reduce_op op,
                           bool in_place, int salt)
{
    int r = ddpc_pg_rank(pg), w = ddpc_pg_world_size(pg);
    size_t bytes = count * ddpc_dtype_size(t);
    void *h = ddpc_malloc(bytes + 1);
    fill(h, count, t, r, salt);
    void *ds = dev_copy(h, bytes), *dr = in_place ? ds : gpu->alloc(bytes + 64);
    CHECK_EQ_INT(ddpc_pg_all_reduce(pg, ds, dr, count, t, op), DDPC_OK);
    void *got = host_copy(dr, bytes), *want = expected_reduce(w, count, t, op, salt, 0);
    char what[96];
    snprintf(what, sizeof what, "all_reduce %s %s count %zu%s", ddpc_dtype_name(t),
             ddpc_reduce_op_name(op), count, in_place ? " in place" : "");
    CHECK(same(got, want, bytes, what, r));
    ddpc_free(want);
    ddpc_free(got);
    ddpc_free(h);
    if (!in_place)
        gpu->free(dr);
    gpu->free(ds);
}

static void dev_reduce_scatter(ddpc_pg *pg, size_t count, ddpc_dtype t, ddpc_reduce_op op,
                               bool in_place, int salt)
{
    int r = ddpc_pg_rank(pg), w = ddpc_pg_world_size(pg);
    size_t bytes = count * ddpc_dtype_size(t);
    void *h = ddpc_malloc((size_t)w * bytes + 1);
    fill(h, (size_t)w * count, t, r, salt);
    unsigned char *ds = dev_copy(h, (size_t)w * bytes);
    unsigned char *dr = in_place ? ds + (size_t)r * bytes : gpu->alloc(bytes + 64);
    CHECK_EQ_INT(ddpc_pg_reduce_scatter(pg, ds, dr, count, t, op), DDPC_OK);
    void *got = host_copy(dr, bytes), *want = expected_reduce(w, count, t, op, salt, (size_t)r);
    char what[96];
    snprintf(what, sizeof what, "reduce_scatter %s %s count %zu%s", ddpc_dtype_name(t),
             ddpc_reduce_op_name(op), count, in_place ? " in place" : "");
    CHECK(same(got, want, bytes, what, r));
    ddpc_free(want);
    ddpc_free(got);
    ddpc_free(h);
    if (!in_place)
        gpu->free(dr);
    gpu->free(ds);
}

static void dev_gather_and_broadcast(ddpc_pg *pg, size_t count, ddpc_dtype t, bool in_place,
                                     int salt)
{
    int r = ddpc_pg_rank(pg), w = ddpc_pg_world_size(pg), root = salt % w;
    size_t bytes = count * ddpc_dtype_size(t);
    unsigned char *mine = ddpc_malloc(bytes + 1), *want = ddpc_malloc(bytes + 1);
    fill(mine, count, t, r, salt);
    unsigned char *dall = gpu->alloc((size_t)w * bytes + 64);
    unsigned char *dmine = in_place ? dall + (size_t)r * bytes : gpu->alloc(bytes + 64);
    if (bytes)
        gpu->to_device(dmine, mine, bytes);
    CHECK_EQ_INT(ddpc_pg_all_gather(pg, dmine, dall, count, t), DDPC_OK);
    unsigned char *all = host_copy(dall, (size_t)w * bytes);
    bool ok = true;
    for (int k = 0; k < w && ok; k++) {
        fill(want, count, t, k, salt);
        ok = same(all + (size_t)k * bytes, want, bytes, "all_gather block", r);
    }
    CHECK(ok);
    fill(mine, count, t, r, salt + 1);
    if (bytes)
        gpu->to_device(dmine, mine, bytes);
    CHECK_EQ_INT(ddpc_pg_broadcast(pg, dmine, count, t, root), DDPC_OK);
    unsigned char *got = host_copy(dmine, bytes);
    fill(want, count, t, root, salt + 1);
    CHECK(same(got, want, bytes, "broadcast", r));
    ddpc_free(got);
    ddpc_free(all);
    ddpc_free(want);
    ddpc_free(mine);
    if (!in_place)
        gpu->free(dmine);
    gpu->free(dall);
}

/* Async all-reduces queued on the comm thread (which must make the GPU current itself). */
static void dev_async(ddpc_pg *pg)
{
    enum { N = 3, COUNT = 5000 };
    int r = ddpc_pg_rank(pg), w = ddpc_pg_world_size(pg);
    size_t bytes = COUNT * sizeof(float);
    void *h = ddpc_malloc(bytes), *d[N];
    ddpc_work *work[N];
    for (int i = 0; i < N; i++) {
        fill(h, COUNT, DDPC_DTYPE_F32, r, 100 + i);
        d[i] = dev_copy(h, bytes);
        CHECK_EQ_INT(
            ddpc_pg_iall_reduce(pg, d[i], d[i], COUNT, DDPC_DTYPE_F32, DDPC_REDUCE_SUM, &work[i]),
            DDPC_OK);
    }
    for (int i = 0; i < N; i++) {
        CHECK_EQ_INT(ddpc_work_wait(work[i]), DDPC_OK);
        ddpc_work_destroy(work[i]);
        void *got = host_copy(d[i], bytes);
        void *want = expected_reduce(w, COUNT, DDPC_DTYPE_F32, DDPC_REDUCE_SUM, 100 + i, 0);
        CHECK(same(got, want, bytes, "async all_reduce", r));
        ddpc_free(want);
        ddpc_free(got);
        gpu->free(d[i]);
    }
    ddpc_free(h);
}

static void rank_conformance(const ddpc_comm_env *e, void *arg)
{
    const scenario *sc = arg;
    ddpc_pg_config c = ddpc_pg_config_default();
    c.cuda = true;
    c.backend = sc->backend;
    ddpc_pg *pg = NULL;
    ddpc_status s = ddpc_pg_create(e, &c, &pg);
    if (s != DDPC_OK)
        fprintf(stderr, "rank %d: ddpc_pg_create: %s\n", e->rank, ddpc_last_error());
    CHECK_EQ_INT(s, DDPC_OK);
    if (!pg)
        return;
    const char *note = ddpc_pg_device_note(pg);
    if (e->rank == 0)
        printf("     %d rank(s), backend %s asked: %s\n", e->world_size,
               ddpc_backend_name(sc->backend), note ? note : "(no note)");
    CHECK(note && strstr(note, sc->note));
    CHECK_EQ_INT(ddpc_device_select(DDPC_DEVICE_CUDA, e->local_rank, &gpu), DDPC_OK);
    static const size_t sizes[] = {0, 1, 7, 4099, (1u << 18) + 3};
    size_t first = sc->quick ? 3 : 0, last = sc->quick ? 4 : 5;
    int salt = 0;
    for (int t = 0; t < DDPC_DTYPE_COUNT; t++)
        for (size_t i = first; i < last; i++, salt++) {
            for (int op = 0; op < DDPC_REDUCE_COUNT; op++) {
                dev_all_reduce(pg, sizes[i], t, op, (op + salt) % 2, salt);
                dev_reduce_scatter(pg, sizes[i], t, op, (op + salt) % 2 == 0, salt);
            }
            dev_gather_and_broadcast(pg, sizes[i], t, salt % 2, salt);
        }
    CHECK_EQ_INT(ddpc_pg_barrier(pg), DDPC_OK);
    dev_async(pg);
    if (ddpc_pg_backend(pg) == DDPC_BACKEND_NCCL) { /* last: a refused call fails the group */
        float x[4] = {0};
        CHECK_EQ_INT(ddpc_pg_all_reduce(pg, x, x, 4, DDPC_DTYPE_F32, DDPC_REDUCE_SUM), DDPC_EINVAL);
        CHECK_STR_CONTAINS(ddpc_last_error(), "is not device memory (the nccl backend");
    }
    ddpc_pg_destroy(pg);
}

/* Explicit nccl where 2 ranks share one GPU: one line, before any rank waits for another. */
static void rank_nccl_shared(const ddpc_comm_env *e, void *arg)
{
    (void)arg;
    ddpc_pg_config c = ddpc_pg_config_default();
    c.cuda = true;
    c.backend = DDPC_BACKEND_NCCL;
    ddpc_pg *pg = NULL;
    CHECK_EQ_INT(ddpc_pg_create(e, &c, &pg), DDPC_EUNSUPPORTED);
    CHECK_STR_CONTAINS(ddpc_last_error(), "backend nccl cannot run: 2 ranks on this host share 1 "
                                          "GPU, which NCCL refuses");
    CHECK(pg == NULL);
}

static int gpus; /* visible GPUs, as a child found them */

static void run(const char *name, int world, rank_fn fn, const scenario *sc)
{
    ddpc_comm_env e = base_env(world);
    e.master_port = free_port();
    snprintf(e.master_addr, sizeof e.master_addr, "127.0.0.1"); /* nccl's store: where to meet */
    e.timeout_s = 60;
    int codes[16];
    printf("   %s\n", name);
    fflush(stdout);
    run_ranks(world, &e, fn, (void *)sc, 100, codes);
    expect_all_ok(world, codes);
}

static void test_one_rank_nccl(void)
{
    run("1 rank, backend nccl", 1, rank_conformance,
        &(scenario){DDPC_BACKEND_NCCL, "nccl on GPU 0", false});
}

static void test_two_ranks_auto(void)
{
    scenario sc = {DDPC_BACKEND_AUTO,
                   gpus >= 2 ? "nccl on GPU"
                             : "host staging over shm: 2 ranks on this host share 1 GPU, which "
                               "NCCL refuses",
                   false};
    run("2 ranks, backend auto", 2, rank_conformance, &sc);
}

/* The other staged size: 4 ranks on one GPU (on 4 GPUs or more, AUTO picks nccl). */
static void test_four_ranks_auto(void)
{
    scenario sc = {DDPC_BACKEND_AUTO,
                   gpus >= 4 ? "nccl on GPU" : "host staging over shm: 4 ranks on this host share",
                   false};
    run("4 ranks, backend auto", 4, rank_conformance, &sc);
}

static void test_staged_extras(void)
{
    run("1 rank staged (no host backend)", 1, rank_conformance,
        &(scenario){DDPC_BACKEND_SHM, "host staging over shm: backend shm was asked for", true});
    run("2 ranks, backend shm asked", 2, rank_conformance,
        &(scenario){DDPC_BACKEND_SHM, "host staging over shm: backend shm was asked for", true});
    if (gpus == 1)
        run("2 ranks, backend nccl on one GPU", 2, rank_nccl_shared, NULL);
}

int main(void)
{
    gpus = gpu_count_in_child();
    if (gpus <= 0)
        return 77;
    printf("%d GPU(s) visible\n", gpus);
    RUN_TEST(test_one_rank_nccl);
    RUN_TEST(test_two_ranks_auto);
    RUN_TEST(test_four_ranks_auto);
    RUN_TEST(test_staged_extras);
    return check_summary();
}
