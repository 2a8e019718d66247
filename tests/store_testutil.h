// SPDX-License-Identifier: MIT
/* Raw store peers for tests: a socket to 127.0.0.1:port that speaks as much of the store's
 * protocol (src/comm/store_wire.h) as a test wants, to play strangers, stalled clients and
 * replays against the real server. */
#ifndef DDPC_TESTS_STORE_TESTUTIL_H
#define DDPC_TESTS_STORE_TESTUTIL_H

#include "comm/store_wire.h"

#include <ddpc/store.h>
#include <ddpc/timer.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* A connected socket to 127.0.0.1:port, or -1. */
static inline int raw_connect(int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* Reads exactly len bytes within 5 s; false otherwise. */
static inline bool raw_read(int fd, void *buf, size_t len)
{
    bool timed_out;
    return ddpc__store_read(fd, buf, len, ddpc_time_now() + 5, &timed_out);
}

static inline bool raw_write(int fd, const void *buf, size_t len)
{
    return ddpc__store_write(fd, buf, len, ddpc_time_now() + 5);
}

/* Sends the greeting and a fresh nonce (kept in hello), reads the server's challenge. */
static inline bool raw_hello(int fd, unsigned char hello[DDPC__STORE_HELLO_LEN],
                             unsigned char challenge[DDPC__STORE_CHALLENGE_LEN])
{
    memcpy(hello, DDPC__STORE_GREETING, DDPC__STORE_GREETING_LEN);
    ddpc__store_random(hello + DDPC__STORE_GREETING_LEN, DDPC__STORE_NONCE_LEN);
    return raw_write(fd, hello, DDPC__STORE_HELLO_LEN) &&
           raw_read(fd, challenge, DDPC__STORE_CHALLENGE_LEN);
}

/* The client's proof for that exchange under `token`. */
static inline void raw_proof(const char *token, const unsigned char *hello,
                             const unsigned char *challenge, unsigned char mac[DDPC__STORE_MAC_LEN])
{
    ddpc__store_mac(token, "ddpc store client", hello + DDPC__STORE_GREETING_LEN,
                    challenge + DDPC__STORE_GREETING_LEN, mac);
}

/* Sends a SET of key to value without waiting for the answer. */
static inline bool raw_send_set(int fd, const char *key, const char *value)
{
    ddpc__store_request q = {DDPC__STORE_SET, (uint32_t)strlen(key), strlen(value)};
    return raw_write(fd, &q, sizeof q) && raw_write(fd, key, strlen(key)) &&
           raw_write(fd, value, strlen(value));
}

/* Whether the server closed fd within `seconds` (EOF or reset, after any bytes it sent). */
static inline bool raw_closed_within(int fd, double seconds)
{
    double deadline = ddpc_time_now() + seconds;
    char buf[256];
    while (ddpc_time_now() < deadline) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 100) > 0) {
            ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
            if (n <= 0)
                return true;
        }
    }
    return false;
}

#endif
