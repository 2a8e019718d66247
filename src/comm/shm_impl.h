// SPDX-License-Identifier: MIT
/* Private to the shm backend: the shared segment's layout, the per-process state, and the
 * functions its files share (rendezvous, segment, hello protocol, waiting, collectives).
 * Segment = header page | per-rank control blocks | per-rank data areas (in[2], out[2]).
 * Invariant (one synchronisation per step): every rank runs the same sequence of steps; at step t
 * a rank writes only its own in[t&1] before arriving and reads others' areas only after all have
 * arrived at t, so an area of parity p is rewritten only after everyone finished reading it. */
#ifndef DDPC_COMM_SHM_IMPL_H
#define DDPC_COMM_SHM_IMPL_H

#include "comm/coll_desc.h"
#include "comm/pg_impl.h"

#include <stdatomic.h>
#include <sys/types.h>

#define DDPC__SHM_MAGIC 0x6464706373686d31ull /* "ddpcshm1" */
#define DDPC__SHM_VERSION 1u

enum {
    DDPC__SHM_LINE = 128,        /* two cache lines: adjacent-line prefetch stays private */
    DDPC__SHM_HEADER = 4096,     /* header page */
    DDPC__SHM_SLOT = 256 * 1024, /* bytes of one in/out area of one rank and parity */
    DDPC__SHM_HOST_CAP = 256,
    DDPC__SHM_NAME_CAP = 96,
    DDPC__SHM_MSG_CAP = 512,
};

typedef struct {
    uint64_t magic;
    uint32_t version, world;
    uint64_t slot_bytes, total_bytes;
    int32_t owner_pid;
    uint64_t owner_start;
    char host[DDPC__SHM_HOST_CAP];
    atomic_uint ready;    /* rank 0 finished initialising (set last, release) */
    atomic_uint attached; /* ranks that mapped the segment and claimed their slot */
    atomic_uint joined;   /* rank 0 saw everyone and unlinked the name */
    atomic_uint aborted;  /* 0, 1 = being written, 2 = abort_* valid */
    int32_t abort_status, abort_rank;
    char abort_msg[DDPC__SHM_MSG_CAP];
} ddpc__shm_header;

/* One rank's control block: the arrival counter and the collective descriptors on one line (a
 * waiter that sees the counter has the descriptor in cache), then identity. */
typedef struct {
    _Alignas(DDPC__SHM_LINE) atomic_uint_least64_t step;
    /* What the rank says it is running, written before the first step of each collective into
     * the slot of that step's parity (a peer can be at most one step ahead, so it cannot
     * overwrite the slot a slower rank still has to read). */
    ddpc__coll_desc desc[2];
    _Alignas(DDPC__SHM_LINE) atomic_int pid; /* 0 until the rank claims its slot */
    uint64_t start_time;                     /* /proc/PID/stat starttime; 0 unknown */
    uint64_t pid_ns;                         /* inode of /proc/self/ns/pid; 0 unknown */
    uint64_t cma_addr;                       /* address of cma_word in that process */
    uint64_t cma_word;                       /* the value a CMA probe must read there */
    atomic_uint cma_ok;                      /* 1 + whether it could read every peer */
    uint64_t post_send, post_recv;           /* buffers of the current collective (CMA) */
    /* For the hang recorder's diagnosis: what the rank last entered (seq + 1, 0: nothing yet)
     * and its phase now (ddpc_phase), so that a peer's timeout can say where it is stuck. */
    atomic_uint_least64_t entered;
    atomic_uint entered_kind, phase;
} ddpc__shm_rank;

typedef struct {
    int rank, world;
    int rank_base; /* added to ranks in messages: global rank of local rank 0 (gloo host groups) */
    ddpc__shm_header *hdr;
    ddpc__shm_rank *ranks; /* (world) */
    unsigned char *data;   /* (world, 4, slot_bytes): in[0], in[1], out[0], out[1] */
    size_t map_bytes, slot;
    uint64_t step;    /* steps this rank completed */
    int spin;         /* pause-loop iterations before yielding */
    bool yielded;     /* the last wait outlasted its spin: spin briefly next time */
    bool check_desc;  /* the next step is a collective's first: compare descriptors after it */
    double timeout_s; /* of the current collective, for messages */
    bool use_cma;
    uint64_t cma_word;  /* read by peers through process_vm_readv */
    pid_t *pids;        /* (world) peers' pids, for liveness */
    uint64_t *starts;   /* (world) their start times */
    bool *watch;        /* (world) whether this process can see that one in /proc */
    const void **srcs;  /* (world) scratch for ddpc__reduce_many */
    unsigned char *tmp; /* (world, cma_chunk) peers' data pulled by CMA */
    size_t cma_chunk;   /* bytes per pull while reducing */
    size_t cma_min;     /* messages from this size on use CMA when use_cma */
    size_t small_max;   /* all-reduces up to this size take the one-step path (<= slot) */
} ddpc__shm_state;

/* Segment geometry for `world` ranks. */
size_t ddpc__shm_total_bytes(int world);
void ddpc__shm_bind(ddpc__shm_state *s, void *base);
static inline unsigned char *ddpc__shm_in(const ddpc__shm_state *s, int rank, uint64_t step)
{
    return s->data + ((size_t)rank * 4 + (step & 1)) * s->slot;
}
static inline unsigned char *ddpc__shm_out(const ddpc__shm_state *s, int rank, uint64_t step)
{
    return s->data + ((size_t)rank * 4 + 2 + (step & 1)) * s->slot;
}

