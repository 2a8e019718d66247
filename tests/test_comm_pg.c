// SPDX-License-Identifier: MIT
/* Tests for the process-group front-end (src/comm/pg*.c): world-1 semantics of every collective,
 * argument errors, config/env precedence, async work handles and ordering, and the sticky failed
 * state. Multi-rank behaviour here runs over a fake in-process backend (ddpc__pg_create_with)
 * that records the order it saw collectives in, can be slowed down and can fail on demand. */
#include "comm/pg_front.h"

#include <ddpc/alloc.h>
#include <ddpc/device.h>

#include "check.h"

#include <time.h>

static ddpc_comm_env env1(void)
{
    ddpc_comm_env e;
    memset(&e, 0, sizeof e);
    e.world_size = e.local_world_size = e.num_nodes = 1;
    return e;
}

/* ---- fake backend ---- */

typedef struct {
    uint64_t seen[512];
    int n_seen;
    long sleep_ns;       /* per collective, so async work piles up */
    int64_t fail_at_seq; /* -1: never */
    pthread_t last_thread;
} fake_state;

static ddpc_status fake_run(void *state, const ddpc__coll *c)
{
    fake_state *f = state;
    if (f->sleep_ns > 0)
        nanosleep(&(struct timespec){0, f->sleep_ns}, NULL);
    if (f->n_seen < 512)
        f->seen[f->n_seen++] = c->seq;
    f->last_thread = pthread_self();
    if ((int64_t)c->seq == f->fail_at_seq)
        return ddpc_errorf(DDPC_ETIMEOUT, "%s #%llu timed out after 1 s: rank 1 never arrived",
                           ddpc__coll_name(c->kind), (unsigned long long)c->seq);
    if (c->kind == DDPC__COLL_ALL_REDUCE && c->send != c->recv)
        memcpy(c->recv, c->send, c->count * ddpc_dtype_size(c->dtype));
    return DDPC_OK;
}

static void fake_destroy(void *state)
{
    (void)state;
}

static const ddpc__pg_backend fake_ops = {"fake", fake_run, fake_destroy, NULL, NULL};

static ddpc_pg *fake_pg(fake_state *f, int rank)
{
    memset(f, 0, sizeof *f);
    f->fail_at_seq = -1;
    ddpc_comm_env e = env1();
    e.world_size = e.local_world_size = 2;
    e.rank = e.local_rank = rank;
    ddpc_pg *pg = NULL;
    CHECK_EQ_INT(ddpc__pg_create_with(&e, DDPC_BACKEND_SHM, 1.0, &fake_ops, f, &pg), DDPC_OK);
    return pg;
}

/* ---- world size 1 ---- */

static void test_world1_collectives(void)
{
    ddpc_comm_env e = env1();
    ddpc_pg *pg = NULL;
    CHECK_EQ_INT(ddpc_pg_create(&e, NULL, &pg), DDPC_OK);
    CHECK_EQ_INT(ddpc_pg_rank(pg), 0);
    CHECK_EQ_INT(ddpc_pg_world_size(pg), 1);
    CHECK_EQ_INT(ddpc_pg_local_world_size(pg), 1);
    CHECK(ddpc_pg_timeout(pg) == 300.0);
    CHECK(ddpc_pg_error(pg) == NULL);
    for (int t = 0; t < DDPC_DTYPE_COUNT; t++) {
        size_t es = ddpc_dtype_size((ddpc_dtype)t);
        unsigned char a[64], b[64], g[64];
        for (int i = 0; i < 64; i++)
            a[i] = (unsigned char)(i * 7 + 3);
        for (int op = 0; op < DDPC_REDUCE_COUNT; op++) {
            memset(b, 0, sizeof b);
            CHECK_EQ_INT(ddpc_pg_all_reduce(pg, a, b, 64 / es, t, op), DDPC_OK);
            CHECK(memcmp(a, b, 64) == 0); /* AVG of one value is the value */
            memcpy(g, a, 64);
            CHECK_EQ_INT(ddpc_pg_all_reduce(pg, g, g, 64 / es, t, op), DDPC_OK);
            CHECK(memcmp(a, g, 64) == 0);
            memset(b, 0, sizeof b);
            CHECK_EQ_INT(ddpc_pg_reduce_scatter(pg, a, b, 64 / es, t, op), DDPC_OK);
            CHECK(memcmp(a, b, 64) == 0);
            CHECK_EQ_INT(ddpc_pg_reduce_scatter(pg, g, g, 64 / es, t, op), DDPC_OK);
            CHECK(memcmp(a, g, 64) == 0);
        }
        memset(g, 0, sizeof g);
        CHECK_EQ_INT(ddpc_pg_all_gather(pg, a, g, 64 / es, t), DDPC_OK);
        CHECK(memcmp(a, g, 64) == 0);
        CHECK_EQ_INT(ddpc_pg_all_gather(pg, g, g, 64 / es, t), DDPC_OK);
        CHECK(memcmp(a, g, 64) == 0);
        CHECK_EQ_INT(ddpc_pg_broadcast(pg, g, 64 / es, t, 0), DDPC_OK);
        CHECK(memcmp(a, g, 64) == 0);
    }
    CHECK_EQ_INT(ddpc_pg_barrier(pg), DDPC_OK);
    CHECK_EQ_INT(ddpc_pg_all_reduce(pg, NULL, NULL, 0, DDPC_DTYPE_F32, DDPC_REDUCE_SUM), DDPC_OK);
    CHECK_EQ_INT(ddpc_pg_all_gather(pg, NULL, NULL, 0, DDPC_DTYPE_I64), DDPC_OK);
    CHECK_EQ_INT(ddpc_pg_seq(pg), 6 * (4 * 4 + 3) + 3);
    ddpc_pg_destroy(pg);
    ddpc_pg_destroy(NULL);
}

