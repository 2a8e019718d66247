/* Tests for the shm backend: forked ranks that each build a process group from a hand-filled env
 * (rank, world, MASTER_PORT or run id). Rendezvous both ways, collectives against a local
 * reference (small and pipelined, in place), bitwise repeatability, async order, and the failure
 * paths: port in use, world-size mismatch, duplicate rank, a rank that never arrives (timeout
 * naming it), a rank that dies, the failed state, and nothing left in /dev/shm afterwards.
 * A rank reports by its exit status (0 = all its checks passed); the parent reaps with a limit. */
#include "dist/pg_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/timer.h>

#include "check.h"

#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef void (*rank_fn)(const ddpc_dist_env *env, void *arg);

static ddpc_dist_env base_env(int world)
{
    ddpc_dist_env e;
    memset(&e, 0, sizeof e);
    e.world_size = e.local_world_size = world;
    e.num_nodes = 1;
    e.timeout_s = 20;
    return e;
}

/* A port nothing listens on right now (the kernel's choice of a free one). */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    bind(fd, (struct sockaddr *)&sa, sizeof sa);
    getsockname(fd, (struct sockaddr *)&sa, &len);
    close(fd);
    return ntohs(sa.sin_port);
}

/* A run id no other test or job uses (odd characters on purpose: the backend sanitises them). */
static void set_run_id(ddpc_dist_env *e, const char *tag)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(e->run_id, sizeof e->run_id, "test/%s:%d %ld", tag, (int)getpid(), ts.tv_nsec);
}

/* Forks one process per rank running fn; returns each rank's exit status in codes[] (-1 if it had
 * to be killed after `limit_s`). */
static void run_ranks(int world, const ddpc_dist_env *base, rank_fn fn, void *arg, double limit_s,
                      int *codes)
{
    pid_t pids[16];
    fflush(NULL);
    for (int r = 0; r < world; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            ddpc_dist_env e = *base;
            e.rank = e.local_rank = r;
            check_failures_in_test = 0;
            fn(&e, arg);
            fflush(NULL);
            _exit(check_failures_in_test ? 1 : 0);
        }
    }
    double end = ddpc_time_now() + limit_s;
    for (int r = 0; r < world; r++) {
        int status = 0;
        codes[r] = -1;
        for (;;) {
            pid_t got = waitpid(pids[r], &status, WNOHANG);
            if (got == pids[r]) {
                codes[r] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
                break;
            }
            if (ddpc_time_now() > end) {
                kill(pids[r], SIGKILL);
                waitpid(pids[r], &status, 0);
                fprintf(stderr, "rank %d did not finish within %g s\n", r, limit_s);
                break;
            }
            nanosleep(&(struct timespec){0, 1000000}, NULL);
        }
    }
}

static void expect_all_ok(int world, const int *codes)
{
    for (int r = 0; r < world; r++)
        CHECK_EQ_INT(codes[r], 0);
}

/* ---- reference data: element i of rank k's input, exactly representable in every dtype ---- */

static void fill(void *p, size_t count, ddpc_dtype t, int k, int salt)
{
    for (size_t i = 0; i < count; i++) {
        int v =
            (int)((i * 2654435761u + (unsigned)k * 40503u + (unsigned)salt * 977u) % 2001) - 1000;
        float f = (float)v / 8.0f + (float)k * 0.3f; /* non-associative sums in f32 */
        switch (t) {
        case DDPC_DTYPE_F32:
            ((float *)p)[i] = f;
            break;
        case DDPC_DTYPE_F64:
            ((double *)p)[i] = (double)f / 3.0;
            break;
        case DDPC_DTYPE_BF16:
            ((uint16_t *)p)[i] = ddpc__f32_to_bf16(f);
            break;
        case DDPC_DTYPE_F16:
            ((uint16_t *)p)[i] = ddpc__f32_to_f16(f);
            break;
        case DDPC_DTYPE_I32:
            ((int32_t *)p)[i] = v * 1000003;
            break;
        default:
            ((int64_t *)p)[i] = (int64_t)v * 1000000007ll;
            break;
        }
    }
}

/* Expected all-reduce result: every rank's input rebuilt here and reduced in rank order. */
static void *expected_reduce(int world, size_t count, ddpc_dtype t, ddpc_reduce_op op, int salt,
                             size_t offset_blocks)
{
    size_t es = ddpc_dtype_size(t), total = count * (offset_blocks + 1);
    const void *srcs[16];
    void *in[16];
    for (int k = 0; k < world; k++) {
        in[k] = ddpc_malloc(total * es + 1);
        fill(in[k], total, t, k, salt);
        srcs[k] = (unsigned char *)in[k] + offset_blocks * count * es;
    }
    void *out = ddpc_malloc(count * es + 1);
    ddpc__reduce_many(out, srcs, world, count, t, op);
    for (int k = 0; k < world; k++)
        ddpc_free(in[k]);
    return out;
}

