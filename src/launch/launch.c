// SPDX-License-Identifier: MIT
/* ddpc_launch_run: the job as a sequence of attempts. It resolves the program, fixes the job's
 * identities (run id, reserved master port, OMP_NUM_THREADS) once, blocks the signals it watches,
 * and runs attempts until one succeeds, the launcher is interrupted, or restarts run out.
 * Invariant: the signal mask and the reserved port are restored and released on every return. */
#include "launch/launch_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/fs.h>
#include <ddpc/sysinfo.h>

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static ddpc_status check_config(const ddpc_launch_config *cfg)
{
    if (cfg->argc < 1 || !cfg->argv || !cfg->argv[0])
        return ddpc_errorf(DDPC_EINVAL, "no PROGRAM to launch");
    if (cfg->nproc_per_node < 1 || cfg->nnodes < 1 || cfg->node_rank < 0 ||
        cfg->node_rank >= cfg->nnodes)
        return ddpc_errorf(DDPC_EINVAL, "bad job shape: %d worker(s) per node, node %d of %d",
                           cfg->nproc_per_node, cfg->node_rank, cfg->nnodes);
    if (!(cfg->monitor_interval_s > 0) || !(cfg->stop_grace_s >= 0) || cfg->max_restarts < 0)
        return ddpc_errorf(DDPC_EINVAL,
                           "monitor interval %g s, stop grace %g s and max restarts "
                           "%d must be positive",
                           cfg->monitor_interval_s, cfg->stop_grace_s, cfg->max_restarts);
    if (!cfg->out || !cfg->err)
        return ddpc_errorf(DDPC_EINVAL, "the launch config has no console streams");
    return DDPC_OK;
}

static ddpc_status make_attempt_dir(const ddpc_launch_config *cfg, int attempt_no)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/attempt_%d", cfg->log_dir, attempt_no);
    return ddpc_mkdirs(path);
}

static void free_envs(char ***envs, int n)
{
    for (int i = 0; envs && i < n; i++)
        ddpc__strv_free(envs[i]);
    ddpc_free(envs);
}

static ddpc_status build_envs(const ddpc_launch_config *cfg, const char *const *base,
                              const ddpc__job_ids *ids, char ****out)
{
    int n = cfg->nproc_per_node;
    char ***envs = ddpc_calloc((size_t)n, sizeof *envs);
    if (!envs)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for %d worker environments", n);
    for (int i = 0; i < n; i++) {
        ddpc_status s = ddpc__worker_env(cfg, base, ids, i, &envs[i]);
        if (s != DDPC_OK) {
            free_envs(envs, n);
            return s;
        }
    }
    *out = envs;
    return DDPC_OK;
}

/* Across hosts, this node's success is the job's only once every node's workers succeeded; a
 * failure elsewhere turns it into that failure. Returns the outcome to act on. */
static ddpc__attempt_outcome settle_success(const ddpc_launch_config *cfg, ddpc__agent *agent,
                                            int attempt_no, const sigset_t *watched,
                                            ddpc__attempt_result *r)
{
    if (!agent)
        return DDPC__ATTEMPT_SUCCEEDED;
    int sig = 0;
    ddpc__agent_await(agent, attempt_no, watched, r->remote, &sig);
    if (sig) {
        char name[32], text[600];
        snprintf(text, sizeof text, "the launcher of %s got %s after its workers succeeded",
                 ddpc__agent_self(agent), ddpc_launch_signal_name(sig, name, sizeof name));
        (void)ddpc__agent_publish(agent, attempt_no, 128 + sig, false, cfg->node_rank, text);
        ddpc_clear_error();
        r->signo = sig;
        return DDPC__ATTEMPT_INTERRUPTED;
    }
    return r->remote->kind == DDPC__AGENT_FAILED ? DDPC__ATTEMPT_REMOTE : DDPC__ATTEMPT_SUCCEEDED;
}

