// SPDX-License-Identifier: MIT
/* Private to src/comm: the hang recorder's ring of a process group's last collectives
 * (flight.c). Invariant: entries are written only by the thread running the backend, one
 * collective at a time, so the ring needs no lock; it is read on that thread's failure path. */
#ifndef DDPC_COMM_FLIGHT_H
#define DDPC_COMM_FLIGHT_H

#include "comm/pg_impl.h"

typedef struct {
    uint64_t seq;
    int kind;  /* ddpc__coll_kind */
    int dtype; /* ddpc_dtype */
    int phase; /* ddpc_phase */
    size_t count;
    double start, end; /* ddpc_time_now(); end 0 while open (or failed) */
} ddpc__flight_entry;

typedef struct {
    ddpc__flight_entry ring[DDPC_FLIGHT_ENTRIES];
    uint64_t n;    /* entries ever opened; ring[(n - 1) % entries] is the newest */
    char dir[512]; /* "" : no file */
} ddpc__flight;

/* Records the start of `c`; the entry's end is the caller's to set. */
ddpc__flight_entry *ddpc__flight_open(ddpc__flight *f, const ddpc__coll *c, double start);
/* Writes the ring to f->dir/rank<k>.json (best effort: a directory that cannot be written is
 * skipped, the collective's error is what matters). Keeps the thread's last error. */
void ddpc__flight_dump(const ddpc__flight *f, const ddpc_pg *pg, const char *error);

#endif
