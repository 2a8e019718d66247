// SPDX-License-Identifier: MIT
/* The gloo backend's join and teardown: the job's key-value store at MASTER_ADDR:MASTER_PORT
 * (served by global rank 0, or by a launcher agent when TORCHELASTIC_USE_AGENT_STORE=True), which
 * ranks share a host (each publishes hostname, network namespace and boot id: hosts may share a
 * hostname), the host-local shm group, and the gloo link to the same local rank on other hosts.
 * Invariant: store keys start with the run id and restart count, so a restarted job never reads
 * an earlier attempt's keys; shm segment names carry a per-attempt nonce and the host index. */
#include "comm/gloo_impl.h"

#ifndef DDPC_HAVE_GLOO

ddpc_status ddpc__gloo_create(const ddpc_comm_env *env, double deadline,
                              const ddpc__pg_backend **ops, void **state)
{
    (void)env;
    (void)deadline;
    *ops = NULL;
    *state = NULL;
    return ddpc_errorf(DDPC_EUNSUPPORTED, "ddpc was built without gloo; rebuild with libgloo-dev "
                                          "installed, or use backend mpi across hosts");
}

#else

#include <ddpc/alloc.h>
#include <ddpc/timer.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { ID_CAP = 400 };
/* How long a lost connection waits for its cause (a host-mate's death, another rank's report): a
 * loaded machine's host-mate can take more than a second to see a killed rank and say so. */
static const double REPORT_WAIT_S = 5.0;

/* gloo's TCP pairs write with writev, which raises SIGPIPE when a killed peer reset the
 * connection: the rank would die without a word. Ignored (as Python does under PyTorch), the
 * write fails with EPIPE and the rank reports the lost peer. A handler the program set stays. */
static void ignore_sigpipe(void)
{
    struct sigaction old;
    if (sigaction(SIGPIPE, NULL, &old) == 0 && old.sa_handler == SIG_DFL)
        signal(SIGPIPE, SIG_IGN);
}

void ddpc__gloo_host_text(const ddpc__gloo_state *st, int h, char *out, size_t cap)
{
    int first = h * st->locals, n = st->locals;
    size_t len = (size_t)snprintf(out, cap, "host %d (rank%s ", h, n == 1 ? "" : "s");
    for (int k = 0; k < n && k < 8 && len < cap; k++)
        len += (size_t)snprintf(out + len, cap - len, "%s%d", k ? ", " : "", first + k);
    if (n > 8 && len < cap)
        len += (size_t)snprintf(out + len, cap - len, ", ..., %d", first + n - 1);
    if (len < cap)
        snprintf(out + len, cap - len, " at %s)", st->addrs[h]);
}

/* The IPv4 address this host uses to reach MASTER_ADDR: the one its peers can reach it at. */
static ddpc_status local_address(const ddpc_comm_env *env, char *out, size_t cap)
{
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_DGRAM}, *res = NULL;
    int rc = getaddrinfo(env->master_addr, NULL, &hints, &res);
    if (rc != 0 || !res)
        return ddpc_errorf(DDPC_EINVAL, "cannot resolve MASTER_ADDR '%s': %s", env->master_addr,
                           gai_strerror(rc));
    struct sockaddr_in sa;
    memcpy(&sa, res->ai_addr, sizeof sa);
    freeaddrinfo(res);
    sa.sin_port = htons((uint16_t)env->master_port);
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    socklen_t len = sizeof sa;
    /* a UDP connect sends nothing: it only asks the kernel for the route and source address */
    bool ok = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
              getsockname(fd, (struct sockaddr *)&sa, &len) == 0;
    if (fd >= 0)
        close(fd);
    if (!ok || !inet_ntop(AF_INET, &sa.sin_addr, out, (socklen_t)cap))
        return ddpc_errorf(DDPC_EIO, "no route from this host to MASTER_ADDR %s", env->master_addr);
    return DDPC_OK;
}

