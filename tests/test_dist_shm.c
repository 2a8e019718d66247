/* Tests for the shm backend: forked ranks that each build a process group from a hand-filled env
 * (rank, world, MASTER_PORT or run id). Rendezvous both ways, collectives against a local
 * reference (small and pipelined, in place), bitwise repeatability, async order, and the failure
 * paths: port in use, world-size mismatch, duplicate rank, a rank that never arrives (timeout
 * naming it), a rank that dies, the failed state, and nothing left in /dev/shm afterwards.
 * A rank reports by its exit status (0 = all its checks passed); the parent reaps with a limit. */
#include "dist/pg_front.h"
#include "dist/shm_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/half.h>
#include <ddpc/timer.h>

#include "check.h"

#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef void (*rank_fn)(const ddpc_dist_env *env, void *arg);

/* Sanitizer builds run the same paths on smaller "large" messages (still many pipeline blocks). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
enum { BIG_SHIFT = 0 };
#else
enum { BIG_SHIFT = 3 };
#endif
#define BIG(n) ((size_t)(n) << BIG_SHIFT)

/* Every rank 0 this process forked, for the /dev/shm check at the end. */
static struct {
    pid_t pid[256];
    int n;
} rank0_pids;

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
    if (rank0_pids.n < 256)
        rank0_pids.pid[rank0_pids.n++] = pids[0];
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
            ((uint16_t *)p)[i] = ddpc_f32_to_bf16(f);
            break;
        case DDPC_DTYPE_F16:
            ((uint16_t *)p)[i] = ddpc_f32_to_f16(f);
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