static void test_argument_errors(void)
{
    ddpc_comm_env e = env1();
    ddpc_pg *pg = NULL;
    CHECK_EQ_INT(ddpc_pg_create(&e, NULL, &pg), DDPC_OK);
    float buf[16] = {0}, out[16];
    CHECK_EQ_INT(ddpc_pg_all_reduce(pg, NULL, out, 4, DDPC_DTYPE_F32, DDPC_REDUCE_SUM),
                 DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "send is NULL");
    CHECK_EQ_INT(ddpc_pg_all_reduce(pg, buf, out, 4, (ddpc_dtype)9, DDPC_REDUCE_SUM), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "dtype 9");
    CHECK_EQ_INT(ddpc_pg_all_reduce(pg, buf, out, 4, DDPC_DTYPE_F32, (ddpc_reduce_op)-1),
                 DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "op -1");
    CHECK_EQ_INT(ddpc_pg_all_reduce(pg, buf, buf + 1, 4, DDPC_DTYPE_F32, DDPC_REDUCE_SUM),
                 DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "overlap");
    CHECK_EQ_INT(ddpc_pg_all_reduce(pg, buf, out, SIZE_MAX / 2, DDPC_DTYPE_F32, DDPC_REDUCE_SUM),
                 DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "overflows");
    CHECK_EQ_INT(ddpc_pg_broadcast(pg, buf, 4, DDPC_DTYPE_F32, 1), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "root 1");
    CHECK_EQ_INT(ddpc_pg_broadcast(pg, NULL, 4, DDPC_DTYPE_F32, 0), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "buf is NULL");
    CHECK_EQ_INT(ddpc_pg_all_gather(pg, buf + 2, buf, 4, DDPC_DTYPE_F32), DDPC_EINVAL);
    CHECK_EQ_INT(ddpc_pg_reduce_scatter(pg, buf, NULL, 4, DDPC_DTYPE_F32, DDPC_REDUCE_MAX),
                 DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "recv is NULL");
    CHECK_EQ_INT(ddpc_pg_reduce_scatter(pg, buf, buf + 1, 4, DDPC_DTYPE_F32, DDPC_REDUCE_MAX),
                 DDPC_EINVAL);
    CHECK_EQ_INT(ddpc_pg_barrier(NULL), DDPC_EINVAL);
    CHECK_EQ_INT(ddpc_pg_all_reduce(NULL, buf, out, 4, DDPC_DTYPE_F32, DDPC_REDUCE_SUM),
                 DDPC_EINVAL);
    ddpc_work *w = (ddpc_work *)&w;
    CHECK_EQ_INT(ddpc_pg_iall_reduce(pg, NULL, out, 4, DDPC_DTYPE_F32, DDPC_REDUCE_SUM, &w),
                 DDPC_EINVAL);
    CHECK_EQ_INT(ddpc_pg_ibarrier(pg, NULL), DDPC_EINVAL);
    CHECK_EQ_INT(ddpc_pg_seq(pg), 0); /* rejected calls consume no sequence number */
    CHECK(ddpc_pg_error(pg) == NULL); /* nor fail the group */
    CHECK_EQ_INT(ddpc_pg_all_reduce(pg, buf, out, 4, DDPC_DTYPE_F32, DDPC_REDUCE_SUM), DDPC_OK);
    ddpc_pg_destroy(pg);
}

