// SPDX-License-Identifier: MIT
/* One attempt of the worker group: spawn every local worker, forward output, watch for exits and
 * for the launcher's own signals, and stop the group (SIGTERM + SIGCONT, SIGKILL after the grace)
 * at the first failure or signal. Invariant: when ddpc__attempt_run returns, every worker of the
 * attempt has been reaped and its process group killed; nothing outlives the attempt. */
#include "launch/launch_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/timer.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

typedef struct {
    const ddpc_launch_config *cfg;
    ddpc__worker *w; /* (nproc_per_node) */
    int n;
    bool stopping, killed;
    double kill_at; /* ddpc_time_now() after which stopping turns into SIGKILL */
    ddpc__attempt_result *res;
    struct pollfd *pfd; /* (2 * n) scratch for poll */
    int *slot;          /* (2 * n) worker index * 2 + stream of each pfd entry */
    ddpc__agent *agent; /* per-node launch: the other nodes; NULL on one host */
    ddpc__guard *guard; /* replaced when it dies; NULL in unit tests */
    int attempt_no;
    bool published;        /* this node's failure or interrupt went to the other nodes */
    double next_agent_due; /* ddpc_time_now() of the next check of the other nodes */
    double publish_at;     /* a local error exit waits until then before it is published; 0: none */
    int publish_local;     /* the local worker whose failure waits */
} attempt;

/* A worker that exits with an error may only be echoing a failure on another node (its peer was
 * killed, so its collective failed), and it can exit before that node's launcher has seen its own
 * worker die. Such a failure waits this long for another node's to become the attempt's first;
 * a worker killed by a signal is published at once. */
#define ECHO_GRACE_S 1.0

static ddpc_status open_log(const ddpc_launch_config *cfg, int attempt_no, ddpc__worker *w)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/attempt_%d/rank_%d.log", cfg->log_dir, attempt_no, w->rank);
    snprintf(w->log_path, sizeof w->log_path, "%s", path);
    w->log = fopen(path, "w");
    if (!w->log)
        return ddpc_errorf(DDPC_EIO, "cannot open log file '%s': %s", path, strerror(errno));
    setvbuf(w->log, NULL, _IOLBF, 0);
    return DDPC_OK;
}

static ddpc_status setup_worker(const ddpc_launch_config *cfg, int attempt_no, int local,
                                ddpc__worker *w)
{
    int world = cfg->nnodes * cfg->nproc_per_node;
    w->rank = cfg->node_rank * cfg->nproc_per_node + local;
    w->fds[0] = w->fds[1] = -1;
    snprintf(w->prefix, sizeof w->prefix, "[rank %d/%d] ", w->rank, world);
    if (cfg->log_dir[0])
        DDPC_TRY(open_log(cfg, attempt_no, w));
    bool console = !cfg->log_dir[0] || cfg->tee;
    for (int s = 0; s < 2; s++) {
        w->sinks[s].log = w->log;
        w->sinks[s].log_errno = &w->log_errno;
        w->sinks[s].console = console ? (s == 0 ? cfg->out : cfg->err) : NULL;
        w->sinks[s].prefix = cfg->tee ? w->prefix : NULL;
        w->sinks[s].ring = &w->ring;
    }
    return DDPC_OK;
}

static void signal_all(attempt *a, int sig)
{
    for (int i = 0; i < a->n; i++)
        ddpc__worker_signal(&a->w[i], sig);
}

static void begin_stop(attempt *a)
{
    if (a->stopping) {
        return;
    }
    a->stopping = true;
    a->kill_at = ddpc_time_now() + a->cfg->stop_grace_s;
    signal_all(a, SIGTERM);
    signal_all(a, SIGCONT); /* a stopped worker must run to act on SIGTERM */
}