/* A segment left by a job whose rank 0 died is replaced; one whose creator lives is an error. */
static void test_run_id_stale_and_in_use(void)
{
    ddpc_dist_env e = base_env(2);
    set_run_id(&e, "stale");
    char name[256];
    ddpc__shm_segment_name(&e, name, sizeof name);
    fflush(NULL);
    pid_t child = fork();
    if (child == 0) { /* creates the segment, then dies without unlinking it */
        void *base = NULL;
        size_t bytes = 0;
        _exit(ddpc__shm_seg_create(name, 2, "somehost", &base, &bytes) == DDPC_OK ? 0 : 1);
    }
    int status = 0;
    waitpid(child, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    int codes[16];
    run_ranks(2, &e, rank_small_sum, NULL, 30, codes);
    expect_all_ok(2, codes);

    void *base = NULL; /* now this process holds the name, alive */
    size_t bytes = 0;
    CHECK_EQ_INT(ddpc__shm_seg_create(name, 2, "somehost", &base, &bytes), DDPC_OK);
    ddpc_pg *pg = NULL;
    e.timeout_s = 5;
    CHECK_EQ_INT(ddpc_pg_create(&e, NULL, &pg), DDPC_EIO);
    char want[160];
    snprintf(want, sizeof want, "run id '%s' is in use by pid %d", e.run_id, (int)getpid());
    CHECK_STR_CONTAINS(ddpc_last_error(), want);
    shm_unlink(name);
    munmap(base, bytes);
}

/* Ranks 0 and 1 of 3 join; rank 2 never starts: both fail at the deadline naming rank 2. */
static void rank_join_without_2(const ddpc_dist_env *e, void *arg)
{
    (void)arg;
    if (e->rank == 2)
        return;
    ddpc_pg *pg = NULL;
    double t0 = ddpc_time_now();
    CHECK_EQ_INT(ddpc_pg_create(e, NULL, &pg), DDPC_ETIMEOUT);
    CHECK(ddpc_time_now() - t0 < 3.0);
    CHECK_STR_CONTAINS(ddpc_last_error(), "timed out after 1 s: rank 2 never");
    if (getenv("DDPC_TEST_VERBOSE"))
        fprintf(stderr, "rank %d: %s\n", e->rank, ddpc_last_error());
}

static void test_rendezvous_timeout_names_missing_rank(void)
{
    ddpc_dist_env e = base_env(3);
    e.timeout_s = 1;
    e.master_port = free_port();
    int codes[16];
    run_ranks(3, &e, rank_join_without_2, NULL, 30, codes);
    expect_all_ok(3, codes);
    e.master_port = 0;
    set_run_id(&e, "late");
    run_ranks(3, &e, rank_join_without_2, NULL, 30, codes);
    expect_all_ok(3, codes);
}

/* Talks to a rank 0 by hand: a stranger's bytes are ignored, a hello from another host is refused
 * with a reply, and rank 0 fails with the same reason. */
static int connect_retry(int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    for (int i = 0; i < 500; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0)
            return fd;
        close(fd);
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    return -1;
}

static void test_hello_from_another_host_is_refused(void)
{
    ddpc_dist_env e = base_env(2);
    e.master_port = free_port();
    e.timeout_s = 10;
    fflush(NULL);
    pid_t child = fork();
    if (child == 0) {
        check_failures_in_test = 0;
        ddpc_pg *pg = NULL;
        CHECK_EQ_INT(ddpc_pg_create(&e, NULL, &pg), DDPC_EINVAL);
        CHECK_STR_CONTAINS(ddpc_last_error(), "is on host 'elsewhere'");
        CHECK_STR_CONTAINS(ddpc_last_error(), "use backend mpi");
        fflush(NULL);
        _exit(check_failures_in_test ? 1 : 0);
    }
    int fd = connect_retry(e.master_port);
    CHECK(fd >= 0);
    const char junk[] = "GET / HTTP/1.0\r\n\r\n";
    CHECK(write(fd, junk, sizeof junk - 1) > 0);
    char buf[600];
    CHECK(read(fd, buf, sizeof buf) <= 0); /* closed without an answer */
    close(fd);
    fd = connect_retry(e.master_port);
    char hello[200];
    int n =
        snprintf(hello, sizeof hello, "ddpc-shm-hello %u rank=1 world=2 pid=%d host=elsewhere\n",
                 DDPC__SHM_VERSION, (int)getpid());
    CHECK(write(fd, hello, (size_t)n) == n);
    ssize_t got = 0, r;
    while (got < (ssize_t)sizeof buf - 1 && (r = read(fd, buf + got, sizeof buf - 1 - got)) > 0)
        got += r;
    buf[got > 0 ? got : 0] = '\0';
    close(fd);
    CHECK_STR_CONTAINS(buf, "ddpc-shm-error rank 1");
    CHECK_STR_CONTAINS(buf, "is on host 'elsewhere'");
    int status = 0;
    waitpid(child, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
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

/* ---- failures during collectives ---- */

typedef struct {
    int culprit;  /* the rank that misbehaves */
    bool dies;    /* _exit right after joining; else joins but never calls the collective */
    double limit; /* the others must fail within this many seconds */
} fault_arg;

static void rank_fault(const ddpc_dist_env *e, void *arg)
{
    const fault_arg *f = arg;
    ddpc_pg *pg = join(e);
    if (!pg)
        return;
    CHECK_EQ_INT(ddpc_pg_barrier(pg), DDPC_OK); /* #0: everyone is there */
    if (e->rank == f->culprit) {
        if (f->dies)
            _exit(0);
        nanosleep(&(struct timespec){1, 600000000}, NULL); /* past the others' 1 s timeout */
        ddpc_pg_destroy(pg);
        return;
    }
    float v[64] = {1};
    double t0 = ddpc_time_now();
    ddpc_status s = ddpc_pg_all_reduce(pg, v, v, 64, DDPC_DTYPE_F32, DDPC_REDUCE_SUM); /* #1 */
    double took = ddpc_time_now() - t0;
    CHECK_EQ_INT(s, f->dies ? DDPC_EPEER : DDPC_ETIMEOUT);
    char want[128];
    if (f->dies)
        snprintf(want, sizeof want, "rank %d (pid ", f->culprit);
    else
        snprintf(want, sizeof want, "all_reduce #1 timed out after 1 s: rank %d never arrived",
                 f->culprit);
    CHECK_STR_CONTAINS(ddpc_last_error(), want);
    if (f->dies)
        CHECK_STR_CONTAINS(ddpc_last_error(), "exited during all_reduce #1");
    if (took >= f->limit)
        fprintf(stderr, "rank %d failed after %.2f s\n", e->rank, took);
    CHECK(took < f->limit);
    CHECK_STR_CONTAINS(ddpc_pg_error(pg), want); /* the group stays failed */
    CHECK_EQ_INT(ddpc_pg_barrier(pg), DDPC_EPEER);
    CHECK_STR_CONTAINS(ddpc_last_error(), "process group failed earlier");
    ddpc_pg_destroy(pg);
}

static void test_timeout_names_missing_rank(void)
{
    ddpc_dist_env e = base_env(3);
    e.master_port = free_port();
    e.timeout_s = 1;
    fault_arg f = {2, false, 2.5};
    int codes[16];
    run_ranks(3, &e, rank_fault, &f, 30, codes);
    expect_all_ok(3, codes);
}

static void test_dead_peer_detected(void)
{
    ddpc_dist_env e = base_env(3);
    set_run_id(&e, "dead");
    e.timeout_s = 30; /* detection must not wait for the timeout */
    fault_arg f = {1, true, 1.0};
    int codes[16];
    run_ranks(3, &e, rank_fault, &f, 30, codes);
    expect_all_ok(3, codes);
}

/* Ranks that disagree on the collective fail at once with both sides named (no garbage). */
static void rank_mismatch_coll(const ddpc_dist_env *e, void *arg)
{
    (void)arg;
    ddpc_pg *pg = join(e);
    if (!pg)
        return;
    float v[300] = {0};
    CHECK_EQ_INT(ddpc_pg_barrier(pg), DDPC_OK);
    ddpc_status s = e->rank == 1
                        ? ddpc_pg_broadcast(pg, v, 100, DDPC_DTYPE_F32, 0)
                        : ddpc_pg_all_reduce(pg, v, v, 300, DDPC_DTYPE_F32, DDPC_REDUCE_MAX);
    CHECK_EQ_INT(s, DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "collective mismatch");
    CHECK_STR_CONTAINS(ddpc_last_error(), "all_reduce #1 of 300 f32 (max)");
    CHECK_STR_CONTAINS(ddpc_last_error(), "broadcast #1 of 100 f32 from root 0");
    ddpc_pg_destroy(pg);
}

static void test_collective_mismatch_is_an_error(void)
{
    ddpc_dist_env e = base_env(3);
    e.master_port = free_port();
    int codes[16];
    run_ranks(3, &e, rank_mismatch_coll, NULL, 30, codes);
    expect_all_ok(3, codes);
}

/* ---- determinism, isolation, async ---- */

static void rank_repeatable(const ddpc_dist_env *e, void *arg)
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
    ddpc_dist_env e1 = base_env(2), e2 = base_env(2);
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

static void rank_async(const ddpc_dist_env *e, void *arg)
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
    ddpc_dist_env e = base_env(3);
    set_run_id(&e, "async");
    int codes[16];
    run_ranks(3, &e, rank_async, NULL, 30, codes);
    expect_all_ok(3, codes);
}

/* The cross-memory-attach paths (off by default, see shm_rendezvous.c), forced on. */
static void rank_cma(const ddpc_dist_env *e, void *arg)
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
    ddpc_dist_env e = base_env(3);
    e.master_port = free_port();
    int codes[16];
    run_ranks(3, &e, rank_cma, NULL, 60, codes);
    expect_all_ok(3, codes);
}

/* ---- /dev/shm ---- */

/* Segments this test created and did not remove: named ones carry the parent's pid in the run
 * id; TCP ones are "ddpc-UID-PID-..." with the pid of some rank 0 (recorded by run_ranks). */
static int count_leftovers(void)
{
    char mine[64];
    snprintf(mine, sizeof mine, "_%d_", (int)getpid());
    DIR *d = opendir("/dev/shm");
    int n = 0;
    for (struct dirent *de; d && (de = readdir(d));) {
        bool ours = strncmp(de->d_name, "ddpc-u", 6) == 0 && strstr(de->d_name, mine);
        for (int i = 0; i < rank0_pids.n && !ours; i++) {
            char tcp[64];
            snprintf(tcp, sizeof tcp, "ddpc-%d-%d-", (int)getuid(), (int)rank0_pids.pid[i]);
            ours = strncmp(de->d_name, tcp, strlen(tcp)) == 0;
        }
        if (ours)
            fprintf(stderr, "left in /dev/shm: %s\n", de->d_name);
        n += ours;
    }
    if (d)
        closedir(d);
    return n;
}

static void test_nothing_left_in_dev_shm(void)
{
    CHECK(rank0_pids.n > 10);
    CHECK_EQ_INT(count_leftovers(), 0);
}

/* ---- the rendezvous messages (bytes from the network) ---- */

static bool hello_ok(const char *line)
{
    ddpc__shm_hello h;
    return ddpc__shm_hello_parse(line, strlen(line), &h) == DDPC_OK;
}

static void test_hello_parser_is_strict(void)
{
    ddpc__shm_hello h = {.version = 1, .rank = 3, .world = 4, .pid = 4242, .host = "node-1.lan"};
    char line[DDPC__SHM_LINE_MAX + 1];
    int n = ddpc__shm_hello_format(line, sizeof line, &h);
    ddpc__shm_hello back;
    CHECK_EQ_INT(ddpc__shm_hello_parse(line, (size_t)n, &back), DDPC_OK);
    CHECK(back.rank == 3 && back.world == 4 && back.pid == 4242 &&
          !strcmp(back.host, "node-1.lan"));
    CHECK(hello_ok("ddpc-shm-hello 1 rank=0 world=1 pid=1 host=\n"));    /* empty host: allowed */
    CHECK(!hello_ok("ddpc-shm-hello 1 rank=01 world=2 pid=5 host=a\n")); /* leading zero */
    CHECK(!hello_ok("ddpc-shm-hello 1 rank=+1 world=2 pid=5 host=a\n")); /* sign */
    CHECK(!hello_ok("ddpc-shm-hello 1 rank=1 world=99999999999 pid=5 host=a\n"));
    CHECK(!hello_ok("ddpc-shm-hello 1 rank=1 world=2 pid=5 host=a\nx")); /* bytes after it */
    CHECK(!hello_ok("ddpc-shm-hello 1 rank=1 world=2 pid=5 host=a"));    /* no newline */
    CHECK(!hello_ok("ddpc-shm-hello 1 rank=1 world=2 pid=5 host=a b\n"));
    CHECK(!hello_ok("ddpc-shm-hello 1 rank=1 world=0 pid=5 host=a\n"));
    CHECK(!hello_ok("ddpc-shm-hello 1 rank=1  world=2 pid=5 host=a\n"));
    CHECK(!hello_ok("GET / HTTP/1.1\r\n"));
    CHECK_EQ_INT(ddpc__shm_hello_parse(line, 0, &back), DDPC_EFORMAT);

    bool ok = false;
    char text[DDPC__SHM_MSG_CAP];
    n = ddpc__shm_reply_format(line, sizeof line, true, "/ddpc-0-1-ab");
    CHECK_EQ_INT(ddpc__shm_reply_parse(line, (size_t)n, &ok, text, sizeof text), DDPC_OK);
    CHECK(ok && !strcmp(text, "/ddpc-0-1-ab"));
    n = ddpc__shm_reply_format(line, sizeof line, false, "world size\tmismatch\n");
    CHECK_EQ_INT(ddpc__shm_reply_parse(line, (size_t)n, &ok, text, sizeof text), DDPC_OK);
    CHECK(!ok && !strcmp(text, "world size?mismatch?")); /* kept on one printable line */
    const char *bad[] = {"ddpc-shm-ok ../etc/passwd\n", "ddpc-shm-ok /a/b\n", "ddpc-shm-ok /\n",
                         "ddpc-shm-error \n", "ddpc-shm-ok /a\n\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_EQ_INT(ddpc__shm_reply_parse(bad[i], strlen(bad[i]), &ok, text, sizeof text),
                     DDPC_EFORMAT);
    /* found by fuzz_rdzv: a segment name longer than any we create must not parse, since the
     * reply could not be formatted back the same */
    char longname[DDPC__SHM_LINE_MAX];
    n = snprintf(longname, sizeof longname, "ddpc-shm-ok /");
    memset(longname + n, 'l', 480);
    longname[n + 480] = '\n';
    CHECK_EQ_INT(ddpc__shm_reply_parse(longname, (size_t)n + 481, &ok, text, sizeof text),
                 DDPC_EFORMAT);
}

int main(void)
{
    RUN_TEST(test_hello_parser_is_strict);
    RUN_TEST(test_collectives_by_port);
    RUN_TEST(test_rendezvous_by_run_id);
    RUN_TEST(test_run_id_stale_and_in_use);
    RUN_TEST(test_port_in_use);
    RUN_TEST(test_rendezvous_timeout_names_missing_rank);
    RUN_TEST(test_hello_from_another_host_is_refused);
    RUN_TEST(test_world_size_mismatch_and_duplicate_rank);
    RUN_TEST(test_config_errors);
    RUN_TEST(test_timeout_names_missing_rank);
    RUN_TEST(test_dead_peer_detected);
    RUN_TEST(test_collective_mismatch_is_an_error);
    RUN_TEST(test_two_groups_at_once_are_bitwise_repeatable);
    RUN_TEST(test_async_in_order);
    RUN_TEST(test_cross_memory_attach_paths);
    RUN_TEST(test_nothing_left_in_dev_shm);
    return check_summary();
}
