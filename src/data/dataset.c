// SPDX-License-Identifier: MIT
/* Dataset accessors and batch copies, common to every dataset kind.
 * Invariant: these only read the dataset, so any number of threads may call them at once;
 * get_batch validates every index before writing any output. */
#include "data/dataset_impl.h"

#include <ddpc/alloc.h>

#include <string.h>

ddpc_dataset *ddpc__dataset_alloc(ddpc_dataset_kind kind)
{
    ddpc_dataset *d = ddpc_calloc(1, sizeof *d);
    if (d)
        d->kind = kind;
    return d;
}

ddpc_status ddpc__dataset_set_windows(ddpc_dataset *d, int64_t block_size, const char *what)
{
    if (block_size < 1)
        return ddpc_errorf(DDPC_EINVAL, "%s: block_size must be >= 1, got %lld", what,
                           (long long)block_size);
    if (d->n_tokens < block_size + 1)
        return ddpc_errorf(DDPC_EINVAL,
                           "%s: %lld tokens, fewer than block_size+1 = %lld needed for one sample",
                           what, (long long)d->n_tokens, (long long)block_size + 1);
    d->shape[0] = block_size;
    d->shape[1] = 1;
    d->shape[2] = 1;
    d->n = (d->n_tokens - 1) / block_size;
    return DDPC_OK;
}

void ddpc_dataset_destroy(ddpc_dataset *d)
{
    if (!d)
        return;
    ddpc_free(d->pix_u8);
    ddpc_free(d->pix_f32);
    ddpc_free(d->chan_lut);
    for (int64_t k = 0; d->class_names && k < d->classes; k++)
        ddpc_free(d->class_names[k]);
    ddpc_free(d->class_names);
    ddpc_free(d->labels);
    ddpc_free(d->ftargets);
    ddpc_free(d->tok_u8);
    ddpc_free(d->tok_i32);
    ddpc__token_shards_free(d);
    ddpc_free(d->src_ids);
    ddpc_free(d->tgt_ids);
    ddpc_free(d->src_off);
    ddpc_free(d->tgt_off);
    if (d->cb && d->cb->destroy)
        d->cb->destroy(d->cb->ctx);
    ddpc_free(d->cb);
    ddpc_free(d);
}

ddpc_dataset_kind ddpc_dataset_kind_of(const ddpc_dataset *d)
{
    return d->kind;
}

int64_t ddpc_dataset_size(const ddpc_dataset *d)
{
    return d->n;
}

int64_t ddpc_dataset_num_classes(const ddpc_dataset *d)
{
    return d->classes;
}

void ddpc_dataset_sample_shape(const ddpc_dataset *d, int64_t shape[3])
{
    shape[0] = d->shape[0];
    shape[1] = d->shape[1];
    shape[2] = d->shape[2];
}

const uint8_t *ddpc_dataset_labels(const ddpc_dataset *d)
{
    return d->kind == DDPC_DATASET_IMAGES ? d->labels : NULL; /* NULL from callbacks */
}

/* x (per) = pixels of sample i, normalised. */
static void copy_image(const ddpc_dataset *d, int64_t i, int64_t per, float *x)
{
    if (d->pix_f32) {
        memcpy(x, d->pix_f32 + i * per, (size_t)per * sizeof *x);
        return;
    }
    const uint8_t *p = d->pix_u8 + i * per;
    if (d->chan_lut) {
        int64_t plane = d->shape[1] * d->shape[2];
        for (int64_t j = 0; j < per; j++)
            x[j] = d->chan_lut[j / plane][p[j]];
        return;
    }
    for (int64_t j = 0; j < per; j++)
        x[j] = d->lut[p[j]];
}

/* out (len) = stream[start, start+len) as int32. */
static void copy_tokens(const ddpc_dataset *d, int64_t start, int64_t len, int32_t *out)
{
    if (d->tok_i32) {
        memcpy(out, d->tok_i32 + start, (size_t)len * sizeof *out);
        return;
    }
    if (d->shards) {
        ddpc__token_shards_copy(d, start, len, out);
        return;
    }
    const uint8_t *p = d->tok_u8 + start;
    for (int64_t j = 0; j < len; j++)
        out[j] = p[j];
}

ddpc_status ddpc_dataset_get_batch(const ddpc_dataset *d, const int64_t *idx, int64_t n, float *x,
                                   int32_t *tokens, int32_t *targets)
{
    if (!d || n < 0 || (n > 0 && !idx))
        return ddpc_errorf(DDPC_EINVAL, "dataset get_batch: invalid arguments (dataset %p, n %lld)",
                           (const void *)d, (long long)n);
    if (d->kind == DDPC_DATASET_PAIRS)
        return ddpc_errorf(DDPC_EINVAL,
                           "dataset get_batch: a translation dataset's samples are read with "
                           "ddpc_dataset_get_pairs");
    for (int64_t b = 0; b < n; b++)
        if (idx[b] < 0 || idx[b] >= d->n)
            return ddpc_errorf(DDPC_EINVAL,
                               "dataset get_batch: index %lld (batch row %lld) is outside [0, %lld)",
                               (long long)idx[b], (long long)b, (long long)d->n);
    if (d->cb)
        return ddpc__dataset_callbacks_get(d, idx, n, x, tokens, targets);
    int64_t per = d->shape[0] * d->shape[1] * d->shape[2];
    for (int64_t b = 0; b < n; b++) {
        int64_t i = idx[b];
        if (d->kind == DDPC_DATASET_IMAGES) {
            if (x)
                copy_image(d->base ? d->base : d, i, per, x + b * per);
            if (targets && d->labels)
                targets[b] = d->labels[i];
        } else {
            int64_t t = d->shape[0];
            if (tokens)
                copy_tokens(d, i * t, t, tokens + b * t);
            if (targets)
                copy_tokens(d, i * t + 1, t, targets + b * t);
        }
    }
    return DDPC_OK;
}

int64_t ddpc_dataset_target_width(const ddpc_dataset *d)
{
    return d->target_width;
}

ddpc_status ddpc_dataset_get_float_targets(const ddpc_dataset *d, const int64_t *idx, int64_t n,
                                           float *y)
{
    if (!d || !d->ftargets || n < 0 || (n > 0 && (!idx || !y)))
        return ddpc_errorf(DDPC_EINVAL, "dataset get_float_targets: the dataset has no float "
                                        "targets or the arguments are invalid");
    for (int64_t b = 0; b < n; b++)
        if (idx[b] < 0 || idx[b] >= d->n)
            return ddpc_errorf(DDPC_EINVAL,
                               "dataset get_float_targets: index %lld (batch row %lld) is outside "
                               "[0, %lld)", (long long)idx[b], (long long)b, (long long)d->n);
    size_t k = (size_t)d->target_width;
    for (int64_t b = 0; b < n; b++)
        memcpy(y + (size_t)b * k, d->ftargets + (size_t)idx[b] * k, k * sizeof *y);
    return DDPC_OK;
}
