// SPDX-License-Identifier: MIT
/* Private to src/comm/mpi*.c (the only files that see mpi.h): the mpi backend's per-group state,
 * shared by mpi.c (joining, waiting, teardown), mpi_progress.c (the progress window and the
 * timeout diagnosis), mpi_check.c (the descriptor exchange that opens every collective) and
 * mpi_coll.c (the data paths). Invariant: once `failed` is set no MPI call touches this group
 * again, and nothing MPI might still write into (scratch, exchange blocks, the progress window)
 * is ever freed. */
#ifndef DDPC_COMM_MPI_STATE_H
#define DDPC_COMM_MPI_STATE_H

#include "comm/pg_impl.h"

#include <mpi.h>

typedef struct {
    MPI_Comm comm; /* our duplicate of MPI_COMM_WORLD; errors return instead of aborting */
    int rank, world;
    double timeout_s; /* the group's collective timeout, for messages */
    bool failed;
    /* Progress words, in a shared-memory window among the ranks of this host: two uint64 per
     * rank, which peers on the host read with plain loads, needing neither the owner's help nor
     * an MPI call (a read that needs MPI can block on a stopped owner), so that a timed-out rank
     * can say who never arrived and who stopped mid-transfer. Word 0 is 2 seq + 1 once the rank
     * entered collective `seq` and 2 seq + 2 once it left it (done or failed); word 1 is a
     * heartbeat that ticks while the rank waits or reduces. Only the owner writes its words.
     * win_ok false: no window, ranks are unknown. */
    MPI_Comm node; /* the ranks of this host, or MPI_COMM_NULL */
    MPI_Win win;
    bool win_ok;
    uint64_t *mine;        /* (2) this rank's words */
    const uint64_t **peer; /* (world) each rank's words, NULL for ranks on other hosts */
    uint64_t beat;         /* the last heartbeat published */
    uint64_t *seen;        /* (2, world, 2) two snapshots of every rank's words, on a timeout */
    int *cls;              /* (world) what the diagnosis concluded about each rank */
    /* Descriptor exchange (mpi_check.c): every collective starts with an MPI_Iallgather of one
     * xblock-byte block per rank, a ddpc__coll_desc followed by the data when it fits. */
    size_t xblock;
    unsigned char *xsend; /* (xblock) */
    unsigned char *xrecv; /* (world, xblock) */
    /* Scratch for the collectives, grown on demand and kept, so a steady training step allocates
     * nothing. */
    void *scratch;
    size_t scratch_cap;
    int *counts, *displs; /* (world) element counts and offsets for the v-collectives */
    int *rcounts, *rdispls;
    const void **srcs; /* (world) the inputs handed to ddpc__reduce_many */
} ddpc__mpi_state;

/* mpi_progress.c. Opens the progress window (collective over the group; failure only loses the
 * timeout report's detail). Frees the healthy group's part of it at destroy. */
void ddpc__mpi_open_window(ddpc__mpi_state *st);
void ddpc__mpi_close_window(ddpc__mpi_state *st);
/* Publishes that this rank entered / left collective `seq`: one store, cheap enough for every
 * call. */
void ddpc__mpi_enter(ddpc__mpi_state *st, uint64_t seq);
void ddpc__mpi_leave(ddpc__mpi_state *st, uint64_t seq);
/* Ticks the heartbeat: call often while waiting or computing inside a collective. */
void ddpc__mpi_beat(ddpc__mpi_state *st);
/* After collective `seq` timed out: who never arrived, who stopped responding mid-transfer, who
 * could not be read ("rank 2 never arrived; rank 1 stopped responding mid-transfer"). Takes about
 * a second when some peer is inside the collective: it watches the heartbeats. */
void ddpc__mpi_diagnose(ddpc__mpi_state *st, uint64_t seq, char *buf, size_t cap);

/* mpi.c. Polls *req with MPI_Test until it completes or coll->deadline passes, ticking the
 * heartbeat. Timeout: DDPC_ETIMEOUT "all_reduce #17 timed out after 300 s: rank 2 never arrived".
 * An MPI error: DDPC_EPEER. Either marks the group failed. */
ddpc_status ddpc__mpi_wait(ddpc__mpi_state *st, MPI_Request *req, const ddpc__coll *coll,
                           double start);

/* DDPC_EPEER naming the collective, the MPI call and MPI's error string; marks the group failed. */
ddpc_status ddpc__mpi_fail(ddpc__mpi_state *st, const ddpc__coll *coll, const char *call, int err);

/* Scratch of at least `bytes` (64-byte aligned), or NULL with DDPC_ENOMEM set. */
void *ddpc__mpi_scratch(ddpc__mpi_state *st, size_t bytes);

/* mpi_check.c. Exchanges descriptors (and the data of collectives small enough to ride along)
 * and checks that every rank issued the same collective: a mismatch is DDPC_EINVAL naming both
 * ranks' calls, on every rank, before any data moves. *done: the collective is complete. */
ddpc_status ddpc__mpi_check(ddpc__mpi_state *st, const ddpc__coll *coll, double start, bool *done);

/* mpi_coll.c. The backend's run function. */
ddpc_status ddpc__mpi_run(void *state, const ddpc__coll *coll);

#endif
