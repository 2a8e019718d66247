// SPDX-License-Identifier: MIT
/* Whether Open MPI can start inside this srun step. Open MPI's ranks meet through a PMI server
 * that srun's MPI plugin runs (PMIx with `srun --mpi=pmix`); a step started without one (SLURM's
 * default MpiDefault=none) makes every rank's MPI_Init abort with a page of Open MPI text. This
 * check runs before MPI_Init and says, in one sentence, what to change instead. */
#include "comm/env_impl.h"

#include <string.h>

/* A PMIx server is what Debian's Open MPI (and any Open MPI >= 2 built without SLURM's own PMI
 * library) needs; its clients find it through these variables. */
static bool pmix_present(const char *const *envp)
{
    return ddpc_comm_env_lookup(envp, "PMIX_NAMESPACE") || ddpc_comm_env_lookup(envp, "PMIX_RANK");
}

ddpc_status ddpc__slurm_mpi_check(const char *const *envp, const ddpc_comm_env *e, bool open_mpi)
{
    /* only a rank that SLURM's own step variables placed: under pmi2 the PMI family wins, and
     * Open MPI's mpirun inside an allocation sets OMPI_COMM_WORLD_* */
    if (!open_mpi || e->source != DDPC_COMM_SOURCE_SLURM || e->world_size < 2 || pmix_present(envp))
        return DDPC_OK;
    const char *type = ddpc_comm_env_lookup(envp, "SLURM_MPI_TYPE");
    if (type && type[0] && strcmp(type, "none") != 0)
        return DDPC_OK; /* a plugin ddpc does not know (cray_shasta, ...): let MPI try */
    return ddpc_errorf(DDPC_EINVAL,
                       "this srun step started its %d tasks without an MPI plugin "
                       "(SLURM_MPI_TYPE=%s), so Open MPI cannot connect them and MPI_Init would "
                       "abort; start it with 'srun --mpi=pmix' ('srun --mpi=list' shows what "
                       "this SLURM offers), or set DDPC_BACKEND=shm when all tasks share one "
                       "node",
                       e->world_size, type ? type : "unset");
}