static void test_create_errors_and_precedence(void)
{
    ddpc_pg *pg = (ddpc_pg *)&pg;
    ddpc_comm_env e = env1();
    e.world_size = 0;
    CHECK_EQ_INT(ddpc_pg_create(&e, NULL, &pg), DDPC_EINVAL);
    CHECK(pg == NULL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "world size 0");
    e = env1();
    e.rank = 1;
    CHECK_EQ_INT(ddpc_pg_create(&e, NULL, &pg), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "rank 1");
    e = env1();
    e.local_world_size = 0;
    CHECK_EQ_INT(ddpc_pg_create(&e, NULL, &pg), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "local world size 0");
    e = env1();
    ddpc_pg_config c = ddpc_pg_config_default();
    c.timeout_s = -1;
    CHECK_EQ_INT(ddpc_pg_create(&e, &c, &pg), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "timeout");
    CHECK_EQ_INT(ddpc_pg_create(NULL, NULL, &pg), DDPC_EINVAL);

    e.timeout_s = 7; /* env timeout beats the default, config beats env */
    CHECK_EQ_INT(ddpc_pg_create(&e, NULL, &pg), DDPC_OK);
    CHECK(ddpc_pg_timeout(pg) == 7.0);
    ddpc_pg_destroy(pg);
    c.timeout_s = 5;
    CHECK_EQ_INT(ddpc_pg_create(&e, &c, &pg), DDPC_OK);
    CHECK(ddpc_pg_timeout(pg) == 5.0);
    ddpc_pg_destroy(pg);

    e = env1(); /* AUTO: mpi under mpirun when built in, else shm; env and config override */
    e.source = DDPC_COMM_SOURCE_OPENMPI;
    bool mpi = ddpc_backend_available(DDPC_BACKEND_MPI);
    CHECK_EQ_INT(ddpc_pg_create(&e, NULL, &pg), DDPC_OK);
    CHECK_EQ_INT(ddpc_pg_backend(pg), mpi ? DDPC_BACKEND_MPI : DDPC_BACKEND_SHM);
    ddpc_pg_destroy(pg);
    e.backend = DDPC_BACKEND_SHM;
    CHECK_EQ_INT(ddpc_pg_create(&e, NULL, &pg), DDPC_OK);
    CHECK_EQ_INT(ddpc_pg_backend(pg), DDPC_BACKEND_SHM);
    ddpc_pg_destroy(pg);
    c = ddpc_pg_config_default();
    c.backend = DDPC_BACKEND_MPI;
    ddpc_status s = ddpc_pg_create(&e, &c, &pg);
    CHECK_EQ_INT(s, mpi ? DDPC_OK : DDPC_EUNSUPPORTED);
    if (!mpi)
        CHECK_STR_CONTAINS(ddpc_last_error(), "mpi");
    ddpc_pg_destroy(s == DDPC_OK ? pg : NULL);
}