/* hostname/netns/boot id: equal exactly for processes that can share /dev/shm segments here. */
static void host_identity(char *out, size_t cap)
{
    char name[256] = "", ns[64] = "", boot[64] = "";
    ddpc__host_name(name, sizeof name);
    ssize_t n = readlink("/proc/self/ns/net", ns, sizeof ns - 1);
    ns[n > 0 ? n : 0] = '\0';
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(boot, sizeof boot, f))
            boot[0] = '\0';
        fclose(f);
    }
    boot[strcspn(boot, "\n")] = '\0';
    snprintf(out, cap, "%.200s|%.60s|%.60s", name, ns, boot); /* fits ID_CAP less the address */
}

static ddpc_status key_get(ddpc__gloo_state *st, const char *suffix, char *buf, size_t cap,
                           double deadline)
{
    char key[DDPC_STORE_KEY_MAX + 1];
    size_t len = 0;
    snprintf(key, sizeof key, "%s%s", st->prefix, suffix);
    DDPC_TRY(ddpc_store_get(st->store, key, buf, cap - 1, &len, deadline));
    buf[len < cap - 1 ? len : cap - 1] = '\0';
    return DDPC_OK;
}

static ddpc_status key_set(ddpc__gloo_state *st, const char *suffix, const char *value)
{
    char key[DDPC_STORE_KEY_MAX + 1];
    snprintf(key, sizeof key, "%s%s", st->prefix, suffix);
    return ddpc_store_set(st->store, key, value, strlen(value));
}

/* Every rank publishes "identity address"; hosts are numbered in order of their lowest rank. */
static ddpc_status find_hosts(ddpc__gloo_state *st, const ddpc_comm_env *env, double deadline)
{
    char me[ID_CAP], addr[DDPC__GLOO_ADDR_CAP], key[32], (*ids)[ID_CAP] = NULL;
    DDPC_TRY(local_address(env, addr, sizeof addr));
    host_identity(me, sizeof me - sizeof addr - 2);
    size_t idlen = strlen(me);
    snprintf(me + idlen, sizeof me - idlen, " %s", addr);
    snprintf(key, sizeof key, "host/%d", st->rank);
    DDPC_TRY(key_set(st, key, me));
    int *host_of = ddpc_calloc((size_t)st->world, sizeof *host_of);
    ids = ddpc_calloc((size_t)st->world, sizeof *ids);
    st->addrs = ddpc_calloc((size_t)st->world, sizeof *st->addrs);
    ddpc_status s = DDPC_OK;
    if (!host_of || !ids || !st->addrs)
        s = ddpc_errorf(DDPC_ENOMEM, "out of memory finding the hosts of %d ranks", st->world);
    int hosts = 0;
    for (int r = 0; r < st->world && s == DDPC_OK; r++) {
        snprintf(key, sizeof key, "host/%d", r);
        s = key_get(st, key, ids[r], sizeof ids[r], deadline);
        char *sp = s == DDPC_OK ? strrchr(ids[r], ' ') : NULL;
        if (s == DDPC_OK && !sp)
            s = ddpc_errorf(DDPC_EFORMAT, "rank %d published a malformed host entry", r);
        if (s != DDPC_OK)
            break;
        *sp = '\0';
        host_of[r] = -1;
        for (int q = 0; q < r && host_of[r] < 0; q++)
            if (strcmp(ids[q], ids[r]) == 0)
                host_of[r] = host_of[q];
        if (host_of[r] < 0) {
            host_of[r] = hosts;
            snprintf(st->addrs[hosts++], DDPC__GLOO_ADDR_CAP, "%s", sp + 1);
        }
    }
    int locals = hosts ? st->world / hosts : 0;
    for (int r = 0; r < st->world && s == DDPC_OK; r++)
        if (st->world % hosts != 0 || host_of[r] != r / locals)
            s = ddpc_errorf(DDPC_EINVAL,
                            "the gloo backend needs the same number of ranks on every host, "
                            "numbered host after host, but rank %d is on host %d of %d (%d ranks "
                            "in all); start ranks node-major as torchrun and ddpc run do",
                            r, host_of[r], hosts, st->world);
    if (s == DDPC_OK) {
        st->hosts = hosts;
        st->locals = locals;
        st->host = st->rank / locals;
        st->local = st->rank % locals;
    }
    ddpc_free(ids);
    ddpc_free(host_of);
    return s;
}

