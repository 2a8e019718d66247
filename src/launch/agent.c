// SPDX-License-Identifier: MIT
/* The agents of a per-node launch: one `ddpc run` per host, joined through the key-value store
 * that the node-0 launcher serves at MASTER_ADDR:MASTER_PORT (include/ddpc/store.h). Their keys
 * live under "agent/" (workers use "<run id>/<restart>/..."): the rendezvous records
 * (agent_rdzv.c), per attempt the first failure ("agent/<k>/first", its report) and a count of
 * nodes whose workers all succeeded, each agent's heartbeat counter, and an exit count. Node 0
 * watches the heartbeats and publishes a silent node as that attempt's failure, so every agent
 * learns everything from the one "first" key. Invariant: the first failure of an attempt is written
 * once (the agent whose add() made the count 1), so every host reports the same cause. */
#include "launch/agent_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/timer.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void pause_s(double s)
{
    if (s <= 0)
        return;
    struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* A lost store is the one failure that cannot be published: say who is gone and stop. The cause
 * is kept from the first call that saw it, since every later call fails at once without one. */
static void store_lost(ddpc__agent *a, ddpc__agent_event *ev)
{
    if (!a->store_lost) {
        a->store_lost = true;
        snprintf(a->lost_why, sizeof a->lost_why, "%s", ddpc_last_error());
        ddpc_clear_error();
    }
    ev->kind = DDPC__AGENT_FAILED;
    ev->exit_code = 1;
    ev->restartable = false;
    ev->node = 0;
    snprintf(ev->text, sizeof ev->text,
             "the store of node 0 (%s) at %s:%d stopped answering: node 0's launcher exited or "
             "its host is unreachable (%s)",
             a->nodes[0].where, a->cfg->master_addr, a->cfg->master_port, a->lost_why);
}

void ddpc__agent_parse_failure(const char *rec, ddpc__agent_event *ev)
{
    int code = 1, restartable = 0, node = -1, used = 0;
    const char *nl = NULL;
    if (sscanf(rec, "%d %d %d%n", &code, &restartable, &node, &used) == 3 && rec[used] == '\n')
        nl = rec + used;
    if (!nl || code < 1 || code > 255) { /* not a record an agent wrote: keep it all as text */
        code = 1;
        restartable = 0;
        node = -1;
        nl = NULL;
    }
    ev->kind = DDPC__AGENT_FAILED;
    ev->exit_code = code;
    ev->restartable = restartable != 0;
    ev->node = node;
    snprintf(ev->text, sizeof ev->text, "%s", nl ? nl + 1 : rec);
}

ddpc_status ddpc__agent_publish(ddpc__agent *a, int attempt, int exit_code, bool restartable,
                                int node, const char *text)
{
    if (a->store_lost)
        return DDPC_OK;
    char key[64];
    int64_t n = 0;
    snprintf(key, sizeof key, "agent/%d/failures", attempt);
    if (ddpc_store_add(a->store, key, 1, &n) != DDPC_OK)
        return DDPC_EPEER;
    if (n != 1)
        return DDPC_OK; /* another node's failure came first; it is the one every host reports */
    size_t cap = strlen(text) + 64;
    char *rec = ddpc_malloc(cap);
    if (!rec)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for a %zu-byte failure report", cap);
    int len = snprintf(rec, cap, "%d %d %d\n%s", exit_code, restartable ? 1 : 0, node, text);
    snprintf(key, sizeof key, "agent/%d/first", attempt);
    ddpc_status s = ddpc_store_set(a->store, key, rec, (size_t)len);
    ddpc_free(rec);
    return s == DDPC_OK ? DDPC_OK : DDPC_EPEER;
}

/* Node 0 only: names a node whose heartbeat counter stood still for agent_timeout seconds. */
static ddpc_status watch_heartbeats(ddpc__agent *a, int attempt, double now)
{
    for (int i = 1; i < a->cfg->nnodes; i++) {
        ddpc__agent_node *nd = &a->nodes[i];
        if (nd->gone)
            continue;
        char key[64];
        int64_t beat = 0;
        snprintf(key, sizeof key, "agent/beat/%d", i);
        if (ddpc_store_add(a->store, key, 0, &beat) != DDPC_OK)
            return DDPC_EPEER;
        if (beat != nd->beat) {
            nd->beat = beat;
            nd->heard = now;
            continue;
        }
        if (now - nd->heard < a->cfg->agent_timeout_s)
            continue;
        nd->gone = true;
        char text[600];
        snprintf(text, sizeof text,
                 "node %d (%s) has not been heard from for %.0f s (--agent-timeout): its "
                 "launcher was killed or its host is unreachable",
                 i, nd->where, now - nd->heard);
        if (ddpc__agent_publish(a, attempt, 1, false, i, text) != DDPC_OK)
            return DDPC_EPEER;
    }
    return DDPC_OK;
}

static ddpc_status heartbeat(ddpc__agent *a, int attempt)
{
    double now = ddpc_time_now();
    if (now < a->next_beat)
        return DDPC_OK;
    a->next_beat = now + a->beat_every;
    if (a->cfg->node_rank == 0)
        return watch_heartbeats(a, attempt, now);
    char key[64];
    snprintf(key, sizeof key, "agent/beat/%d", a->cfg->node_rank);
    return ddpc_store_add(a->store, key, 1, NULL) == DDPC_OK ? DDPC_OK : DDPC_EPEER;
}

void ddpc__agent_poll(ddpc__agent *a, int attempt, ddpc__agent_event *ev)
{
    ev->kind = DDPC__AGENT_QUIET;
    if (a->store_lost) {
        store_lost(a, ev);
        return;
    }
    if (heartbeat(a, attempt) != DDPC_OK) {
        store_lost(a, ev);
        return;
    }
    char key[64];
    snprintf(key, sizeof key, "agent/%d/first", attempt);
    size_t len = 0;
    bool found = false;
    char *rec = a->scratch;
    if (ddpc_store_try_get(a->store, key, rec, DDPC__AGENT_RECORD_MAX - 1, &len, &found) !=
        DDPC_OK) {
        store_lost(a, ev);
        return;
    }
    if (!found)
        return;
    rec[len < DDPC__AGENT_RECORD_MAX ? len : DDPC__AGENT_RECORD_MAX - 1] = '\0';
    ddpc__agent_parse_failure(rec, ev);
}

void ddpc__agent_await(ddpc__agent *a, int attempt, const sigset_t *watched, ddpc__agent_event *ev,
                       int *signo)
{
    *signo = 0;
    char key[64];
    snprintf(key, sizeof key, "agent/%d/done", attempt);
    if (!a->store_lost && ddpc_store_add(a->store, key, 1, NULL) != DDPC_OK) {
        store_lost(a, ev);
        return;
    }
    for (;;) {
        struct timespec zero = {0, 0};
        int sig;
        while ((sig = sigtimedwait(watched, NULL, &zero)) > 0) {
            if (sig == SIGPIPE)
                continue;
            *signo = sig;
            ev->kind = DDPC__AGENT_QUIET;
            return;
        }
        ddpc__agent_poll(a, attempt, ev);
        if (ev->kind != DDPC__AGENT_QUIET)
            return;
        int64_t done = 0;
        if (ddpc_store_add(a->store, key, 0, &done) != DDPC_OK) {
            store_lost(a, ev);
            return;
        }
        if (done >= a->cfg->nnodes)
            return; /* QUIET: every node's workers succeeded */
        pause_s(a->cfg->monitor_interval_s);
    }
}

void ddpc__agent_finish(ddpc__agent *a)
{
    if (!a)
        return;
    if (!a->store_lost) {
        int64_t n = 0;
        ddpc_status s = ddpc_store_add(a->store, "agent/exit", 1, &n);
        /* The store lives in node 0's launcher: it stays up until every node that is still there
         * has read how the job ended (bounded by the agent timeout). */
        double deadline = ddpc_time_now() + a->cfg->agent_timeout_s;
        while (s == DDPC_OK && a->cfg->node_rank == 0 && ddpc_time_now() < deadline) {
            int expected = a->cfg->nnodes;
            for (int i = 1; i < a->cfg->nnodes; i++)
                expected -= a->nodes[i].gone;
            if (n >= expected)
                break;
            pause_s(0.02);
            s = ddpc_store_add(a->store, "agent/exit", 0, &n);
        }
        ddpc_clear_error(); /* a store gone at the end changes nothing: the outcome is known */
    }
    ddpc_store_close(a->store);
    ddpc_store_server_stop(a->server);
    ddpc_free(a->nodes);
    ddpc_free(a->scratch);
    ddpc_free(a);
}

const char *ddpc__agent_self(const ddpc__agent *a)
{
    return a->self;
}
