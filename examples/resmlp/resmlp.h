// SPDX-License-Identifier: MIT
/* A residual MLP and a dataset from arrays, defined outside ddpc through its public seams
 * (ddpc/model_ops.h, ddpc/dataset_ops.h) and trained by ddpc's own trainer. */
#ifndef RESMLP_H
#define RESMLP_H

#include <ddpc/dataset_ops.h>
#include <ddpc/model_ops.h>

/* The model's own config: model.hidden, the residual block's inner width. The input width D and
 * the classes come from the data, through ddpc_model_config's in_* and num_classes. */
typedef struct {
    int64_t hidden;
} resmlp_config;

/* "resmlp": y = x + fc2(relu(fc1(x))), logits = head(y); torch's twin is in resmlp_torch.py. */
extern const ddpc_model_ops resmlp_ops;

/* "arrays": a synthetic dataset held in arrays; data.size, data.features, data.classes. */
ddpc_status arrays_factory(void *ctx, ddpc_config *cfg, const char *prefix, uint64_t seed,
                           ddpc_data_splits *out);
/* The arrays dataset of n samples of d features and `classes` labels, from `seed`; `split` 0 is
 * the train split, 1 the test split (other samples, the same rule). */
ddpc_status arrays_create(ddpc_dataset **out, int64_t n, int64_t d, int64_t classes, uint64_t seed,
                          int split);

#endif
