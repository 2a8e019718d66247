// SPDX-License-Identifier: MIT
/* The agents' rendezvous: node 0 serves the store, every node connects, claims its node rank with
 * an atomic add (a rank claimed twice is named), publishes what it was started with, and waits
 * for every other node's record, checking that all agree. Any agent that finds a problem writes
 * it to "agent/abort", which every waiting agent reads, so the whole job fails with one cause
 * instead of waiting out the timeout. Invariant: ddpc__agent_start returns an agent only when
 * all nnodes records were read and agree. */
#include "launch/agent_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/timer.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* The address this host reaches the master from: a UDP socket connected to it sends nothing but
 * gets the route's source address. Falls back to "?" (only a label in reports). */
static void local_addr(const char *master, int port, char *out, size_t cap)
{
    snprintf(out, cap, "?");
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_DGRAM}, *ai = NULL;
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    if (getaddrinfo(master, service, &hints, &ai) != 0 || !ai)
        return;
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
        inet_ntop(AF_INET, &sa.sin_addr, out, (socklen_t)cap);
    if (fd >= 0)
        close(fd);
    freeaddrinfo(ai);
}

static void self_record(const ddpc_launch_config *cfg, const ddpc__job_ids *ids,
                        ddpc__agent_record *r)
{
    memset(r, 0, sizeof *r);
    r->nnodes = cfg->nnodes;
    r->nproc = cfg->nproc_per_node;
    r->max_restarts = cfg->max_restarts;
    /* Node 0's id is the job's; another node's counts only when given (else it adopts node 0's) */
    snprintf(r->run_id, sizeof r->run_id, "%s",
             cfg->node_rank == 0 || cfg->run_id[0] ? ids->run_id : "-");
    if (gethostname(r->host, sizeof r->host - 1) != 0 || !r->host[0])
        snprintf(r->host, sizeof r->host, "?");
    r->host[strcspn(r->host, " \t\n")] = '\0';
    local_addr(cfg->master_addr, cfg->master_port, r->addr, sizeof r->addr);
}

bool ddpc__agent_parse_node(const char *text, ddpc__agent_record *r)
{
    memset(r, 0, sizeof *r);
    return sscanf(text, "%d %d %d %127s %127s %63s", &r->nnodes, &r->nproc, &r->max_restarts,
                  r->run_id, r->host, r->addr) == 6;
}

/* Writes the job-wide cause for every waiting agent, then returns it as this agent's error. */
static ddpc_status abort_job(ddpc__agent *a, ddpc_status code, const char *why)
{
    (void)ddpc_store_set(a->store, "agent/abort", why, strlen(why));
    (void)ddpc_store_add(a->store, "agent/abort_seen", 1, NULL);
    return ddpc_errorf(code, "%s", why);
}

static ddpc_status check_abort(ddpc__agent *a)
{
    char why[1024];
    size_t len = 0;
    bool found = false;
    DDPC_TRY(ddpc_store_try_get(a->store, "agent/abort", why, sizeof why - 1, &len, &found));
    if (!found)
        return DDPC_OK;
    why[len < sizeof why ? len : sizeof why - 1] = '\0';
    (void)ddpc_store_add(a->store, "agent/abort_seen", 1, NULL);
    return ddpc_errorf(DDPC_EINVAL, "%s", why);
}

/* Node 0, after a failed rendezvous: its store goes away with it, so it first waits (5 s at most)
 * until every agent that joined has read the cause, which they then all report alike. */
