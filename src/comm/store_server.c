// SPDX-License-Identifier: MIT
/* The store's server: one thread drives every connection from one poll loop. Sockets are
 * non-blocking and each connection is a state machine with its own input and output, so a peer
 * that stalls mid-greeting or mid-request delays nobody. Until it has proved the token a peer
 * may send nothing but the handshake, gets HANDSHAKE_SECONDS for it, and is the first evicted
 * when the connections are at their cap; the job's own clients then stay as long as they like
 * (they idle legitimately between rendezvous), bounded only while a request is half-sent.
 * Keys and bytes are capped (store_table.h). The bookkeeping uses the C allocator, not
 * ddpc_malloc: a server thread beside a training run must not show up in the trainer's
 * allocation counts. */
#define _GNU_SOURCE /* accept4, pipe2 */
#include "comm/store_table.h"
#include "comm/store_wire.h"

#include <ddpc/store.h>
#include <ddpc/timer.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/crypto.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

static const double HANDSHAKE_SECONDS = 5.0;     /* a stranger's slot is freed after this */
static const double REQUEST_SECONDS = 30.0;      /* a client's half-sent request or unread answer */
static const double ACCEPT_PAUSE_SECONDS = 0.25; /* out of descriptors: the listener rests */
enum { CONN_LIMIT = 1000, FD_MARGIN = 256 };

typedef enum {
    CONN_HELLO,  /* reading the client's greeting and nonce */
    CONN_PROOF,  /* reading the client's MAC */
    CONN_HEADER, /* authenticated: reading a request header */
    CONN_KEY,    /* reading the key */
    CONN_VALUE,  /* reading a value (into `value`, or `in` for ADD) */
    CONN_DISCARD /* reading a refused SET's value into nothing */
} conn_state;

typedef struct {
    int fd;
    conn_state state;
    double since; /* accept, or the start of the current request or answer */
    unsigned char client_nonce[DDPC__STORE_NONCE_LEN], server_nonce[DDPC__STORE_NONCE_LEN];
    unsigned char in[DDPC_STORE_KEY_MAX + 1 > DDPC__STORE_HELLO_LEN ? DDPC_STORE_KEY_MAX + 1
                                                                    : DDPC__STORE_HELLO_LEN];
    size_t got, want;      /* bytes of the current unit read, and its length */
    ddpc__store_request q; /* the request being read */
    char key[DDPC_STORE_KEY_MAX + 1];
    ddpc__store_blob *value; /* a SET's value being received; its length is reserved */
    uint64_t discard_left;
    unsigned char head[DDPC__STORE_CHALLENGE_LEN]; /* answer header (or the challenge) to send */
    size_t head_len, head_sent;
    ddpc__store_blob *out; /* the answer's value, a reference held until it is sent */
    size_t out_sent;
} conn;

struct ddpc_store_server {
    int listen_fd, wake[2], port;
    pthread_t thread;
    char token[DDPC_STORE_TOKEN_MAX + 1];
    size_t max_conns;
    /* Below: the server thread's only. */
    ddpc__store_table table;
    conn **conns;
    size_t nconns;
    double listen_rest_until;  /* accept failed for want of descriptors: wait until then */
    unsigned char sink[65536]; /* where refused values go */
};

static bool authed(const conn *c)
{
    return c->state != CONN_HELLO && c->state != CONN_PROOF;
}

static bool sending(const conn *c)
{
    return c->head_sent < c->head_len || (c->out && c->out_sent < c->out->len);
}

/* When c is dropped unless it makes progress; 0: never (an idle authenticated client). */
static double conn_deadline(const conn *c)
{
    if (!authed(c))
        return c->since + HANDSHAKE_SECONDS;
    if (sending(c) || c->state != CONN_HEADER || c->got > 0)
        return c->since + REQUEST_SECONDS;
    return 0;
}

static void conn_free(ddpc_store_server *s, conn *c)
{
    close(c->fd);
    if (c->value) {
        s->table.reserved -= c->value->len;
        ddpc__store_blob_unref(c->value);
    }
    ddpc__store_blob_unref(c->out);
    free(c);
}

static void drop(ddpc_store_server *s, size_t i)
{
    conn_free(s, s->conns[i]);
    s->conns[i] = s->conns[--s->nconns];
}

static void expect(conn *c, conn_state state, size_t want)
{
    c->state = state;
    c->got = 0;
    c->want = want;
}

