// SPDX-License-Identifier: MIT
/* The mpi backend's progress words and timeout diagnosis. Each rank publishes where it is (entered
 * or left collective #seq) and a heartbeat that ticks while it waits or reduces; a timed-out rank
 * reads its peers' words twice, a second apart, and names the peers that never arrived and those
 * that arrived but whose heartbeat stood still: stopped (SIGSTOP, a hang) mid-transfer. The words
 * live in a shared-memory window (MPI_Win_allocate_shared over this host's ranks): publishing is
 * one atomic store and reading one atomic load, no MPI call, so neither can block on a stopped
 * peer, as an MPI_Rget_accumulate through osc/pt2pt does. Ranks on other hosts cannot be read and
 * are reported as such. */
#include "comm/pg_impl.h"

#ifdef DDPC_HAVE_MPI

#include "comm/mpi_state.h"

#include <ddpc/timer.h>

#include <stdio.h>
#include <string.h>
#include <time.h>

static const double OBSERVE_S = 1.0; /* between snapshots: a live rank ticks far more often */
enum { UNREAD = 0 };                 /* a published heartbeat is never 0 */
enum { LINE = 128 };                 /* bytes of window per rank: two cache lines */

static void put(ddpc__mpi_state *st, int word, uint64_t value)
{
    if (st->win_ok)
        __atomic_store_n(&st->mine[word], value, __ATOMIC_RELEASE);
}

void ddpc__mpi_enter(ddpc__mpi_state *st, uint64_t seq)
{
    put(st, 0, 2 * seq + 1);
}

void ddpc__mpi_leave(ddpc__mpi_state *st, uint64_t seq)
{
    put(st, 0, 2 * seq + 2);
}

void ddpc__mpi_beat(ddpc__mpi_state *st)
{
    put(st, 1, ++st->beat);
}

/* peer[r] for every rank r on this host: its words in the shared window. */
static bool map_peers(ddpc__mpi_state *st)
{
    MPI_Group world_group, node_group;
    int n = 0;
    bool ok = MPI_Comm_size(st->node, &n) == MPI_SUCCESS &&
              MPI_Comm_group(st->comm, &world_group) == MPI_SUCCESS;
    if (!ok || MPI_Comm_group(st->node, &node_group) != MPI_SUCCESS)
        return false;
    for (int k = 0; ok && k < n; k++) {
        int r = MPI_UNDEFINED, disp = 0;
        MPI_Aint size = 0;
        void *base = NULL;
        ok = MPI_Group_translate_ranks(node_group, 1, &k, world_group, &r) == MPI_SUCCESS &&
             r >= 0 && r < st->world &&
             MPI_Win_shared_query(st->win, k, &size, &disp, &base) == MPI_SUCCESS && base &&
             size >= (MPI_Aint)(2 * sizeof(uint64_t));
        if (ok)
            st->peer[r] = base;
    }
    MPI_Group_free(&node_group);
    MPI_Group_free(&world_group);
    return ok && st->peer[st->rank] == st->mine;
}

void ddpc__mpi_open_window(ddpc__mpi_state *st)
{
    uint64_t *base = NULL;
    if (MPI_Comm_split_type(st->comm, MPI_COMM_TYPE_SHARED, st->rank, MPI_INFO_NULL, &st->node) !=
        MPI_SUCCESS) {
        st->node = MPI_COMM_NULL;
        return;
    }
    MPI_Comm_set_errhandler(st->node, MPI_ERRORS_RETURN);
    /* A line of its own per rank: the words are written on every collective, and ranks sharing a
     * cache line would pass it back and forth. */
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "alloc_shared_noncontig", "true");
    int err = MPI_Win_allocate_shared(LINE, sizeof(uint64_t), info, st->node, &base, &st->win);
    MPI_Info_free(&info);
    if (err != MPI_SUCCESS)
        return;
    MPI_Win_set_errhandler(st->win, MPI_ERRORS_RETURN);
    st->mine = base;
    st->beat = 1;
    __atomic_store_n(&st->mine[0], 0, __ATOMIC_RELEASE);
    __atomic_store_n(&st->mine[1], st->beat, __ATOMIC_RELEASE);
    /* Peers read these words only after a timeout, long after this barrier-free start: the
     * window's creation already synchronised the host's ranks. */
    st->win_ok = map_peers(st);
}