/* The host-local shm group, named from a nonce of this attempt and the host index: /dev/shm may
 * be shared by "hosts" that are only network namespaces. */
static ddpc_status open_host_group(ddpc__gloo_state *st, const ddpc_comm_env *env, double deadline)
{
    char nonce[64], key[DDPC_STORE_KEY_MAX + 1];
    int64_t n = 0;
    snprintf(key, sizeof key, "%snonce_taken", st->prefix);
    DDPC_TRY(ddpc_store_add(st->store, key, 1, &n));
    if (n == 1) {
        snprintf(nonce, sizeof nonce, "%x%llx", (unsigned)getpid(),
                 (unsigned long long)(ddpc_time_now() * 1e9));
        DDPC_TRY(key_set(st, "nonce", nonce));
    }
    DDPC_TRY(key_get(st, "nonce", nonce, sizeof nonce, deadline));
    ddpc_comm_env le = *env;
    le.rank = st->local;
    le.world_size = le.local_world_size = st->locals;
    le.local_rank = st->local;
    le.node_rank = 0;
    le.num_nodes = 1;
    snprintf(le.run_id, sizeof le.run_id, "g%s.h%d", nonce, st->host);
    void *state = NULL;
    DDPC_TRY(ddpc__shm_create(&le, deadline, &st->shm_ops, &state));
    st->shm = state;
    st->shm->rank_base = st->host * st->locals;
    return DDPC_OK;
}

/* Whether every host's group can use cross-memory attach: the all_reduce path must be the same on
 * every rank, and each host's probe decided only for that host. */
static ddpc_status agree_on_cma(ddpc__gloo_state *st, double deadline)
{
    char key[32], v[8];
    snprintf(key, sizeof key, "cma/%d", st->host);
    if (st->local == 0)
        DDPC_TRY(key_set(st, key, st->shm->use_cma ? "1" : "0"));
    st->direct = true;
    for (int h = 0; h < st->hosts; h++) {
        snprintf(key, sizeof key, "cma/%d", h);
        DDPC_TRY(key_get(st, key, v, sizeof v, deadline));
        st->direct = st->direct && strcmp(v, "1") == 0;
    }
    return DDPC_OK;
}

static void gloo_destroy(void *state)
{
    ddpc__gloo_state *st = state;
    if (!st)
        return;
    ddpc__gloo_link_destroy(st->link);
    if (st->shm_ops)
        st->shm_ops->destroy(st->shm);
    ddpc_store_close(st->store);
    ddpc__job_store_release(st->server);
    ddpc_free(st->addrs);
    ddpc_free((void *)st->srcs);
    ddpc_free(st->pulled);
    ddpc_free(st->scratch);
    ddpc_free(st);
}

/* Within a host the ranks share gloo's shm segment: they see each other's phase there. */
static void gloo_set_phase(void *state, int phase)
{
    ddpc__shm_set_phase(((ddpc__gloo_state *)state)->shm, phase);
}

/* find_hosts counted the ranks that published this host's identity. */
static void gloo_layout(const void *state, int *local_rank, int *local_world)
{
    const ddpc__gloo_state *st = state;
    *local_rank = st->local;
    *local_world = st->locals;
}

static const ddpc__pg_backend gloo_ops = {"gloo", ddpc__gloo_run, gloo_destroy, gloo_set_phase,
                                          gloo_layout};