/* Queues an answer header and (a reference to) its value. */
static void answer(conn *c, ddpc__store_reply status, ddpc__store_blob *value)
{
    ddpc__store_answer a = {status, 0, value ? value->len : 0};
    memcpy(c->head, &a, sizeof a);
    c->head_len = sizeof a;
    c->head_sent = 0;
    if (value)
        value->refs++;
    c->out = value;
    c->out_sent = 0;
    c->since = ddpc_time_now(); /* the client has REQUEST_SECONDS to read it */
    expect(c, CONN_HEADER, sizeof(ddpc__store_request));
}

/* The client's greeting is in c->in: answer with our nonce and proof. False drops it. */
static bool on_hello(ddpc_store_server *s, conn *c)
{
    if (memcmp(c->in, DDPC__STORE_GREETING, DDPC__STORE_GREETING_LEN) != 0 ||
        !ddpc__store_random(c->server_nonce, sizeof c->server_nonce))
        return false;
    memcpy(c->client_nonce, c->in + DDPC__STORE_GREETING_LEN, sizeof c->client_nonce);
    memcpy(c->head, DDPC__STORE_GREETING, DDPC__STORE_GREETING_LEN);
    memcpy(c->head + DDPC__STORE_GREETING_LEN, c->server_nonce, DDPC__STORE_NONCE_LEN);
    ddpc__store_mac(s->token, "ddpc store server", c->client_nonce, c->server_nonce,
                    c->head + DDPC__STORE_HELLO_LEN);
    c->head_len = DDPC__STORE_CHALLENGE_LEN;
    c->head_sent = 0;
    expect(c, CONN_PROOF, DDPC__STORE_MAC_LEN);
    return true;
}

static bool on_proof(ddpc_store_server *s, conn *c)
{
    unsigned char mac[DDPC__STORE_MAC_LEN];
    ddpc__store_mac(s->token, "ddpc store client", c->client_nonce, c->server_nonce, mac);
    if (!ddpc__store_mac_equal(mac, c->in))
        return false;
    expect(c, CONN_HEADER, sizeof(ddpc__store_request));
    return true;
}

static bool on_header(conn *c)
{
    memcpy(&c->q, c->in, sizeof c->q);
    if (c->q.key_len == 0 || c->q.key_len > DDPC_STORE_KEY_MAX ||
        c->q.value_len > DDPC_STORE_VALUE_MAX)
        return false; /* not our client */
    if ((c->q.op == DDPC__STORE_GET && c->q.value_len != 0) ||
        (c->q.op == DDPC__STORE_ADD && c->q.value_len != sizeof(int64_t)) ||
        (c->q.op != DDPC__STORE_GET && c->q.op != DDPC__STORE_ADD && c->q.op != DDPC__STORE_SET))
        return false;
    expect(c, CONN_KEY, c->q.key_len);
    return true;
}

static void serve_add(ddpc_store_server *s, conn *c)
{
    int64_t delta, now = 0;
    memcpy(&delta, c->in, sizeof delta);
    ddpc__store_entry *e = ddpc__store_table_find(&s->table, c->key);
    if (e && e->value->len != sizeof now) {
        answer(c, DDPC__STORE_BAD, NULL);
        return;
    }
    if (e)
        memcpy(&now, e->value->data, sizeof now);
    now = (int64_t)((uint64_t)now + (uint64_t)delta); /* wraps rather than overflows */
    ddpc__store_blob *b = ddpc__store_blob_new(sizeof now);
    if (!b) {
        answer(c, DDPC__STORE_FULL, NULL);
        return;
    }
    memcpy(b->data, &now, sizeof now);
    ddpc__table_put r = ddpc__store_table_put(&s->table, c->key, b);
    answer(c, r == DDPC__TABLE_OK ? DDPC__STORE_OK : DDPC__STORE_FULL,
           r == DDPC__TABLE_OK ? b : NULL);
    ddpc__store_blob_unref(b);
}

