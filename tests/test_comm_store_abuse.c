// SPDX-License-Identifier: MIT
/* The store under abuse (src/comm/store_server.c): 20 half-sent greetings do not delay a real
 * client; 300 idle connections neither lock it out nor make the server spin, and are dropped
 * after the handshake timeout; running out of descriptors rests the listener instead of
 * spinning; SETs past the byte cap are refused with a message and do not grow the server; the
 * table takes its cap of keys and no more. CPU
 * time is the whole process's (the server is a thread of it) while the test thread sleeps. */
#include "check.h"
#include "comm/store_table.h"
#include "store_testutil.h"

#include <ddpc/status.h>
#include <ddpc/store.h>
#include <ddpc/timer.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char TOKEN[] = "the-job-token-0123456789abcdef";

static double cpu_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static void sleep_s(double s)
{
    struct timespec t = {(time_t)s, (long)((s - (time_t)s) * 1e9)};
    nanosleep(&t, NULL);
}

/* Seconds a fresh client takes to connect, set and read back a key. */
static double real_client_seconds(int port)
{
    double t0 = ddpc_time_now();
    ddpc_store *c = NULL;
    char buf[8];
    size_t len = 0;
    CHECK_EQ_INT(ddpc_store_connect("127.0.0.1", port, TOKEN, t0 + 30, &c), DDPC_OK);
    CHECK_EQ_INT(ddpc_store_set(c, "real", "yes", 3), DDPC_OK);
    CHECK_EQ_INT(ddpc_store_get(c, "real", buf, sizeof buf, &len, ddpc_time_now() + 30), DDPC_OK);
    CHECK(len == 3);
    ddpc_store_close(c);
    return ddpc_time_now() - t0;
}

static void test_slow_loris(void)
{
    enum { LORIS = 20 };
    ddpc_store_server *srv = NULL;
    CHECK_EQ_INT(ddpc_store_server_start("127.0.0.1", 0, TOKEN, &srv), DDPC_OK);
    int port = ddpc_store_server_port(srv), fds[LORIS];
    for (int i = 0; i < LORIS; i++) {
        fds[i] = raw_connect(port);
        CHECK(fds[i] >= 0 && raw_write(fds[i], "DDPCK", 5)); /* a greeting begun, never ended */
    }
    sleep_s(0.1); /* let the server take them all before the real client comes */
    double took = real_client_seconds(port);
    CHECK(took < 4.0); /* not queued behind their 5 s handshake eviction */
    if (took >= 4.0)
        fprintf(stderr, "a real client took %.2f s beside %d half-greetings\n", took, LORIS);
    for (int i = 0; i < LORIS; i++)
        close(fds[i]);
    ddpc_store_server_stop(srv);
}

static void test_idle_flood(void)
{
    enum { IDLE = 300 };
    ddpc_store_server *srv = NULL;
    CHECK_EQ_INT(ddpc_store_server_start("127.0.0.1", 0, TOKEN, &srv), DDPC_OK);
    int port = ddpc_store_server_port(srv), fds[IDLE];
    for (int i = 0; i < IDLE; i++) {
        fds[i] = raw_connect(port);
        CHECK(fds[i] >= 0);
    }
    double took = real_client_seconds(port);
    CHECK(took < 4.0); /* served beside them, not after the 5 s handshake eviction */
    /* Nothing to do: the server sleeps in poll. */
    double cpu0 = cpu_seconds();
    sleep_s(2.0);
    double cpu = cpu_seconds() - cpu0;
    CHECK(cpu < 0.2);
    if (cpu >= 0.2)
        fprintf(stderr, "the server used %.2f s of CPU in 2 s beside %d idle peers\n", cpu, IDLE);
    /* Strangers that never greet are dropped after the handshake timeout (5 s). */
    CHECK(raw_closed_within(fds[0], 10));
    CHECK(raw_closed_within(fds[IDLE - 1], 5));
    for (int i = 0; i < IDLE; i++)
        close(fds[i]);
    ddpc_store_server_stop(srv);
}

/* A child serves with no descriptor left to accept with; 20 connections wait in its backlog. */
static void test_out_of_descriptors_no_spin(void)
{
    int report[2], ready[2], go[2]; /* child to parent: port, CPU seconds; parent to child: go */
    CHECK(pipe(report) == 0 && pipe(ready) == 0 && pipe(go) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        ddpc_store_server *srv = NULL;
        if (ddpc_store_server_start("127.0.0.1", 0, TOKEN, &srv) != DDPC_OK)
            _exit(2);
        int port = ddpc_store_server_port(srv);
        struct rlimit rl = {64, 64};
        setrlimit(RLIMIT_NOFILE, &rl);
        while (dup(0) >= 0) {
        }
        if (write(ready[1], &port, sizeof port) != (ssize_t)sizeof port)
            _exit(3);
        char byte;
        if (read(go[0], &byte, 1) != 1) /* the parent has connected */
            _exit(4);
        double cpu0 = cpu_seconds();
        sleep_s(2.0);
        double cpu = cpu_seconds() - cpu0;
        if (write(report[1], &cpu, sizeof cpu) != (ssize_t)sizeof cpu)
            _exit(5);
        _exit(0);
    }
    int port = 0, fds[20];
    CHECK(read(ready[0], &port, sizeof port) == (ssize_t)sizeof port);
    for (int i = 0; i < 20; i++)
        fds[i] = raw_connect(port);
    CHECK(write(go[1], "g", 1) == 1);
    double cpu = 99;
    CHECK(read(report[0], &cpu, sizeof cpu) == (ssize_t)sizeof cpu);
    CHECK(cpu < 0.3);
    if (cpu >= 0.3)
        fprintf(stderr, "the server used %.2f s of CPU in 2 s without descriptors\n", cpu);
    int status = -1;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    for (int i = 0; i < 20; i++)
        close(fds[i]);
    close(report[0]);
    close(report[1]);
    close(ready[0]);
    close(ready[1]);
    close(go[0]);
    close(go[1]);
}