/* The report of a failure on another node, and the exit code it gives this one. */
static int report_remote(const ddpc_launch_config *cfg, const ddpc__agent *agent,
                         const ddpc__agent_event *ev)
{
    fprintf(cfg->err, "ddpc run: stopped the %d local worker(s) of %s: %s\n", cfg->nproc_per_node,
            ddpc__agent_self(agent), ev->text);
    fflush(cfg->err);
    return ev->exit_code;
}

/* A local failure can be the echo of one on another node (a worker whose peer was killed fails
 * its collective): when the store holds another node's failure as the attempt's first, say so,
 * so every host names the same first cause. */
static void report_first_elsewhere(const ddpc_launch_config *cfg, ddpc__agent *agent,
                                   int attempt_no, ddpc__agent_event *ev)
{
    ddpc__agent_poll(agent, attempt_no, ev);
    if (ev->kind != DDPC__AGENT_FAILED || ev->node == cfg->node_rank || ev->node < 0)
        return;
    fprintf(cfg->err, "ddpc run: the job's first failure was on another node: %s\n", ev->text);
    fflush(cfg->err);
}

/* The attempts themselves; `remote` receives what another node reported. */
static ddpc_status run_attempt_loop(const ddpc_launch_config *cfg, const char *program,
                                    const char *const *envp, ddpc__job_ids *ids,
                                    const sigset_t *watched, const sigset_t *child_mask,
                                    ddpc__guard *guard, ddpc__agent *agent,
                                    ddpc__agent_event *remote, int *exit_code)
{
    bool log_failed = false;
    for (int attempt_no = 0;; attempt_no++) {
        ids->restart_count = attempt_no;
        char ***envs = NULL;
        if (cfg->log_dir[0])
            DDPC_TRY(make_attempt_dir(cfg, attempt_no));
        DDPC_TRY(build_envs(cfg, envp, ids, &envs));
        ddpc__attempt_result r = {.remote = remote};
        memset(remote, 0, sizeof *remote);
        ddpc_status s = ddpc__attempt_run(cfg, program, envs, attempt_no, watched, child_mask,
                                          guard, agent, &r);
        free_envs(envs, cfg->nproc_per_node);
        /* Every worker of the attempt is gone: take the segment a rank that died during the shm
         * rendezvous could not unlink (each attempt names its own, so none is ever reused). */
        ddpc__job_shm_remove(ids, attempt_no);
        DDPC_TRY(s);
        log_failed = log_failed || r.log_failed;
        if (r.outcome == DDPC__ATTEMPT_SUCCEEDED)
            r.outcome = settle_success(cfg, agent, attempt_no, watched, &r);
        if (r.outcome == DDPC__ATTEMPT_SUCCEEDED) {
            *exit_code = log_failed ? 1 : 0;
            if (log_failed)
                fprintf(cfg->err, "ddpc run: every worker succeeded, but log files could not be "
                                  "written; exiting with 1.\n");
            return DDPC_OK;
        }
        if (r.outcome == DDPC__ATTEMPT_INTERRUPTED) {
            *exit_code = 128 + r.signo;
            return DDPC_OK;
        }
        if (r.outcome == DDPC__ATTEMPT_FAILED && agent)
            report_first_elsewhere(cfg, agent, attempt_no, remote);
        bool remote_failed = r.outcome == DDPC__ATTEMPT_REMOTE;
        *exit_code = remote_failed ? report_remote(cfg, agent, remote)
                                   : ddpc_launch_exit_code(r.wait_status);
        if (remote_failed && !remote->restartable) {
            fprintf(
                cfg->err,
                "ddpc run: not restarting: only failed workers are restarted; exiting with %d.\n",
                *exit_code);
            return DDPC_OK;
        }
        if (attempt_no >= cfg->max_restarts) {
            fprintf(cfg->err, "ddpc run: no restarts left (--max-restarts %d); exiting with %d.\n",
                    cfg->max_restarts, *exit_code);
            return DDPC_OK;
        }
        fprintf(cfg->err, "ddpc run: restarting all workers%s (restart %d of %d).\n",
                agent ? " on every node" : "", attempt_no + 1, cfg->max_restarts);
        fflush(cfg->err);
    }
}