/* The key is in: GET answers now, ADD and SET read their value first. */
static void on_key(ddpc_store_server *s, conn *c)
{
    memcpy(c->key, c->in, c->q.key_len);
    c->key[c->q.key_len] = '\0';
    if (c->q.op == DDPC__STORE_GET) {
        ddpc__store_entry *e = ddpc__store_table_find(&s->table, c->key);
        answer(c, e ? DDPC__STORE_OK : DDPC__STORE_ABSENT, e ? e->value : NULL);
    } else if (c->q.op == DDPC__STORE_ADD) {
        expect(c, CONN_VALUE, sizeof(int64_t));
    } else if (!ddpc__store_table_fits(&s->table, c->key, c->q.value_len) ||
               !(c->value = ddpc__store_blob_new(c->q.value_len))) {
        /* Refused: read the value into nothing, so the client hears why instead of a reset. */
        c->discard_left = c->q.value_len;
        if (c->discard_left == 0)
            answer(c, DDPC__STORE_FULL, NULL);
        else
            expect(c, CONN_DISCARD, 0);
    } else {
        s->table.reserved += c->q.value_len;
        expect(c, CONN_VALUE, c->q.value_len);
    }
}

static void finish_set(ddpc_store_server *s, conn *c)
{
    ddpc__store_blob *b = c->value;
    c->value = NULL;
    s->table.reserved -= b->len;
    ddpc__table_put r = ddpc__store_table_put(&s->table, c->key, b);
    ddpc__store_blob_unref(b);
    answer(c, r == DDPC__TABLE_OK ? DDPC__STORE_OK : DDPC__STORE_FULL, NULL);
}

/* A unit of input is complete: act on it. False drops the connection. */
static bool on_unit(ddpc_store_server *s, conn *c)
{
    switch (c->state) {
    case CONN_HELLO:
        return on_hello(s, c);
    case CONN_PROOF:
        return on_proof(s, c);
    case CONN_HEADER:
        return on_header(c);
    case CONN_KEY:
        on_key(s, c);
        return true;
    case CONN_VALUE:
        if (c->q.op == DDPC__STORE_ADD)
            serve_add(s, c);
        else
            finish_set(s, c);
        return true;
    case CONN_DISCARD:
        answer(c, DDPC__STORE_FULL, NULL);
        return true;
    }
    return false;
}

/* Where the current unit's next bytes go, and how many to ask for. */
static unsigned char *in_slot(ddpc_store_server *s, conn *c, size_t *room)
{
    if (c->state == CONN_DISCARD) {
        *room = c->discard_left < sizeof s->sink ? (size_t)c->discard_left : sizeof s->sink;
        return s->sink;
    }
    *room = c->want - c->got;
    if (c->state == CONN_VALUE && c->q.op == DDPC__STORE_SET)
        return c->value->data + c->got;
    return c->in + c->got;
}

/* Reads what c's socket holds, acting on each whole unit, until it would block or an answer is
 * queued (one request at a time: the next is read once the answer is out). False drops it. */
static bool conn_read(ddpc_store_server *s, conn *c)
{
    while (!sending(c)) {
        size_t room;
        unsigned char *to = in_slot(s, c, &room);
        if (room > 0) {
            ssize_t got = recv(c->fd, to, room, 0);
            if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                return true;
            if (got < 0 && errno == EINTR)
                continue;
            if (got <= 0)
                return false;
            if (c->state == CONN_HEADER && c->got == 0)
                c->since = ddpc_time_now(); /* a request begins: REQUEST_SECONDS to arrive */
            if (c->state == CONN_DISCARD)
                c->discard_left -= (uint64_t)got;
            else
                c->got += (size_t)got;
            /* a peer that does not open with our greeting goes at its first wrong byte */
            if (c->state == CONN_HELLO &&
                memcmp(c->in, DDPC__STORE_GREETING,
                       c->got < DDPC__STORE_GREETING_LEN ? c->got : DDPC__STORE_GREETING_LEN) != 0)
                return false;
            if (c->state == CONN_DISCARD ? c->discard_left > 0 : c->got < c->want)
                continue;
        }
        if (!on_unit(s, c))
            return false;
    }
    return true;
}

/* Sends what c has queued; false drops it. */
static bool conn_write(conn *c)
{
    while (sending(c)) {
        const unsigned char *from;
        size_t len;
        if (c->head_sent < c->head_len) {
            from = c->head + c->head_sent;
            len = c->head_len - c->head_sent;
        } else {
            from = c->out->data + c->out_sent;
            len = c->out->len - c->out_sent;
        }
        ssize_t w = send(c->fd, from, len, MSG_NOSIGNAL);
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return true;
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        if (c->head_sent < c->head_len)
            c->head_sent += (size_t)w;
        else
            c->out_sent += (size_t)w;
    }
    ddpc__store_blob_unref(c->out);
    c->out = NULL;
    return true;
}

