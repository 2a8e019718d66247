// SPDX-License-Identifier: MIT
/* How many kernel threads each rank runs. A count the user set (num_threads, else OMP_NUM_THREADS,
 * which `ddpc run` and torchrun set for their workers) is left alone; otherwise the usable CPUs
 * are split among the ranks on this host as `ddpc run` splits them, so that ranks a platform,
 * srun or mpirun started do not each take every core (2 ranks on 2 cores: 23.5 s instead of
 * 0.9 s). Decided once the process group knows the ranks on this host; said in a start-up line. */
#include "train/trainer_impl.h"

#include <ddpc/kernels.h>
#include <ddpc/sysinfo.h>

#include <stdio.h>
#include <string.h>

/* What told this rank how many ranks share its host. */
static const char *local_source(const ddpc_trainer *t, const ddpc_comm_env *env)
{
    if (env->local_world_from[0])
        return env->local_world_from;
    switch (ddpc_pg_backend(t->dist.pg)) {
    case DDPC_BACKEND_GLOO:
        return "counted through the store";
    case DDPC_BACKEND_SHM:
        return "the shm backend's one host";
    default:
        return "assumed: no launcher variable gives it";
    }
}

void ddpc__trainer_split_threads(ddpc_trainer *t, const ddpc_comm_env *env)
{
    if (t->dist.world <= 1)
        return; /* a single process keeps every core, or the count it was given */
    int cpus = ddpc_sysinfo_cpus_usable(), local = ddpc_pg_local_world_size(t->dist.pg);
    if (t->set.threads > 0 || env->omp_num_threads[0]) {
        int n = ddpc_kernels_threads();
        char why[64];
        if (t->set.threads > 0)
            snprintf(why, sizeof why, "num_threads");
        else
            snprintf(why, sizeof why, "OMP_NUM_THREADS=%s", env->omp_num_threads);
        ddpc__trainer_add_note(
            t, "threads: %d per rank (%s, left as set; %d rank%s on this host, %d core%s)%s\n", n,
            why, local, local == 1 ? "" : "s", cpus, cpus == 1 ? "" : "s",
            (long long)n * local > cpus ? ": more threads than cores, which slows every rank" : "");
        return;
    }
    int n = ddpc_sysinfo_threads_per_rank(cpus, local);
    ddpc_kernels_set_threads(n);
    ddpc__trainer_add_note(t, "threads: %d per rank (%d core%s / %d rank%s on this host, %s)\n", n,
                           cpus, cpus == 1 ? "" : "s", local, local == 1 ? "" : "s",
                           local_source(t, env));
}