void ddpc__mpi_close_window(ddpc__mpi_state *st)
{
    /* The window itself stays for MPI_Finalize to free: MPI_Win_free waits for every rank of the
     * host, and destroy must not wait on peers. */
    if (st->node != MPI_COMM_NULL)
        MPI_Comm_free(&st->node);
}

/* Reads every readable peer's two words into snap (world, 2); the others stay UNREAD. */
static void read_all(const ddpc__mpi_state *st, uint64_t *snap)
{
    for (int r = 0; r < st->world; r++) {
        const uint64_t *w = st->peer[r];
        snap[2 * r] = w ? __atomic_load_n(&w[0], __ATOMIC_ACQUIRE) : 0;
        snap[2 * r + 1] = w ? __atomic_load_n(&w[1], __ATOMIC_ACQUIRE) : UNREAD;
    }
}

enum { ARRIVED, MISSING, STALLED, UNKNOWN, CLASSES };

/* What a timed-out rank learnt about rank r at collective `seq` from snapshots a and b. */
static int classify(const ddpc__mpi_state *st, int r, uint64_t seq, const uint64_t *a,
                    const uint64_t *b)
{
    uint64_t entered = 2 * seq + 1;
    if (r == st->rank)
        return ARRIVED;
    if (a[2 * r + 1] == UNREAD)
        return UNKNOWN;
    if (a[2 * r] < entered)
        return MISSING;
    if (a[2 * r] > entered)
        return ARRIVED; /* it left this collective: finished or gave up, either way responsive */
    return b[2 * r] == entered && b[2 * r + 1] == a[2 * r + 1] ? STALLED : ARRIVED;
}

static void append(char *buf, size_t cap, const char *fmt, int v)
{
    size_t n = strlen(buf);
    if (n + 1 < cap)
        snprintf(buf + n, cap - n, fmt, v);
}

/* Appends "; ranks 2, 3<what>" (or "rank 2<one>") for the ranks of class `kind`, at most 32. */
static void list_ranks(const int *cls, int world, int kind, int count, const char *one,
                       const char *what, char *buf, size_t cap)
{
    if (!count)
        return;
    append(buf, cap, buf[0] ? "; " : "", 0);
    append(buf, cap, count == 1 ? "rank" : "ranks", 0);
    for (int r = 0, shown = 0; r < world; r++) {
        if (cls[r] != kind)
            continue;
        if (shown == 32) {
            append(buf, cap, " and %d more", count - shown);
            break;
        }
        append(buf, cap, shown ? ", %d" : " %d", r);
        shown++;
    }
    append(buf, cap, count == 1 ? one : what, 0);
}

void ddpc__mpi_diagnose(ddpc__mpi_state *st, uint64_t seq, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (!st->win_ok) {
        snprintf(buf, cap, "the ranks that never arrived are unknown (no progress window)");
        return;
    }
    uint64_t *a = st->seen, *b = st->seen + 2 * (size_t)st->world;
    read_all(st, a);
    bool inside = false; /* some peer is in this collective: is it still alive? */
    for (int r = 0; r < st->world; r++)
        inside |= r != st->rank && a[2 * r + 1] != UNREAD && a[2 * r] == 2 * seq + 1;
    memcpy(b, a, 2 * (size_t)st->world * sizeof *b);
    if (inside) { /* the others keep ticking while they wait or diagnose, as this rank does */
        for (double until = ddpc_time_now() + OBSERVE_S; ddpc_time_now() < until;) {
            ddpc__mpi_beat(st);
            nanosleep(&(struct timespec){0, 1000000}, NULL);
        }
        read_all(st, b);
    }
    int n[CLASSES] = {0};
    for (int r = 0; r < st->world; r++)
        n[st->cls[r] = classify(st, r, seq, a, b)]++;
    const int *c = st->cls, w = st->world;
    const char *arrived = " never arrived", *stopped = " stopped responding mid-transfer";
    list_ranks(c, w, MISSING, n[MISSING], arrived, arrived, buf, cap);
    list_ranks(c, w, STALLED, n[STALLED], stopped, stopped, buf, cap);
    list_ranks(c, w, UNKNOWN, n[UNKNOWN], " is on another host, so whether it arrived is unknown",
               " are on other hosts, so whether they arrived is unknown", buf, cap);
    if (!buf[0])
        snprintf(buf, cap,
                 "every rank arrived and kept responding, but the transfer did not finish (MPI "
                 "made no progress, or the timeout is too short for this size)");
}

#endif