/* Runs attempts until success, interruption, an error, or no restarts left. */
static ddpc_status run_attempts(const ddpc_launch_config *cfg, const char *program,
                                const char *const *envp, ddpc__job_ids *ids,
                                const sigset_t *watched, const sigset_t *child_mask,
                                ddpc__guard *guard, ddpc__agent *agent, int *exit_code)
{
    /* what another node reported: 16 KiB of text, so not on the stack */
    ddpc__agent_event *remote = ddpc_calloc(1, sizeof *remote);
    if (!remote)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for a failure report");
    ddpc_status s = run_attempt_loop(cfg, program, envp, ids, watched, child_mask, guard, agent,
                                     remote, exit_code);
    ddpc_free(remote);
    if (s != DDPC_OK && agent) {
        /* this launcher cannot go on (fork, pipes, log files): the other nodes stop now, told
         * why, rather than after the agent timeout */
        char why[1024], text[1400];
        snprintf(why, sizeof why, "%s", ddpc_last_error());
        snprintf(text, sizeof text, "the launcher of %s failed: %s", ddpc__agent_self(agent), why);
        (void)ddpc__agent_publish(agent, ids->restart_count, 1, false, cfg->node_rank, text);
        ddpc_errorf(s, "%s", why);
    }
    return s;
}

/* The job's store token and bind address. One host: the one given, else a fresh one (the
 * workers get it in their environment). Several: every node needs the same one before any
 * connects: the one given on each, else node 0 makes one and writes it to its token file, which
 * the others are given (and wait for) in DDPC_STORE_TOKEN_FILE (docs/launcher.md); only launchers
 * meeting on loopback may go without. */
static ddpc_status store_secret(const ddpc_launch_config *cfg, const char *const *envp,
                                ddpc__job_ids *ids, ddpc__token_file *tf)
{
    const char *bind = ddpc_comm_env_lookup(envp, "DDPC_STORE_BIND");
    if (bind && strlen(bind) >= sizeof ids->store_bind)
        return ddpc_errorf(DDPC_EINVAL, "DDPC_STORE_BIND=%.40s... is longer than %zu bytes", bind,
                           sizeof ids->store_bind - 1);
    snprintf(ids->store_bind, sizeof ids->store_bind, "%s", bind ? bind : "");
    const char *file = ddpc_comm_env_lookup(envp, "DDPC_STORE_TOKEN_FILE");
    if (ddpc_launch_per_node(cfg) && cfg->node_rank > 0 && file &&
        !ddpc_comm_env_lookup(envp, "DDPC_STORE_TOKEN"))
        DDPC_TRY(ddpc__token_file_await(cfg, file));
    bool found;
    DDPC_TRY(ddpc_store_token_load(envp, ids->store_token, sizeof ids->store_token, &found));
    if (found)
        return DDPC_OK;
    if (!ddpc_launch_per_node(cfg))
        return ddpc_store_token_generate(ids->store_token, sizeof ids->store_token);
    if (ddpc_store_addr_is_loopback(cfg->master_addr) &&
        (!ids->store_bind[0] || ddpc_store_addr_is_loopback(ids->store_bind)))
        return DDPC_OK;
    if (cfg->node_rank == 0) {
        DDPC_TRY(ddpc_store_token_generate(ids->store_token, sizeof ids->store_token));
        return ddpc__token_file_write(cfg, ids->master_port, ids->store_token, tf);
    }
    return ddpc_errorf(DDPC_EINVAL,
                       "--nnodes %d needs the job's secret on every host, so that only its own "
                       "launchers and workers can join node 0's store at %s: set "
                       "DDPC_STORE_TOKEN_FILE to the file node 0's launcher wrote (store.token in "
                       "its --log-dir, else ddpc-store-token-%d in its working directory; it says "
                       "where), or DDPC_STORE_TOKEN to the token node 0 was given or wrote",
                       cfg->nnodes, cfg->master_addr, cfg->master_port);
}

/* Run id, master port and OMP_NUM_THREADS, fixed for the whole job. *port_fd gets the socket
 * that keeps a chosen port reserved (-1 when the port was given). */
