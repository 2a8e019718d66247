/* The mpi backend's progress window and timeout diagnosis. Each rank publishes where it is (entered
 * or left collective #seq) and a heartbeat that ticks while it waits or reduces; a timed-out rank
 * reads every peer's words twice, a second apart, and names the peers that never arrived and
 * those that arrived but whose heartbeat stood still: stopped (SIGSTOP, a hang) mid-transfer.
 * In MPI's unified memory model (osc/sm on one host) a store to one's own window is visible to
 * remote reads without further calls (MPI-3.1 11.4), so publishing costs a store; otherwise it is
 * an MPI_Accumulate, and heartbeats are paced. Only the owner writes its words. */
#include "comm/pg_impl.h"

#ifdef DDPC_HAVE_MPI

#include "comm/mpi_state.h"

#include <ddpc/timer.h>

#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static const double READ_S = 2.0;    /* per snapshot: a peer may only answer with its own help */
static const double OBSERVE_S = 1.0; /* between snapshots: a live rank ticks far more often */
static const double PACE_S = 0.01;   /* between heartbeats that cost an MPI call */
enum { UNANSWERED = 0 };             /* a beat is never 0 once read: see read_all */

static bool publish(ddpc__mpi_state *st, int word, uint64_t value)
{
    if (st->win_unified) {
        __atomic_store_n(&st->mine[word], value, __ATOMIC_RELEASE);
        return true;
    }
    return MPI_Accumulate(&value, 1, MPI_UINT64_T, st->rank, word, 1, MPI_UINT64_T, MPI_REPLACE,
                          st->win) == MPI_SUCCESS &&
           MPI_Win_flush(st->rank, st->win) == MPI_SUCCESS;
}

static void put(ddpc__mpi_state *st, int word, uint64_t value)
{
    if (st->win_ok && !st->failed && !publish(st, word, value))
        st->win_ok = false; /* only the timeout report loses its detail */
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
    if (!st->win_ok)
        return;
    if (!st->win_unified) {
        double now = ddpc_time_now();
        if (now - st->beat_at < PACE_S)
            return;
        st->beat_at = now;
    }
    put(st, 1, ++st->beat);
}

void ddpc__mpi_open_window(ddpc__mpi_state *st)
{
    uint64_t *base = NULL;
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "same_disp_unit", "true");
    MPI_Info_set(info, "accumulate_ops", "same_op_no_op");
    int err =
        MPI_Win_allocate(2 * sizeof(uint64_t), sizeof(uint64_t), info, st->comm, &base, &st->win);
    MPI_Info_free(&info);
    if (err != MPI_SUCCESS)
        return;
    MPI_Win_set_errhandler(st->win, MPI_ERRORS_RETURN);
    int *model = NULL, flag = 0;
    st->mine = base;
    st->win_unified = MPI_Win_get_attr(st->win, MPI_WIN_MODEL, &model, &flag) == MPI_SUCCESS &&
                      flag && *model == MPI_WIN_UNIFIED;
    st->win_ok = MPI_Win_lock_all(MPI_MODE_NOCHECK, st->win) == MPI_SUCCESS;
    st->beat = 1; /* so that a beat read back is never UNANSWERED */
    put(st, 0, 0);
    put(st, 1, st->beat);
}

/* Reads every peer's two words into snap (world, 2) for at most READ_S: a peer's memory may only
 * be readable with its help, which a stopped peer cannot give. Unanswered: both words stay 0. */
static void read_all(ddpc__mpi_state *st, uint64_t *snap)
{
    for (int r = 0; r < st->world; r++) {
        snap[2 * r] = snap[2 * r + 1] = UNANSWERED;
        st->reqs[r] = MPI_REQUEST_NULL;
        if (r != st->rank &&
            MPI_Rget_accumulate(NULL, 0, MPI_UINT64_T, &snap[2 * r], 2, MPI_UINT64_T, r, 0, 2,
                                MPI_UINT64_T, MPI_NO_OP, st->win, &st->reqs[r]) != MPI_SUCCESS)
            st->reqs[r] = MPI_REQUEST_NULL;
    }
    double until = ddpc_time_now() + READ_S;
    for (int pending = 1; pending && ddpc_time_now() < until;) {
        pending = 0;
        ddpc__mpi_beat(st);
        for (int r = 0; r < st->world; r++) {
            int done = 1;
            if (st->reqs[r] != MPI_REQUEST_NULL &&
                MPI_Test(&st->reqs[r], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
                st->reqs[r] = MPI_REQUEST_NULL; /* unanswerable */
            pending |= !done;
        }
        if (pending)
            sched_yield();
    }
    /* A request still pending may yet write into snap: mark the peer unanswered and never read
     * snap again for it (it lives as long as the failed group, which is never freed). */
    for (int r = 0; r < st->world; r++)
        if (st->reqs[r] != MPI_REQUEST_NULL)
            snap[2 * r + 1] = UNANSWERED;
}

enum { ARRIVED, MISSING, STALLED, UNKNOWN, CLASSES };

/* What a timed-out rank learnt about rank r at collective `seq` from snapshots a and b. */
static int classify(const ddpc__mpi_state *st, int r, uint64_t seq, const uint64_t *a,
                    const uint64_t *b)
{
    uint64_t entered = 2 * seq + 1;
    if (r == st->rank)
        return ARRIVED;
    if (a[2 * r + 1] == UNANSWERED)
        return UNKNOWN;
    if (a[2 * r] < entered)
        return MISSING;
    if (a[2 * r] > entered)
        return ARRIVED; /* it left this collective: finished or gave up, either way responsive */
    if (b[2 * r + 1] == UNANSWERED)
        return UNKNOWN;
    return b[2 * r] == entered && b[2 * r + 1] == a[2 * r + 1] ? STALLED : ARRIVED;
}

static void append(char *buf, size_t cap, const char *fmt, int v)
{
    size_t n = strlen(buf);
    if (n + 1 < cap)
        snprintf(buf + n, cap - n, fmt, v);
}

/* Appends "; ranks 2, 3<what>" (or "rank 2<what>") for the ranks of class `kind`, at most 32. */
static void list_ranks(const int *cls, int world, int kind, int count, const char *what, char *buf,
                       size_t cap)
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
    append(buf, cap, what, 0);
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
        inside |= r != st->rank && a[2 * r + 1] != UNANSWERED && a[2 * r] == 2 * seq + 1;
    memcpy(b, a, 2 * (size_t)st->world * sizeof *b);
    if (inside) {
        for (double until = ddpc_time_now() + OBSERVE_S; ddpc_time_now() < until;) {
            ddpc__mpi_beat(st);
            nanosleep(&(struct timespec){0, 1000000}, NULL);
        }
        read_all(st, b);
    }
    int n[CLASSES] = {0};
    for (int r = 0; r < st->world; r++)
        n[st->cls[r] = classify(st, r, seq, a, b)]++;
    list_ranks(st->cls, st->world, MISSING, n[MISSING], " never arrived", buf, cap);
    list_ranks(st->cls, st->world, STALLED, n[STALLED], " stopped responding mid-transfer", buf,
               cap);
    list_ranks(st->cls, st->world, UNKNOWN, n[UNKNOWN],
               " did not answer, so whether they arrived is unknown", buf, cap);
    if (!buf[0])
        snprintf(buf, cap,
                 "every rank arrived and kept responding, but the transfer did not finish (MPI "
                 "made no progress, or the timeout is too short for this size)");
}

#endif
