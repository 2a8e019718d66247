/* Placeholder: the shm backend lands in the next commits. */
#include "dist/pg_impl.h"

ddpc_status ddpc__shm_create(const ddpc_dist_env *env, double deadline,
                             const ddpc__pg_backend **ops, void **state)
{
    (void)env;
    (void)deadline;
    *ops = NULL;
    *state = NULL;
    return ddpc_errorf(DDPC_EUNSUPPORTED, "the shm backend is not implemented yet");
}