/* Which backend AUTO picks, per launcher and layout (docs/distributed.md's table). */
static void test_choose_backend(void)
{
    bool mpi = ddpc_backend_available(DDPC_BACKEND_MPI);
    bool gloo = ddpc_backend_available(DDPC_BACKEND_GLOO);
    ddpc_backend across = gloo ? DDPC_BACKEND_GLOO : mpi ? DDPC_BACKEND_MPI : DDPC_BACKEND_SHM;
    ddpc_comm_env e = env1();
    e.source = DDPC_COMM_SOURCE_TORCHRUN; /* ddpc run / torchrun on one host */
    e.world_size = e.local_world_size = 4;
    e.layout_known = true;
    snprintf(e.master_addr, sizeof e.master_addr, "10.0.0.1");
    e.master_port = 29500;
    CHECK_EQ_INT(ddpc_pg_choose_backend(&e, DDPC_BACKEND_AUTO), DDPC_BACKEND_SHM);
    e.local_world_size = 2; /* ddpc run --nnodes 2 / torchrun per node: hosts known */
    e.num_nodes = 2;
    CHECK_EQ_INT(ddpc_pg_choose_backend(&e, DDPC_BACKEND_AUTO), across);
    e.local_world_size = 4; /* a platform's five variables: layout unknown, found by gloo */
    e.num_nodes = 1;
    e.layout_known = false;
    CHECK_EQ_INT(ddpc_pg_choose_backend(&e, DDPC_BACKEND_AUTO),
                 gloo ? DDPC_BACKEND_GLOO : DDPC_BACKEND_SHM);
    e.master_addr[0] = '\0'; /* no master: nowhere to meet but /dev/shm */
    CHECK_EQ_INT(ddpc_pg_choose_backend(&e, DDPC_BACKEND_AUTO), DDPC_BACKEND_SHM);
    e.source = DDPC_COMM_SOURCE_SLURM; /* srun / mpirun: mpi, across hosts or not */
    CHECK_EQ_INT(ddpc_pg_choose_backend(&e, DDPC_BACKEND_AUTO),
                 mpi ? DDPC_BACKEND_MPI : DDPC_BACKEND_SHM);
    e.backend = DDPC_BACKEND_GLOO; /* DDPC_BACKEND / --backend, then the config, win */
    CHECK_EQ_INT(ddpc_pg_choose_backend(&e, DDPC_BACKEND_AUTO), DDPC_BACKEND_GLOO);
    CHECK_EQ_INT(ddpc_pg_choose_backend(&e, DDPC_BACKEND_SHM), DDPC_BACKEND_SHM);
}

static void test_names(void)
{
    ddpc_backend b;
    CHECK_EQ_INT(ddpc_backend_parse("shm", &b), DDPC_OK);
    CHECK_EQ_INT(b, DDPC_BACKEND_SHM);
    CHECK_EQ_INT(ddpc_backend_parse("gloo", &b), DDPC_OK);
    CHECK_EQ_INT(b, DDPC_BACKEND_GLOO);
    CHECK(strcmp(ddpc_backend_name(DDPC_BACKEND_GLOO), "gloo") == 0);
    CHECK_EQ_INT(ddpc_backend_parse("nccl", &b), DDPC_OK);
    CHECK_EQ_INT(b, DDPC_BACKEND_NCCL);
    CHECK(strcmp(ddpc_backend_name(DDPC_BACKEND_NCCL), "nccl") == 0);
    CHECK_EQ_INT(ddpc_backend_parse("rccl", &b), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "'rccl'");
    CHECK(strcmp(ddpc_dtype_name(DDPC_DTYPE_BF16), "bf16") == 0);
    CHECK(strcmp(ddpc_reduce_op_name(DDPC_REDUCE_AVG), "avg") == 0);
    CHECK(strcmp(ddpc_comm_source_name(DDPC_COMM_SOURCE_SLURM), "slurm") == 0);
    CHECK(strcmp(ddpc__coll_name(DDPC__COLL_REDUCE_SCATTER), "reduce_scatter") == 0);
    CHECK_EQ_INT(ddpc_dtype_size(DDPC_DTYPE_I64), 8);
    CHECK_EQ_INT(ddpc_dtype_size((ddpc_dtype)42), 0);
    CHECK(ddpc_backend_available(DDPC_BACKEND_SHM));
}

/* ---- async ---- */

/* backend nccl is for GPU buffers only, and GPU buffers need a GPU: each refused in one line,
 * nothing created. Where a GPU is visible, the second half is tests/test_cuda_comm.c's. */
static void test_device_refusals(void)
{
    ddpc_comm_env e = env1();
    ddpc_pg_config c = ddpc_pg_config_default();
    ddpc_pg *pg = NULL;
    c.backend = DDPC_BACKEND_NCCL;
    CHECK_EQ_INT(ddpc_pg_create(&e, &c, &pg), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "backend nccl moves GPU buffers only");
    CHECK(pg == NULL);
    c.backend = DDPC_BACKEND_AUTO;
    e.backend = DDPC_BACKEND_NCCL; /* DDPC_BACKEND=nccl, as `ddpc run --backend nccl` sets it */
    CHECK_EQ_INT(ddpc_pg_create(&e, &c, &pg), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "backend nccl moves GPU buffers only");
    CHECK(strchr(ddpc_last_error(), '\n') == NULL);
    e.backend = DDPC_BACKEND_AUTO;
    char why[160];
    if (ddpc_cuda_devices(why, sizeof why) > 0) {
        printf("     (a GPU is visible: the no-GPU refusals are not this machine's)\n");
        return;
    }
    c.cuda = true;
    static const ddpc_backend asked[] = {DDPC_BACKEND_AUTO, DDPC_BACKEND_NCCL, DDPC_BACKEND_SHM};
    for (int i = 0; i < 3; i++) {
        c.backend = asked[i];
        CHECK_EQ_INT(ddpc_pg_create(&e, &c, &pg), DDPC_EINVAL);
        CHECK_STR_CONTAINS(ddpc_last_error(), "collectives on GPU buffers");
        CHECK_STR_CONTAINS(ddpc_last_error(), why);
        CHECK(pg == NULL);
    }
    CHECK_STR_CONTAINS(ddpc_last_error(), "need a GPU");
}