static ddpc_pg *join(const ddpc_dist_env *e)
{
    ddpc_pg *pg = NULL;
    ddpc_status s = ddpc_pg_create(e, NULL, &pg);
    if (s != DDPC_OK)
        fprintf(stderr, "rank %d: ddpc_pg_create: %s\n", e->rank, ddpc_last_error());
    CHECK_EQ_INT(s, DDPC_OK);
    return pg;
}

static bool same(const void *got, const void *want, size_t bytes, const char *what, int rank)
{
    if (bytes == 0 || memcmp(got, want, bytes) == 0)
        return true;
    size_t i = 0;
    while (((const unsigned char *)got)[i] == ((const unsigned char *)want)[i])
        i++;
    fprintf(stderr, "rank %d: %s differs from the reference at byte %zu of %zu\n", rank, what, i,
            bytes);
    return false;
}

static void check_all_reduce(ddpc_pg *pg, size_t count, ddpc_dtype t, ddpc_reduce_op op,
                             bool in_place, int salt)
{
    int r = ddpc_pg_rank(pg), w = ddpc_pg_world_size(pg);
    size_t es = ddpc_dtype_size(t);
    void *send = ddpc_malloc(count * es + 1), *recv = in_place ? send : ddpc_malloc(count * es + 1);
    fill(send, count, t, r, salt);
    CHECK_EQ_INT(ddpc_pg_all_reduce(pg, send, recv, count, t, op), DDPC_OK);
    void *want = expected_reduce(w, count, t, op, salt, 0);
    char what[96];
    snprintf(what, sizeof what, "all_reduce %s %s count %zu%s", ddpc_dtype_name(t),
             ddpc_reduce_op_name(op), count, in_place ? " in place" : "");
    CHECK(same(recv, want, count * es, what, r));
    ddpc_free(want);
    if (!in_place)
        ddpc_free(recv);
    ddpc_free(send);
}

static void check_reduce_scatter(ddpc_pg *pg, size_t count, ddpc_dtype t, ddpc_reduce_op op,
                                 bool in_place, int salt)
{
    int r = ddpc_pg_rank(pg), w = ddpc_pg_world_size(pg);
    size_t es = ddpc_dtype_size(t);
    unsigned char *send = ddpc_malloc((size_t)w * count * es + 1);
    fill(send, (size_t)w * count, t, r, salt);
    unsigned char *recv = in_place ? send + (size_t)r * count * es : ddpc_malloc(count * es + 1);
    CHECK_EQ_INT(ddpc_pg_reduce_scatter(pg, send, recv, count, t, op), DDPC_OK);
    void *want = expected_reduce(w, count, t, op, salt, (size_t)r);
    char what[96];
    snprintf(what, sizeof what, "reduce_scatter %s %s count %zu%s", ddpc_dtype_name(t),
             ddpc_reduce_op_name(op), count, in_place ? " in place" : "");
    CHECK(same(recv, want, count * es, what, r));
    ddpc_free(want);
    if (!in_place)
        ddpc_free(recv);
    ddpc_free(send);
}

static void check_gather_and_broadcast(ddpc_pg *pg, size_t count, ddpc_dtype t, bool in_place,
                                       int salt)
{
    int r = ddpc_pg_rank(pg), w = ddpc_pg_world_size(pg), root = salt % w;
    size_t es = ddpc_dtype_size(t), bytes = count * es;
    unsigned char *all = ddpc_malloc((size_t)w * bytes + 1), *want = ddpc_malloc(bytes + 1);
    unsigned char *mine = in_place ? all + (size_t)r * bytes : ddpc_malloc(bytes + 1);
    fill(mine, count, t, r, salt);
    CHECK_EQ_INT(ddpc_pg_all_gather(pg, mine, all, count, t), DDPC_OK);
    bool ok = true;
    for (int k = 0; k < w && ok; k++) {
        fill(want, count, t, k, salt);
        ok = same(all + (size_t)k * bytes, want, bytes, "all_gather block", r);
    }
    CHECK(ok);
    fill(mine, count, t, r, salt + 1);
    CHECK_EQ_INT(ddpc_pg_broadcast(pg, mine, count, t, root), DDPC_OK);
    fill(want, count, t, root, salt + 1);
    CHECK(same(mine, want, bytes, "broadcast", r));
    if (!in_place)
        ddpc_free(mine);
    ddpc_free(want);
    ddpc_free(all);
}

static void rank_collectives(const ddpc_dist_env *e, void *arg)
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
    /* >= 16 MiB: many pipeline blocks, far more than the whole segment */
    check_all_reduce(pg, 4u << 20, DDPC_DTYPE_F32, DDPC_REDUCE_SUM, false, 7);
    check_all_reduce(pg, (2u << 20) + 3, DDPC_DTYPE_BF16, DDPC_REDUCE_AVG, true, 8);
    check_reduce_scatter(pg, (1u << 20) + 5, DDPC_DTYPE_F64, DDPC_REDUCE_MAX, true, 9);
    check_gather_and_broadcast(pg, (1u << 20) + 1, DDPC_DTYPE_F32, false, 10);
    ddpc_pg_destroy(pg);
}

