/* The store's server: one thread polls the listening socket, a wake-up pipe and every client, and
 * answers one request at a time from an in-memory table. A job has a few hundred keys at most
 * (rendezvous addresses, agents' states), so the table is a plain array searched linearly.
 * A client gets 2 s to finish a request it started and to greet; one that does not is dropped,
 * so a stalled or foreign peer cannot hold the job's rendezvous. The bookkeeping uses the C
 * allocator, not ddpc_malloc: a server thread beside a training run must not show up in the
 * trainer's allocation counts. */
#include "comm/store_wire.h"

#include <ddpc/store.h>
#include <ddpc/timer.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

enum { REQUEST_SECONDS = 2 };

typedef struct {
    char *key;
    void *value;
    size_t len;
} entry;

typedef struct {
    int fd;
    bool greeted;
} client;

struct ddpc_store_server {
    int listen_fd, wake[2], port;
    pthread_t thread;
    /* Below: the server thread's only. */
    entry *table;
    size_t entries, table_cap;
    client *clients;
    size_t nclients, clients_cap;
    void *scratch; /* the value being received */
    size_t scratch_cap;
};

static entry *find(ddpc_store_server *s, const char *key)
{
    for (size_t i = 0; i < s->entries; i++)
        if (strcmp(s->table[i].key, key) == 0)
            return &s->table[i];
    return NULL;
}

/* Sets key to a copy of value; false when out of memory (the client is then dropped). */
static bool put(ddpc_store_server *s, const char *key, const void *value, size_t len)
{
    void *copy = malloc(len ? len : 1);
    if (!copy)
        return false;
    memcpy(copy, value, len);
    entry *e = find(s, key);
    if (!e) {
        if (s->entries == s->table_cap) {
            size_t cap = s->table_cap ? 2 * s->table_cap : 64;
            entry *t = realloc(s->table, cap * sizeof *t);
            if (!t) {
                free(copy);
                return false;
            }
            s->table = t;
            s->table_cap = cap;
        }
        char *k = strdup(key);
        if (!k) {
            free(copy);
            return false;
        }
        e = &s->table[s->entries++];
        e->key = k;
        e->value = NULL;
    }
    free(e->value);
    e->value = copy;
    e->len = len;
    return true;
}

static bool answer(int fd, ddpc__store_reply status, const void *value, size_t len)
{
    ddpc__store_answer a = {status, 0, len};
    double deadline = ddpc_time_now() + REQUEST_SECONDS;
    return ddpc__store_write(fd, &a, sizeof a, deadline) &&
           (len == 0 || ddpc__store_write(fd, value, len, deadline));
}

/* Serves one request (or the greeting) of client c; false drops the client. */
static bool serve_one(ddpc_store_server *s, client *c)
{
    double deadline = ddpc_time_now() + REQUEST_SECONDS;
    bool timed_out;
    if (!c->greeted) {
        char hello[DDPC__STORE_GREETING_LEN];
        if (!ddpc__store_read(c->fd, hello, sizeof hello, deadline, &timed_out) ||
            memcmp(hello, DDPC__STORE_GREETING, sizeof hello) != 0)
            return false;
        c->greeted = true;
        return ddpc__store_write(c->fd, DDPC__STORE_GREETING, DDPC__STORE_GREETING_LEN, deadline);
    }
    ddpc__store_request q;
    char key[DDPC_STORE_KEY_MAX + 1];
    if (!ddpc__store_read(c->fd, &q, sizeof q, deadline, &timed_out) || q.key_len == 0 ||
        q.key_len > DDPC_STORE_KEY_MAX || q.value_len > DDPC_STORE_VALUE_MAX ||
        !ddpc__store_read(c->fd, key, q.key_len, deadline, &timed_out))
        return false;
    key[q.key_len] = '\0';
    if (q.value_len > s->scratch_cap) {
        void *p = realloc(s->scratch, q.value_len);
        if (!p)
            return false;
        s->scratch = p;
        s->scratch_cap = q.value_len;
    }
    if (q.value_len && !ddpc__store_read(c->fd, s->scratch, q.value_len, deadline, &timed_out))
        return false;
    entry *e;
    switch (q.op) {
    case DDPC__STORE_SET:
        return put(s, key, s->scratch, q.value_len) && answer(c->fd, DDPC__STORE_OK, NULL, 0);
    case DDPC__STORE_GET:
        e = find(s, key);
        return e ? answer(c->fd, DDPC__STORE_OK, e->value, e->len)
                 : answer(c->fd, DDPC__STORE_ABSENT, NULL, 0);
    case DDPC__STORE_ADD: {
        int64_t delta, now = 0;
        if (q.value_len != sizeof delta)
            return false; /* our client never sends that */
        memcpy(&delta, s->scratch, sizeof delta);
        e = find(s, key);
        if (e && e->len != sizeof now)
            return answer(c->fd, DDPC__STORE_BAD, NULL, 0);
        if (e)
            memcpy(&now, e->value, sizeof now);
        now = (int64_t)((uint64_t)now + (uint64_t)delta); /* wraps rather than overflows */
        return put(s, key, &now, sizeof now) && answer(c->fd, DDPC__STORE_OK, &now, sizeof now);
    }
    default:
        return false;
    }
}

