// SPDX-License-Identifier: MIT
/* Task sharding: which ranks train which tasks (the PI0-RIPT seed's rule, task t on rank
 * t mod world, with a floor of tasks per rank met by refusing or by sharing tasks). Invariant on
 * success: every rank holds at least min_per_rank distinct tasks and every task has a holder. */
#include <ddpc/sampler.h>

#include <string.h>

/* Tasks rank r holds. */
static int count_held(const unsigned char *row, int n)
{
    int k = 0;
    for (int t = 0; t < n; t++)
        k += row[t];
    return k;
}

ddpc_status ddpc_task_assign(int num_tasks, int world, int min_per_rank, bool replicate,
                             unsigned char *holds)
{
    if (num_tasks < 1 || world < 1 || min_per_rank < 1 || !holds)
        return ddpc_errorf(DDPC_EINVAL,
                           "task sharding: needs tasks (%d), ranks (%d) and min_tasks_per_rank "
                           "(%d) all >= 1",
                           num_tasks, world, min_per_rank);
    int64_t need = (int64_t)world * min_per_rank;
    if (!replicate && num_tasks < need)
        return ddpc_errorf(DDPC_EINVAL,
                           "task sharding: %d task%s cannot give each of %d rank%s %d task%s of "
                           "its own: that needs %lld tasks (%d rank%s x min_tasks_per_rank %d); "
                           "use more tasks or fewer ranks, lower min_tasks_per_rank, or replicate "
                           "tasks so that ranks share them",
                           num_tasks, num_tasks == 1 ? "" : "s", world, world == 1 ? "" : "s",
                           min_per_rank, min_per_rank == 1 ? "" : "s", (long long)need, world,
                           world == 1 ? "" : "s", min_per_rank);
    if (num_tasks < min_per_rank)
        return ddpc_errorf(DDPC_EINVAL,
                           "task sharding: %d task%s cannot give any rank min_tasks_per_rank %d "
                           "distinct tasks, even shared",
                           num_tasks, num_tasks == 1 ? "" : "s", min_per_rank);
    memset(holds, 0, (size_t)world * (size_t)num_tasks);
    for (int t = 0; t < num_tasks; t++)
        holds[(size_t)(t % world) * (size_t)num_tasks + (size_t)t] = 1;
    for (int r = 0; r < world; r++) {
        unsigned char *row = holds + (size_t)r * (size_t)num_tasks;
        while (count_held(row, num_tasks) < min_per_rank) {
            int best = -1, best_holders = 0;
            for (int t = 0; t < num_tasks; t++) {
                if (row[t])
                    continue;
                int h = 0;
                for (int q = 0; q < world; q++)
                    h += holds[(size_t)q * (size_t)num_tasks + (size_t)t];
                if (best < 0 || h < best_holders) {
                    best = t;
                    best_holders = h;
                }
            }
            DDPC_ASSERT(best >= 0); /* num_tasks >= min_per_rank leaves a task to add */
            row[best] = 1;
        }
    }
    return DDPC_OK;
}
