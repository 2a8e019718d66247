// SPDX-License-Identifier: MIT
/* Private to src/launch: the pieces of the supervisor, split so each can be unit-tested.
 * Environment arrays are NULL-terminated "KEY=VALUE" vectors from ddpc_malloc; a worker owns two
 * pipes (stdout, stderr) whose bytes become whole lines before they reach a ring, a log or the
 * console. The launcher is single-threaded: nothing here locks. */
#ifndef DDPC_LAUNCH_IMPL_H
#define DDPC_LAUNCH_IMPL_H

#include <ddpc/fs.h>
#include <ddpc/launch.h>
#include <ddpc/store.h>

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

/* ---- environment vectors (worker_env.c) ---- */

/* Frees a vector from ddpc__worker_env or ddpc__strv_*; NULL is a no-op. */
void ddpc__strv_free(char **v);
/* Appends a copy of `s` to the vector *v of *n entries (kept NULL-terminated). */
ddpc_status ddpc__strv_push(char ***v, int *n, const char *s);
/* Same with printf formatting. */
ddpc_status ddpc__strv_pushf(char ***v, int *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* What ddpc__worker_env needs besides the config; the launcher fills it once per job. */
typedef struct {
    char run_id[128];
    int master_port;
    int omp_threads; /* > 0: set OMP_NUM_THREADS (the caller's was unset); 0: leave it */
    int restart_count;
    char store_token[DDPC_STORE_TOKEN_MAX + 1]; /* the job's; "" only for a store on loopback */
    char store_bind[256]; /* DDPC_STORE_BIND: where node 0's store listens; "" is MASTER_ADDR */
} ddpc__job_ids;

/* OMP_NUM_THREADS for each worker as torchrun picks it: 0 when `base` sets it or nproc <= 1,
 * else max(1, cpus / nproc). */
int ddpc__omp_threads(const char *const *base, int nproc, int cpus);

/* The environment of worker `local_rank`: `base` without the variables the launcher owns, then
 * RANK, LOCAL_RANK, WORLD_SIZE, ... (torchrun's contract), DDPC_LAUNCHER=1, DDPC_STORE_TOKEN (the
 * job's token, never a token file), and DDPC_BACKEND / DDPC_COLLECTIVE_TIMEOUT / OMP_NUM_THREADS
 * when the config or `ids` ask for them. */
ddpc_status ddpc__worker_env(const ddpc_launch_config *cfg, const char *const *base,
                             const ddpc__job_ids *ids, int local_rank, char ***out);

/* ---- node 0's token file (token_file.c) ---- */

/* The token file node 0's launcher wrote, to remove at the job's end. */
typedef struct {
    char path[DDPC_FS_PATH_MAX];
    bool written; /* by this launcher: only then is it removed */
    dev_t dev;    /* what was written, so a file put there since is left alone */
    ino_t ino;
} ddpc__token_file;

/* Writes `token` (a line) to <cfg->log_dir>/store.token, else ddpc-store-token-<port> in the
 * working directory (absolute), atomically and mode 0600 from its creation, and says on cfg->err
 * where it is and how the other nodes get it (never the token). Replaces only a regular file of
 * this user: a link, anything else or another user's file is DDPC_EINVAL naming the path. */
ddpc_status ddpc__token_file_write(const ddpc_launch_config *cfg, int port, const char *token,
                                   ddpc__token_file *tf);
/* Removes the file ddpc__token_file_write wrote, if the path still names it. */
void ddpc__token_file_remove(ddpc__token_file *tf);
/* For a node of rank > 0: while `path` does not exist, says once on cfg->err that it waits, and
 * looks again (at most 200 ms apart) for up to cfg->rdzv_timeout_s; DDPC_ETIMEOUT naming the
 * path when it never appears. A path that exists (or fails otherwise) returns DDPC_OK at once: the
 * token loader checks it. */
ddpc_status ddpc__token_file_await(const ddpc_launch_config *cfg, const char *path);

/* ---- identities: ports, run ids, programs (ids.c) ---- */

/* Binds a TCP socket to addr:0 and returns it (close-on-exec) in *fd with its port in *port; the
 * socket then allows SO_REUSEADDR binds, so rank 0 can listen on the port while the launcher's
 * reservation keeps every other bind(0) on the host off it. */
ddpc_status ddpc__port_reserve(const char *addr, int *fd, int *port);
/* A run id unique on this host: "ddpc-<pid>-<nanoseconds in hex>". */
void ddpc__run_id_make(char *buf, size_t cap);
/* True when `id` is 1..100 characters of [A-Za-z0-9._-]. */
bool ddpc__run_id_valid(const char *id);
/* Resolves `name` as execvp would (a name with '/' is taken as is, else each PATH entry of envp;
 * PATH unset means /usr/local/bin:/usr/bin:/bin). DDPC_EINVAL naming it when no executable file. */
ddpc_status ddpc__find_program(const char *name, const char *const *envp, char *out, size_t cap);

/* ---- output: line assembly and the failure ring (output.c) ---- */

#define DDPC__RING_LINES 20
#define DDPC__RING_LINE_MAX 512
#define DDPC__LINE_MAX 65536 /* a longer line is forwarded in pieces of this size */

/* The last DDPC__RING_LINES lines, each cut to DDPC__RING_LINE_MAX - 1 bytes. */
typedef struct {
    char lines[DDPC__RING_LINES][DDPC__RING_LINE_MAX];
    int next;  /* slot the next line goes to */
    int count; /* lines held, <= DDPC__RING_LINES */
} ddpc__line_ring;

void ddpc__ring_push(ddpc__line_ring *r, const char *line, size_t len);
/* The i-th held line, oldest first (0 <= i < r->count). */
const char *ddpc__ring_line(const ddpc__line_ring *r, int i);

/* Where one worker's lines go. `prefix` ("[rank r/w] ") is put before console lines when tee. */
typedef struct {
    FILE *log;      /* NULL: no log file */
    int *log_errno; /* NULL, or where the first failed write to `log` leaves its errno */
    FILE *console;  /* NULL: not to the console */
    const char *prefix;
    ddpc__line_ring *ring;
} ddpc__line_sink;

/* Bytes of one stream waiting for their newline. */
typedef struct {
    char *buf; /* (DDPC__LINE_MAX) from ddpc_malloc, or NULL before the first byte */
    size_t len;
} ddpc__line_buf;

/* Feeds `n` bytes: every complete line (and every DDPC__LINE_MAX bytes without one) goes to the
 * sink with its newline. DDPC_ENOMEM when the buffer cannot be allocated. */
ddpc_status ddpc__line_feed(ddpc__line_buf *b, const char *data, size_t n,
                            const ddpc__line_sink *sink);
/* At end of stream: a pending partial line goes out with a newline added; frees the buffer. */
void ddpc__line_flush(ddpc__line_buf *b, const ddpc__line_sink *sink);

/* ---- the guard: workers die with the launcher (guard.c) ---- */

typedef struct {
    pid_t pid;         /* the guard process; 0 when none */
    int fd;            /* write end of its pipe (close-on-exec); -1 when none */
    ddpc__job_ids ids; /* what a new guard needs: the job's shm segment names */
    int max_restarts;  /* segments of attempts 0..max_restarts are the job's */
    pid_t *groups;     /* (cap) the groups the guard lists, as the launcher told it */
    int n, cap;        /* listed groups and room: one per local worker */
    int starts;        /* guards started so far; 1 for the first */
} ddpc__guard;

/* Forks the guard (its process name is "ddpc-guard"). Call with the launcher's watched signals
 * blocked (the guard inherits the mask). When the launcher dies before ddpc__guard_stop, the
 * guard SIGKILLs every listed group and removes the job's shm segments for restarts
 * 0..max_restarts. `max_groups` bounds the groups listed at once (the local workers). DDPC_EIO on
 * pipe or fork failure, DDPC_ENOMEM. */
ddpc_status ddpc__guard_start(ddpc__guard *g, const ddpc__job_ids *ids, int max_restarts,
                              int max_groups);
/* Lists process group `pgid` (a worker just spawned). g may be NULL. */
void ddpc__guard_add(ddpc__guard *g, pid_t pgid);
/* Unlists it: call once the launcher has SIGKILLed the group itself. g may be NULL. */
void ddpc__guard_remove(ddpc__guard *g, pid_t pgid);
/* Without blocking: when the guard has died (killed, OOM), says so on `err` and starts a new one
 * that lists the same groups, so a launcher killed later still takes every group with it.
 * DDPC_EIO naming the dead guard when no new one can be started. g may be NULL. */
ddpc_status ddpc__guard_check(ddpc__guard *g, FILE *err);
/* Tells the guard the launcher is done, reaps it and frees the list. */
void ddpc__guard_stop(ddpc__guard *g);
/* Removes the shm segment the workers of attempt `restart_count` would use (best effort). */
void ddpc__job_shm_remove(const ddpc__job_ids *ids, int restart_count);

/* ---- one worker process (worker.c) ---- */

typedef struct {
    int rank;   /* global rank */
    pid_t pid;  /* also its process group id; 0 when not started */
    int fds[2]; /* read ends of its stdout and stderr pipes; -1 once closed */
    ddpc__line_buf bufs[2];
    ddpc__line_sink sinks[2];
    ddpc__line_ring ring;
    FILE *log;
    char log_path[1200];
    int log_errno;      /* first write error of its log file, 0 while none */
    bool log_reported;  /* that error was reported */
    ddpc__guard *guard; /* told about its process group; may be NULL */
    char prefix[32];
    bool exited; /* observed (not yet reaped: the zombie keeps its pid and group id ours) */
    bool failed; /* exited non-zero or by a signal */
    bool reaped;
    int wait_status; /* valid once exited */
} ddpc__worker;

/* Starts `path` with `argv` and `envp` in its own process group, with stdout and stderr on fresh
 * pipes and `child_mask` as its signal mask; it gets SIGKILL when the launcher dies, and its group
 * is listed with w->guard. DDPC_EIO on pipe or fork failure. */
ddpc_status ddpc__worker_spawn(ddpc__worker *w, const char *path, char *const *argv,
                               char *const *envp, const sigset_t *child_mask);
/* Checks without blocking whether the worker exited (sets exited, failed); leaves a zombie. */
bool ddpc__worker_poll_exit(ddpc__worker *w);
/* Sends `sig` to the worker's whole process group (no-op once reaped). */
void ddpc__worker_signal(ddpc__worker *w, int sig);
/* Reads what its pipe `stream` (0 stdout, 1 stderr) holds into the sinks; closes it at EOF. */
ddpc_status ddpc__worker_read(ddpc__worker *w, int stream);
/* SIGKILLs what is left of its group, reaps it, flushes and closes its pipes and its log (a
 * failed close sets log_errno). */
void ddpc__worker_finish(ddpc__worker *w);

/* ---- the agent of a per-node launch (agent.c, agent_rdzv.c) ---- */

typedef struct ddpc__agent ddpc__agent;

typedef enum {
    DDPC__AGENT_QUIET,  /* nothing happened elsewhere */
    DDPC__AGENT_FAILED, /* a node failed (its worker, its launcher, or node 0's store is gone) */
} ddpc__agent_event_kind;

typedef struct {
    ddpc__agent_event_kind kind;
    int exit_code;    /* FAILED: the failing worker's status (exit code or 128 + signal), else 1 */
    bool restartable; /* FAILED: a worker failed, so --max-restarts applies; not for lost nodes */
    int node;         /* FAILED: the node that failed or went silent */
    char text[16384]; /* FAILED: one report naming node, host, rank and cause (no trailing \n) */
} ddpc__agent_event;

/* Joins the other hosts' launchers: node 0 serves the store at the master address and port;
 * every node connects, claims its node rank, publishes and checks nnodes, nproc-per-node,
 * max-restarts and run id, and waits (cfg->rdzv_timeout_s) until all nodes joined. ids->run_id
 * becomes node 0's. Errors name the culprit: a node that did not join, a node rank taken twice,
 * a node started with different options, a port in use. Call with the watched signals blocked:
 * node 0's server thread inherits the mask. */
ddpc_status ddpc__agent_start(const ddpc_launch_config *cfg, ddpc__job_ids *ids, ddpc__agent **out);
/* Heartbeats (node 0: names nodes silent for cfg->agent_timeout_s) and reports, in *ev, the first
 * failure published for `attempt` anywhere; node 0's store gone is a failure too. Never blocks
 * longer than one store round trip. */
void ddpc__agent_poll(ddpc__agent *a, int attempt, ddpc__agent_event *ev);
/* Publishes a failure of this node for `attempt` (ignored when another came first). DDPC_EPEER
 * when the store is gone. */
ddpc_status ddpc__agent_publish(ddpc__agent *a, int attempt, int exit_code, bool restartable,
                                int node, const char *text);
/* After this node's workers all succeeded: counts it done and waits until every node is (ev
 * QUIET), a failure is published (ev FAILED), or a watched signal arrives (*signo). */
void ddpc__agent_await(ddpc__agent *a, int attempt, const sigset_t *watched, ddpc__agent_event *ev,
                       int *signo);
/* "node R (host NAME, ADDR)". */
const char *ddpc__agent_self(const ddpc__agent *a);
/* Counts this node out; node 0 keeps its store up until every node still there did the same
 * (bounded by the agent timeout). Closes and frees. NULL is a no-op. */
void ddpc__agent_finish(ddpc__agent *a);

/* ---- one attempt of the whole group (attempt.c) ---- */

typedef enum {
    DDPC__ATTEMPT_SUCCEEDED,   /* every worker exited 0 */
    DDPC__ATTEMPT_FAILED,      /* a worker failed; the others were stopped */
    DDPC__ATTEMPT_INTERRUPTED, /* the launcher got SIGINT/SIGTERM/SIGHUP; workers were stopped */
    DDPC__ATTEMPT_REMOTE,      /* another node failed (the agent's event); workers were stopped */
} ddpc__attempt_outcome;

typedef struct {
    ddpc__attempt_outcome outcome;
    int failed_rank;           /* FAILED: the first rank seen failing */
    int wait_status;           /* FAILED: its waitpid status */
    int signo;                 /* INTERRUPTED: the signal the launcher got */
    bool log_failed;           /* a log file could not be written (reported on cfg->err) */
    ddpc__agent_event *remote; /* REMOTE: what the agent reported (the caller's buffer) */
} ddpc__attempt_result;

/* Runs one attempt: spawns every worker (envs[i] for local rank i), lists their groups with
 * `guard` (may be NULL; a dead guard is replaced), forwards output, and watches for exits and for
 * the signals in `watched` (blocked by the caller). With an `agent` (per-node launch; else NULL) it
 * also polls the other nodes at every check, publishes a local failure or interrupt to them at
 * once, and stops on theirs (REMOTE, described in *res->remote, which must then point to a buffer).
 * Reports a local failure and log write errors on cfg->err. Returns an error only when the attempt
 * could not be started or run. */
ddpc_status ddpc__attempt_run(const ddpc_launch_config *cfg, const char *program,
                              char **const *envs, int attempt, const sigset_t *watched,
                              const sigset_t *child_mask, ddpc__guard *guard, ddpc__agent *agent,
                              ddpc__attempt_result *res);

/* ---- torchrun's rendezvous options (options_torchrun.c) ---- */

/* Applies `name` (normalised, "--rdzv-endpoint") with value `v` when it is one of torchrun's
 * rendezvous options (--rdzv-endpoint, --rdzv-backend, --rdzv-id, --nnodes MIN:MAX) and sets
 * *handled; else leaves c alone with *handled false. DDPC_EINVAL naming the option otherwise. */
ddpc_status ddpc__torchrun_option(ddpc_launch_config *c, const char *name, const char *v,
                                  bool *handled);
/* DDPC_EINVAL, one sentence, for torchrun options ddpc cannot honour together: --standalone with
 * another host or rendezvous, a free endpoint port (HOST:0) across hosts. */
ddpc_status ddpc__torchrun_check(const ddpc_launch_config *c);

/* ---- host names (hostname.c) ---- */

/* True when `name` is an IPv4 or IPv6 literal or an RFC 1123 DNS name of at most 253 characters
 * (so never an option: no leading '-'); else false with one sentence in `why` naming it. */
bool ddpc__host_check(const char *name, char *why, size_t cap);
/* `text` as a message may quote it: its first 40 characters, "..." when cut, each unprintable byte
 * as '?' (a hostfile's terminal escapes must not reach the user's screen); returns buf. */
const char *ddpc__host_shown(const char *text, char *buf, size_t cap);

/* ---- mpirun hand-off (mpirun.c) ---- */

/* Counts the distinct hosts of an Open MPI hostfile ("host [slots=N] [max_slots=N]", '#'
 * comments). DDPC_EIO when unreadable; DDPC_EFORMAT naming file:line when a host is not a valid
 * name (ddpc__host_check), an option is not slots/max_slots in [1, 65536], a line is longer than
 * 4095 characters, or no host is named. */
ddpc_status ddpc__hostfile_hosts(const char *path, int *hosts);
/* How many hosts an mpirun job spans: the hostfile's hosts (or --nnodes of them), or --nnodes
 * checked against SLURM_JOB_NODELIST. DDPC_EINVAL when the request cannot go to mpirun
 * (--node-rank > 0, --max-restarts > 0, more nodes than hosts, --nnodes > 1 with no hosts). */
ddpc_status ddpc__mpirun_nodes(const ddpc_launch_config *cfg, const char *const *envp, int *nnodes);
/* The mpirun command line for the job: mpirun -np TOTAL [--hostfile F] --map-by ppr:N:node
 * [--allow-run-as-root] --oversubscribe -x DDPC_BACKEND=mpi ... PROGRAM ARGS. `nnodes` is the
 * number of hosts the job spans. */
ddpc_status ddpc__mpirun_argv(const ddpc_launch_config *cfg, const char *mpirun, int nnodes,
                              bool as_root, int omp_threads, char ***out);
/* Prints the command line and replaces this process with mpirun; returns only on failure. */
ddpc_status ddpc__mpirun_exec(const ddpc_launch_config *cfg, const char *const *envp);

#endif
