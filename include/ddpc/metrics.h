// SPDX-License-Identifier: MIT
/* ddpc metrics: one typed sink for everything a run reports. A record is a step and up to
 * DDPC_METRICS_MAX_FIELDS typed (key, value) fields; ddpc_metrics_end hands it to every sink
 * (metrics.jsonl, TensorBoard event files). Keys "group/name" are one level
 * of grouping (JSON: consecutive ones nest as "group": {"name": ...}). Non-finite numbers never
 * produce invalid output (JSON null). Recording allocates nothing. One thread at a time. */
#ifndef DDPC_METRICS_H
#define DDPC_METRICS_H

#include <ddpc/status.h>

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DDPC_METRICS_MAX_FIELDS 64

typedef struct ddpc_metrics ddpc_metrics;

/* No sinks yet: records go nowhere. DDPC_ENOMEM. */
ddpc_status ddpc_metrics_create(ddpc_metrics **out);
/* Closes every sink; NULL is a no-op. */
void ddpc_metrics_destroy(ddpc_metrics *m);

/* Adds a JSON-lines sink writing `path`: appended to (append) or truncated. Each record is one
 * line written with one write(), so lines never interleave. DDPC_EIO naming the path. */
ddpc_status ddpc_metrics_add_jsonl(ddpc_metrics *m, const char *path, bool append);

/* Adds a TensorBoard sink: a new event file `dir/events.out.tfevents.<time>.<host>.<pid>` (dir is
 * created if missing) holding every numeric field as a scalar at the record's step (tag: the key;
 * evaluation records under "<split>/[<task>/]"); a record whose "event" is "resume" or "restart"
 * becomes a session_log START at its step + 1. DDPC_EIO naming the path. */
ddpc_status ddpc_metrics_add_tensorboard(ddpc_metrics *m, const char *dir);

/* Starts a record of `step` (its first field, "step"); an unfinished record is dropped. */
void ddpc_metrics_begin(ddpc_metrics *m, int64_t step);
/* Fields, in order. Keys are copied (at most 63 bytes); fields past the maximum are dropped. */
void ddpc_metrics_i64(ddpc_metrics *m, const char *key, int64_t v);
/* digits >= 0: fixed with that many decimals; -1: 6 significant digits (%.6g); DDPC_METRICS_EXACT:
 * 9 significant digits (%.9g), which read back as the same float. */
#define DDPC_METRICS_EXACT (-9)
void ddpc_metrics_f64(ddpc_metrics *m, const char *key, double v, int digits);
/* The value is copied (at most 1023 bytes) and escaped by each sink. */
void ddpc_metrics_str(ddpc_metrics *m, const char *key, const char *v);
/* Hands the record to every sink. A sink that cannot write (disk full) fails with DDPC_EIO
 * "cannot write '<path>': <reason>" now and on every later record. */
ddpc_status ddpc_metrics_end(ddpc_metrics *m);

#ifdef __cplusplus
}
#endif
#endif
