// SPDX-License-Identifier: MIT
/* The store's client: one blocking TCP connection, one request in flight, opened by the mutual
 * proof of the token (store_wire.h). A request that gets no answer within IO_SECONDS means the
 * server (or the link to it) is gone: DDPC_EPEER naming the address, and the connection is
 * closed so later calls fail at once with the same cause. */
#include "comm/store_wire.h"

#include <ddpc/store.h>
#include <ddpc/timer.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { IO_SECONDS = 30 };

struct ddpc_store {
    int fd; /* -1 once the connection was lost */
    char where[300];
};

static void pause_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* Connects a non-blocking attempt to sa, waiting at most until deadline; fd or -1. */
static int connect_once(const struct sockaddr_in *sa, double deadline)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (const struct sockaddr *)sa, sizeof *sa) != 0) {
        if (errno != EINPROGRESS) {
            close(fd);
            return -1;
        }
        double ms = (deadline - ddpc_time_now()) * 1e3;
        struct pollfd p = {fd, POLLOUT, 0};
        int err = 0;
        socklen_t len = sizeof err;
        if (poll(&p, 1,
                 ms <= 0     ? 0
                 : ms > 1000 ? 1000
                             : (int)ms) <= 0 ||
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
            close(fd);
            return -1;
        }
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

typedef enum { HANDSHAKE_OK, HANDSHAKE_RETRY, HANDSHAKE_FORGED } handshake;

/* The client's half of the handshake on a fresh connection. FORGED: the peer answered with a
 * proof of another token (or none), which no retry will change. */
static handshake prove(int fd, const char *token)
{
    unsigned char hello[DDPC__STORE_HELLO_LEN], challenge[DDPC__STORE_CHALLENGE_LEN];
    unsigned char mac[DDPC__STORE_MAC_LEN];
    unsigned char *cn = hello + DDPC__STORE_GREETING_LEN,
                  *sn = challenge + DDPC__STORE_GREETING_LEN;
    memcpy(hello, DDPC__STORE_GREETING, DDPC__STORE_GREETING_LEN);
    if (!ddpc__store_random(cn, DDPC__STORE_NONCE_LEN))
        return HANDSHAKE_RETRY;
    bool timed_out;
    double deadline = ddpc_time_now() + 5.0;
    if (!ddpc__store_write(fd, hello, sizeof hello, deadline) ||
        !ddpc__store_read(fd, challenge, sizeof challenge, deadline, &timed_out))
        return HANDSHAKE_RETRY; /* not listening yet, or busy: the caller tries again */
    if (memcmp(challenge, DDPC__STORE_GREETING, DDPC__STORE_GREETING_LEN) != 0)
        return HANDSHAKE_FORGED;
    ddpc__store_mac(token, "ddpc store server", cn, sn, mac);
    if (!ddpc__store_mac_equal(mac, challenge + DDPC__STORE_HELLO_LEN))
        return HANDSHAKE_FORGED;
    ddpc__store_mac(token, "ddpc store client", cn, sn, mac);
    return ddpc__store_write(fd, mac, sizeof mac, deadline) ? HANDSHAKE_OK : HANDSHAKE_RETRY;
}

ddpc_status ddpc_store_connect(const char *addr, int port, const char *token, double deadline,
                               ddpc_store **out)
{
    *out = NULL;
    if (!addr || !addr[0])
        addr = "127.0.0.1";
    if (port <= 0 || port > 65535)
        return ddpc_errorf(DDPC_EINVAL, "store port %d is not a TCP port", port);
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(addr, NULL, &hints, &res);
    if (rc != 0 || !res)
        return ddpc_errorf(DDPC_EINVAL, "cannot resolve the store address '%s': %s", addr,
                           gai_strerror(rc));
    struct sockaddr_in sa = *(struct sockaddr_in *)res->ai_addr;
    freeaddrinfo(res);
    sa.sin_port = htons((uint16_t)port);
    ddpc_store *s = calloc(1, sizeof *s);
    if (!s)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for a store client");
    snprintf(s->where, sizeof s->where, "%s:%d", addr, port);
    if (token && strlen(token) > DDPC_STORE_TOKEN_MAX) {
        free(s);
        return ddpc_errorf(DDPC_EINVAL, "the store's token has more than %d bytes",
                           DDPC_STORE_TOKEN_MAX);
    }
    /* Retry until the deadline: the server may not listen yet, or may be at its connection cap. */
    for (int wait_ms = 10;; wait_ms = wait_ms < 200 ? 2 * wait_ms : 200) {
        int fd = connect_once(&sa, deadline);
        handshake h = fd >= 0 ? prove(fd, token) : HANDSHAKE_RETRY;
        if (h == HANDSHAKE_OK) {
            s->fd = fd;
            *out = s;
            return DDPC_OK;
        }
        if (fd >= 0)
            close(fd);
        if (h == HANDSHAKE_FORGED) {
            free(s);
            return ddpc_errorf(DDPC_EINVAL,
                               "the store at %s:%d did not prove this job's token: it was given "
                               "another DDPC_STORE_TOKEN (or none), or it is not this job's store",
                               addr, port);
        }
        if (ddpc_time_now() + wait_ms * 1e-3 > deadline) {
            free(s);
            return ddpc_errorf(DDPC_ETIMEOUT,
                               "no key-value store answered at %s:%d before the deadline (is "
                               "rank 0 or the node-0 launcher running there?)",
                               addr, port);
        }
        pause_ms(wait_ms);
    }
}

void ddpc_store_close(ddpc_store *s)
{
    if (!s)
        return;
    if (s->fd >= 0)
        close(s->fd);
    free(s);
}

static ddpc_status lost(ddpc_store *s, const char *key)
{
    if (s->fd >= 0) {
        close(s->fd);
        s->fd = -1;
    }
    return ddpc_errorf(DDPC_EPEER, "lost the connection to the key-value store at %s (at key '%s')",
                       s->where, key);
}

static ddpc_status full(const ddpc_store *s, const char *key, size_t len)
{
    return ddpc_errorf(DDPC_EINVAL,
                       "the key-value store at %s refused key '%s' (%zu bytes): it holds at most "
                       "%d MiB in %d keys",
                       s->where, key, len, DDPC_STORE_BYTES_MAX >> 20, DDPC_STORE_KEYS_MAX);
}

/* One round trip: sends (op, key, value) and reads the answer header; the answer's value, if
 * any, is left on the socket for the caller (read_value). */
static ddpc_status request(ddpc_store *s, ddpc__store_op op, const char *key, const void *value,
                           size_t len, ddpc__store_answer *a)
{
    size_t key_len = strlen(key);
    if (key_len == 0 || key_len > DDPC_STORE_KEY_MAX)
        return ddpc_errorf(DDPC_EINVAL, "store key '%.40s' must have 1 to %d bytes", key,
                           DDPC_STORE_KEY_MAX);
    if (len > DDPC_STORE_VALUE_MAX)
        return ddpc_errorf(DDPC_EINVAL, "store value of key '%s' has %zu bytes (at most %d)", key,
                           len, DDPC_STORE_VALUE_MAX);
    if (s->fd < 0)
        return lost(s, key);
    ddpc__store_request q = {(uint32_t)op, (uint32_t)key_len, len};
    double deadline = ddpc_time_now() + IO_SECONDS;
    bool timed_out;
    if (!ddpc__store_write(s->fd, &q, sizeof q, deadline) ||
        !ddpc__store_write(s->fd, key, key_len, deadline) ||
        (len && !ddpc__store_write(s->fd, value, len, deadline)) ||
        !ddpc__store_read(s->fd, a, sizeof *a, deadline, &timed_out) ||
        a->value_len > DDPC_STORE_VALUE_MAX)
        return lost(s, key);
    return DDPC_OK;
}

/* Reads the answer's value: the first `cap` bytes into buf, the rest discarded. */
static ddpc_status read_value(ddpc_store *s, const char *key, uint64_t len, void *buf, size_t cap)
{
    double deadline = ddpc_time_now() + IO_SECONDS;
    bool timed_out;
    size_t keep = len < cap ? (size_t)len : cap;
    if (keep && !ddpc__store_read(s->fd, buf, keep, deadline, &timed_out))
        return lost(s, key);
    char sink[4096];
    for (uint64_t left = len - keep; left > 0;) {
        size_t n = left < sizeof sink ? (size_t)left : sizeof sink;
        if (!ddpc__store_read(s->fd, sink, n, deadline, &timed_out))
            return lost(s, key);
        left -= n;
    }
    return DDPC_OK;
}

ddpc_status ddpc_store_set(ddpc_store *s, const char *key, const void *value, size_t len)
{
    ddpc__store_answer a;
    ddpc_status st = request(s, DDPC__STORE_SET, key, value, len, &a);
    if (st != DDPC_OK)
        return st;
    if (a.status == DDPC__STORE_FULL && a.value_len == 0)
        return full(s, key, len);
    if (a.status != DDPC__STORE_OK || a.value_len != 0)
        return lost(s, key);
    return DDPC_OK;
}

ddpc_status ddpc_store_try_get(ddpc_store *s, const char *key, void *buf, size_t cap, size_t *len,
                               bool *found)
{
    ddpc__store_answer a;
    *found = false;
    *len = 0;
    ddpc_status st = request(s, DDPC__STORE_GET, key, NULL, 0, &a);
    if (st != DDPC_OK)
        return st;
    if (a.status == DDPC__STORE_ABSENT)
        return a.value_len == 0 ? DDPC_OK : lost(s, key);
    if (a.status != DDPC__STORE_OK)
        return lost(s, key);
    st = read_value(s, key, a.value_len, buf, cap);
    if (st == DDPC_OK) {
        *found = true;
        *len = (size_t)a.value_len;
    }
    return st;
}

ddpc_status ddpc_store_get(ddpc_store *s, const char *key, void *buf, size_t cap, size_t *len,
                           double deadline)
{
    for (int wait_ms = 1;; wait_ms = wait_ms < 50 ? 2 * wait_ms : 50) {
        bool found;
        ddpc_status st = ddpc_store_try_get(s, key, buf, cap, len, &found);
        if (st != DDPC_OK || found)
            return st;
        if (ddpc_time_now() > deadline)
            return ddpc_errorf(DDPC_ETIMEOUT, "key '%s' was not set in the store at %s in time",
                               key, s->where);
        pause_ms(wait_ms);
    }
}

ddpc_status ddpc_store_add(ddpc_store *s, const char *key, int64_t delta, int64_t *out)
{
    ddpc__store_answer a;
    ddpc_status st = request(s, DDPC__STORE_ADD, key, &delta, sizeof delta, &a);
    if (st != DDPC_OK)
        return st;
    if (a.status == DDPC__STORE_BAD)
        return ddpc_errorf(DDPC_EINVAL, "store key '%s' holds a value that is not a counter", key);
    if (a.status == DDPC__STORE_FULL && a.value_len == 0)
        return full(s, key, sizeof delta);
    int64_t now = 0;
    if (a.status != DDPC__STORE_OK || a.value_len != sizeof now)
        return lost(s, key);
    st = read_value(s, key, a.value_len, &now, sizeof now);
    if (st == DDPC_OK && out)
        *out = now;
    return st;
}