static void test_async_world1(void)
{
    ddpc_comm_env e = env1();
    ddpc_pg *pg = NULL;
    CHECK_EQ_INT(ddpc_pg_create(&e, NULL, &pg), DDPC_OK);
    double a[8] = {1, 2, 3, 4, 5, 6, 7, 8}, b[8] = {0};
    ddpc_work *w = NULL, *w2 = NULL;
    CHECK_EQ_INT(ddpc_pg_iall_reduce(pg, a, b, 8, DDPC_DTYPE_F64, DDPC_REDUCE_AVG, &w), DDPC_OK);
    CHECK_EQ_INT(ddpc_work_wait(w), DDPC_OK);
    CHECK(b[7] == 8.0);
    CHECK(ddpc_work_seconds(w) >= 0);
    bool done = false;
    CHECK_EQ_INT(ddpc_work_test(w, &done), DDPC_OK);
    CHECK(done);
    ddpc_work_destroy(w);
    CHECK_EQ_INT(ddpc_pg_ibarrier(pg, &w), DDPC_OK);
    CHECK_EQ_INT(ddpc_pg_ibroadcast(pg, b, 8, DDPC_DTYPE_F64, 0, &w2), DDPC_OK);
    /* Both handles are in use, so no spare one is left: the next needs an allocation. */
    ddpc_work *w3 = NULL;
    ddpc_alloc_fail_after(0);
    CHECK_EQ_INT(ddpc_pg_iall_gather(pg, a, b, 8, DDPC_DTYPE_F64, &w3), DDPC_ENOMEM);
    ddpc_alloc_fail_after(-1);
    CHECK(w3 == NULL);
    CHECK_EQ_INT(ddpc_pg_seq(pg), 3);
    ddpc_work_destroy(w); /* destroy without wait */
    ddpc_work_destroy(w2);
    ddpc_work_destroy(NULL);
    CHECK_EQ_INT(ddpc_work_wait(NULL), DDPC_EINVAL);
    /* Destroyed handles are reused: issuing again allocates nothing. */
    int64_t allocs = ddpc_alloc_total();
    CHECK_EQ_INT(ddpc_pg_iall_gather(pg, a, b, 8, DDPC_DTYPE_F64, &w3), DDPC_OK);
    CHECK_EQ_INT(ddpc_work_wait(w3), DDPC_OK);
    CHECK_EQ_INT(ddpc_alloc_total(), allocs);
    ddpc_work_destroy(w3);
    /* A handle kept past its group's destroy stays valid and frees itself. */
    CHECK_EQ_INT(ddpc_pg_ibarrier(pg, &w3), DDPC_OK);
    ddpc_pg_destroy(pg);
    CHECK_EQ_INT(ddpc_work_wait(w3), DDPC_OK);
    ddpc_work_destroy(w3);
}

static void test_async_in_order_then_blocking(void)
{
    fake_state f;
    ddpc_pg *pg = fake_pg(&f, 0);
    f.sleep_ns = 200000;
    enum { N = 40 };
    ddpc_work *w[N];
    float x[N][4], y[N][4];
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < 4; j++)
            x[i][j] = (float)(i * 4 + j);
        CHECK_EQ_INT(ddpc_pg_iall_reduce(pg, x[i], y[i], 4, DDPC_DTYPE_F32, DDPC_REDUCE_SUM, &w[i]),
                     DDPC_OK);
    }
    bool first_done = true;
    CHECK_EQ_INT(ddpc_work_test(w[N - 1], &first_done), DDPC_OK);
    CHECK(!first_done);                         /* 40 x 0.2 ms cannot be done yet */
    CHECK_EQ_INT(ddpc_pg_barrier(pg), DDPC_OK); /* queued behind the async work */
    for (int i = 0; i < N; i++) {
        bool done = false;
        CHECK_EQ_INT(ddpc_work_test(w[i], &done), DDPC_OK);
        CHECK(done);
        CHECK(y[i][3] == x[i][3]);
        /* its own 0.2 ms, not the time it queued behind the others */
        CHECK(ddpc_work_seconds(w[i]) >= 1.5e-4 && ddpc_work_seconds(w[i]) < 0.1);
        ddpc_work_destroy(w[i]);
    }
    CHECK_EQ_INT(f.n_seen, N + 1);
    for (int i = 0; i < f.n_seen; i++)
        CHECK_EQ_INT(f.seen[i], i);
    CHECK(!pthread_equal(f.last_thread, pthread_self())); /* the barrier ran on the comm thread */
    CHECK_EQ_INT(ddpc_pg_barrier(pg), DDPC_OK);           /* nothing pending: runs inline */
    CHECK(pthread_equal(f.last_thread, pthread_self()));
    ddpc_pg_destroy(pg);
}

