// SPDX-License-Identifier: MIT
/* Tests for rank-aware logging (src/comm/log.c): which ranks print for each scope, the
 * "[rank r/w] " prefix on every line, ordering with the stream's buffer, write errors, and that
 * lines from concurrent processes sharing a pipe or an O_APPEND file never interleave. */
#include <ddpc/alloc.h>
#include <ddpc/log.h>

#include "check.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

/* Logs through a temporary file and returns what reached it (static buffer). */
static const char *logged(ddpc_log_ranks r, ddpc_log_scope scope, const char *msg)
{
    static char buf[16384];
    FILE *f = tmpfile();
    CHECK(f != NULL);
    CHECK_EQ_INT(ddpc_logf(f, r, scope, "%s", msg), DDPC_OK);
    rewind(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static ddpc_log_ranks ranks(int rank, int world, int local)
{
    return (ddpc_log_ranks){.rank = rank, .world_size = world, .local_rank = local};
}

static void test_enabled_by_scope(void)
{
    ddpc_log_ranks r0 = ranks(0, 4, 0), r2 = ranks(2, 4, 0), r3 = ranks(3, 4, 1);
    CHECK(ddpc_log_enabled(r0, DDPC_LOG_EVERY_RANK) && ddpc_log_enabled(r3, DDPC_LOG_EVERY_RANK));
    CHECK(ddpc_log_enabled(r0, DDPC_LOG_LOCAL_RANK0));
    CHECK(ddpc_log_enabled(r2, DDPC_LOG_LOCAL_RANK0));
    CHECK(!ddpc_log_enabled(r3, DDPC_LOG_LOCAL_RANK0));
    CHECK(ddpc_log_enabled(r0, DDPC_LOG_GLOBAL_RANK0));
    CHECK(!ddpc_log_enabled(r2, DDPC_LOG_GLOBAL_RANK0));
    CHECK(!ddpc_log_enabled(r3, DDPC_LOG_GLOBAL_RANK0));
    CHECK(!ddpc_log_enabled(r0, (ddpc_log_scope)99));
    ddpc_log_ranks s = ddpc_log_ranks_single();
    CHECK(ddpc_log_enabled(s, DDPC_LOG_GLOBAL_RANK0) && ddpc_log_enabled(s, DDPC_LOG_LOCAL_RANK0));
}

static void test_ranks_from_env(void)
{
    ddpc_comm_env e = ddpc_comm_env_single();
    e.rank = 5;
    e.world_size = 8;
    e.local_rank = 1;
    e.local_world_size = 4;
    ddpc_log_ranks r = ddpc_log_ranks_from_env(&e);
    CHECK_EQ_INT(r.rank, 5);
    CHECK_EQ_INT(r.world_size, 8);
    CHECK_EQ_INT(r.local_rank, 1);
}

/* A world-size-1 group (needs no peers) gives rank 0 of 1. */
static void test_ranks_from_pg(void)
{
    ddpc_comm_env e = ddpc_comm_env_single();
    ddpc_pg_config cfg = ddpc_pg_config_default();
    cfg.backend = DDPC_BACKEND_SHM;
    ddpc_pg *pg = NULL;
    CHECK_EQ_INT(ddpc_pg_create(&e, &cfg, &pg), DDPC_OK);
    if (!pg)
        return;
    ddpc_log_ranks r = ddpc_log_ranks_from_pg(pg);
    CHECK_EQ_INT(r.rank, 0);
    CHECK_EQ_INT(r.world_size, 1);
    CHECK_EQ_INT(r.local_rank, 0);
    ddpc_pg_destroy(pg);
}

static void test_prefix(void)
{
    char buf[64];
    CHECK_EQ_INT(ddpc_log_prefix(ranks(0, 1, 0), buf, sizeof buf), 0);
    CHECK(strcmp(buf, "") == 0);
    CHECK_EQ_INT(ddpc_log_prefix(ranks(2, 4, 0), buf, sizeof buf), 11);
    CHECK(strcmp(buf, "[rank 2/4] ") == 0);
    CHECK_EQ_INT(ddpc_log_prefix(ranks(12, 16, 4), buf, 6), 13);
    CHECK(strcmp(buf, "[rank") == 0);
    CHECK_EQ_INT(ddpc_log_prefix(ranks(1, 2, 1), NULL, 0), 11);
}

static void test_lines_are_prefixed(void)
{
    CHECK(strcmp(logged(ranks(0, 1, 0), DDPC_LOG_EVERY_RANK, "loss 0.5"), "loss 0.5\n") == 0);
    CHECK(strcmp(logged(ranks(1, 2, 1), DDPC_LOG_EVERY_RANK, "loss 0.5\n"),
                 "[rank 1/2] loss 0.5\n") == 0);
    CHECK(strcmp(logged(ranks(3, 4, 1), DDPC_LOG_EVERY_RANK, "a\nb"),
                 "[rank 3/4] a\n[rank 3/4] b\n") == 0);
    CHECK(strcmp(logged(ranks(3, 4, 1), DDPC_LOG_EVERY_RANK, "a\n\nb\n"),
                 "[rank 3/4] a\n[rank 3/4] \n[rank 3/4] b\n") == 0);
    CHECK(strcmp(logged(ranks(3, 4, 1), DDPC_LOG_EVERY_RANK, ""), "[rank 3/4] \n") == 0);
    CHECK(strcmp(logged(ranks(3, 4, 1), DDPC_LOG_GLOBAL_RANK0, "hidden"), "") == 0);
    CHECK(strcmp(logged(ranks(3, 4, 1), DDPC_LOG_LOCAL_RANK0, "hidden"), "") == 0);
    CHECK(strcmp(logged(ranks(2, 4, 0), DDPC_LOG_LOCAL_RANK0, "node"), "[rank 2/4] node\n") == 0);
}

static void test_long_message(void)
{
    static char msg[12001];
    for (int i = 0; i < 12000; i++)
        msg[i] = (i % 100 == 99) ? '\n' : (char)('a' + i % 26);
    msg[12000] = '\0';
    int64_t live = ddpc_alloc_live();
    const char *out = logged(ranks(1, 2, 0), DDPC_LOG_EVERY_RANK, msg);
    CHECK_EQ_INT(strlen(out), 12000 + 120 * 11);
    CHECK(strncmp(out, "[rank 1/2] abc", 14) == 0);
    CHECK_EQ_INT(ddpc_alloc_live(), live);
    /* out of memory for a long message is an error, not a crash or a silent drop */
    FILE *f = tmpfile();
    ddpc_alloc_fail_after(0);
    CHECK_EQ_INT(ddpc_logf(f, ranks(1, 2, 0), DDPC_LOG_EVERY_RANK, "%s", msg), DDPC_ENOMEM);
    ddpc_alloc_fail_after(-1);
    CHECK_STR_CONTAINS(ddpc_last_error(), "out of memory");
    fclose(f);
}

static void test_order_with_stream_buffer_and_errors(void)
{
    FILE *f = tmpfile();
    fprintf(f, "buffered first\n"); /* still in stdio's buffer */
    CHECK_EQ_INT(ddpc_logf(f, ranks(0, 2, 0), DDPC_LOG_EVERY_RANK, "then %d", 2), DDPC_OK);
    fprintf(f, "last\n");
    fflush(f);
    rewind(f);
    char buf[128] = {0};
    CHECK(fread(buf, 1, sizeof buf - 1, f) > 0);
    CHECK(strcmp(buf, "buffered first\n[rank 0/2] then 2\nlast\n") == 0);
    fclose(f);
    /* a stream without a descriptor */
    char *mem = NULL;
    size_t memlen = 0;
    FILE *m = open_memstream(&mem, &memlen);
    CHECK_EQ_INT(ddpc_logf(m, ranks(1, 3, 1), DDPC_LOG_EVERY_RANK, "x=%d", 7), DDPC_OK);
    fclose(m);
    CHECK(mem && strcmp(mem, "[rank 1/3] x=7\n") == 0);
    free(mem);
    /* a write that fails */
    FILE *ro = fopen("/dev/null", "r");
    CHECK(ro != NULL);
    CHECK_EQ_INT(ddpc_logf(ro, ranks(0, 1, 0), DDPC_LOG_EVERY_RANK, "nowhere"), DDPC_EIO);
    CHECK_STR_CONTAINS(ddpc_last_error(), "log: writing");
    fclose(ro);
}

enum { WRITERS = 4, LINES = 300 };

/* Every line of text must be exactly what some writer wrote, and each writer's lines must all be
 * there, in order. */
static void check_lines(const char *text)
{
    int next[WRITERS] = {0};
    const char *p = text;
    while (*p) {
        int r = -1, w = -1, i = -1, n = 0;
        char pad[256];
        if (sscanf(p, "[rank %d/%d] line %d %255[x]%n", &r, &w, &i, pad, &n) != 4 || w != WRITERS ||
            r < 0 || r >= WRITERS || p[n] != '\n' || strlen(pad) != (size_t)(40 + r * 10)) {
            fprintf(stderr, "garbled line: %.80s\n", p);
            CHECK(0);
            return;
        }
        CHECK_EQ_INT(i, next[r]);
        next[r] = i + 1;
        p += n + 1;
    }
    for (int r = 0; r < WRITERS; r++)
        CHECK_EQ_INT(next[r], LINES);
}

static void spawn_writers(FILE *f)
{
    pid_t pids[WRITERS];
    for (int r = 0; r < WRITERS; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            char pad[128];
            memset(pad, 'x', sizeof pad);
            pad[40 + r * 10] = '\0';
            for (int i = 0; i < LINES; i++)
                if (ddpc_logf(f, ranks(r, WRITERS, r), DDPC_LOG_EVERY_RANK, "line %d %s", i, pad))
                    _exit(1);
            _exit(0);
        }
    }
    for (int r = 0; r < WRITERS; r++) {
        int status = 0;
        waitpid(pids[r], &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
}

static void test_concurrent_writers_append_file(void)
{
    char path[] = "/tmp/ddpc_test_log_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    FILE *f = fopen(path, "a");
    spawn_writers(f);
    fclose(f);
    FILE *in = fopen(path, "r");
    static char text[WRITERS * LINES * 128];
    size_t n = fread(text, 1, sizeof text - 1, in);
    text[n] = '\0';
    fclose(in);
    unlink(path);
    check_lines(text);
}

static void test_concurrent_writers_pipe(void)
{
    int fds[2];
    CHECK(pipe(fds) == 0);
    FILE *f = fdopen(fds[1], "w");
    static char text[WRITERS * LINES * 128];
    char path[] = "/tmp/ddpc_test_log_pipe_XXXXXX";
    int tmp = mkstemp(path);
    CHECK(tmp >= 0);
    close(tmp);
    pid_t reader = fork();
    if (reader == 0) { /* drains the pipe so writers never block; echoes to a file for the parent */
        fclose(f);
        size_t n = 0;
        ssize_t got;
        while ((got = read(fds[0], text + n, sizeof text - 1 - n)) > 0)
            n += (size_t)got;
        FILE *out = fopen(path, "w");
        fwrite(text, 1, n, out);
        fclose(out);
        _exit(0);
    }
    close(fds[0]);
    spawn_writers(f);
    fclose(f);
    int status = 0;
    waitpid(reader, &status, 0);
    FILE *in = fopen(path, "r");
    size_t n = in ? fread(text, 1, sizeof text - 1, in) : 0;
    text[n] = '\0';
    if (in)
        fclose(in);
    unlink(path);
    check_lines(text);
}

int main(void)
{
    RUN_TEST(test_enabled_by_scope);
    RUN_TEST(test_ranks_from_env);
    RUN_TEST(test_ranks_from_pg);
    RUN_TEST(test_prefix);
    RUN_TEST(test_lines_are_prefixed);
    RUN_TEST(test_long_message);
    RUN_TEST(test_order_with_stream_buffer_and_errors);
    RUN_TEST(test_concurrent_writers_append_file);
    RUN_TEST(test_concurrent_writers_pipe);
    return check_summary();
}