ddpc_status ddpc__gloo_create(const ddpc_comm_env *env, double deadline,
                              const ddpc__pg_backend **ops, void **state)
{
    *ops = NULL;
    *state = NULL;
    ddpc__gloo_state *st = ddpc_calloc(1, sizeof *st);
    if (!st)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for the gloo backend");
    st->rank = env->rank;
    st->world = env->world_size;
    ddpc_status s = ddpc__job_store_open(env, "the gloo backend", deadline, &st->server,
                                         &st->store, st->prefix);
    if (s == DDPC_OK)
        s = find_hosts(st, env, deadline);
    if (s == DDPC_OK)
        s = open_host_group(st, env, deadline);
    if (s == DDPC_OK)
        s = agree_on_cma(st, deadline);
    if (s == DDPC_OK) {
        st->srcs = ddpc_calloc((size_t)st->locals + 1, sizeof *st->srcs);
        st->pulled = ddpc_malloc((size_t)st->locals * (4 * DDPC__SHM_SLOT + 256));
        if (!st->srcs || !st->pulled)
            s = ddpc_errorf(DDPC_ENOMEM, "out of memory for the gloo backend");
    }
    st->payload_cap = 4 * DDPC__SHM_SLOT + 256;
    if (s == DDPC_OK && st->hosts > 1) {
        ignore_sigpipe();
        char prefix[DDPC_STORE_KEY_MAX + 1];
        snprintf(prefix, sizeof prefix, "%slink%d/", st->prefix, st->local);
        s = ddpc__gloo_link_create(st->store, prefix, st->host, st->hosts, st->addrs[st->host],
                                   DDPC__GLOO_HDR + st->payload_cap, DDPC__GLOO_NBUF, deadline,
                                   &st->link);
    }
    if (s != DDPC_OK) {
        gloo_destroy(st);
        return s;
    }
    *ops = &gloo_ops;
    *state = st;
    return DDPC_OK;
}

void ddpc__gloo_fail(ddpc__gloo_state *st, ddpc_status status)
{
    char msg[DDPC__SHM_MSG_CAP];
    snprintf(msg, sizeof msg, "%s", ddpc_last_error());
    ddpc__shm_abort(st->shm, status);
    /* A timeout often means the network is gone, and the store may be behind it too (its calls
     * can wait 30 s); the peers' own timeouts name the host then. Otherwise tell them why. */
    if (status != DDPC_ETIMEOUT && st->hosts > 1 && !strstr(msg, "(reported by rank")) {
        char report[DDPC__SHM_MSG_CAP + 64];
        snprintf(report, sizeof report, "%s (reported by rank %d)", msg, st->rank);
        key_set(st, "abort", report);
    }
    ddpc__gloo_link_destroy(st->link);
    st->link = NULL;
    ddpc_errorf(status, "%s", msg); /* keep the original message for the caller */
}

ddpc_status ddpc__gloo_lost(ddpc__gloo_state *st, const ddpc__coll *c, int h, ddpc_status s)
{
    char why[DDPC__SHM_MSG_CAP], host[160], report[DDPC__SHM_MSG_CAP + 64], key[DDPC_STORE_KEY_MAX];
    snprintf(why, sizeof why, "%s", ddpc_last_error());
    ddpc__gloo_host_text(st, h, host, sizeof host);
    if (s == DDPC_ETIMEOUT) {
        char me[160];
        ddpc__gloo_host_text(st, st->host, me, sizeof me);
        return ddpc_errorf(DDPC_ETIMEOUT,
                           "%s #%llu timed out after %.3g s: %s never answered rank "
                           "%d on %s",
                           ddpc__coll_name(c->kind), (unsigned long long)c->seq, st->shm->timeout_s,
                           host, st->rank, me);
    }
    snprintf(key, sizeof key, "%sabort", st->prefix);
    double until = ddpc_time_now() + REPORT_WAIT_S;
    while (ddpc_time_now() < until) {
        /* a host-mate that died closed its connections: the other hosts may see it first */
        ddpc_status mate = ddpc__shm_check_mates(st->shm, c);
        if (mate != DDPC_OK)
            return mate;
        size_t len = 0;
        bool found = false;
        if (ddpc_store_try_get(st->store, key, report, sizeof report - 1, &len, &found) != DDPC_OK)
            break;
        if (found) {
            report[len < sizeof report - 1 ? len : sizeof report - 1] = '\0';
            return ddpc_errorf(DDPC_EPEER, "%s", report);
        }
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    }
    return ddpc_errorf(DDPC_EPEER, "%s #%llu failed: lost the connection to %s: %s",
                       ddpc__coll_name(c->kind), (unsigned long long)c->seq, host, why);
}

#endif
