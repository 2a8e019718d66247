// SPDX-License-Identifier: MIT
/* The environment as rank discovery sees it: the library's one lookup in an envp array (the
 * launcher uses it too), the SLURM allocation's host count, the list of launcher variables it
 * knows (for `ddpc env`), and the process environment. This file holds the only reference to
 * `environ` in the library. */
#include <ddpc/comm.h>

#include "comm/env_impl.h"

#include <string.h>

extern char **environ;

static const char *const var_names[] = {
    /* torchrun / ddpc run */
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
    "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
    "TORCHELASTIC_RUN_ID", "TORCHELASTIC_USE_AGENT_STORE",
    /* Open MPI (mpirun) */
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_MCA_orte_num_nodes", "OMPI_MCA_ess_base_jobid",
    "PMIX_NAMESPACE",
    /* MPICH / Intel MPI / Cray PMI */
    "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "PMI_LOCAL_RANK",
    "PMI_LOCAL_SIZE", "PMI_JOBID",
    /* SLURM (srun step) */
    "SLURM_PROCID", "SLURM_STEP_ID", "SLURM_STEPID", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS",
    "SLURM_LOCALID", "SLURM_STEP_NODEID", "SLURM_NODEID", "SLURM_STEP_NUM_NODES", "SLURM_NNODES",
    "SLURM_JOB_NUM_NODES", "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE",
    "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST", "SLURM_JOB_ID", "SLURM_JOBID",
    "SLURM_MPI_TYPE",
    /* compute threads per rank (ddpc run sets it for its workers) */
    "OMP_NUM_THREADS",
    /* ddpc */
    "DDPC_BACKEND", "DDPC_COLLECTIVE_TIMEOUT", "DDPC_LAUNCHER",
    /* not DDPC_STORE_TOKEN: `ddpc env` prints these, and the token is a secret */
    "DDPC_STORE_TOKEN_FILE", "DDPC_STORE_BIND", NULL};

const char *const *ddpc__dist_env_var_names(void)
{
    return var_names;
}

const char *ddpc_comm_env_lookup(const char *const *envp, const char *key)
{
    if (!envp)
        return NULL;
    size_t n = strlen(key);
    for (; *envp; envp++) {
        if (strncmp(*envp, key, n) == 0 && (*envp)[n] == '=')
            return *envp + n + 1;
    }
    return NULL;
}

ddpc_status ddpc_comm_env_slurm_hosts(const char *const *envp, int *hosts)
{
    const char *list = ddpc_comm_env_lookup(envp, "SLURM_JOB_NODELIST");
    *hosts = 0;
    return list ? ddpc__slurm_hostlist_count("SLURM_JOB_NODELIST", list, hosts) : DDPC_OK;
}

const char *const *ddpc__env_process(void)
{
    return (const char *const *)environ;
}
