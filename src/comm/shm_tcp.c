// SPDX-License-Identifier: MIT
/* The shm rendezvous over TCP (MASTER_ADDR:MASTER_PORT, no run id): rank 0 listens, creates a
 * segment under a private unique name and answers each rank's hello with that name or with an
 * error (world-size mismatch, duplicate rank, other host, other protocol version), which then
 * fails rank 0 too. Other ranks retry connecting until the deadline (rank 0 may start later).
 * Invariant: rank 0 accepts at most one hello per rank and ignores connections that do not
 * speak the protocol, so a port scanner cannot break a job. */
#include "comm/shm_impl.h"

#include <ddpc/fs.h>
#include <ddpc/timer.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    struct sockaddr_in sa;
    char addr[256], where[300], at[304]; /* "127.0.0.1:29500", "at 127.0.0.1:29500" */
    int port;
} endpoint;

static ddpc_status resolve(const ddpc_comm_env *env, endpoint *ep)
{
    snprintf(ep->addr, sizeof ep->addr, "%s", env->master_addr[0] ? env->master_addr : "127.0.0.1");
    ep->port = env->master_port;
    snprintf(ep->where, sizeof ep->where, "%s:%d", ep->addr, ep->port);
    snprintf(ep->at, sizeof ep->at, "at %s", ep->where);
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(ep->addr, NULL, &hints, &res);
    if (rc != 0 || !res)
        return ddpc_errorf(DDPC_EINVAL, "cannot resolve MASTER_ADDR '%s': %s", ep->addr,
                           gai_strerror(rc));
    memcpy(&ep->sa, res->ai_addr, sizeof ep->sa);
    ep->sa.sin_port = htons((uint16_t)ep->port);
    freeaddrinfo(res);
    return DDPC_OK;
}

static int socket_cloexec(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd >= 0)
        fcntl(fd, F_SETFD, FD_CLOEXEC);
    return fd;
}

/* Milliseconds left until `deadline`, capped; 0 once past. */
static int ms_left(double deadline, int cap)
{
    double ms = (deadline - ddpc_time_now()) * 1e3;
    return ms <= 0 ? 0 : ms > cap ? cap : (int)ms + 1;
}