static void test_collectives_by_port(void)
{
    for (int w = 2; w <= 4; w++) {
        ddpc_dist_env e = base_env(w);
        e.master_port = free_port();
        int codes[16];
        run_ranks(w, &e, rank_collectives, NULL, 60, codes);
        expect_all_ok(w, codes);
    }
}

/* ---- rendezvous ---- */

static void rank_small_sum(const ddpc_dist_env *e, void *arg)
{
    (void)arg;
    ddpc_pg *pg = join(e);
    if (!pg)
        return;
    check_all_reduce(pg, 1000, DDPC_DTYPE_F32, DDPC_REDUCE_SUM, false, 1);
    check_all_reduce(pg, 300000, DDPC_DTYPE_F32, DDPC_REDUCE_SUM, true, 2);
    ddpc_pg_destroy(pg);
}

static void test_rendezvous_by_run_id(void)
{
    ddpc_dist_env e = base_env(3);
    set_run_id(&e, "rid");
    int codes[16];
    run_ranks(3, &e, rank_small_sum, NULL, 30, codes);
    expect_all_ok(3, codes);
    e.master_port = free_port(); /* run id and port (torchrun): still the named segment */
    e.restart_count = 1;
    run_ranks(3, &e, rank_small_sum, NULL, 30, codes);
    expect_all_ok(3, codes);
}

static void test_port_in_use(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    CHECK(bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(fd, 1) == 0);
    getsockname(fd, (struct sockaddr *)&sa, &len);
    ddpc_dist_env e = base_env(2);
    e.master_port = ntohs(sa.sin_port);
    ddpc_pg *pg = NULL;
    CHECK_EQ_INT(ddpc_pg_create(&e, NULL, &pg), DDPC_EIO);
    char want[96];
    snprintf(want, sizeof want, "MASTER_PORT %d on 127.0.0.1 is already in use", e.master_port);
    CHECK_STR_CONTAINS(ddpc_last_error(), want);
    close(fd);
}

typedef struct {
    int wrong_rank, wrong_world, dup_of;
    const char *want;
} mismatch_arg;

/* Every rank must fail to join with a message containing arg->want. */
static void rank_mismatch(const ddpc_dist_env *e, void *arg)
{
    const mismatch_arg *m = arg;
    ddpc_dist_env mine = *e;
    if (e->rank == m->wrong_rank)
        mine.world_size = mine.local_world_size = m->wrong_world;
    if (e->rank == m->dup_of + 1 && m->dup_of >= 0)
        mine.rank = mine.local_rank = m->dup_of;
    ddpc_pg *pg = NULL;
    ddpc_status s = ddpc_pg_create(&mine, NULL, &pg);
    CHECK(s != DDPC_OK);
    if (s != DDPC_OK)
        CHECK_STR_CONTAINS(ddpc_last_error(), m->want);
    if (getenv("DDPC_TEST_VERBOSE"))
        fprintf(stderr, "rank %d: %s: %s\n", e->rank, ddpc_status_name(s), ddpc_last_error());
    ddpc_pg_destroy(s == DDPC_OK ? pg : NULL);
}

static void test_world_size_mismatch_and_duplicate_rank(void)
{
    int codes[16];
    mismatch_arg m = {1, 3, -1, "world size mismatch"};
    ddpc_dist_env e = base_env(2);
    e.timeout_s = 5;
    e.master_port = free_port();
    double t0 = ddpc_time_now();
    run_ranks(2, &e, rank_mismatch, &m, 30, codes);
    expect_all_ok(2, codes);
    set_run_id(&e, "mismatch");
    run_ranks(2, &e, rank_mismatch, &m, 30, codes);
    expect_all_ok(2, codes);
    CHECK(ddpc_time_now() - t0 < 4.0); /* both sides fail at once, not at the timeout */

    /* world 3 where rank 2 also says it is rank 1: the group never forms; the error names it */
    m = (mismatch_arg){-1, 0, 1, "rank 1"};
    e = base_env(3);
    e.timeout_s = 2;
    e.master_port = free_port();
    run_ranks(3, &e, rank_mismatch, &m, 30, codes);
    expect_all_ok(3, codes);
}

static void test_config_errors(void)
{
    ddpc_dist_env e = base_env(2);
    ddpc_pg *pg = NULL;
    CHECK_EQ_INT(ddpc_pg_create(&e, NULL, &pg), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "MASTER_ADDR/MASTER_PORT or a run id");
    e.master_port = free_port();
    e.local_world_size = 1;
    e.num_nodes = 2;
    CHECK_EQ_INT(ddpc_pg_create(&e, &(ddpc_pg_config){DDPC_BACKEND_SHM, 0}, &pg), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "backend mpi");
}

int main(void)
{
    RUN_TEST(test_collectives_by_port);
    RUN_TEST(test_rendezvous_by_run_id);
    RUN_TEST(test_port_in_use);
    RUN_TEST(test_world_size_mismatch_and_duplicate_rank);
    RUN_TEST(test_config_errors);
    return check_summary();
}