static ddpc_status job_ids(const ddpc_launch_config *cfg, const char *const *envp,
                           ddpc__job_ids *ids, int *port_fd, ddpc__token_file *tf)
{
    memset(ids, 0, sizeof *ids);
    *port_fd = -1;
    if (cfg->run_id[0])
        snprintf(ids->run_id, sizeof ids->run_id, "%s", cfg->run_id);
    else
        ddpc__run_id_make(ids->run_id, sizeof ids->run_id);
    ids->master_port = cfg->master_port;
    if (ids->master_port == 0)
        DDPC_TRY(ddpc__port_reserve(cfg->master_addr, port_fd, &ids->master_port));
    DDPC_TRY(store_secret(cfg, envp, ids, tf));
    int cpus = ddpc_sysinfo_cpus_usable(); /* a taskset or cpuset leaves fewer than are online */
    ids->omp_threads = ddpc__omp_threads(envp, cfg->nproc_per_node, cpus);
    if (ids->omp_threads > 0) {
        fprintf(cfg->err,
                "ddpc run: OMP_NUM_THREADS is unset; setting it to %d for each of the "
                "%d workers (%d usable CPUs). Set it yourself to tune.\n",
                ids->omp_threads, cfg->nproc_per_node, cpus);
        fflush(cfg->err);
    }
    return DDPC_OK;
}

/* The job once the config and program are known: ids, signal mask, attempts. */
static ddpc_status run_job(const ddpc_launch_config *cfg, const char *program,
                           const char *const *envp, int *exit_code)
{
    if (cfg->log_dir[0])
        DDPC_TRY(ddpc_mkdirs(cfg->log_dir));
    ddpc__job_ids ids;
    int port_fd = -1;
    ddpc__token_file tf = {.written = false}; /* node 0's, when it made the job's token */
    DDPC_TRY(job_ids(cfg, envp, &ids, &port_fd, &tf));
    sigset_t watched, old_mask;
    sigemptyset(&watched);
    sigaddset(&watched, SIGINT);
    sigaddset(&watched, SIGTERM);
    sigaddset(&watched, SIGHUP);
    sigaddset(&watched, SIGPIPE);
    sigprocmask(SIG_BLOCK, &watched, &old_mask);
    /* Across hosts the agents meet first (node 0's store thread inherits the blocked mask), and
     * the run id is node 0's from then on, so the guard gets the one the workers will use. */
    ddpc__agent *agent = NULL;
    ddpc_status s = DDPC_OK;
    if (ddpc_launch_per_node(cfg))
        s = ddpc__agent_start(cfg, &ids, &agent);
    ddpc__guard guard;
    if (s == DDPC_OK)
        s = ddpc__guard_start(&guard, &ids, cfg->max_restarts, cfg->nproc_per_node);
    if (s == DDPC_OK) {
        s = run_attempts(cfg, program, envp, &ids, &watched, &old_mask, &guard, agent, exit_code);
        ddpc__guard_stop(&guard);
    }
    if (agent) {
        /* counting out may touch the store: keep the message of a failure that came before */
        char why[1024];
        snprintf(why, sizeof why, "%s", s != DDPC_OK ? ddpc_last_error() : "");
        ddpc__agent_finish(agent);
        if (s != DDPC_OK)
            ddpc_errorf(s, "%s", why);
    }
    /* A signal that came after the last check still counts: it decides the exit code. */
    struct timespec zero = {0, 0};
    int sig;
    while ((sig = sigtimedwait(&watched, NULL, &zero)) > 0)
        if (sig != SIGPIPE && s == DDPC_OK && *exit_code == 0)
            *exit_code = 128 + sig;
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
    if (port_fd >= 0)
        close(port_fd);
    /* a secret: gone with the job (every node read it before it could join, and none rejoins) */
    ddpc__token_file_remove(&tf);
    return s;
}

