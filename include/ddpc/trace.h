// SPDX-License-Identifier: MIT
/* ddpc trace: a process-wide recorder of timed events for Chrome's trace-event format (issue #13),
 * like the allocator's counters one per process. Events go into one array preallocated by
 * ddpc_trace_open and are recorded only between ddpc_trace_record(true) and (false); a full array
 * drops events (counted). Recording is lock-free and thread safe; open, serialize and close are
 * for one thread while no other thread records. Names and ops are string literals (borrowed). */
#ifndef DDPC_TRACE_H
#define DDPC_TRACE_H

#include <ddpc/status.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The thread an event belongs to (its tid): compute 1, comm 2, loader workers 10, 11, ...; the
 * replicas of DataParallel, ddpc_trace_add_replica. */
typedef enum { DDPC_TRACE_COMPUTE, DDPC_TRACE_COMM, DDPC_TRACE_LOADER } ddpc_trace_thread;

/* Allocates room for `capacity` events (dropping any recorded); not recording yet. DDPC_ENOMEM. */
ddpc_status ddpc_trace_open(size_t capacity);
/* Starts or stops recording (no-op before open). */
void ddpc_trace_record(bool on);
/* Whether events are being recorded now. Thread safe, one relaxed load. */
bool ddpc_trace_on(void);
/* Records a complete event [t0, t1] (ddpc_time_now seconds) of `thread`; step >= 0 and op/bytes
 * (op non-NULL) become its args. Dropped when not recording or full. Thread safe. */
void ddpc_trace_add(ddpc_trace_thread thread, const char *name, double t0, double t1, int64_t step,
                    const char *op, int64_t bytes);
/* Records a complete event [t0, t1] of DataParallel replica `replica`: replica 0 runs on the
 * compute thread and is recorded there; replica k > 0 on its own thread, "replica k" (tid
 * 1000 + k). Dropped when not recording or full. Thread safe. */
void ddpc_trace_add_replica(int replica, const char *name, double t0, double t1);
/* The recorded events as JSON objects, each preceded by ",\n" (so that blobs concatenate inside
 * a "traceEvents" array), sorted by thread then start, with "M" events naming process
 * "rank <rank>" (pid = rank) and its threads; ts and dur in microseconds. *out is allocated
 * (ddpc_free), NUL-terminated, *len its length; *dropped the events that did not fit.
 * DDPC_ENOMEM. */
ddpc_status ddpc_trace_serialize(int rank, char **out, size_t *len, size_t *dropped);
/* Frees the array; no recording afterwards. */
void ddpc_trace_close(void);

#ifdef __cplusplus
}
#endif
#endif
