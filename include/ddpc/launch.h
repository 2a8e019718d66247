// SPDX-License-Identifier: MIT
/* ddpc launch: the process supervisor behind `ddpc run`, modelled on torchrun. It starts
 * nproc_per_node workers with torchrun's environment, forwards their output line by line, stops the
 * whole group when one fails, restarts it up to max_restarts times, and hands several-machine or
 * MPI jobs to mpirun. Invariant: when ddpc_launch_run returns, no worker process group is left. */
#ifndef DDPC_LAUNCH_H
#define DDPC_LAUNCH_H

#include <ddpc/comm.h>
#include <ddpc/status.h>

#include <stdbool.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int nproc_per_node;          /* workers on this host, >= 1 ("auto" resolves to online CPUs) */
    int nnodes, node_rank;       /* hosts in the job and this host's index; 1 and 0 on one host */
    ddpc_backend backend;        /* AUTO: DDPC_BACKEND is left as the caller's environment has it */
    int max_restarts;            /* whole-group restarts after a failure, >= 0 */
    double monitor_interval_s;   /* longest wait between checks of workers and signals, > 0 */
    double stop_grace_s;         /* SIGTERM to SIGKILL when stopping the group, >= 0 */
    double collective_timeout_s; /* > 0: exported to workers as DDPC_COLLECTIVE_TIMEOUT */
    bool tee;                    /* copy worker lines to the console, prefixed "[rank r/w] " */
    bool help;                   /* -h/--help was given; nothing else was checked */
    char log_dir[1024];          /* "": no log files; else DIR/attempt_K/rank_R.log */
    char master_addr[256];       /* exported as MASTER_ADDR */
    int master_port;             /* 0: a free port, reserved for the job's lifetime */
    bool master_addr_set;        /* --master-addr was given: with nnodes > 1, a per-node launch */
    bool rdzv_endpoint_set;      /* torchrun's --rdzv-endpoint gave master_addr and master_port */
    bool standalone;             /* torchrun's --standalone: this host alone, a free local port */
    double rdzv_timeout_s;       /* per-node launch: how long the agents wait for each other */
    double agent_timeout_s;      /* per-node launch: silence after which an agent counts as lost */
    char run_id[128];            /* "": a unique id; [A-Za-z0-9._-] only */
    char hostfile[1024];         /* "": none; else the job goes to mpirun with this hostfile */
    int argc;                    /* PROGRAM and its arguments: argv[0 .. argc-1] */
    char *const *argv;           /* borrowed from the caller's argument vector */
    FILE *out;                   /* worker stdout lines go here (console); stdout by default */
    FILE *err;                   /* worker stderr lines and the launcher's own messages */
} ddpc_launch_config;

/* One worker per host, no restarts, 0.1 s monitor interval, 3 s stop grace, master 127.0.0.1 with
 * a free port, 60 s rendezvous and 30 s agent timeouts, console stdout/stderr. */
ddpc_launch_config ddpc_launch_config_default(void);

/* Parses `ddpc run` options (argv excludes "run"): `--opt VALUE` or `--opt=VALUE`, '_' or '-' in
 * names, then `--` or the first non-option starts PROGRAM. cfg->argv borrows from argv. A bad
 * option is DDPC_EINVAL naming it and its value; a missing PROGRAM is an error unless --help. */
ddpc_status ddpc_launch_parse_args(int argc, char *const *argv, ddpc_launch_config *cfg);

/* DDPC_EINVAL with one sentence explaining the nested-launch trap when `envp` (NULL-terminated
 * "KEY=VALUE" strings) says this process is itself a worker of a launcher, as rank discovery
 * (ddpc_comm_env_parse) reads it: TORCHELASTIC_RUN_ID or DDPC_LAUNCHER set, or one rank of an
 * mpirun, PMI or srun world larger than one. DDPC_OK otherwise. */
ddpc_status ddpc_launch_check_nested(const char *const *envp);

/* True when the job is handed to mpirun: a hostfile, backend mpi, or nnodes > 1 that is not a
 * per-node launch. */
bool ddpc_launch_uses_mpirun(const ddpc_launch_config *cfg);
/* True for a per-node launch: nnodes > 1 with --master-addr, no hostfile, backend not mpi; then
 * one `ddpc run` per host, the node-0 one serving the agents' key-value store at the master. */
bool ddpc_launch_per_node(const ddpc_launch_config *cfg);

/* Runs the job with `envp` as the base of every worker's environment. Returns DDPC_OK once the
 * job ran, with *exit_code 0 when every worker exited 0, the failing worker's status (exit code,
 * or 128 + signal) when restarts ran out, or 128 + signal when the launcher itself got SIGINT,
 * SIGTERM or SIGHUP. Messages (failure reports, restarts) go to cfg->err. An mpirun job replaces
 * this process (execve) and returns only on failure. Errors: DDPC_EINVAL (program or mpirun not
 * found, bad hostfile), DDPC_EIO (fork, pipe, log files). Blocks SIGINT, SIGTERM, SIGHUP and
 * SIGPIPE while it runs, so call it from a single-threaded process. */
ddpc_status ddpc_launch_run(const ddpc_launch_config *cfg, const char *const *envp, int *exit_code);

/* "exit code 3", "signal SIGKILL" for a waitpid status; returns buf. */
const char *ddpc_launch_describe_wait(int wait_status, char *buf, size_t cap);
/* The shell's convention: the exit code, or 128 + the signal number. */
int ddpc_launch_exit_code(int wait_status);
/* "SIGKILL" for 9, "SIG42" for numbers without a name. Returns buf. */
const char *ddpc_launch_signal_name(int signo, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