static void test_destroy_drains_and_handles_outlive_group(void)
{
    fake_state f;
    ddpc_pg *pg = fake_pg(&f, 1);
    f.sleep_ns = 100000;
    ddpc_work *w[10];
    for (int i = 0; i < 10; i++)
        CHECK_EQ_INT(ddpc_pg_ibarrier(pg, &w[i]), DDPC_OK);
    ddpc_pg_destroy(pg);
    CHECK_EQ_INT(f.n_seen, 10);
    for (int i = 0; i < 10; i++) {
        CHECK_EQ_INT(ddpc_work_wait(w[i]), DDPC_OK);
        ddpc_work_destroy(w[i]);
    }
}

static void test_failed_state_is_sticky(void)
{
    fake_state f;
    ddpc_pg *pg = fake_pg(&f, 0);
    f.fail_at_seq = 2;
    f.sleep_ns = 100000;
    ddpc_work *w[5];
    for (int i = 0; i < 5; i++)
        CHECK_EQ_INT(ddpc_pg_ibarrier(pg, &w[i]), DDPC_OK);
    CHECK_EQ_INT(ddpc_work_wait(w[1]), DDPC_OK);
    ddpc_clear_error();
    CHECK_EQ_INT(ddpc_work_wait(w[2]), DDPC_ETIMEOUT);
    CHECK_STR_CONTAINS(ddpc_last_error(), "barrier #2 timed out"); /* re-raised on this thread */
    CHECK_EQ_INT(ddpc_work_wait(w[4]), DDPC_EPEER);
    CHECK_STR_CONTAINS(ddpc_last_error(), "process group failed earlier: barrier #2 timed out");
    bool done = false;
    CHECK_EQ_INT(ddpc_work_test(w[3], &done), DDPC_EPEER);
    CHECK(done);
    CHECK_STR_CONTAINS(ddpc_pg_error(pg), "barrier #2 timed out after 1 s: rank 1 never arrived");
    float v[2] = {1, 2};
    CHECK_EQ_INT(ddpc_pg_all_reduce(pg, v, v, 2, DDPC_DTYPE_F32, DDPC_REDUCE_SUM), DDPC_EPEER);
    CHECK_STR_CONTAINS(ddpc_last_error(), "failed earlier");
    CHECK_EQ_INT(f.n_seen, 3); /* nothing reached the backend after the failure */
    for (int i = 0; i < 5; i++)
        ddpc_work_destroy(w[i]);
    ddpc_pg_destroy(pg);

    pg = fake_pg(&f, 0); /* a blocking failure fails the group too */
    f.fail_at_seq = 0;
    CHECK_EQ_INT(ddpc_pg_barrier(pg), DDPC_ETIMEOUT);
    CHECK_EQ_INT(ddpc_pg_barrier(pg), DDPC_EPEER);
    CHECK_EQ_INT(ddpc_pg_seq(pg), 2);
    ddpc_pg_destroy(pg);
}

int main(void)
{
    RUN_TEST(test_world1_collectives);
    RUN_TEST(test_argument_errors);
    RUN_TEST(test_create_errors_and_precedence);
    RUN_TEST(test_choose_backend);
    RUN_TEST(test_names);
    RUN_TEST(test_device_refusals);
    RUN_TEST(test_async_world1);
    RUN_TEST(test_async_in_order_then_blocking);
    RUN_TEST(test_destroy_drains_and_handles_outlive_group);
    RUN_TEST(test_failed_state_is_sticky);
    return check_summary();
}
