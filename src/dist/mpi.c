/* Temporary stand-in for the mpi backend until h-env's src/dist/mpi.c lands: every build reports
 * the backend as not built in. */
#include "dist/pg_impl.h"

ddpc_status ddpc__mpi_create(const ddpc_dist_env *env, double deadline,
                             const ddpc__pg_backend **ops, void **state)
{
    (void)env;
    (void)deadline;
    *ops = NULL;
    *state = NULL;
    return ddpc_errorf(DDPC_EUNSUPPORTED, "the mpi backend is not built into this ddpc yet");
}