/* Appends printf output to buf (cap bytes, at *at so far); output past cap is cut. */
static void append(char *buf, size_t cap, size_t *at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void append(char *buf, size_t cap, size_t *at, const char *fmt, ...)
{
    if (*at >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *at, cap - *at, fmt, ap);
    va_end(ap);
    *at = n < 0 ? cap : (*at + (size_t)n < cap ? *at + (size_t)n : cap);
}

/* The one message a failure gets: which rank (and, across hosts, which node), how it ended, the
 * last lines it printed. No "ddpc run: " and no final newline: the agent sends it to the other
 * nodes as it is. */
static void failure_text(const attempt *a, int local, char *buf, size_t cap)
{
    const ddpc__worker *w = &a->w[local];
    char how[96];
    size_t at = 0;
    buf[0] = '\0';
    ddpc_launch_describe_wait(w->wait_status, how, sizeof how);
    append(buf, cap, &at, "rank %d (local rank %d, pid %ld)", w->rank, local, (long)w->pid);
    if (a->agent)
        append(buf, cap, &at, " on %s", ddpc__agent_self(a->agent));
    append(buf, cap, &at, " failed with %s on attempt %d; stopped the other %d local worker(s)",
           how, a->attempt_no, a->n - 1);
    if (a->agent)
        append(buf, cap, &at, " and told the other %d node(s)", a->cfg->nnodes - 1);
    append(buf, cap, &at, ".");
    if (a->cfg->log_dir[0])
        append(buf, cap, &at, " Its log: %s/attempt_%d/rank_%d.log.", a->cfg->log_dir,
               a->attempt_no, w->rank);
    if (w->ring.count == 0) {
        append(buf, cap, &at, " It printed nothing.");
        return;
    }
    append(buf, cap, &at, " Its last %d line(s):", w->ring.count);
    for (int i = 0; i < w->ring.count; i++)
        append(buf, cap, &at, "\n    %s%s", w->prefix, ddpc__ring_line(&w->ring, i));
}

static void report_failure(const attempt *a)
{
    char text[DDPC__RING_LINES * (DDPC__RING_LINE_MAX + 48) + 1024];
    failure_text(a, a->res->failed_rank, text, sizeof text);
    fprintf(a->cfg->err, "ddpc run: %s\n", text);
    fflush(a->cfg->err);
}

/* Tells the other nodes at once, so they stop their workers while ours are still stopping. What
 * the failed worker wrote last is taken from its pipes first: the report should show it. */
static void publish_failure(attempt *a, int local)
{
    if (!a->agent || a->published)
        return;
    a->published = true;
    ddpc__worker *w = &a->w[local];
    for (int st = 0; st < 2; st++)
        if (w->fds[st] >= 0)
            (void)ddpc__worker_read(w, st);
    char text[DDPC__RING_LINES * (DDPC__RING_LINE_MAX + 48) + 1024];
    failure_text(a, local, text, sizeof text);
    (void)ddpc__agent_publish(a->agent, a->attempt_no, ddpc_launch_exit_code(w->wait_status), true,
                              a->cfg->node_rank, text);
    ddpc_clear_error(); /* a lost store shows at the next poll, which names node 0 */
}

static void publish_interrupt(attempt *a, int sig)
{
    if (!a->agent || a->published)
        return;
    a->published = true;
    char name[32], text[600];
    snprintf(text, sizeof text, "the launcher of %s got %s and stopped its workers",
             ddpc__agent_self(a->agent), ddpc_launch_signal_name(sig, name, sizeof name));
    (void)ddpc__agent_publish(a->agent, a->attempt_no, 128 + sig, false, a->cfg->node_rank, text);
    ddpc_clear_error();
}

/* Another node failed (or went silent): stop ours, like a local failure, but nothing to publish. */
static void check_agent(attempt *a)
{
    if (!a->agent)
        return;
    /* once per monitor interval: output wakes the loop far more often, and each check is a round
     * trip to node 0's store */
    double now = ddpc_time_now();
    if (now < a->next_agent_due)
        return;
    a->next_agent_due = now + a->cfg->monitor_interval_s;
    ddpc__agent_event *ev = a->res->remote;
    ddpc__agent_poll(a->agent, a->attempt_no, ev);
    if (ev->kind != DDPC__AGENT_FAILED)
        return;
    if (a->publish_at > 0 && ev->node != a->cfg->node_rank) {
        a->publish_at = 0; /* ours echoed this one: it stays the first, ours is not published */
        a->published = true;
    }
    if (a->stopping)
        return;
    if (ev->node == a->cfg->node_rank && a->published)
        return; /* our own failure, read back */
    a->res->outcome = DDPC__ATTEMPT_REMOTE;
    a->published = true; /* nothing of ours to tell: the job already failed elsewhere */
    begin_stop(a);
}

/* Waits up to one monitor interval (less when the SIGKILL deadline is near) for output. */
static ddpc_status pump_output(attempt *a)
{
    struct pollfd *pfd = a->pfd;
    int np = 0;
    for (int i = 0; i < a->n; i++) {
        for (int s = 0; s < 2; s++) {
            if (a->w[i].fds[s] >= 0) {
                pfd[np] = (struct pollfd){.fd = a->w[i].fds[s], .events = POLLIN};
                a->slot[np++] = 2 * i + s;
            }
        }
    }
    double wait_s = a->cfg->monitor_interval_s;
    if (a->stopping && !a->killed && a->kill_at - ddpc_time_now() < wait_s)
        wait_s = a->kill_at - ddpc_time_now();
    int ms = wait_s > 0 ? (int)(wait_s * 1000.0 + 0.5) : 0;
    if (np == 0) {
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        return DDPC_OK;
    }
    if (poll(pfd, (nfds_t)np, ms) < 0 && errno != EINTR)
        return ddpc_errorf(DDPC_EIO, "poll on worker output failed: %s", strerror(errno));
    bool any = false;
    for (int k = 0; k < np; k++) {
        if (pfd[k].revents) {
            DDPC_TRY(ddpc__worker_read(&a->w[a->slot[k] / 2], a->slot[k] % 2));
            any = true;
        }
    }
    if (any) { /* lines reach a piped console as they come, not when a buffer fills */
        fflush(a->cfg->out);
        fflush(a->cfg->err);
    }
    return DDPC_OK;
}

static void check_signals(attempt *a, const sigset_t *watched)
{
    struct timespec zero = {0, 0};
    int sig;
    while ((sig = sigtimedwait(watched, NULL, &zero)) > 0) {
        if (sig == SIGPIPE)
            continue; /* the console went away; writes fail with EPIPE instead */
        if (a->stopping && a->res->outcome == DDPC__ATTEMPT_INTERRUPTED) {
            signal_all(a, SIGKILL); /* a second Ctrl-C does not wait for the grace */
            a->killed = true;
            continue;
        }
        if (!a->stopping) {
            a->res->outcome = DDPC__ATTEMPT_INTERRUPTED;
            a->res->signo = sig;
            publish_interrupt(a, sig);
            begin_stop(a);
        }
    }
}

/* True once every worker has exited. Records the first failure and starts the stop. */
static bool check_exits(attempt *a)
{
    int running = 0;
    for (int i = 0; i < a->n; i++) {
        ddpc__worker *w = &a->w[i];
        if (!ddpc__worker_poll_exit(w)) {
            running++;
            continue;
        }
        if (w->failed && !a->stopping) {
            a->res->outcome = DDPC__ATTEMPT_FAILED;
            a->res->failed_rank = i; /* local index until the report */
            if (a->agent && WIFEXITED(w->wait_status)) {
                a->publish_at = ddpc_time_now() + ECHO_GRACE_S;
                a->publish_local = i;
            } else {
                publish_failure(a, i);
            }
            begin_stop(a);
        }
    }
    return running == 0;
}

/* One message per log file that could not be written (full disk, I/O error); the run goes on,
 * but its exit status will say it failed. */
static void report_log_errors(attempt *a)
{
    for (int i = 0; i < a->n; i++) {
        ddpc__worker *w = &a->w[i];
        if (w->log_errno == 0 || w->log_reported)
            continue;
        w->log_reported = true;
        a->res->log_failed = true;
        fprintf(a->cfg->err,
                "ddpc run: cannot write log file '%s' of rank %d: %s; its output is lost from "
                "here on and the run will exit non-zero.\n",
                w->log_path, w->rank, strerror(w->log_errno));
        fflush(a->cfg->err);
    }
}

static ddpc_status monitor(attempt *a, const sigset_t *watched)
{
    for (;;) {
        DDPC_TRY(pump_output(a));
        DDPC_TRY(ddpc__guard_check(a->guard, a->cfg->err));
        report_log_errors(a);
        check_signals(a, watched);
        /* this node's own exits first: a local failure seen in the same check as another
         * node's is reported as ours, with what this host knows for sure */
        bool all_exited = check_exits(a);
        check_agent(a); /* also while stopping: heartbeats go on */
        if (a->publish_at > 0 && ddpc_time_now() >= a->publish_at) {
            a->publish_at = 0;
            publish_failure(a, a->publish_local);
        }
        if (all_exited && a->publish_at == 0)
            return DDPC_OK;
        if (a->stopping && !a->killed && ddpc_time_now() >= a->kill_at) {
            signal_all(a, SIGKILL);
            a->killed = true;
        }
    }
}

static void report_interrupt(const attempt *a)
{
    char name[32];
    fprintf(a->cfg->err, "ddpc run: got %s; stopped all %d local worker(s).\n",
            ddpc_launch_signal_name(a->res->signo, name, sizeof name), a->n);
    fflush(a->cfg->err);
}

static ddpc_status spawn_all(attempt *a, const char *program, char **const *envs, int attempt_no,
                             const sigset_t *child_mask)
{
    for (int i = 0; i < a->n; i++) {
        DDPC_TRY(setup_worker(a->cfg, attempt_no, i, &a->w[i]));
        DDPC_TRY(ddpc__worker_spawn(&a->w[i], program, a->cfg->argv, envs[i], child_mask));
    }
    return DDPC_OK;
}

ddpc_status ddpc__attempt_run(const ddpc_launch_config *cfg, const char *program,
                              char **const *envs, int attempt_no, const sigset_t *watched,
                              const sigset_t *child_mask, ddpc__guard *guard, ddpc__agent *agent,
                              ddpc__attempt_result *res)
{
    ddpc__agent_event *remote = res->remote;
    memset(res, 0, sizeof *res);
    res->remote = remote;
    res->outcome = DDPC__ATTEMPT_SUCCEEDED;
    res->failed_rank = -1;
    attempt a = {.cfg = cfg,
                 .n = cfg->nproc_per_node,
                 .res = res,
                 .agent = remote ? agent : NULL,
                 .guard = guard,
                 .attempt_no = attempt_no,
                 /* the workers' own start first: the other nodes are asked one interval later */
                 .next_agent_due = ddpc_time_now() + cfg->monitor_interval_s};
    a.w = ddpc_calloc((size_t)a.n, sizeof *a.w);
    a.pfd = ddpc_calloc((size_t)a.n * 2, sizeof *a.pfd);
    a.slot = ddpc_calloc((size_t)a.n * 2, sizeof *a.slot);
    ddpc_status s = DDPC_OK;
    if (!a.w || !a.pfd || !a.slot)
        s = ddpc_errorf(DDPC_ENOMEM, "out of memory for %d workers", a.n);
    for (int i = 0; a.w && i < a.n; i++) {
        a.w[i].fds[0] = a.w[i].fds[1] = -1;
        a.w[i].guard = guard;
    }
    if (s == DDPC_OK) /* a guard that died between attempts is replaced before it is needed */
        s = ddpc__guard_check(guard, cfg->err);
    if (s == DDPC_OK)
        s = spawn_all(&a, program, envs, attempt_no, child_mask);
    if (s == DDPC_OK)
        s = monitor(&a, watched);
    if (s != DDPC_OK)
        signal_all(&a, SIGKILL); /* could not run the attempt: leave nothing behind */
    for (int i = 0; a.w && i < a.n; i++)
        ddpc__worker_finish(&a.w[i]);
    if (a.w)
        report_log_errors(&a); /* closing a log flushes it: a last chance to fail */
    fflush(cfg->out);
    fflush(cfg->err);
    if (s == DDPC_OK && res->outcome == DDPC__ATTEMPT_FAILED) {
        res->wait_status = a.w[res->failed_rank].wait_status;
        report_failure(&a);
        res->failed_rank = a.w[res->failed_rank].rank;
    } else if (s == DDPC_OK && res->outcome == DDPC__ATTEMPT_INTERRUPTED) {
        report_interrupt(&a);
    }
    ddpc_free(a.slot);
    ddpc_free(a.pfd);
    ddpc_free(a.w);
    return s;
}
