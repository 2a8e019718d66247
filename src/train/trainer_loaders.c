// SPDX-License-Identifier: MIT
/* The training loaders: per task a sampler and a loader on the ranks that train it, combined into
 * one stream of steps. Invariant: every rank runs the same number of steps per epoch (partial last
 * batches dropped, the ranks' epochs agreed), so their collectives stay in step. */
#include "train/trainer_impl.h"

#include <stdio.h>

/* The training sampler and loader of task i, on the ranks that train it. */
static ddpc_status build_loader(ddpc_trainer *t, int i)
{
    ddpc__task *k = &t->data.task[i];
    if (k->shard_rank < 0)
        return DDPC_OK; /* task sharding gave it to other ranks */
    int64_t size;
    ddpc_sampler_config sc = ddpc__trainer_sampler_config(t, i, &size);
    if (ddpc_sampler_create(&sc, &k->sampler) != DDPC_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", ddpc_last_error());
        if (t->data.multi)
            return ddpc_errorf(DDPC_EINVAL, "tasks.%d ('%s'), %lld training samples: %s", i,
                               k->name, (long long)size, why);
        return ddpc_errorf(DDPC_EINVAL, "data (%lld training samples): %s", (long long)size, why);
    }
    ddpc_loader_config lc = ddpc_loader_config_default();
    lc.batch_size = k->batch_size *
                    (t->dist.dp_replicas > 0 ? t->dist.dp_replicas : 1); /* dp: every replica's */
    lc.num_workers = t->set.num_workers;
    lc.prefetch_factor = t->set.prefetch_factor;
    /* Every rank runs the same steps, so partial last batches are dropped; but where this rank's
     * share is less than one batch (a tiny data set) the epoch is that partial batch, as torch's
     * DataLoader(drop_last=False) would train it, unless data.drop_last says drop. Under the
     * distributed sampler every rank's share is the same size, so the ranks still agree. */
    int64_t share = ddpc_sampler_len(k->sampler);
    bool partial = !t->data.multi && t->dist.dp_replicas == 0 && !t->data.samp.drop_last &&
                   t->data.samp.kind == DDPC_SAMPLER_DISTRIBUTED && share > 0 &&
                   share < lc.batch_size;
    lc.drop_last = !partial;
    if (partial && t->dist.world > 1)
        ddpc__trainer_add_note(
            t,
            "data: %lld training samples, %lld on each of %d ranks, are fewer than "
            "data.batch_size %lld: each epoch is one step on a partial batch of %lld per "
            "rank (data.drop_last: true refuses instead)\n",
            (long long)size, (long long)share, t->dist.world, (long long)lc.batch_size,
            (long long)share);
    else if (partial)
        ddpc__trainer_add_note(
            t,
            "data: %lld training samples are fewer than data.batch_size %lld: each epoch "
            "is one step on a partial batch of %lld (data.drop_last: true refuses "
            "instead)\n",
            (long long)size, (long long)lc.batch_size, (long long)share);
    if ((t->set.hflip || t->set.random_shift > 0) &&
        ddpc_dataset_kind_of(k->train) != DDPC_DATASET_IMAGES) /* not silently ignored */
        return ddpc_errorf(DDPC_EINVAL, "key '%s' augments images; data.type %s has none",
                           t->set.hflip ? "data.hflip" : "data.random_shift", k->data_type);
    lc.hflip = t->set.hflip;
    lc.random_shift = t->set.random_shift;
    lc.augment_seed = t->set.seed;
    const ddpc_dataset *ds[1] = {k->train};
    DDPC_TRY(ddpc_loader_create(ds, 1, k->sampler, &lc, &k->loader));
    if (ddpc_loader_len(k->loader) == 0 && t->data.multi)
        return ddpc_errorf(DDPC_EINVAL,
                           "tasks.%d ('%s'): batch_size %lld on each of %d ranks/replicas is more "
                           "than its %lld training samples",
                           i, k->name, (long long)k->batch_size,
                           k->shard_world * (t->dist.dp_replicas > 0 ? t->dist.dp_replicas : 1),
                           (long long)ddpc_sampler_len(k->sampler) * k->shard_world);
    return DDPC_OK;
}

/* The ranks' epochs (combined steps) agree: with task sharding each rank combines its own tasks,
 * and `case` gives ranks different shares, so every rank takes the longest epoch (shorter ones
 * restart their loaders, as max_size_cycle does within a rank) or, in min_size mode or with
 * `case`, the shortest. *len is this rank's and becomes the agreed one. */
static ddpc_status agree_epoch(ddpc_trainer *t, int64_t *len)
{
    bool shortest =
        t->data.mode == DDPC_COMBINED_MIN_SIZE || t->data.samp.kind == DDPC_SAMPLER_CASE;
    if (t->dist.world == 1 || (!t->data.sharding && t->data.samp.kind != DDPC_SAMPLER_CASE))
        return DDPC_OK;
    int64_t mine = *len;
    DDPC_TRY(ddpc_pg_all_reduce(t->dist.pg, len, len, 1, DDPC_DTYPE_I64,
                                shortest ? DDPC_REDUCE_MIN : DDPC_REDUCE_MAX));
    t->data.cycle = *len > mine;
    return DDPC_OK;
}

ddpc_status ddpc__trainer_build_loaders(ddpc_trainer *t, int64_t *per_epoch)
{
    ddpc_loader *loaders[DDPC_MODEL_MAX_HEADS];
    const char *names[DDPC_MODEL_MAX_HEADS];
    t->data.n_local = 0;
    for (int i = 0; i < t->data.n_tasks; i++) {
        DDPC_TRY(build_loader(t, i));
        if (!t->data.task[i].loader)
            continue;
        loaders[t->data.n_local] = t->data.task[i].loader;
        names[t->data.n_local] = t->data.task[i].name;
        t->data.local_task[t->data.n_local++] = i;
    }
    DDPC_TRY(
        ddpc_combined_create(loaders, names, t->data.n_local, t->data.mode, &t->data.combined));
    int64_t len = ddpc_combined_len(t->data.combined);
    DDPC_TRY(agree_epoch(t, &len));
    *per_epoch = len / t->set.accum_steps;
    if (*per_epoch > 0)
        return DDPC_OK;
    if (!t->data.multi)
        return ddpc_errorf(
            DDPC_EINVAL,
            "one step takes data.batch_size %lld x optim.grad_accum_steps %lld "
            "samples on each of %d %s, more than the %lld training samples%s",
            (long long)t->set.batch_size, (long long)t->set.accum_steps, ddpc__trainer_dp_degree(t),
            t->dist.dp_replicas > 0 ? "replicas" : "ranks",
            (long long)ddpc_dataset_size(t->data.task[0].train),
            t->data.samp.drop_last ? " (data.drop_last: true drops a partial batch)" : "");
    return ddpc_errorf(DDPC_EINVAL,
                       "an epoch of %lld combined steps (data.combined_mode %s) is shorter than "
                       "optim.grad_accum_steps %lld",
                       (long long)len, ddpc_combined_mode_name(t->data.mode),
                       (long long)t->set.accum_steps);
}
