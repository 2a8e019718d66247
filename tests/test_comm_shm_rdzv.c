// SPDX-License-Identifier: MIT
/* Tests for the shm backend's rendezvous: forked ranks (see comm_shm_testutil.h) meeting by
 * MASTER_PORT and by run id, a stale segment replaced and a live one refused, a port in use, a rank
 * that never arrives (the timeout names it), a stranger's bytes and a hello from another host,
 * configuration errors, the strict parsers of the rendezvous messages, and nothing left in
 * /dev/shm afterwards. */
#include "comm_shm_testutil.h"

#include <sys/mman.h>

/* ---- rendezvous ---- */

static void rank_small_sum(const ddpc_comm_env *e, void *arg)
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
    ddpc_comm_env e = base_env(3);
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
    ddpc_comm_env e = base_env(2);
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
static void rank_join_without_2(const ddpc_comm_env *e, void *arg)
{
    (void)arg;
    if (e->rank == 2)
        return;
    ddpc_pg *pg = NULL;
    double t0 = ddpc_time_now();
    CHECK_EQ_INT(ddpc_pg_create(e, NULL, &pg), DDPC_ETIMEOUT);
    CHECK(ddpc_time_now() - t0 < 20.0); /* the 1 s deadline, not a hang (loaded machines) */
    /* The budget left when the backend starts, a few ms under 1 s on a slow (sanitizer) build. */
    CHECK_STR_CONTAINS(ddpc_last_error(), "timed out after ");
    CHECK_STR_CONTAINS(ddpc_last_error(), " s: rank 2 never");
    if (getenv("DDPC_TEST_VERBOSE"))
        fprintf(stderr, "rank %d: %s\n", e->rank, ddpc_last_error());
}

static void test_rendezvous_timeout_names_missing_rank(void)
{
    ddpc_comm_env e = base_env(3);
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
    ddpc_comm_env e = base_env(2);
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
    ddpc_comm_env e = base_env(2);
    e.master_port = ntohs(sa.sin_port);
    ddpc_pg *pg = NULL;
    CHECK_EQ_INT(ddpc_pg_create(&e, NULL, &pg), DDPC_EIO);
    char want[96];
    snprintf(want, sizeof want, "MASTER_PORT %d on 127.0.0.1 is already in use", e.master_port);
    CHECK_STR_CONTAINS(ddpc_last_error(), want);
    close(fd);
}

static void test_config_errors(void)
{
    ddpc_comm_env e = base_env(2);
    ddpc_pg *pg = NULL;
    CHECK_EQ_INT(ddpc_pg_create(&e, NULL, &pg), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "MASTER_ADDR/MASTER_PORT or a run id");
    e.master_port = free_port();
    e.local_world_size = 1;
    e.num_nodes = 2;
    CHECK_EQ_INT(ddpc_pg_create(&e, &(ddpc_pg_config){.backend = DDPC_BACKEND_SHM}, &pg),
                 DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "use backend gloo or mpi across hosts");
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

/* ---- /dev/shm ---- */

static void test_nothing_left_in_dev_shm(void)
{
    expect_nothing_left_in_dev_shm(5);
}

int main(void)
{
    RUN_TEST(test_hello_parser_is_strict);
    RUN_TEST(test_rendezvous_by_run_id);
    RUN_TEST(test_run_id_stale_and_in_use);
    RUN_TEST(test_port_in_use);
    RUN_TEST(test_rendezvous_timeout_names_missing_rank);
    RUN_TEST(test_hello_from_another_host_is_refused);
    RUN_TEST(test_config_errors);
    RUN_TEST(test_nothing_left_in_dev_shm);
    return check_summary();
}
