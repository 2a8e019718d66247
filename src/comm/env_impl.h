// SPDX-License-Identifier: MIT
/* Private to src/comm: the parsers behind rank discovery (env.c) that read SLURM's compressed
 * host and task lists, and the list of launcher variables rank discovery knows. The parsers read
 * untrusted bytes: they accept the whole string or reject it, and never write past `cap`. */
#ifndef DDPC_COMM_ENV_IMPL_H
#define DDPC_COMM_ENV_IMPL_H

#include <ddpc/comm.h>
#include <ddpc/status.h>

#include <stdbool.h>
#include <stddef.h>

/* Longest host name the host-list parser produces (bytes, without the terminator). */
#define DDPC__HOSTNAME_MAX 255

/* First host of a SLURM host list ("node[01-04,07],gpu7" -> "node01") into out (cap bytes).
 * The whole list is validated: names of [A-Za-z0-9._-], bracket groups of decimal numbers and
 * lo-hi ranges (lo <= hi), zero padding kept from lo. `var` names the variable in errors:
 * DDPC_EINVAL "SLURM_JOB_NODELIST=node[3-1] is not a valid host list: range 3-1 is descending". */
ddpc_status ddpc__slurm_hostlist_first(const char *var, const char *list, char *out, size_t cap);

/* Number of hosts a valid SLURM host list names (saturates at INT_MAX). */
ddpc_status ddpc__slurm_hostlist_count(const char *var, const char *list, int *count);

/* Tasks on node `node` (0-based) of a SLURM tasks-per-node list ("2(x3),1": nodes 0-2 run 2
 * tasks, node 3 runs 1). DDPC_EINVAL naming `var` for a malformed list or a node past its end. */
ddpc_status ddpc__slurm_tasks_on_node(const char *var, const char *spec, int node, int *tasks);

/* Before the mpi backend initialises MPI: DDPC_EINVAL when rank `e` came from an srun step with
 * more than one task that has no MPI plugin (no PMIx server, SLURM_MPI_TYPE unset or "none") and
 * the MPI library is Open MPI (`open_mpi`), which cannot start there; the message names
 * 'srun --mpi=pmix'. DDPC_OK otherwise, including for MPI libraries that use SLURM's PMI-1. */
ddpc_status ddpc__slurm_mpi_check(const char *const *envp, const ddpc_comm_env *e, bool open_mpi);

/* NULL-terminated list of every variable name rank discovery reads, in precedence order. */
const char *const *ddpc__dist_env_var_names(void);

/* This process's environment as a NULL-terminated envp (the only reader of `environ`). */
const char *const *ddpc__env_process(void);

#endif
