// SPDX-License-Identifier: MIT
/* Test helpers for the shm backend tests (tests/test_comm_shm*.c): forked ranks that each build a
 * process group from a hand-filled env (rank, world, MASTER_PORT or run id), reference inputs and
 * results for the collectives, and the /dev/shm leftover check. A rank reports by its exit status
 * (0 = all its checks passed); the parent reaps with a limit. Every rank 0 forked by run_ranks is
 * recorded, so each test program can check at its end that its groups left nothing behind.
 * Header-only, for tests; each including program gets its own copy of the record. */
#ifndef DDPC_TESTS_DIST_SHM_TESTUTIL_H
#define DDPC_TESTS_DIST_SHM_TESTUTIL_H

#include "comm/pg_front.h"
#include "comm/shm_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/half.h>
#include <ddpc/timer.h>

#include "check.h"

#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef void (*rank_fn)(const ddpc_comm_env *env, void *arg);

/* Every rank 0 this process forked, for the /dev/shm check at the end. */
static struct {
    pid_t pid[256];
    int n;
} rank0_pids;

static inline ddpc_comm_env base_env(int world)
{
    ddpc_comm_env e;
    memset(&e, 0, sizeof e);
    e.world_size = e.local_world_size = world;
    e.num_nodes = 1;
    e.timeout_s = 20;
    return e;
}

/* A port nothing listens on right now (the kernel's choice of a free one). */
static inline int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    bind(fd, (struct sockaddr *)&sa, sizeof sa);
    getsockname(fd, (struct sockaddr *)&sa, &len);
    close(fd);
    return ntohs(sa.sin_port);
}

/* A port p with p and p + 1 free right now: torchrun's agent store on p, ddpc's on the next.
 * free_port alone leaves p + 1 to chance, and tests running beside this one (ctest -j, another
 * build's tests) take kernel-chosen ports in the same range. */
static inline int free_port_pair(void)
{
    for (int tries = 0; tries < 64; tries++) {
        int p = free_port();
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET,
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                                 .sin_port = htons((uint16_t)(p + 1))};
        bool free_next = p < 65535 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
        close(fd);
        if (free_next)
            return p;
    }
    return free_port();
}

/* A run id no other test or job uses (odd characters on purpose: the backend sanitises them). */
static inline void set_run_id(ddpc_comm_env *e, const char *tag)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(e->run_id, sizeof e->run_id, "test/%s:%d %ld", tag, (int)getpid(), ts.tv_nsec);
}

/* Forks one process per rank running fn; returns each rank's exit status in codes[] (-1 if it had
 * to be killed after `limit_s`). */
static inline void run_ranks(int world, const ddpc_comm_env *base, rank_fn fn, void *arg,
                             double limit_s, int *codes)
{
    pid_t pids[16];
    fflush(NULL);
    for (int r = 0; r < world; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            ddpc_comm_env e = *base;
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

static inline void expect_all_ok(int world, const int *codes)
{
    for (int r = 0; r < world; r++)
        CHECK_EQ_INT(codes[r], 0);
}

/* ---- reference data: element i of rank k's input, exactly representable in every dtype ---- */

static inline void fill(void *p, size_t count, ddpc_dtype t, int k, int salt)
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
static inline void *expected_reduce(int world, size_t count, ddpc_dtype t, ddpc_reduce_op op,
                                    int salt, size_t offset_blocks)
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

static inline ddpc_pg *join(const ddpc_comm_env *e)
{
    ddpc_pg *pg = NULL;
    ddpc_status s = ddpc_pg_create(e, NULL, &pg);
    if (s != DDPC_OK)
        fprintf(stderr, "rank %d: ddpc_pg_create: %s\n", e->rank, ddpc_last_error());
    CHECK_EQ_INT(s, DDPC_OK);
    return pg;
}

static inline bool same(const void *got, const void *want, size_t bytes, const char *what, int rank)
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

static inline void check_all_reduce(ddpc_pg *pg, size_t count, ddpc_dtype t, ddpc_reduce_op op,
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

static inline void check_reduce_scatter(ddpc_pg *pg, size_t count, ddpc_dtype t, ddpc_reduce_op op,
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

static inline void check_gather_and_broadcast(ddpc_pg *pg, size_t count, ddpc_dtype t,
                                              bool in_place, int salt)
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

/* Segments this test created and did not remove: named ones carry the parent's pid in the run
 * id; TCP ones are "ddpc-UID-PID-..." with the pid of some rank 0 (recorded by run_ranks). */
static inline int count_leftovers(void)
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

/* The body of each program's last test: run_ranks ran at least min_groups groups (so the check
 * below is not vacuous), and none of them left a segment in /dev/shm. */
static inline void expect_nothing_left_in_dev_shm(int min_groups)
{
    CHECK(rank0_pids.n >= min_groups);
    CHECK_EQ_INT(count_leftovers(), 0);
}

#endif
