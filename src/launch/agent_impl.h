// SPDX-License-Identifier: MIT
/* Private to src/launch: the agent of a per-node launch (agent.c, agent_rdzv.c), the part of one
 * `ddpc run` that talks to the other hosts' launchers through node 0's key-value store. The
 * launcher is single-threaded; only node 0's store server runs on a thread of its own. */
#ifndef DDPC_LAUNCH_AGENT_IMPL_H
#define DDPC_LAUNCH_AGENT_IMPL_H

#include "launch/launch_impl.h"

#include <ddpc/store.h>

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

/* Longest failure record: the report of one worker (its last 20 lines of at most 511 bytes). */
#define DDPC__AGENT_RECORD_MAX 16384

typedef struct {
    char where[300]; /* "host NAME, ADDR" as the node described itself */
    int64_t beat;    /* node 0: its heartbeat counter when last read */
    double heard;    /* node 0: when that counter last changed (ddpc_time_now) */
    bool gone;       /* node 0: named as lost */
} ddpc__agent_node;

struct ddpc__agent {
    const ddpc_launch_config *cfg;
    ddpc_store_server *server; /* node 0 only */
    ddpc_store *store;
    ddpc__agent_node *nodes; /* (nnodes) */
    char self[340];          /* "node R (host NAME, ADDR)" */
    double beat_every, next_beat;
    bool store_lost;    /* node 0's store stopped answering: nothing more can be published */
    char lost_why[512]; /* the store's message when it was lost */
    char *scratch;      /* (DDPC__AGENT_RECORD_MAX) */
};

/* What a node was started with, as published in "agent/node/<rank>":
 * "NNODES NPROC MAX_RESTARTS RUN_ID HOST ADDR". */
typedef struct {
    int nnodes, nproc, max_restarts;
    char run_id[128]; /* "-": not given (only nodes other than 0) */
    char host[128], addr[64];
} ddpc__agent_record;

/* Parsers of what other agents wrote to the store (outside bytes: tests/fuzz/fuzz_agent.c).
 * A node record: true when all six fields were read. */
bool ddpc__agent_parse_node(const char *text, ddpc__agent_record *r);
/* A failure record "EXIT_CODE RESTARTABLE NODE\nTEXT" into a FAILED event; a malformed header
 * gives exit code 1, not restartable, node -1, and the whole record as text. */
void ddpc__agent_parse_failure(const char *rec, ddpc__agent_event *ev);

#endif
