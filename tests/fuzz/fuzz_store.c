// SPDX-License-Identifier: MIT
/* libFuzzer harness for the rendezvous store's server (src/comm/store_server.c): its handshake
 * and request parsing, the only bytes it takes from strangers. Built and run by tests/fuzz/run.sh.
 * One server per process (127.0.0.1, a free port, a known token). Per input, a raw TCP client
 * sends the input's bytes after its first byte: as they are (a stranger's handshake) when that
 * byte is even, else after a correct handshake (store_wire.h, computed with the same MAC code) so
 * the request parser is reached; then it half-closes and reads until the server closes. After
 * every input a real client (ddpc_store_connect, kept across inputs) sets and gets a key, and
 * every 64 inputs a fresh one connects: a crash, a server that never closes, or one that stops
 * serving the job's own clients aborts within DEADLINE_SECONDS. */
#include "comm/store_wire.h"

#include <ddpc/store.h>
#include <ddpc/timer.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char TOKEN[] = "fuzz-token-0123456789abcdef";
static const double DEADLINE_SECONDS = 10.0;

static ddpc_store_server *server;
static ddpc_store *client;
static int port;
static uint64_t inputs;

static void die(const char *what)
{
    fprintf(stderr, "fuzz_store: %s (%s)\n", what, ddpc_last_error());
    abort();
}

static void start(void)
{
    if (ddpc_store_server_start("127.0.0.1", 0, TOKEN, &server) != DDPC_OK)
        die("cannot start the server");
    port = ddpc_store_server_port(server);
    if (ddpc_store_connect("127.0.0.1", port, TOKEN, ddpc_time_now() + DEADLINE_SECONDS, &client) !=
        DDPC_OK)
        die("cannot connect the checking client");
}

/* A raw connection to the server, tried again until the deadline: one failed connect aborted a
 * CI run once (after 35,000 inputs, on a machine busy with other tests; its input alone did not
 * reproduce it), while a server that stops accepting fails here after DEADLINE_SECONDS, with
 * the reason. */
static int dial(double deadline)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (;;) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0)
            return fd;
        int err = errno;
        if (fd >= 0)
            close(fd);
        if (ddpc_time_now() >= deadline) {
            fprintf(stderr, "fuzz_store: cannot connect a raw socket to the server: %s\n",
                    strerror(err));
            abort();
        }
        usleep(10000);
    }
}

/* The client's side of the handshake; false when the server closed first (it may not). */
static bool handshake(int fd, double deadline)
{
    unsigned char hello[DDPC__STORE_HELLO_LEN], challenge[DDPC__STORE_CHALLENGE_LEN];
    unsigned char mac[DDPC__STORE_MAC_LEN];
    memcpy(hello, DDPC__STORE_GREETING, DDPC__STORE_GREETING_LEN);
    memset(hello + DDPC__STORE_GREETING_LEN, 0x5a, DDPC__STORE_NONCE_LEN);
    bool timed_out = false;
    if (!ddpc__store_write(fd, hello, sizeof hello, deadline) ||
        !ddpc__store_read(fd, challenge, sizeof challenge, deadline, &timed_out))
        die("the server did not answer a correct greeting");
    const unsigned char *client_nonce = hello + DDPC__STORE_GREETING_LEN;
    const unsigned char *server_nonce = challenge + DDPC__STORE_GREETING_LEN;
    ddpc__store_mac(TOKEN, "ddpc store server", client_nonce, server_nonce, mac);
    if (!ddpc__store_mac_equal(mac, challenge + DDPC__STORE_HELLO_LEN))
        die("the server's proof of the token is wrong");
    ddpc__store_mac(TOKEN, "ddpc store client", client_nonce, server_nonce, mac);
    return ddpc__store_write(fd, mac, sizeof mac, deadline);
}

/* Sends what the server takes, then half-closes and reads until the server closes. */
static void send_and_drain(int fd, const uint8_t *p, size_t n, double deadline)
{
    unsigned char sink[65536];
    bool open_out = true;
    while (ddpc_time_now() < deadline) {
        struct pollfd pf = {fd, (short)(POLLIN | (open_out ? POLLOUT : 0)), 0};
        if (poll(&pf, 1, 100) < 0 && errno != EINTR)
            die("poll failed");
        if (open_out && (pf.revents & POLLOUT)) {
            ssize_t w = n ? send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT) : 0;
            if (w > 0)
                p += w, n -= (size_t)w;
            if (n == 0 || (w < 0 && errno != EAGAIN && errno != EINTR)) {
                shutdown(fd, SHUT_WR); /* the server sees the end of the input */
                open_out = false;
            }
        }
        if (pf.revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t got = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
            if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR))
                return; /* closed (or reset): the server is done with this connection */
        }
    }
    die("the server kept a connection open after its peer's input ended");
}

static void check_service(double deadline)
{
    char key[32], got[32];
    snprintf(key, sizeof key, "%llu", (unsigned long long)inputs);
    size_t len = 0;
    if (ddpc_store_set(client, "fuzz-check", key, strlen(key)) != DDPC_OK ||
        ddpc_store_get(client, "fuzz-check", got, sizeof got, &len, deadline) != DDPC_OK ||
        len != strlen(key) || memcmp(got, key, len) != 0)
        die("the job's own client is no longer served");
    if (inputs % 64 == 0) {
        ddpc_store *fresh = NULL;
        if (ddpc_store_connect("127.0.0.1", port, TOKEN, deadline, &fresh) != DDPC_OK)
            die("a new client of the job cannot connect");
        ddpc_store_close(fresh);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!server)
        start();
    inputs++;
    double deadline = ddpc_time_now() + DEADLINE_SECONDS;
    int fd = dial(deadline);
    bool authed = size > 0 && (data[0] & 1);
    if (!authed || handshake(fd, deadline))
        send_and_drain(fd, data + (size > 0), size - (size > 0), deadline);
    close(fd);
    check_service(deadline);
    return 0;
}
