// SPDX-License-Identifier: MIT
/* The key-value store (include/ddpc/store.h): set/get/try_get/add round trips, values up to the
 * limit, overwrites, a counter incremented by many processes at once (every value seen once),
 * a get that waits for a later set, deadlines with messages naming the key and the address, a
 * port in use, a foreign connection that must not disturb the server, and a server that goes
 * away under a client. */
#include "check.h"
#include "store_testutil.h"

#include <ddpc/status.h>
#include <ddpc/store.h>
#include <ddpc/timer.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char TOKEN[] = "test-token-0123456789abcdef";

static ddpc_store *connect_to(const ddpc_store_server *srv)
{
    ddpc_store *c = NULL;
    CHECK_EQ_INT(
        ddpc_store_connect("127.0.0.1", ddpc_store_server_port(srv), TOKEN, ddpc_time_now() + 10, &c),
        DDPC_OK);
    return c;
}

static void test_round_trips(void)
{
    ddpc_store_server *srv = NULL;
    CHECK_EQ_INT(ddpc_store_server_start("127.0.0.1", 0, TOKEN, &srv), DDPC_OK);
    CHECK(ddpc_store_server_port(srv) > 0);
    ddpc_store *c = connect_to(srv);
    char buf[64];
    size_t len = 99;
    bool found = true;
    CHECK_EQ_INT(ddpc_store_try_get(c, "a", buf, sizeof buf, &len, &found), DDPC_OK);
    CHECK(!found);
    CHECK_EQ_INT(len, 0);
    CHECK_EQ_INT(ddpc_store_set(c, "a", "hello", 5), DDPC_OK);
    CHECK_EQ_INT(ddpc_store_try_get(c, "a", buf, sizeof buf, &len, &found), DDPC_OK);
    CHECK(found && len == 5 && memcmp(buf, "hello", 5) == 0);
    /* Overwrite with a longer value; a short buffer gets the head and the full length. */
    CHECK_EQ_INT(ddpc_store_set(c, "a", "a longer value", 14), DDPC_OK);
    CHECK_EQ_INT(ddpc_store_get(c, "a", buf, 3, &len, ddpc_time_now() + 1), DDPC_OK);
    CHECK(len == 14 && memcmp(buf, "a l", 3) == 0);
    /* The connection stays in step after a truncated read. */
    CHECK_EQ_INT(ddpc_store_set(c, "empty", "", 0), DDPC_OK);
    CHECK_EQ_INT(ddpc_store_try_get(c, "empty", buf, sizeof buf, &len, &found), DDPC_OK);
    CHECK(found && len == 0);
    int64_t v = 0;
    CHECK_EQ_INT(ddpc_store_add(c, "n", 5, &v), DDPC_OK);
    CHECK_EQ_INT(v, 5);
    CHECK_EQ_INT(ddpc_store_add(c, "n", -7, &v), DDPC_OK);
    CHECK_EQ_INT(v, -2);
    CHECK_EQ_INT(ddpc_store_add(c, "a", 1, &v), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "key 'a' holds a value that is not a counter");
    /* The largest value goes through whole. */
    size_t big = DDPC_STORE_VALUE_MAX;
    unsigned char *out = malloc(big), *in = malloc(big);
    for (size_t i = 0; i < big; i++)
        out[i] = (unsigned char)(i * 131 + 7);
    CHECK_EQ_INT(ddpc_store_set(c, "big", out, big), DDPC_OK);
    CHECK_EQ_INT(ddpc_store_get(c, "big", in, big, &len, ddpc_time_now() + 10), DDPC_OK);
    CHECK(len == big && memcmp(in, out, big) == 0);
    CHECK_EQ_INT(ddpc_store_set(c, "big", out, big + 1), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "value of key 'big' has");
    free(in);
    free(out);
    char key[DDPC_STORE_KEY_MAX + 2];
    memset(key, 'k', sizeof key - 1);
    key[sizeof key - 1] = '\0';
    CHECK_EQ_INT(ddpc_store_set(c, key, "x", 1), DDPC_EINVAL);
    CHECK_EQ_INT(ddpc_store_set(c, "", "x", 1), DDPC_EINVAL);
    /* Still usable after refused calls. */
    CHECK_EQ_INT(ddpc_store_add(c, "n", 2, &v), DDPC_OK);
    CHECK_EQ_INT(v, 0);
    ddpc_store_close(c);
    ddpc_store_server_stop(srv);
}

