// SPDX-License-Identifier: MIT
/* Datasets from a program's callbacks (ddpc/dataset_ops.h): the one kind whose samples ddpc does
 * not hold. Invariant: the callbacks are only called with indices get_batch has checked and with
 * buffers of the caller's, laid out as ddpc_dataset_get_batch's. */
#include "data/dataset_impl.h"

#include <ddpc/alloc.h>

ddpc_status ddpc_dataset_from_callbacks(ddpc_dataset **out, const ddpc_dataset_callbacks *cb)
{
    *out = NULL;
    if (!cb)
        return ddpc_errorf(DDPC_EINVAL, "dataset from callbacks: the callbacks are NULL");
    if (cb->kind != DDPC_DATASET_IMAGES && cb->kind != DDPC_DATASET_TOKENS)
        return ddpc_errorf(DDPC_EINVAL, "dataset from callbacks: kind %d is not images or tokens",
                           (int)cb->kind);
    if (cb->size < 1)
        return ddpc_errorf(DDPC_EINVAL, "dataset from callbacks: size %lld is not positive",
                           (long long)cb->size);
    for (int i = 0; i < 3; i++)
        if (cb->shape[i] < 1 || (cb->kind == DDPC_DATASET_TOKENS && i > 0 && cb->shape[i] != 1))
            return ddpc_errorf(DDPC_EINVAL, "dataset from callbacks: shape[%d] = %lld (%s)", i,
                               (long long)cb->shape[i],
                               cb->kind == DDPC_DATASET_TOKENS ? "tokens are (T, 1, 1)"
                                                               : "each must be >= 1");
    if (cb->num_classes < 2)
        return ddpc_errorf(DDPC_EINVAL, "dataset from callbacks: num_classes %lld is below 2",
                           (long long)cb->num_classes);
    if (!cb->get_sample && !cb->get_batch)
        return ddpc_errorf(DDPC_EINVAL, "dataset from callbacks: neither get_sample nor "
                                        "get_batch is set");
    ddpc_dataset *d = ddpc__dataset_alloc(cb->kind);
    if (d)
        d->cb = ddpc_malloc(sizeof *d->cb);
    if (!d || !d->cb) {
        ddpc_free(d);
        return ddpc_errorf(DDPC_ENOMEM, "dataset from callbacks: out of memory");
    }
    *d->cb = *cb;
    d->n = cb->size;
    d->classes = cb->num_classes;
    for (int i = 0; i < 3; i++)
        d->shape[i] = cb->shape[i];
    *out = d;
    return DDPC_OK;
}

ddpc_status ddpc__dataset_callbacks_get(const ddpc_dataset *d, const int64_t *idx, int64_t n,
                                        float *x, int32_t *tokens, int32_t *targets)
{
    const ddpc_dataset_callbacks *cb = d->cb;
    if (cb->get_batch)
        return cb->get_batch(cb->ctx, idx, n, x, tokens, targets);
    bool images = d->kind == DDPC_DATASET_IMAGES;
    int64_t per_x = images ? d->shape[0] * d->shape[1] * d->shape[2] : 0;
    int64_t per_t = images ? 0 : d->shape[0];
    int64_t per_y = images ? 1 : d->shape[0];
    for (int64_t b = 0; b < n; b++)
        DDPC_TRY(cb->get_sample(cb->ctx, idx[b], x && images ? x + b * per_x : NULL,
                                tokens && !images ? tokens + b * per_t : NULL,
                                targets ? targets + b * per_y : NULL));
    return DDPC_OK;
}
