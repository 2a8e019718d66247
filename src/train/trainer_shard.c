// SPDX-License-Identifier: MIT
/* Which tasks are trained, and by which ranks: data.task_names_to_use keeps the tasks it names, in
 * its order (head k is the k-th name), and data.task_sharding gives each rank its own tasks by the
 * PI0-RIPT seed's rule (ddpc_task_assign: task i on rank i mod world), with
 * data.min_tasks_per_rank and data.replicate_tasks deciding what happens when there are too few
 * tasks. A task several ranks train is split over them by its sampler. Invariant after
 * shard_tasks: every task has shard_world >= 1 ranks and this rank trains at least one task. */
#include "train/trainer_impl.h"

#include <ddpc/alloc.h>

#include <stdio.h>
#include <string.h>

ddpc_status ddpc__trainer_select_tasks(ddpc_trainer *t)
{
    ddpc_config *c = t->cfg;
    const char *key = "data.task_names_to_use";
    if (!ddpc_config_has(c, key))
        return DDPC_OK;
    size_t n = ddpc_config_seq_len(c, key);
    if (!t->data.multi)
        return ddpc_errorf(DDPC_EINVAL,
                           "key '%s' selects among the tasks of a 'tasks:' list; "
                           "this config has none",
                           key);
    if (n == 0 || n > (size_t)t->data.n_tasks)
        return ddpc_errorf(DDPC_EINVAL, "key '%s' must be a list of 1 to %d task names, got %zu",
                           key, t->data.n_tasks, n);
    ddpc__task kept[DDPC_MODEL_MAX_HEADS];
    bool taken[DDPC_MODEL_MAX_HEADS] = {false};
    for (size_t j = 0; j < n; j++) {
        char elem[64];
        const char *name;
        snprintf(elem, sizeof elem, "%s.%zu", key, j);
        DDPC_TRY(ddpc_config_string(c, elem, NULL, &name));
        int found = -1;
        for (int i = 0; i < t->data.n_tasks && found < 0; i++)
            if (name && strcmp(t->data.task[i].name, name) == 0)
                found = i;
        if (found < 0) {
            char names[DDPC_MODEL_MAX_HEADS * (DDPC__TASK_NAME_MAX + 2)] = "";
            size_t len = 0;
            for (int i = 0; i < t->data.n_tasks; i++)
                len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", i ? ", " : "",
                                        t->data.task[i].name);
            return ddpc_errorf(DDPC_EINVAL, "key '%s': no task is named '%s' (the tasks are %s)",
                               elem, name ? name : "", names);
        }
        if (taken[found])
            return ddpc_errorf(DDPC_EINVAL, "key '%s': task '%s' is named twice", key, name);
        taken[found] = true;
        kept[j] = t->data.task[found];
    }
    memcpy(t->data.task, kept, n * sizeof *kept);
    t->data.n_tasks_declared = t->data.n_tasks;
    t->data.n_tasks = (int)n;
    return DDPC_OK;
}

ddpc_status ddpc__trainer_shard_tasks(ddpc_trainer *t)
{
    ddpc_config *c = t->cfg;
    int64_t m;
    DDPC_TRY(ddpc_config_bool(c, "data.task_sharding", false, &t->data.sharding));
    DDPC_TRY(ddpc_config_int(c, "data.min_tasks_per_rank", 1, 1, DDPC_MODEL_MAX_HEADS, &m));
    DDPC_TRY(ddpc_config_bool(c, "data.replicate_tasks", false, &t->data.replicate_tasks));
    t->data.min_tasks_per_rank = (int)m;
    for (int i = 0; i < t->data.n_tasks; i++) {
        t->data.task[i].shard_world = t->dist.world;
        t->data.task[i].shard_rank = t->dist.rank;
    }
    if (!t->data.sharding) {
        if (t->data.min_tasks_per_rank != 1 ||
            t->data.replicate_tasks) /* the defaults are harmless */
            return ddpc_errorf(DDPC_EINVAL, "keys 'data.min_tasks_per_rank' and "
                                            "'data.replicate_tasks' need data.task_sharding: true");
        return DDPC_OK;
    }
    if (!t->data.multi)
        return ddpc_errorf(DDPC_EINVAL, "data.task_sharding gives whole tasks of a 'tasks:' list "
                                        "to ranks; this config has none");
    /* `ddpc plan` at N ranks checks the assignment for N ranks. */
    int world = t->dist.plan_world > 0 ? t->dist.plan_world : t->dist.world;
    t->data.holds = ddpc_malloc((size_t)world * (size_t)t->data.n_tasks);
    if (!t->data.holds)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for the task assignment");
    if (ddpc_task_assign(t->data.n_tasks, world, t->data.min_tasks_per_rank,
                         t->data.replicate_tasks, t->data.holds) != DDPC_OK) {
        char why[512], kept[96] = "";
        const char *msg = ddpc_last_error(), *prefix = "task sharding: ";
        if (strncmp(msg, prefix, strlen(prefix)) == 0)
            msg += strlen(prefix);
        snprintf(why, sizeof why, "%s", msg);
        if (ddpc_config_has(c, "data.task_names_to_use"))
            snprintf(kept, sizeof kept, " (data.task_names_to_use keeps %d of %d)", t->data.n_tasks,
                     t->data.n_tasks_declared);
        return ddpc_errorf(DDPC_EINVAL,
                           "data.task_sharding%s: %s (keys data.min_tasks_per_rank, "
                           "data.replicate_tasks)",
                           kept, why);
    }
    for (int i = 0; i < t->data.n_tasks; i++) {
        ddpc__task *k = &t->data.task[i];
        k->shard_world = 0;
        k->shard_rank = -1;
        for (int r = 0; r < world; r++)
            if (t->data.holds[(size_t)r * (size_t)t->data.n_tasks + (size_t)i]) {
                if (r == t->dist.rank)
                    k->shard_rank = k->shard_world;
                k->shard_world++;
            }
    }
    return DDPC_OK;
}

void ddpc__trainer_log_task_sharding(ddpc_trainer *t)
{
    if (!t->log || !t->data.sharding)
        return;
    fprintf(t->log,
            "task sharding over %d rank%s (task i on rank i mod %d, at least %d per rank%s):\n",
            t->dist.world, t->dist.world == 1 ? "" : "s", t->dist.world, t->data.min_tasks_per_rank,
            t->data.replicate_tasks ? ", shared tasks split among their ranks" : "");
    for (int r = 0; r < t->dist.world; r++) {
        fprintf(t->log, "  rank %d:", r);
        int count = 0;
        for (int i = 0; i < t->data.n_tasks; i++) {
            if (!t->data.holds[(size_t)r * (size_t)t->data.n_tasks + (size_t)i])
                continue;
            fprintf(t->log, "%s %s", count++ ? "," : "", t->data.task[i].name);
            if (t->data.task[i].shard_world > 1)
                fprintf(t->log, " (shared by %d ranks)", t->data.task[i].shard_world);
        }
        fprintf(t->log, "\n");
    }
}
