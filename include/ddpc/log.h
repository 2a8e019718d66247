// SPDX-License-Identifier: MIT
/* Rank-aware logging: print a line on every rank, only on each host's local rank 0, or only on
 * global rank 0, with a "[rank r/w] " prefix when the job has more than one rank. A message goes
 * out in one write(2), so lines from concurrent ranks sharing a terminal, pipe or O_APPEND file
 * never interleave mid-line (pipes guarantee this up to PIPE_BUF = 4096 bytes). */
#ifndef DDPC_LOG_H
#define DDPC_LOG_H

#include <ddpc/comm.h>
#include <ddpc/status.h>

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    DDPC_LOG_EVERY_RANK,   /* every rank prints (with the prefix) */
    DDPC_LOG_LOCAL_RANK0,  /* one rank per host: local rank 0 */
    DDPC_LOG_GLOBAL_RANK0, /* one rank per job: rank 0 */
} ddpc_log_scope;

/* Where a process sits, as far as logging cares. */
typedef struct {
    int rank, world_size, local_rank;
} ddpc_log_ranks;

/* A single process: rank 0 of 1. */
ddpc_log_ranks ddpc_log_ranks_single(void);
/* The ranks of a process group (pg must be valid). */
ddpc_log_ranks ddpc_log_ranks_from_pg(const ddpc_pg *pg);
/* The ranks rank discovery found (before any group exists). */
ddpc_log_ranks ddpc_log_ranks_from_env(const ddpc_comm_env *env);

/* Whether a process at `ranks` prints messages of `scope`. */
bool ddpc_log_enabled(ddpc_log_ranks ranks, ddpc_log_scope scope);

/* Writes "[rank r/w] " (or "" when world_size <= 1) into buf (cap bytes, NUL-terminated when
 * cap > 0, truncated to fit); returns the length the whole prefix needs, like snprintf. */
int ddpc_log_prefix(ddpc_log_ranks ranks, char *buf, size_t cap);

/* Prints the formatted message to f when ddpc_log_enabled(ranks, scope): every line of it
 * prefixed, a final newline added when missing, all in one write after flushing what f buffered.
 * Streams without a file descriptor get one fwrite + fflush instead. Errors: DDPC_EIO (the write
 * failed), DDPC_ENOMEM (a message over 4 KiB could not be buffered). */
ddpc_status ddpc_logf(FILE *f, ddpc_log_ranks ranks, ddpc_log_scope scope, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* ddpc_logf with a va_list. */
ddpc_status ddpc_vlogf(FILE *f, ddpc_log_ranks ranks, ddpc_log_scope scope, const char *fmt,
                       va_list ap) __attribute__((format(printf, 4, 0)));

#ifdef __cplusplus
}
#endif
#endif
