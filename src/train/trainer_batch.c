/* Gathers a batch from a dataset into the trainer's buffers and runs the model forward.
 * The rng stream gives dropout a fresh mask every step. */
#include "train/trainer_impl.h"

ddpc_status ddpc__trainer_forward(ddpc_trainer *t, const ddpc_dataset *d, const int64_t *idx,
                                  int64_t n, bool training, ddpc_model_output *out)
{
    DDPC_TRY(ddpc_dataset_get_batch(d, idx, n, t->x, t->tokens, t->targets));
    ddpc_model_input in = {.n = n, .x = t->x, .tokens = t->tokens, .targets = t->targets,
                           .rng_stream = (uint64_t)t->step};
    return ddpc_model_forward(t->model, &in, training, out);
}