/* shm_segment.c: create (O_EXCL, sized, zeroed, header filled but not ready; an existing name
 * is DDPC_EINVAL) or open and map a ready segment (*retry: missing or not ready yet); both name
 * the segment and the problem in their errors. */
ddpc_status ddpc__shm_seg_create(const char *name, int world, const char *host, void **base,
                                 size_t *bytes);
ddpc_status ddpc__shm_seg_open(const char *name, int world, void **base, size_t *bytes,
                               bool *retry);
/* Sets the segment's abort flag (rank `rank` failed with `status` and `msg`) unless another
 * failure came first. */
void ddpc__shm_header_abort(ddpc__shm_header *h, int rank, ddpc_status status, const char *msg);
/* Claims `rank`'s slot in a mapped segment (pid, start time); DDPC_EINVAL if already taken. */
ddpc_status ddpc__shm_claim(ddpc__shm_state *s);
/* starttime (field 22) of /proc/PID/stat, 0 if unreadable; *dead set for zombies/missing. */
uint64_t ddpc__proc_start_time(pid_t pid, bool *dead);
/* False once `pid` with start time `start` is gone (exited, zombie, or pid reused). */
bool ddpc__pid_alive(pid_t pid, uint64_t start);
/* Inode number of this process's pid namespace, 0 if unknown. */
uint64_t ddpc__pid_namespace(void);
/* The host name, "" if unknown. */
void ddpc__host_name(char *out, size_t cap);

/* shm_hello.c: the rendezvous messages (one line each, at most DDPC__SHM_LINE_MAX bytes). */
enum { DDPC__SHM_LINE_MAX = 512, DDPC__SHM_REPLY_TEXT_MAX = 400 };
typedef struct {
    int version, rank, world, pid;
    char host[DDPC__SHM_HOST_CAP];
} ddpc__shm_hello;
int ddpc__shm_hello_format(char *out, size_t cap, const ddpc__shm_hello *h);
ddpc_status ddpc__shm_hello_parse(const char *buf, size_t len, ddpc__shm_hello *out);
/* Reply: ok with the segment name (< DDPC__SHM_NAME_CAP chars), or an error message (printable
 * ASCII, cut to DDPC__SHM_REPLY_TEXT_MAX chars). */
int ddpc__shm_reply_format(char *out, size_t cap, bool ok, const char *text);
ddpc_status ddpc__shm_reply_parse(const char *buf, size_t len, bool *ok, char *text, size_t cap);

/* shm_tcp.c / shm_named.c: the two rendezvous; on success `s` is mapped and every rank joined. */
ddpc_status ddpc__shm_rdzv_tcp(ddpc__shm_state *s, const ddpc_comm_env *env, double deadline);
ddpc_status ddpc__shm_rdzv_named(ddpc__shm_state *s, const ddpc_comm_env *env, double deadline);
/* The /dev/shm name the run-id rendezvous uses for `env`. */
void ddpc__shm_segment_name(const ddpc_comm_env *env, char *out, size_t cap);
/* Waits until every rank attached (rank 0 then unlinks `name` and sets joined) or the deadline;
 * names the missing ranks. */
ddpc_status ddpc__shm_wait_joined(ddpc__shm_state *s, const char *name, double deadline,
                                  const char *where);

/* shm_wait.c: one step: publish arrival, wait for every peer (spin, then yield), watching the
 * deadline, dead peers and the segment's abort flag. `c` names the collective in errors. */
ddpc_status ddpc__shm_step(ddpc__shm_state *s, const ddpc__coll *c);
/* Publishes what collective `c` is, for the check after its first step (a mismatch between
 * ranks is DDPC_EINVAL naming both). Called before the collective's first step. */
void ddpc__shm_describe(ddpc__shm_state *s, const ddpc__coll *c);
/* Marks the segment aborted with `status` and this thread's last error, so peers fail fast. */
void ddpc__shm_abort(ddpc__shm_state *s, ddpc_status status);
/* shm_wait.c: DDPC_EPEER "rank K (pid P) exited during OP #SEQ" when a watched rank of this host
 * is gone, else DDPC_OK. For a backend whose link to other hosts broke: a dead host-mate is the
 * likelier cause, and the one worth telling the other hosts. */
ddpc_status ddpc__shm_check_mates(const ddpc__shm_state *s, const ddpc__coll *c);
/* shm_wait.c: the backend's set_phase. */
void ddpc__shm_set_phase(void *state, int phase);

/* shm_coll.c */
ddpc_status ddpc__shm_run(void *state, const ddpc__coll *c);

/* shm_cma.c: single-copy large collectives (callers check s->use_cma), and the join-time probe
 * that sets use_cma on every rank alike. */
ddpc_status ddpc__shm_cma_all_reduce(ddpc__shm_state *s, const ddpc__coll *c);
ddpc_status ddpc__shm_cma_reduce_scatter(ddpc__shm_state *s, const ddpc__coll *c);
ddpc_status ddpc__shm_cma_all_gather(ddpc__shm_state *s, const ddpc__coll *c);
ddpc_status ddpc__shm_cma_broadcast(ddpc__shm_state *s, const ddpc__coll *c);
ddpc_status ddpc__shm_cma_probe(ddpc__shm_state *s, double deadline);
/* Publishes c's send/recv addresses for the peers and takes one step (c's first). */
ddpc_status ddpc__shm_cma_post(ddpc__shm_state *s, const ddpc__coll *c);
/* Copies `bytes` at address `remote` of rank k's memory to `local`; a dead peer is DDPC_EPEER. */
ddpc_status ddpc__shm_cma_pull(ddpc__shm_state *s, const ddpc__coll *c, int k, uint64_t remote,
                               void *local, size_t bytes);

#endif