static void drop(ddpc_store_server *s, size_t i)
{
    close(s->clients[i].fd);
    s->clients[i] = s->clients[--s->nclients];
}

static void accept_one(ddpc_store_server *s)
{
    int fd = accept(s->listen_fd, NULL, NULL);
    if (fd < 0)
        return;
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (s->nclients == s->clients_cap) {
        size_t cap = s->clients_cap ? 2 * s->clients_cap : 16;
        client *c = realloc(s->clients, cap * sizeof *c);
        if (!c) {
            close(fd);
            return;
        }
        s->clients = c;
        s->clients_cap = cap;
    }
    s->clients[s->nclients++] = (client){fd, false};
}

static void *serve(void *arg)
{
    ddpc_store_server *s = arg;
    struct pollfd *fds = NULL;
    size_t fds_cap = 0;
    for (;;) {
        size_t n = s->nclients + 2;
        if (n > fds_cap) {
            struct pollfd *p = realloc(fds, 2 * n * sizeof *p);
            if (!p)
                break;
            fds = p;
            fds_cap = 2 * n;
        }
        fds[0] = (struct pollfd){s->wake[0], POLLIN, 0};
        fds[1] = (struct pollfd){s->listen_fd, POLLIN, 0};
        for (size_t i = 0; i < s->nclients; i++)
            fds[i + 2] = (struct pollfd){s->clients[i].fd, POLLIN, 0};
        if (poll(fds, n, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (fds[0].revents)
            break;
        /* Clients from the back, so that drop() (which moves the last into the hole) never
         * moves one whose poll result is still to be read. */
        for (size_t i = s->nclients; i-- > 0;)
            if (fds[i + 2].revents && !serve_one(s, &s->clients[i]))
                drop(s, i);
        if (fds[1].revents)
            accept_one(s);
    }
    free(fds);
    return NULL;
}

ddpc_status ddpc_store_server_start(const char *bind_addr, int port, ddpc_store_server **out)
{
    *out = NULL;
    if (port < 0 || port > 65535)
        return ddpc_errorf(DDPC_EINVAL, "store port %d is not a TCP port", port);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
    if (bind_addr && bind_addr[0] && inet_pton(AF_INET, bind_addr, &sa.sin_addr) != 1) {
        struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
        int rc = getaddrinfo(bind_addr, NULL, &hints, &res);
        if (rc != 0 || !res)
            return ddpc_errorf(DDPC_EINVAL, "cannot resolve the store address '%s': %s", bind_addr,
                               gai_strerror(rc));
        sa.sin_addr = ((struct sockaddr_in *)res->ai_addr)->sin_addr;
        freeaddrinfo(res);
    }
    ddpc_store_server *s = calloc(1, sizeof *s);
    if (!s)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for the store");
    s->wake[0] = s->wake[1] = -1;
    s->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ddpc_status st = DDPC_OK;
    if (s->listen_fd < 0) {
        st = ddpc_errorf(DDPC_EIO, "cannot create the store's socket: %s", strerror(errno));
        goto fail;
    }
    setsockopt(s->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(s->listen_fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        listen(s->listen_fd, 128) != 0) {
        int e = errno;
        char where[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &sa.sin_addr, where, sizeof where);
        st = e == EADDRINUSE
                 ? ddpc_errorf(DDPC_EIO, "port %d on %s is already in use (another job?)", port,
                               where)
                 : ddpc_errorf(DDPC_EIO, "cannot listen on %s port %d: %s", where, port,
                               strerror(e));
        goto fail;
    }
    socklen_t len = sizeof sa;
    getsockname(s->listen_fd, (struct sockaddr *)&sa, &len);
    s->port = ntohs(sa.sin_port);
    if (pipe(s->wake) != 0) {
        st = ddpc_errorf(DDPC_EIO, "cannot create the store's wake-up pipe: %s", strerror(errno));
        goto fail;
    }
    fcntl(s->wake[0], F_SETFD, FD_CLOEXEC);
    fcntl(s->wake[1], F_SETFD, FD_CLOEXEC);
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
    for (size_t i = 0; i < s->nclients; i++)
        close(s->clients[i].fd);
    for (size_t i = 0; i < s->entries; i++) {
        free(s->table[i].key);
        free(s->table[i].value);
    }
    close(s->listen_fd);
    close(s->wake[0]);
    close(s->wake[1]);
    free(s->table);
    free(s->clients);
    free(s->scratch);
    free(s);
}