static void linger_for_abort(ddpc__agent *a, ddpc_status code)
{
    char why[1024];
    snprintf(why, sizeof why, "%s", ddpc_last_error());
    double deadline = ddpc_time_now() + 5.0;
    int64_t joined = 0, seen = 0;
    while (ddpc_time_now() < deadline &&
           ddpc_store_add(a->store, "agent/joined", 0, &joined) == DDPC_OK &&
           ddpc_store_add(a->store, "agent/abort_seen", 0, &seen) == DDPC_OK && seen < joined) {
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    ddpc_errorf(code, "%s", why);
}

static ddpc_status claim_rank(ddpc__agent *a, const ddpc__agent_record *me)
{
    char key[64];
    int64_t n = 0;
    int r = a->cfg->node_rank;
    DDPC_TRY(ddpc_store_add(a->store, "agent/joined", 1, NULL));
    snprintf(key, sizeof key, "agent/join/%d", r);
    DDPC_TRY(ddpc_store_add(a->store, key, 1, &n));
    if (n == 1)
        return DDPC_OK;
    char first[512] = "?";
    size_t len = 0;
    snprintf(key, sizeof key, "agent/node/%d", r);
    if (ddpc_store_get(a->store, key, first, sizeof first - 1, &len, ddpc_time_now() + 5.0) ==
        DDPC_OK)
        first[len < sizeof first ? len : sizeof first - 1] = '\0';
    ddpc_clear_error();
    ddpc__agent_record other;
    char why[900];
    if (ddpc__agent_parse_node(first, &other))
        snprintf(why, sizeof why,
                 "--node-rank %d was given to two launchers: host %s, %s and host %s, %s; "
                 "give each host its own node rank",
                 r, other.host, other.addr, me->host, me->addr);
    else
        snprintf(why, sizeof why,
                 "--node-rank %d was given to two launchers (host %s, %s is the "
                 "second); give each host its own node rank",
                 r, me->host, me->addr);
    return abort_job(a, DDPC_EINVAL, why);
}

/* Node i's options against this node's, as one sentence naming both, the lower node first so
 * that every host prints the same one. */
static ddpc_status check_agree(ddpc__agent *a, int i, const ddpc__agent_record *them,
                               const ddpc__agent_record *me)
{
    char why[900];
    const char *opt = them->nnodes != me->nnodes               ? "--nnodes"
                      : them->nproc != me->nproc               ? "--nproc-per-node"
                      : them->max_restarts != me->max_restarts ? "--max-restarts"
                                                               : NULL;
    if (opt) {
        int me_rank = a->cfg->node_rank;
        const ddpc__agent_record *lo = i < me_rank ? them : me, *hi = i < me_rank ? me : them;
        int lo_rank = i < me_rank ? i : me_rank, hi_rank = i < me_rank ? me_rank : i;
        int lo_v = opt[3] == 'n' ? lo->nnodes : opt[3] == 'p' ? lo->nproc : lo->max_restarts;
        int hi_v = opt[3] == 'n' ? hi->nnodes : opt[3] == 'p' ? hi->nproc : hi->max_restarts;
        snprintf(why, sizeof why,
                 "node %d (host %s, %s) was started with %s %d but node %d (host %s, %s) with "
                 "%s %d; every host must be given the same %s",
                 lo_rank, lo->host, lo->addr, opt, lo_v, hi_rank, hi->host, hi->addr, opt, hi_v,
                 opt);
        return abort_job(a, DDPC_EINVAL, why);
    }
    /* node 0 and the other node both check, so neither goes on while the other refuses */
    int me_rank = a->cfg->node_rank;
    if ((i == 0 || me_rank == 0) && strcmp(me->run_id, "-") != 0 &&
        strcmp(them->run_id, "-") != 0 && strcmp(them->run_id, me->run_id) != 0) {
        const ddpc__agent_record *zero = i == 0 ? them : me, *other = i == 0 ? me : them;
        snprintf(why, sizeof why,
                 "node 0 (host %s, %s) runs job '%s' but node %d (host %s, %s) was given --run-id "
                 "%s; give every host the same --run-id, or none but node 0",
                 zero->host, zero->addr, zero->run_id, i == 0 ? me_rank : i, other->host,
                 other->addr, other->run_id);
        return abort_job(a, DDPC_EINVAL, why);
    }
    return DDPC_OK;
}

/* Waits for every node's record; names those missing at the deadline. */
static ddpc_status gather(ddpc__agent *a, const ddpc__agent_record *me, ddpc__agent_record *all,
                          double deadline)
{
    int n = a->cfg->nnodes, missing = n;
    bool *have = ddpc_calloc((size_t)n, sizeof *have);
    if (!have)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for %d node records", n);
    ddpc_status s = DDPC_OK;
    for (int wait_ms = 1; s == DDPC_OK && missing > 0; wait_ms = wait_ms < 50 ? 2 * wait_ms : 50) {
        for (int i = 0; i < n && s == DDPC_OK; i++) {
            if (have[i])
                continue;
            char key[64], text[512];
            size_t len = 0;
            bool found = false;
            snprintf(key, sizeof key, "agent/node/%d", i);
            s = ddpc_store_try_get(a->store, key, text, sizeof text - 1, &len, &found);
            if (s != DDPC_OK || !found)
                continue;
            text[len < sizeof text ? len : sizeof text - 1] = '\0';
            if (!ddpc__agent_parse_node(text, &all[i]))
                s = abort_job(a, DDPC_EFORMAT, "a node published a malformed rendezvous record");
            else
                s = check_agree(a, i, &all[i], me);
            have[i] = true;
            missing--;
        }
        if (s == DDPC_OK)
            s = check_abort(a);
        if (s == DDPC_OK && missing > 0 && ddpc_time_now() > deadline) {
            char list[512] = "";
            size_t at = 0;
            for (int i = 0; i < n && at < sizeof list - 16; i++)
                if (!have[i])
                    at += (size_t)snprintf(list + at, sizeof list - at, "%s%d", at ? ", " : "", i);
            char why[2048];
            snprintf(why, sizeof why,
                     "node%s %s did not join within %g s (--rdzv-timeout): is 'ddpc run --nnodes "
                     "%d --node-rank R --master-addr %s --master-port %d' running on %s?",
                     missing > 1 ? "s" : "", list, a->cfg->rdzv_timeout_s, n, a->cfg->master_addr,
                     a->cfg->master_port, missing > 1 ? "those hosts" : "that host");
            s = abort_job(a, DDPC_ETIMEOUT, why);
        }
        if (s == DDPC_OK && missing > 0) {
            struct timespec ts = {0, (long)wait_ms * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    ddpc_free(have);
    return s;
}

static ddpc_status rendezvous(ddpc__agent *a, ddpc__job_ids *ids)
{
    const ddpc_launch_config *cfg = a->cfg;
    double deadline = ddpc_time_now() + cfg->rdzv_timeout_s;
    if (cfg->node_rank == 0) {
        const char *bind = ids->store_bind[0] ? ids->store_bind : cfg->master_addr;
        ddpc_status s = ddpc_store_server_start(bind, cfg->master_port, ids->store_token,
                                                &a->server);
        if (s != DDPC_OK) {
            char why[512];
            snprintf(why, sizeof why, "%s", ddpc_last_error());
            return ddpc_errorf(s, "node 0 cannot serve the rendezvous at %s:%d: %s",
                               cfg->master_addr, cfg->master_port, why);
        }
    }
    ddpc_status s = ddpc_store_connect(cfg->master_addr, cfg->master_port, ids->store_token,
                                       deadline, &a->store);
    if (s != DDPC_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", ddpc_last_error());
        return ddpc_errorf(s,
                           "node %d cannot reach node 0's rendezvous at %s:%d within %g s "
                           "(--rdzv-timeout): %s",
                           cfg->node_rank, cfg->master_addr, cfg->master_port, cfg->rdzv_timeout_s,
                           why);
    }
    ddpc__agent_record me;
    self_record(cfg, ids, &me);
    snprintf(a->self, sizeof a->self, "node %d (host %s, %s)", cfg->node_rank, me.host, me.addr);
    DDPC_TRY(claim_rank(a, &me));
    char key[64], text[512];
    snprintf(key, sizeof key, "agent/node/%d", cfg->node_rank);
    int len = snprintf(text, sizeof text, "%d %d %d %s %s %s", me.nnodes, me.nproc, me.max_restarts,
                       me.run_id, me.host, me.addr);
    DDPC_TRY(ddpc_store_set(a->store, key, text, (size_t)len));
    ddpc__agent_record *all = ddpc_calloc((size_t)cfg->nnodes, sizeof *all);
    if (!all)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for %d node records", cfg->nnodes);
    s = gather(a, &me, all, deadline);
    for (int i = 0; s == DDPC_OK && i < cfg->nnodes; i++)
        snprintf(a->nodes[i].where, sizeof a->nodes[i].where, "host %s, %s", all[i].host,
                 all[i].addr);
    if (s == DDPC_OK)
        snprintf(ids->run_id, sizeof ids->run_id, "%s", all[0].run_id);
    ddpc_free(all);
    return s;
}

ddpc_status ddpc__agent_start(const ddpc_launch_config *cfg, ddpc__job_ids *ids, ddpc__agent **out)
{
    ddpc__agent *a = ddpc_calloc(1, sizeof *a);
    if (!a)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for the launch agent");
    a->cfg = cfg;
    a->nodes = ddpc_calloc((size_t)cfg->nnodes, sizeof *a->nodes);
    a->scratch = ddpc_malloc(DDPC__AGENT_RECORD_MAX);
    ddpc_status s = DDPC_OK;
    if (!a->nodes || !a->scratch)
        s = ddpc_errorf(DDPC_ENOMEM, "out of memory for %d nodes' state", cfg->nnodes);
    if (s == DDPC_OK)
        s = rendezvous(a, ids);
    if (s != DDPC_OK) {
        if (a->server && a->store)
            linger_for_abort(a, s);
        a->store_lost = true; /* counting out would wait for nodes that never came */
        ddpc__agent_finish(a);
        return s;
    }
    /* Beat several times per timeout, so one late beat is not a lost node. */
    a->beat_every = cfg->agent_timeout_s / 5 < 1.0 ? cfg->agent_timeout_s / 5 : 1.0;
    double now = ddpc_time_now();
    a->next_beat = now;
    for (int i = 0; i < cfg->nnodes; i++)
        a->nodes[i].heard = now;
    *out = a;
    return DDPC_OK;
}