/* Makes room for one more connection: the oldest that has not proved the token goes. False
 * when every slot is the job's own. */
static bool evict_stranger(ddpc_store_server *s)
{
    size_t oldest = s->nconns;
    for (size_t i = 0; i < s->nconns; i++)
        if (!authed(s->conns[i]) &&
            (oldest == s->nconns || s->conns[i]->since < s->conns[oldest]->since))
            oldest = i;
    if (oldest == s->nconns)
        return false;
    drop(s, oldest);
    return true;
}

static void accept_one(ddpc_store_server *s, double now)
{
    int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
        /* Out of descriptors or memory: polling the listener again at once would spin. */
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
            s->listen_rest_until = now + ACCEPT_PAUSE_SECONDS;
        return;
    }
    if (s->nconns >= s->max_conns && !evict_stranger(s)) {
        close(fd);
        return;
    }
    conn *c = calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->fd = fd;
    c->since = now;
    expect(c, CONN_HELLO, DDPC__STORE_HELLO_LEN);
    s->conns[s->nconns++] = c;
}

/* Drops connections past their deadline; returns the poll timeout (ms) until the next one. */
static int sweep(ddpc_store_server *s, double now)
{
    double next = s->listen_rest_until > now ? s->listen_rest_until : 0;
    for (size_t i = s->nconns; i-- > 0;) {
        double d = conn_deadline(s->conns[i]);
        if (d > 0 && d <= now)
            drop(s, i);
        else if (d > 0 && (next == 0 || d < next))
            next = d;
    }
    if (next == 0)
        return -1;
    double ms = (next - now) * 1e3;
    return ms > 60000 ? 60000 : (int)ms + 1;
}

static void *serve(void *arg)
{
    ddpc_store_server *s = arg;
    struct pollfd *fds = malloc((s->max_conns + 2) * sizeof *fds);
    while (fds) {
        double now = ddpc_time_now();
        int timeout = sweep(s, now);
        bool listening = now >= s->listen_rest_until;
        fds[0] = (struct pollfd){s->wake[0], POLLIN, 0};
        fds[1] = (struct pollfd){listening ? s->listen_fd : -1, POLLIN, 0};
        for (size_t i = 0; i < s->nconns; i++)
            fds[i + 2] =
                (struct pollfd){s->conns[i]->fd, sending(s->conns[i]) ? POLLOUT : POLLIN, 0};
        size_t n = s->nconns;
        if (poll(fds, n + 2, timeout) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (fds[0].revents)
            break;
        /* Connections from the back, so that drop() (which moves the last into the hole) never
         * moves one whose poll result is still to be read. */
        for (size_t i = n; i-- > 0;) {
            conn *c = s->conns[i];
            if (!fds[i + 2].revents)
                continue;
            bool ok = sending(c) ? conn_write(c) : conn_read(s, c);
            /* an answer queued by the read goes out at once if the socket takes it */
            if (ok && sending(c))
                ok = conn_write(c);
            if (ok && !sending(c) && (fds[i + 2].events & POLLOUT))
                ok = conn_read(s, c);
            if (!ok)
                drop(s, i);
        }
        if (fds[1].revents)
            accept_one(s, ddpc_time_now());
    }
    free(fds);
    return NULL;
}

/* Connections served at once: CONN_LIMIT, and never so many that the process (a launcher with
 * its workers' pipes and logs) runs out of descriptors. */
static size_t conn_cap(void)
{
    struct rlimit rl;
    size_t cap = CONN_LIMIT;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        size_t room =
            rl.rlim_cur > 2 * FD_MARGIN ? (size_t)rl.rlim_cur - FD_MARGIN : (size_t)rl.rlim_cur / 2;
        cap = room < cap ? room : cap;
    }
    return cap < 8 ? 8 : cap;
}

static ddpc_status resolve(const char *bind_addr, struct sockaddr_in *sa)
{
    sa->sin_addr.s_addr = htonl(INADDR_ANY);
    if (!bind_addr || !bind_addr[0] || inet_pton(AF_INET, bind_addr, &sa->sin_addr) == 1)
        return DDPC_OK;
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(bind_addr, NULL, &hints, &res);
    if (rc != 0 || !res)
        return ddpc_errorf(DDPC_EINVAL, "cannot resolve the store address '%s': %s", bind_addr,
                           gai_strerror(rc));
    sa->sin_addr = ((struct sockaddr_in *)res->ai_addr)->sin_addr;
    freeaddrinfo(res);
    return DDPC_OK;
}