/* 8 processes add 1 to a counter 50 times each: the counter ends at 400 and every value 1..400
 * was returned to exactly one caller (what ranks rely on to take turns). The processes are forked
 * before the server's thread starts and learn its port through a pipe: a child forked while that
 * thread serves the others could inherit a lock it holds (the allocator's, libcrypto's random
 * generator's) and wait on it forever. */
static void test_counter_across_processes(void)
{
    enum { PROCS = 8, ADDS = 50 };
    int pipes[PROCS][2], ports[PROCS][2];
    pid_t pids[PROCS];
    for (int p = 0; p < PROCS; p++) {
        CHECK(pipe(pipes[p]) == 0 && pipe(ports[p]) == 0);
        pids[p] = fork();
        if (pids[p] == 0) {
            int port = 0;
            close(ports[p][1]);
            if (read(ports[p][0], &port, sizeof port) != (ssize_t)sizeof port)
                _exit(5);
            ddpc_store *c = NULL;
            if (ddpc_store_connect("localhost", port, TOKEN, ddpc_time_now() + 10, &c) != DDPC_OK)
                _exit(2);
            for (int i = 0; i < ADDS; i++) {
                int64_t v;
                if (ddpc_store_add(c, "turn", 1, &v) != DDPC_OK)
                    _exit(3);
                if (write(pipes[p][1], &v, sizeof v) != (ssize_t)sizeof v)
                    _exit(4);
            }
            ddpc_store_close(c);
            _exit(0);
        }
        close(pipes[p][1]);
        close(ports[p][0]);
    }
    ddpc_store_server *srv = NULL;
    CHECK_EQ_INT(ddpc_store_server_start(NULL, 0, TOKEN, &srv), DDPC_OK);
    int port = srv ? ddpc_store_server_port(srv) : 0;
    for (int p = 0; p < PROCS; p++) {
        CHECK(write(ports[p][1], &port, sizeof port) == (ssize_t)sizeof port);
        close(ports[p][1]);
    }
    int seen[PROCS * ADDS + 1] = {0};
    for (int p = 0; p < PROCS; p++) {
        int64_t v;
        while (read(pipes[p][0], &v, sizeof v) == (ssize_t)sizeof v)
            if (v >= 1 && v <= PROCS * ADDS)
                seen[v]++;
        close(pipes[p][0]);
        int status = -1;
        waitpid(pids[p], &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    int once = 0;
    for (int v = 1; v <= PROCS * ADDS; v++)
        once += seen[v] == 1;
    CHECK_EQ_INT(once, PROCS * ADDS);
    ddpc_store_server_stop(srv);
}

/* A get waits for a set made later by another process; a get past its deadline names the key. */
static void test_get_waits_and_times_out(void)
{
    ddpc_store_server *srv = NULL;
    CHECK_EQ_INT(ddpc_store_server_start("127.0.0.1", 0, TOKEN, &srv), DDPC_OK);
    int port = ddpc_store_server_port(srv);
    pid_t pid = fork();
    if (pid == 0) {
        nanosleep(&(struct timespec){0, 200000000L}, NULL);
        ddpc_store *c = NULL;
        if (ddpc_store_connect("127.0.0.1", port, TOKEN, ddpc_time_now() + 10, &c) != DDPC_OK ||
            ddpc_store_set(c, "addr/1", "10.77.0.2:4000", 14) != DDPC_OK)
            _exit(1);
        ddpc_store_close(c);
        _exit(0);
    }
    ddpc_store *c = connect_to(srv);
    char buf[32];
    size_t len;
    CHECK_EQ_INT(ddpc_store_get(c, "addr/1", buf, sizeof buf, &len, ddpc_time_now() + 10), DDPC_OK);
    CHECK(len == 14 && memcmp(buf, "10.77.0.2:4000", 14) == 0);
    int status;
    waitpid(pid, &status, 0);
    double t0 = ddpc_time_now();
    CHECK_EQ_INT(ddpc_store_get(c, "never", buf, sizeof buf, &len, t0 + 0.2), DDPC_ETIMEOUT);
    CHECK(ddpc_time_now() - t0 < 5);
    CHECK_STR_CONTAINS(ddpc_last_error(), "key 'never' was not set in the store at 127.0.0.1:");
    ddpc_store_close(c);
    ddpc_store_server_stop(srv);
}

static void test_port_in_use_and_no_server(void)
{
    ddpc_store_server *a = NULL, *b = NULL;
    CHECK_EQ_INT(ddpc_store_server_start("127.0.0.1", 0, TOKEN, &a), DDPC_OK);
    int port = ddpc_store_server_port(a);
    CHECK_EQ_INT(ddpc_store_server_start("127.0.0.1", port, TOKEN, &b), DDPC_EIO);
    char want[64];
    snprintf(want, sizeof want, "port %d on 127.0.0.1 is already in use", port);
    CHECK_STR_CONTAINS(ddpc_last_error(), want);
    CHECK(b == NULL);
    ddpc_store_server_stop(a);
    /* Nobody listens there now: connect gives up at its deadline and names the address. */
    ddpc_store *c = NULL;
    double t0 = ddpc_time_now();
    CHECK_EQ_INT(ddpc_store_connect("127.0.0.1", port, TOKEN, t0 + 0.3, &c), DDPC_ETIMEOUT);
    CHECK(ddpc_time_now() - t0 < 5);
    snprintf(want, sizeof want, "no key-value store answered at 127.0.0.1:%d", port);
    CHECK_STR_CONTAINS(ddpc_last_error(), want);
    CHECK_EQ_INT(ddpc_store_server_start("no.such.host.invalid", 0, TOKEN, &b), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(),
                       "cannot resolve the store address 'no.such.host.invalid'");
}

/* A connection that speaks something else is dropped; one that proves the token and then
 * stalls mid-request delays nobody: a real client is served meanwhile and afterwards. */
static void test_foreign_and_stalled_peers(void)
{
    ddpc_store_server *srv = NULL;
    CHECK_EQ_INT(ddpc_store_server_start("127.0.0.1", 0, TOKEN, &srv), DDPC_OK);
    int port = ddpc_store_server_port(srv);
    int junk = raw_connect(port);
    CHECK(junk >= 0);
    CHECK(write(junk, "GET / HTTP/1.0\r\n\r\n", 18) == 18);
    CHECK(write(junk, "Host: x\r\n\r\n                            ", 40) == 40);
    int stall = raw_connect(port);
    unsigned char hello[DDPC__STORE_HELLO_LEN], challenge[DDPC__STORE_CHALLENGE_LEN];
    unsigned char mac[DDPC__STORE_MAC_LEN];
    CHECK(raw_hello(stall, hello, challenge));
    raw_proof(TOKEN, hello, challenge, mac);
    CHECK(raw_write(stall, mac, sizeof mac));
    CHECK(write(stall, "\x01\0\0", 3) == 3); /* a third of a request header, then nothing */
    double t0 = ddpc_time_now();
    ddpc_store *c = connect_to(srv);
    CHECK_EQ_INT(ddpc_store_set(c, "k", "v", 1), DDPC_OK);
    char buf[4];
    size_t len;
    CHECK_EQ_INT(ddpc_store_get(c, "k", buf, sizeof buf, &len, ddpc_time_now() + 10), DDPC_OK);
    CHECK(len == 1 && buf[0] == 'v');
    CHECK(ddpc_time_now() - t0 < 15.0); /* not held up to the stalled peer's 30 s */
    /* The foreign peer got nothing and was closed. */
    CHECK(raw_closed_within(junk, 5));
    close(junk);
    close(stall);
    ddpc_store_close(c);
    ddpc_store_server_stop(srv);
}

/* The server stops under a connected client: the next call fails with DDPC_EPEER naming the
 * address, and so does every later one, at once. */
static void test_server_gone(void)
{
    ddpc_store_server *srv = NULL;
    CHECK_EQ_INT(ddpc_store_server_start("127.0.0.1", 0, TOKEN, &srv), DDPC_OK);
    int port = ddpc_store_server_port(srv);
    ddpc_store *c = connect_to(srv);
    CHECK_EQ_INT(ddpc_store_set(c, "k", "v", 1), DDPC_OK);
    ddpc_store_server_stop(srv);
    char want[80];
    snprintf(want, sizeof want, "lost the connection to the key-value store at 127.0.0.1:%d", port);
    int64_t v;
    CHECK_EQ_INT(ddpc_store_add(c, "n", 1, &v), DDPC_EPEER);
    CHECK_STR_CONTAINS(ddpc_last_error(), want);
    double t0 = ddpc_time_now();
    CHECK_EQ_INT(ddpc_store_set(c, "k", "v", 1), DDPC_EPEER);
    CHECK(ddpc_time_now() - t0 < 10); /* at once, not after a timeout */
    ddpc_store_close(c);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    RUN_TEST(test_round_trips);
    RUN_TEST(test_counter_across_processes);
    RUN_TEST(test_get_waits_and_times_out);
    RUN_TEST(test_port_in_use_and_no_server);
    RUN_TEST(test_foreign_and_stalled_peers);
    RUN_TEST(test_server_gone);
    return check_summary();
}
