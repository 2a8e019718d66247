// SPDX-License-Identifier: MIT
/* Private to the gloo backend (gloo.c joins, gloo_coll.c runs collectives): ranks of one host form
 * a host-local shm group, and ranks with the same local rank on different hosts form a gloo link
 * (member index = host index). Ranks are node-major: rank = host * locals + local, the same number
 * of ranks on every host (checked at join). Invariant: every cross-host message starts with the
 * sender's descriptor of the collective, so ranks that issue different collectives are named. */
#ifndef DDPC_COMM_GLOO_IMPL_H
#define DDPC_COMM_GLOO_IMPL_H

#include "comm/gloo_link.h"
#include "comm/shm_impl.h"
#include "comm/store_job.h"

#include <ddpc/store.h>

enum {
    DDPC__GLOO_RING = 8,                   /* staging buffers per role (pipeline depth) */
    DDPC__GLOO_NBUF = 4 * DDPC__GLOO_RING, /* roles: partial in/out, final in/out */
    DDPC__GLOO_HDR = 64,                   /* message header bytes before the payload */
    DDPC__GLOO_ADDR_CAP = 64,
};

typedef struct {
    ddpc__coll_desc desc; /* the sender's collective */
    uint64_t block;      /* which block of it */
    uint64_t bytes;      /* payload bytes that follow the header */
} ddpc__gloo_hdr;

typedef struct {
    int rank, world;
    int host, hosts;      /* this host's index and the number of hosts */
    int local, locals;    /* local rank and ranks per host */
    ddpc__shm_state *shm; /* the host-local group (world = locals) */
    const ddpc__pg_backend *shm_ops;
    ddpc__gloo_link *link;     /* NULL with one host, or once the group failed */
    ddpc_store *store;         /* client of the job's store */
    ddpc_store_server *server; /* global rank 0's store, unless a launcher agent serves it */
    char prefix[DDPC__JOB_PREFIX_CAP]; /* store keys of this job attempt start with it */
    char (*addrs)[DDPC__GLOO_ADDR_CAP]; /* (hosts) IPv4 address of each host, for messages */
    size_t payload_cap;                 /* bytes of payload a staging buffer holds */
    int pending[DDPC__GLOO_NBUF];       /* sends started and not yet waited, per staging buffer */
    const void **srcs;                  /* (locals) inputs for the reductions */
    bool direct; /* every host can use cross-memory attach: large all_reduce pulls directly */
    unsigned char *pulled; /* (locals, payload_cap) host-mates' inputs pulled by CMA */
    void *scratch;         /* reduce_scatter's full-size buffer, grown on demand */
    size_t scratch_cap;
} ddpc__gloo_state;

/* gloo_coll.c */
ddpc_status ddpc__gloo_run(void *state, const ddpc__coll *c);
/* gloo.c: after a failure: tells the other hosts why (through the store, unless it was a timeout),
 * closes the link so peers blocked on this rank fail at once, and aborts the host's segment. */
void ddpc__gloo_fail(ddpc__gloo_state *st, ddpc_status status);
/* gloo.c: DDPC_EPEER for a lost connection to host h: another rank's report from the store when
 * one arrives within a second (it knows the cause), else the connection's own message. */
ddpc_status ddpc__gloo_lost(ddpc__gloo_state *st, const ddpc__coll *c, int h, ddpc_status s);
/* "host 1 (ranks 2, 3 at 10.77.0.2)" */
void ddpc__gloo_host_text(const ddpc__gloo_state *st, int h, char *out, size_t cap);

#endif