ddpc_status ddpc_launch_run(const ddpc_launch_config *cfg, const char *const *envp, int *exit_code)
{
    *exit_code = 1;
    DDPC_TRY(check_config(cfg));
    /* execve needs argv[argc] == NULL, which a caller's config need not promise. */
    char **args = ddpc_calloc((size_t)cfg->argc + 1, sizeof *args);
    if (!args)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for %d program arguments", cfg->argc);
    memcpy(args, cfg->argv, (size_t)cfg->argc * sizeof *args);
    ddpc_launch_config job = *cfg;
    job.argv = args;
    ddpc_status s;
    if (ddpc_launch_uses_mpirun(&job)) {
        s = ddpc__mpirun_exec(&job, envp);
    } else {
        char program[4096];
        s = ddpc__find_program(job.argv[0], envp, program, sizeof program);
        if (s == DDPC_OK)
            s = run_job(&job, program, envp, exit_code);
    }
    ddpc_free(args);
    return s;
}

/* Why `envp` belongs to a worker of some launcher, or NULL. Rank discovery (comm) decides; when
 * it rejects a malformed environment, the launcher markers alone still count. */
static const char *nested_reason(const char *const *envp, char *buf, size_t cap)
{
    ddpc_comm_env e;
    ddpc_status s = ddpc_comm_env_parse(envp, &e);
    ddpc_clear_error();
    bool torchrun_marks = ddpc_comm_env_lookup(envp, "TORCHELASTIC_RUN_ID") ||
                          ddpc_comm_env_lookup(envp, "DDPC_LAUNCHER");
    if (s != DDPC_OK)
        return torchrun_marks ? "TORCHELASTIC_RUN_ID or DDPC_LAUNCHER is set" : NULL;
    if (e.nested_launcher) {
        snprintf(buf, cap, "%s is set",
                 ddpc_comm_env_lookup(envp, "TORCHELASTIC_RUN_ID") ? "TORCHELASTIC_RUN_ID"
                                                                   : "DDPC_LAUNCHER");
        return buf;
    }
    bool mpi_like = e.source == DDPC_COMM_SOURCE_OPENMPI || e.source == DDPC_COMM_SOURCE_PMI ||
                    e.source == DDPC_COMM_SOURCE_SLURM;
    if (mpi_like && e.world_size > 1) {
        snprintf(buf, cap, "it is rank %d of %d started by %s", e.rank, e.world_size,
                 e.source == DDPC_COMM_SOURCE_OPENMPI ? "mpirun"
                 : e.source == DDPC_COMM_SOURCE_PMI   ? "an MPI launcher (PMI)"
                                                      : "srun");
        return buf;
    }
    return NULL;
}

/* RANK, LOCAL_RANK and WORLD_SIZE all set without a launcher's marker: a platform (Kubernetes,
 * a cloud job service) started this process as one worker of the job and injected its place. */
static bool platform_worker(const char *const *envp)
{
    return ddpc_comm_env_lookup(envp, "RANK") && ddpc_comm_env_lookup(envp, "LOCAL_RANK") &&
           ddpc_comm_env_lookup(envp, "WORLD_SIZE");
}

ddpc_status ddpc_launch_check_nested(const char *const *envp)
{
    char buf[160];
    const char *why = nested_reason(envp, buf, sizeof buf);
    if (!why && platform_worker(envp))
        return ddpc_errorf(
            DDPC_EINVAL,
            "refusing to start: RANK=%s, LOCAL_RANK=%s and WORLD_SIZE=%s are set, so whatever "
            "started this process (a platform that starts every worker and injects RANK, "
            "LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT) already made it one worker of "
            "the job; 'ddpc run' would start a second level of workers and multiply the world "
            "size; run the program directly instead (e.g. 'ddpc train CONFIG'), which reads "
            "these variables and joins the job",
            ddpc_comm_env_lookup(envp, "RANK"), ddpc_comm_env_lookup(envp, "LOCAL_RANK"),
            ddpc_comm_env_lookup(envp, "WORLD_SIZE"));
    if (!why)
        return DDPC_OK;
    return ddpc_errorf(DDPC_EINVAL,
                       "refusing to start inside a worker of another launcher (%s): every worker "
                       "would start its own group and the ranks would never form one job; run "
                       "PROGRAM directly under the outer launcher, or start 'ddpc run' from a "
                       "plain shell",
                       why);
}