static ddpc_status listen_on(ddpc_store_server *s, const char *bind_addr, struct sockaddr_in *sa,
                             int port)
{
    s->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s->listen_fd < 0)
        return ddpc_errorf(DDPC_EIO, "cannot create the store's socket: %s", strerror(errno));
    int one = 1;
    setsockopt(s->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(s->listen_fd, (struct sockaddr *)sa, sizeof *sa) == 0 &&
        listen(s->listen_fd, 128) == 0)
        return DDPC_OK;
    int e = errno;
    char where[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &sa->sin_addr, where, sizeof where);
    if (e == EADDRINUSE)
        return ddpc_errorf(DDPC_EIO, "port %d on %s is already in use (another job?)", port, where);
    if (e == EADDRNOTAVAIL)
        return ddpc_errorf(DDPC_EIO,
                           "cannot listen on %s (%s): it is not an address of this host (a NAT "
                           "or virtual IP?); set DDPC_STORE_BIND to one of this host's addresses, "
                           "or to 0.0.0.0 for all of them",
                           bind_addr, where);
    return ddpc_errorf(DDPC_EIO, "cannot listen on %s port %d: %s", where, port, strerror(e));
}

ddpc_status ddpc_store_server_start(const char *bind_addr, int port, const char *token,
                                    ddpc_store_server **out)
{
    *out = NULL;
    if (port < 0 || port > 65535)
        return ddpc_errorf(DDPC_EINVAL, "store port %d is not a TCP port", port);
    if (token && strlen(token) > DDPC_STORE_TOKEN_MAX)
        return ddpc_errorf(DDPC_EINVAL, "the store's token has more than %d bytes",
                           DDPC_STORE_TOKEN_MAX);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    DDPC_TRY(resolve(bind_addr, &sa));
    if ((!token || !token[0]) && (ntohl(sa.sin_addr.s_addr) >> 24) != 127)
        return ddpc_errorf(DDPC_EINVAL,
                           "a store without a token would let anyone who reaches %s join the "
                           "job; set DDPC_STORE_TOKEN (the same secret for every process of the "
                           "job) or listen on a loopback address",
                           bind_addr && bind_addr[0] ? bind_addr : "0.0.0.0");
    ddpc_store_server *s = calloc(1, sizeof *s);
    if (!s)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for the store");
    s->listen_fd = s->wake[0] = s->wake[1] = -1;
    snprintf(s->token, sizeof s->token, "%s", token ? token : "");
    s->max_conns = conn_cap();
    s->conns = calloc(s->max_conns, sizeof *s->conns);
    ddpc_status st = s->conns ? listen_on(s, bind_addr, &sa, port)
                              : ddpc_errorf(DDPC_ENOMEM, "out of memory for the store");
    if (st != DDPC_OK)
        goto fail;
    socklen_t len = sizeof sa;
    getsockname(s->listen_fd, (struct sockaddr *)&sa, &len);
    s->port = ntohs(sa.sin_port);
    if (pipe2(s->wake, O_CLOEXEC) != 0) {
        st = ddpc_errorf(DDPC_EIO, "cannot create the store's wake-up pipe: %s", strerror(errno));
        goto fail;
    }
    if (pthread_create(&s->thread, NULL, serve, s) != 0) {
        st = ddpc_errorf(DDPC_EIO, "cannot start the store's thread");
        goto fail;
    }
    *out = s;
    return DDPC_OK;
fail:
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    if (s->wake[0] >= 0) {
        close(s->wake[0]);
        close(s->wake[1]);
    }
    free(s->conns);
    free(s);
    return st;
}

int ddpc_store_server_port(const ddpc_store_server *server)
{
    return server->port;
}

void ddpc_store_server_stop(ddpc_store_server *s)
{
    if (!s)
        return;
    char b = 1;
    while (write(s->wake[1], &b, 1) < 0 && errno == EINTR) {
    }
    pthread_join(s->thread, NULL);
    while (s->nconns > 0)
        drop(s, s->nconns - 1);
    ddpc__store_table_fini(&s->table);
    close(s->listen_fd);
    close(s->wake[0]);
    close(s->wake[1]);
    OPENSSL_cleanse(s->token, sizeof s->token);
    free(s->conns);
    free(s);
}
