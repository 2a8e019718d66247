// SPDX-License-Identifier: MIT
/* The guard: a process forked from the launcher before its first worker, so that a launcher that
 * dies without cleaning up (SIGKILL, OOM killer) still takes its workers with it. Each worker dies
 * with the launcher by PR_SET_PDEATHSIG (worker.c), but what a worker started itself does not; the
 * guard holds the read end of a pipe only the launcher can write, learns every worker's process
 * group through it, and at end of file without the launcher's "done" record SIGKILLs the groups
 * still listed and removes the job's shm segments. The launcher keeps its own copy of the list, so
 * a guard that dies (killed, OOM) is replaced by one told the same groups. Invariant: a group
 * leaves the list only after the launcher SIGKILLed it, so nothing listed can be a reused pid of
 * an unrelated process. */
#include "launch/launch_impl.h"

#include <ddpc/alloc.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { GUARD_DONE = 0, GUARD_MAX_GROUPS = 4096 };

void ddpc__job_shm_remove(const ddpc__job_ids *ids, int restart_count)
{
    ddpc_comm_env e = ddpc_comm_env_single();
    snprintf(e.run_id, sizeof e.run_id, "%s", ids->run_id);
    e.master_port = ids->master_port;
    e.restart_count = restart_count;
    (void)ddpc_pg_shm_remove(&e); /* best effort: a segment a live process owns stays */
    ddpc_clear_error();
}

/* The guard's whole life: records are int32 (+pgid: listed, -pgid: gone, 0: the launcher is
 * done). Runs in a forked copy of the single-threaded launcher, so plain calls are safe. */
static void guard_main(int fd, const ddpc__job_ids *ids, int max_restarts)
{
    pid_t groups[GUARD_MAX_GROUPS];
    int n = 0;
    for (;;) {
        int32_t rec;
        ssize_t got = read(fd, &rec, sizeof rec);
        if (got < 0 && errno == EINTR)
            continue;
        if (got == (ssize_t)sizeof rec && rec == GUARD_DONE)
            _exit(0);
        if (got != (ssize_t)sizeof rec)
            break; /* end of file: the launcher is gone */
        if (rec > 0 && n < GUARD_MAX_GROUPS) {
            groups[n++] = (pid_t)rec;
        } else if (rec < 0) {
            for (int i = 0; i < n; i++)
                if (groups[i] == (pid_t)-rec)
                    groups[i--] = groups[--n];
        }
    }
    for (int i = 0; i < n; i++)
        kill(-groups[i], SIGKILL);
    /* give the kernel a moment to tear the ranks down, then take what their rendezvous left */
    nanosleep(&(struct timespec){0, 200 * 1000 * 1000}, NULL);
    for (int r = 0; r <= max_restarts; r++)
        ddpc__job_shm_remove(ids, r);
    _exit(0);
}

/* Forks one guard process on a fresh pipe; g->pid and g->fd are set on success. */
static ddpc_status fork_guard(ddpc__guard *g)
{
    int p[2];
    if (pipe(p) != 0)
        return ddpc_errorf(DDPC_EIO, "cannot create the guard's pipe: %s", strerror(errno));
    fcntl(p[1], F_SETFD, FD_CLOEXEC); /* workers must not hold the launcher's end */
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(p[0]);
        close(p[1]);
        return ddpc_errorf(DDPC_EIO, "cannot start the guard process: fork failed: %s",
                           strerror(e));
    }
    if (pid == 0) {
        close(p[1]);
        prctl(PR_SET_NAME, "ddpc-guard"); /* so ps and pgrep tell it from the workers */
        guard_main(p[0], &g->ids, g->max_restarts);
    }
    close(p[0]);
    g->pid = pid;
    g->fd = p[1];
    g->starts++;
    return DDPC_OK;
}

ddpc_status ddpc__guard_start(ddpc__guard *g, const ddpc__job_ids *ids, int max_restarts,
                              int max_groups)
{
    memset(g, 0, sizeof *g);
    g->fd = -1;
    g->ids = *ids;
    g->max_restarts = max_restarts;
    g->cap = max_groups < GUARD_MAX_GROUPS ? max_groups : GUARD_MAX_GROUPS;
    g->groups = ddpc_calloc((size_t)(g->cap > 0 ? g->cap : 1), sizeof *g->groups);
    if (!g->groups)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for the guard's list of %d groups",
                           max_groups);
    ddpc_status s = fork_guard(g);
    if (s != DDPC_OK) {
        ddpc_free(g->groups);
        g->groups = NULL;
    }
    return s;
}

static void send_record(const ddpc__guard *g, int32_t rec)
{
    if (!g || g->fd < 0)
        return;
    while (write(g->fd, &rec, sizeof rec) < 0 && errno == EINTR) {
    }
}

void ddpc__guard_add(ddpc__guard *g, pid_t pgid)
{
    if (!g)
        return;
    if (g->n < g->cap)
        g->groups[g->n++] = pgid;
    send_record(g, (int32_t)pgid);
}

void ddpc__guard_remove(ddpc__guard *g, pid_t pgid)
{
    if (!g)
        return;
    for (int i = 0; i < g->n; i++)
        if (g->groups[i] == pgid)
            g->groups[i--] = g->groups[--g->n];
    send_record(g, -(int32_t)pgid);
}

ddpc_status ddpc__guard_check(ddpc__guard *g, FILE *err)
{
    if (!g || g->pid <= 0)
        return DDPC_OK;
    int st = 0;
    pid_t got = waitpid(g->pid, &st, WNOHANG);
    if (got == 0 || (got < 0 && errno == EINTR))
        return DDPC_OK;
    /* Dead (or, ECHILD, reaped behind our back): either way nobody watches the groups. Until a
     * new guard runs, a SIGKILL of the launcher would leave what the workers started. */
    char how[96];
    pid_t old = g->pid;
    if (got == old)
        ddpc_launch_describe_wait(st, how, sizeof how);
    else
        snprintf(how, sizeof how, "an unknown status");
    close(g->fd);
    g->fd = -1;
    g->pid = 0;
    ddpc_status s = fork_guard(g);
    if (s != DDPC_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", ddpc_last_error());
        return ddpc_errorf(s,
                           "the guard process (pid %ld) ended with %s and no new one could be "
                           "started (%s); stopping the job, since a launcher killed now would "
                           "leave the workers' own processes running",
                           (long)old, how, why);
    }
    for (int i = 0; i < g->n; i++)
        send_record(g, (int32_t)g->groups[i]);
    fprintf(err,
            "ddpc run: the guard process (pid %ld) ended with %s; started guard %d (pid %ld), "
            "which watches the %d running worker group(s).\n",
            (long)old, how, g->starts, (long)g->pid, g->n);
    fflush(err);
    return DDPC_OK;
}

void ddpc__guard_stop(ddpc__guard *g)
{
    if (g->fd >= 0) {
        send_record(g, GUARD_DONE);
        close(g->fd);
        g->fd = -1;
    }
    if (g->pid > 0) {
        int st;
        while (waitpid(g->pid, &st, 0) < 0 && errno == EINTR) {
        }
        g->pid = 0;
    }
    ddpc_free(g->groups);
    g->groups = NULL;
    g->n = g->cap = 0;
}
