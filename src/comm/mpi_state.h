/* Private to src/comm/mpi*.c (the only files that see mpi.h): the mpi backend's per-group state,
 * shared by mpi.c (joining, progress, timeouts, teardown) and mpi_coll.c (the collectives).
 * Invariant: once `failed` is set no MPI call touches this group again, and nothing MPI might
 * still write into (scratch, the progress window) is ever freed. */
#ifndef DDPC_DIST_MPI_STATE_H
#define DDPC_DIST_MPI_STATE_H

#include "comm/pg_impl.h"

#include <mpi.h>

typedef struct {
    MPI_Comm comm; /* our duplicate of MPI_COMM_WORLD; errors return instead of aborting */
    int rank, world;
    double timeout_s; /* the group's collective timeout, for messages */
    bool failed;
    /* Progress window: each rank's uint64 holds 1 + the sequence number of the last collective
     * it entered, readable by every rank without the owner's help (osc/sm on one host), so a
     * timed-out rank can name who never arrived. win_ok false: no window, ranks are unknown. */
    MPI_Win win;
    bool win_ok;
    uint64_t *seen;    /* (world) progress values read on a timeout */
    MPI_Request *reqs; /* (world) their requests */
    /* Scratch for the collectives, grown on demand and kept, so a steady training step allocates
     * nothing. */
    void *scratch;
    size_t scratch_cap;
    int *counts, *displs; /* (world) element counts and offsets for the v-collectives */
    int *rcounts, *rdispls;
    const void **srcs; /* (world) the inputs handed to ddpc__reduce_many */
} ddpc__mpi_state;

/* Publishes that this rank entered collective `seq` (for the timeout report). */
void ddpc__mpi_enter(ddpc__mpi_state *st, uint64_t seq);

/* Polls *req with MPI_Test until it completes or coll->deadline passes. Timeout: DDPC_ETIMEOUT
 * "all_reduce #17 timed out after 300 s: ranks 2, 3 never arrived". An MPI error: DDPC_EPEER.
 * Either marks the group failed. */
ddpc_status ddpc__mpi_wait(ddpc__mpi_state *st, MPI_Request *req, const ddpc__coll *coll,
                           double start);

/* DDPC_EPEER naming the collective, the MPI call and MPI's error string; marks the group failed. */
ddpc_status ddpc__mpi_fail(ddpc__mpi_state *st, const ddpc__coll *coll, const char *call, int err);

/* Scratch of at least `bytes` (64-byte aligned), or NULL with DDPC_ENOMEM set. */
void *ddpc__mpi_scratch(ddpc__mpi_state *st, size_t bytes);

/* The backend's run function (mpi_coll.c). */
ddpc_status ddpc__mpi_run(void *state, const ddpc__coll *coll);

#endif