static long rss_mib(void)
{
    long pages = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    return rss * sysconf(_SC_PAGESIZE) / (1 << 20);
}

/* Three 16 MiB values fit; a fourth would pass 64 MiB and is refused, as are 20 more, without
 * the server growing; the connection stays usable and an overwrite in place still fits. */
static void test_byte_cap(void)
{
    ddpc_store_server *srv = NULL;
    CHECK_EQ_INT(ddpc_store_server_start("127.0.0.1", 0, TOKEN, &srv), DDPC_OK);
    ddpc_store *c = NULL;
    CHECK_EQ_INT(ddpc_store_connect("127.0.0.1", ddpc_store_server_port(srv), TOKEN,
                                    ddpc_time_now() + 10, &c),
                 DDPC_OK);
    size_t big = DDPC_STORE_VALUE_MAX;
    char *v = malloc(big);
    memset(v, 7, big);
    char key[32];
    for (int i = 0; i < 3; i++) {
        snprintf(key, sizeof key, "big%d", i);
        CHECK_EQ_INT(ddpc_store_set(c, key, v, big), DDPC_OK);
    }
    long before = rss_mib();
    for (int i = 3; i < 24; i++) {
        snprintf(key, sizeof key, "big%d", i);
        CHECK_EQ_INT(ddpc_store_set(c, key, v, big), DDPC_EINVAL);
    }
    CHECK_STR_CONTAINS(ddpc_last_error(), "refused key 'big23' (16777216 bytes): it holds at most "
                                          "64 MiB in 65536 keys");
    long grew = rss_mib() - before;
    CHECK(grew < 40);
    if (grew >= 40)
        fprintf(stderr, "the store grew by %ld MiB on refused SETs\n", grew);
    CHECK_EQ_INT(ddpc_store_set(c, "big0", v, big), DDPC_OK);
    char buf[4];
    size_t len = 0;
    CHECK_EQ_INT(ddpc_store_get(c, "big1", buf, sizeof buf, &len, ddpc_time_now() + 10), DDPC_OK);
    CHECK(len == big && buf[0] == 7);
    int64_t n = 0;
    CHECK_EQ_INT(ddpc_store_add(c, "count", 1, &n), DDPC_OK);
    CHECK_EQ_INT(n, 1);
    free(v);
    ddpc_store_close(c);
    ddpc_store_server_stop(srv);
}

/* The table takes DDPC_STORE_KEYS_MAX keys, finds each, refuses one more, and still overwrites. */
static void test_key_cap(void)
{
    ddpc__store_table t = {0};
    ddpc__store_blob *b = ddpc__store_blob_new(1);
    b->data[0] = 'v';
    char key[32];
    int put = 0, found = 0;
    for (int i = 0; i < DDPC_STORE_KEYS_MAX; i++) {
        snprintf(key, sizeof key, "k/%d", i);
        put += ddpc__store_table_put(&t, key, b) == DDPC__TABLE_OK;
    }
    CHECK_EQ_INT(put, DDPC_STORE_KEYS_MAX);
    for (int i = 0; i < DDPC_STORE_KEYS_MAX; i++) {
        snprintf(key, sizeof key, "k/%d", i);
        ddpc__store_entry *e = ddpc__store_table_find(&t, key);
        found += e && strcmp(e->key, key) == 0;
    }
    CHECK_EQ_INT(found, DDPC_STORE_KEYS_MAX);
    CHECK(ddpc__store_table_find(&t, "k/-1") == NULL);
    CHECK_EQ_INT(ddpc__store_table_put(&t, "one/more", b), DDPC__TABLE_FULL);
    CHECK_EQ_INT(ddpc__store_table_put(&t, "k/7", b), DDPC__TABLE_OK);
    CHECK_EQ_INT(t.count, DDPC_STORE_KEYS_MAX);
    ddpc__store_table_fini(&t);
    ddpc__store_blob_unref(b);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    RUN_TEST(test_slow_loris);
    RUN_TEST(test_idle_flood);
    RUN_TEST(test_out_of_descriptors_no_spin);
    RUN_TEST(test_byte_cap);
    RUN_TEST(test_key_cap);
    return check_summary();
}
