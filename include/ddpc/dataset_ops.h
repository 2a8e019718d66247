// SPDX-License-Identifier: MIT
/* The dataset seam: a dataset whose samples come from a program's own C callbacks, accepted by
 * every sampler, the loader and its workers and the combined loader like a built-in one, and a
 * registry of data types so a config's `data.type: NAME` reaches the program's own factory.
 * Invariant: ddpc never writes through ctx and calls the callbacks only with indices in
 * [0, size) and buffers sized from the shape; see docs/extending.md. */
#ifndef DDPC_DATASET_OPS_H
#define DDPC_DATASET_OPS_H

#include <stdint.h>

#include <ddpc/config.h>
#include <ddpc/data.h>
#include <ddpc/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a callback dataset is. The callbacks are called from the loader's worker threads, several
 * at once (data.num_workers), for different batches: they must be safe to call concurrently
 * (read-only over ctx, or locking inside). An error they return (with ddpc_errorf, naming the
 * sample) fails the batch, and the training step that wanted it, with that message. */
typedef struct {
    /* DDPC_DATASET_IMAGES: each sample is `shape` (c, h, w) fp32 values and one class label in
     * [0, num_classes); DDPC_DATASET_TOKENS: each sample is shape[0] int32 tokens and as many
     * next-token targets, in [0, num_classes) (the vocabulary), shape (T, 1, 1). */
    ddpc_dataset_kind kind;
    int64_t size;        /* samples, >= 1 */
    int64_t shape[3];    /* (c, h, w), or (T, 1, 1) for tokens; each >= 1 */
    int64_t num_classes; /* classes (>= 2), or the vocabulary */
    /* Fills sample i: x (c*h*w floats) and *targets (one label) for images; tokens (T) and
     * targets (T) for tokens. A pointer the caller does not want is NULL. Required unless
     * get_batch is set. */
    ddpc_status (*get_sample)(void *ctx, int64_t i, float *x, int32_t *tokens, int32_t *targets);
    /* Optional: fills n samples idx[0..n) at once, laid out as ddpc_dataset_get_batch's outputs
     * (x (n, c, h, w), targets (n); or tokens and targets (n, T)); for a source that reads
     * faster in batches. NULL: get_sample per index. */
    ddpc_status (*get_batch)(void *ctx, const int64_t *idx, int64_t n, float *x, int32_t *tokens,
                             int32_t *targets);
    /* Optional: called once by ddpc_dataset_destroy, to free ctx. NULL: ctx is the caller's. */
    void (*destroy)(void *ctx);
    void *ctx;
} ddpc_dataset_callbacks;

/* A dataset over `cb` (copied; cb->ctx borrowed, or owned when cb->destroy is set). DDPC_EINVAL
 * naming the field for a kind other than images or tokens, a size, shape or class count below
 * its minimum, or neither get_sample nor get_batch; DDPC_ENOMEM. On failure cb->destroy is not
 * called: ctx stays the caller's. ddpc_dataset_labels gives NULL for it, so label_map views of
 * it are refused. */
ddpc_status ddpc_dataset_from_callbacks(ddpc_dataset **out, const ddpc_dataset_callbacks *cb);

/* ---- data types for the trainer (`data.type: NAME`) ---- */

/* A data type's splits. train and test are required; valid is optional (NULL: validation runs on
 * test). The trainer takes ownership of every non-NULL one, on success and on failure. */
typedef struct {
    ddpc_dataset *train, *test, *valid;
} ddpc_data_splits;

/* Builds a data type's splits: reads its keys under `prefix` ("data", or "tasks.<i>.data" in a
 * multi-task config) with the ddpc_config getters (a key nobody reads is an error), and makes the
 * datasets, deterministically from `seed` (the config's seed) where they are random, the same on
 * every rank. `ctx` is the pointer given to ddpc_data_register. */
typedef ddpc_status (*ddpc_data_factory)(void *ctx, ddpc_config *cfg, const char *prefix,
                                         uint64_t seed, ddpc_data_splits *out);

/* Registers `name` (1 to 31 characters of [a-z0-9_]) as a data type for the trainer; ctx is
 * borrowed for the process's life. DDPC_EINVAL for a bad or taken name, a NULL factory, or beyond
 * 32 types; a name the trainer has built in (fmnist, npy, ...) is refused when a config asks for
 * data.type. Thread safe; register before creating trainers. */
ddpc_status ddpc_data_register(const char *name, ddpc_data_factory factory, void *ctx);
/* The factory registered as `name` (and its ctx in *ctx), or NULL. Thread safe. */
ddpc_data_factory ddpc_data_lookup(const char *name, void **ctx);
/* Writes the names of at most `cap` registered data types into names (borrowed for the process's
 * life); returns how many it wrote. Thread safe. */
size_t ddpc_data_type_names(const char **names, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