/* Reads one '\n'-terminated line (the peer sends nothing after it) before `deadline`. */
static ddpc_status read_line(int fd, char *buf, size_t *len, double deadline, const char *what)
{
    size_t n = 0;
    while (n == 0 || buf[n - 1] != '\n') {
        struct pollfd p = {fd, POLLIN, 0};
        int rc = poll(&p, 1, ms_left(deadline, 1000));
        if (rc < 0 && errno != EINTR)
            return ddpc_errorf(DDPC_EIO, "waiting for the %s: %s", what, strerror(errno));
        if (rc <= 0) {
            if (ddpc_time_now() > deadline)
                return ddpc_errorf(DDPC_ETIMEOUT, "timed out waiting for the %s", what);
            continue;
        }
        if (n == DDPC__SHM_LINE_MAX)
            return ddpc_errorf(DDPC_EFORMAT, "the %s is longer than %d bytes", what,
                               DDPC__SHM_LINE_MAX);
        ssize_t got = read(fd, buf + n, DDPC__SHM_LINE_MAX - n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return ddpc_errorf(DDPC_EIO, "the connection closed before the %s arrived", what);
        n += (size_t)got;
    }
    *len = n;
    return DDPC_OK;
}

static void reply(int fd, bool ok, const char *text)
{
    char line[DDPC__SHM_LINE_MAX];
    int n = ddpc__shm_reply_format(line, sizeof line, ok, text);
    (void)ddpc_fd_write_all(fd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

static ddpc_status listen_on(const endpoint *ep, int world, int *out)
{
    int fd = socket_cloexec(), one = 1;
    if (fd < 0)
        return ddpc_errorf(DDPC_EIO, "cannot create a socket: %s", strerror(errno));
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one); /* a restarted job rebinds */
    if (bind(fd, (const struct sockaddr *)&ep->sa, sizeof ep->sa) != 0) {
        int e = errno;
        close(fd);
        if (e == EADDRINUSE)
            return ddpc_errorf(DDPC_EIO, "MASTER_PORT %d on %s is already in use (another job?)",
                               ep->port, ep->addr);
        return ddpc_errorf(e == EADDRNOTAVAIL ? DDPC_EINVAL : DDPC_EIO,
                           "cannot listen on MASTER_ADDR %s port %d: %s (the shm backend needs "
                           "every rank on this host)",
                           ep->addr, ep->port, strerror(e));
    }
    if (listen(fd, world) != 0) {
        int e = errno;
        close(fd);
        return ddpc_errorf(DDPC_EIO, "cannot listen on %s: %s", ep->where, strerror(e));
    }
    *out = fd;
    return DDPC_OK;
}

/* Why rank 0 refuses `h`, or "" when it is welcome. */
static void judge(const ddpc__shm_state *s, const ddpc__shm_hello *h, const char *host, char *why,
                  size_t cap)
{
    why[0] = '\0';
    if (h->version != (int)DDPC__SHM_VERSION)
        snprintf(why, cap,
                 "rank %d (pid %d) speaks shm protocol version %d but rank 0 speaks %u "
                 "(mixed ddpc builds?)",
                 h->rank, h->pid, h->version, DDPC__SHM_VERSION);
    else if (h->world != s->world)
        snprintf(why, cap,
                 "world size mismatch: rank %d (pid %d) has world size %d but rank 0 "
                 "has %d",
                 h->rank, h->pid, h->world, s->world);
    else if (h->rank < 1 || h->rank >= s->world)
        snprintf(why, cap, "pid %d claims rank %d, which is not a peer rank of world size %d",
                 h->pid, h->rank, s->world);
    else if (s->pids[h->rank] != 0)
        snprintf(why, cap, "rank %d is claimed by two processes (pids %d and %d)", h->rank,
                 (int)s->pids[h->rank], h->pid);
    else if (strcmp(h->host, host) != 0)
        snprintf(why, cap,
                 "rank %d (pid %d) is on host '%.64s' but rank 0 is on '%.64s': the shm "
                 "backend needs one host (use backend mpi)",
                 h->rank, h->pid, h->host, host);
}

/* Rank 0: answers hellos until every peer rank was welcomed. s->pids records who came. */
static ddpc_status serve(ddpc__shm_state *s, const endpoint *ep, int lfd, const char *name,
                         double deadline)
{
    char host[DDPC__SHM_HOST_CAP], line[DDPC__SHM_LINE_MAX + 1], why[DDPC__SHM_MSG_CAP];
    ddpc__host_name(host, sizeof host);
    for (int left = s->world - 1; left > 0;) {
        struct pollfd p = {lfd, POLLIN, 0};
        if (poll(&p, 1, ms_left(deadline, 200)) <= 0) {
            if (ddpc_time_now() <= deadline)
                continue;
            size_t len = 0;
            for (int k = 1; k < s->world && len + 16 < sizeof why; k++)
                if (s->pids[k] == 0)
                    len +=
                        (size_t)snprintf(why + len, sizeof why - len, "%s%d", len ? ", " : "", k);
            return ddpc_errorf(DDPC_ETIMEOUT,
                               "shm rendezvous at %s timed out after %.3g s: rank%s %s never "
                               "connected",
                               ep->where, s->timeout_s, left == 1 ? "" : "s", why);
        }
        int cfd = accept(p.fd, NULL, NULL);
        if (cfd < 0)
            continue;
        size_t len = 0;
        ddpc__shm_hello h;
        double conn_deadline = ddpc_time_now() + 2.0 < deadline ? ddpc_time_now() + 2.0 : deadline;
        if (read_line(cfd, line, &len, conn_deadline, "hello") != DDPC_OK ||
            ddpc__shm_hello_parse(line, len, &h) != DDPC_OK) {
            close(cfd); /* not one of ours: ignore it */
            continue;
        }
        judge(s, &h, host, why, sizeof why);
        reply(cfd, why[0] == '\0', why[0] ? why : name);
        close(cfd);
        if (why[0])
            return ddpc_errorf(DDPC_EINVAL, "%s", why);
        s->pids[h.rank] = h.pid;
        left--;
    }
    return DDPC_OK;
}

static ddpc_status rank0(ddpc__shm_state *s, const endpoint *ep, double deadline)
{
    int lfd = -1;
    DDPC_TRY(listen_on(ep, s->world, &lfd));
    char name[DDPC__SHM_NAME_CAP], host[DDPC__SHM_HOST_CAP];
    ddpc__host_name(host, sizeof host);
    void *base = NULL;
    ddpc_status st = DDPC_EINVAL;
    for (unsigned attempt = 0; attempt < 8 && st == DDPC_EINVAL; attempt++) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        snprintf(name, sizeof name, "/ddpc-%d-%d-%lx%x", (int)getuid(), (int)getpid(),
                 (unsigned long)ts.tv_nsec, attempt);
        st = ddpc__shm_seg_create(name, s->world, host, &base, &s->map_bytes);
    }
    if (st != DDPC_OK) {
        close(lfd);
        return st;
    }
    ddpc__shm_bind(s, base);
    st = ddpc__shm_claim(s);
    atomic_store_explicit(&s->hdr->ready, 1, memory_order_release);
    if (st == DDPC_OK)
        st = serve(s, ep, lfd, name, deadline);
    close(lfd);
    if (st == DDPC_OK)
        st = ddpc__shm_wait_joined(s, name, deadline, ep->at);
    if (st != DDPC_OK) {
        ddpc__shm_abort(s, st); /* peers that already attached fail at once */
        shm_unlink(name);
    }
    return st;
}

static ddpc_status connect_rank0(ddpc__shm_state *s, const endpoint *ep, double deadline, int *out)
{
    for (;;) {
        int fd = socket_cloexec();
        if (fd < 0)
            return ddpc_errorf(DDPC_EIO, "cannot create a socket: %s", strerror(errno));
        if (connect(fd, (const struct sockaddr *)&ep->sa, sizeof ep->sa) == 0) {
            *out = fd;
            return DDPC_OK;
        }
        close(fd);
        if (ddpc_time_now() > deadline)
            return ddpc_errorf(DDPC_ETIMEOUT,
                               "shm rendezvous timed out after %.3g s: nothing answered at %s "
                               "(did rank 0 start?)",
                               s->timeout_s, ep->where);
        nanosleep(&(struct timespec){0, 20 * 1000000}, NULL);
    }
}

/* Ranks 1..world-1: hello, then map the segment rank 0 names, claim the slot, wait for all. */
static ddpc_status rank_n(ddpc__shm_state *s, const endpoint *ep, double deadline)
{
    int fd = -1;
    DDPC_TRY(connect_rank0(s, ep, deadline, &fd));
    ddpc__shm_hello h = {
        .version = DDPC__SHM_VERSION, .rank = s->rank, .world = s->world, .pid = (int)getpid()};
    ddpc__host_name(h.host, sizeof h.host);
    char line[DDPC__SHM_LINE_MAX + 1], text[DDPC__SHM_MSG_CAP];
    int n = ddpc__shm_hello_format(line, sizeof line, &h);
    size_t len = 0;
    bool ok = false;
    ddpc_status st = ddpc_fd_write_all(fd, line, (size_t)n) == 0
                         ? read_line(fd, line, &len, deadline, "reply of rank 0")
                         : ddpc_errorf(DDPC_EIO, "cannot send the hello to %s", ep->where);
    close(fd);
    if (st != DDPC_OK) {
        snprintf(text, sizeof text, "%s", ddpc_last_error());
        return ddpc_errorf(st, "shm rendezvous at %s: %s", ep->where, text);
    }
    if (ddpc__shm_reply_parse(line, len, &ok, text, sizeof text) != DDPC_OK)
        return ddpc_errorf(DDPC_EIO,
                           "%s answered with something that is not a ddpc shm "
                           "rendezvous (another service on that port?)",
                           ep->where);
    if (!ok)
        return ddpc_errorf(DDPC_EINVAL, "rank 0 at %s refused rank %d: %s", ep->where, s->rank,
                           text);
    void *base = NULL;
    bool retry = false;
    if (ddpc__shm_seg_open(text, s->world, &base, &s->map_bytes, &retry) != DDPC_OK) {
        char why[DDPC__SHM_MSG_CAP];
        snprintf(why, sizeof why, "%s", ddpc_last_error());
        if (retry)
            return ddpc_errorf(DDPC_EPEER,
                               "shm rendezvous at %s: rank 0 gave up before rank %d could attach "
                               "(see rank 0's error): %s",
                               ep->where, s->rank, why);
        return ddpc_errorf(DDPC_EIO, "shm rendezvous at %s: %s", ep->where, why);
    }
    ddpc__shm_bind(s, base);
    st = ddpc__shm_claim(s);
    if (st != DDPC_OK) {
        ddpc__shm_abort(s, st);
        return st;
    }
    return ddpc__shm_wait_joined(s, text, deadline, ep->at);
}

ddpc_status ddpc__shm_rdzv_tcp(ddpc__shm_state *s, const ddpc_comm_env *env, double deadline)
{
    endpoint ep;
    DDPC_TRY(resolve(env, &ep));
    return s->rank == 0 ? rank0(s, &ep, deadline) : rank_n(s, &ep, deadline);
}
