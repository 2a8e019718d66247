/* Batches: the training sampler and loader, and the forward pass over a gathered batch.
 * The rng stream gives dropout a fresh mask every step (and every rank). */
#include "train/trainer_impl.h"

ddpc_status ddpc__trainer_forward(ddpc_trainer *t, const ddpc_dataset *d, const int64_t *idx,
                                  int64_t n, int task, bool training, ddpc_model_output *out)
{
    DDPC_TRY(ddpc_dataset_get_batch(d, idx, n, t->x, t->tokens, t->targets));
    ddpc_model_input in = {.n = n, .x = t->x, .tokens = t->tokens, .targets = t->targets,
                           .rng_stream = (uint64_t)t->step, .task = task};
    return ddpc_model_forward(t->model, &in, training, out);
}

ddpc_status ddpc__trainer_forward_batch(ddpc_trainer *t, const ddpc_batch *b, bool training,
                                        uint64_t stream, ddpc_model_output *out)
{
    ddpc_model_input in = {.n = b->n, .x = b->x, .tokens = b->tokens, .targets = b->targets,
                           .rng_stream = stream};
    return ddpc_model_forward(t->model, &in, training, out);
}

ddpc_status ddpc__trainer_build_loader(ddpc_trainer *t)
{
    ddpc_sampler_config sc = ddpc_sampler_config_default();
    sc.kind = DDPC_SAMPLER_DISTRIBUTED;
    sc.rank = t->rank;
    sc.world = t->world;
    sc.seed = t->set.seed;
    sc.shuffle = t->set.shuffle;
    sc.size = ddpc_dataset_size(t->train);
    DDPC_TRY(ddpc_sampler_create(&sc, &t->train_sampler));
    ddpc_loader_config lc = ddpc_loader_config_default();
    lc.batch_size = t->set.batch_size;
    lc.num_workers = t->set.num_workers;
    lc.prefetch_factor = t->set.prefetch_factor;
    lc.drop_last = true;
    const ddpc_dataset *ds[1] = {t->train};
    return ddpc_loader_create(ds, 1, t->train_sampler, &lc, &t->train_loader);
}
