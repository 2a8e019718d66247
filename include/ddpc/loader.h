// SPDX-License-Identifier: MIT
/* ddpc loader: batches of a rank's samples, in the sampler's order, prefetched by background
 * workers into a bounded ring of preallocated batch buffers (torch's DataLoader with
 * num_workers and prefetch_factor, threads instead of processes). Batch k of an epoch holds the
 * sampler's indices [k * batch_size, (k + 1) * batch_size) whichever worker loads it, so the
 * batches are the same with 0, 1 or many workers. A loader is used by one thread at a time. */
#ifndef DDPC_LOADER_H
#define DDPC_LOADER_H

#include <ddpc/data.h>
#include <ddpc/sampler.h>
#include <ddpc/status.h>

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int64_t batch_size;  /* >= 1; 64 */
    int num_workers;     /* 0: load inside ddpc_loader_next in the caller's thread; at most 64 */
    int prefetch_factor; /* batches loaded ahead per worker, >= 1; 2 */
    bool drop_last;      /* drop this rank's last batch when it is partial; false */
    /* Image augmentation (torchvision's RandomHorizontalFlip and RandomCrop(padding=random_shift)),
     * each sample's a function of (augment_seed, epoch, its global index) only: a mirror with
     * probability 1/2, a shift by up to random_shift pixels each way (uncovered pixels take the
     * plane's minimum, the background). Off by default; tokens ignore them. */
    bool hflip;
    int random_shift; /* 0..8 */
    uint64_t augment_seed;
} ddpc_loader_config;

/* batch_size 64, num_workers 0, prefetch_factor 2, drop_last off, no augmentation. */
ddpc_loader_config ddpc_loader_config_default(void);

/* One batch, owned by the loader. Row i is the sampler's global index idx[i]. */
typedef struct {
    int64_t n;     /* rows, <= batch_size (only the last batch may be short) */
    int64_t index; /* batch number within the epoch, from 0 */
    int64_t epoch;
    int source;             /* the dataset every row comes from, or -1 when rows mix datasets */
    const int64_t *idx;     /* (n) sampler (global) indices */
    const float *x;         /* images: (n, c, h, w); tokens: NULL */
    const int32_t *tokens;  /* tokens: (n, T); pairs: decoder input (n, tgt_len); images: NULL */
    const int32_t *targets; /* images: (n) labels; tokens: (n, T) next tokens; pairs: (n, tgt_len);
                               NULL for images with float targets */
    const float *float_targets; /* images with float targets (ddpc_dataset_target_width K > 0):
                                   (n, K); otherwise NULL */
    const int32_t *src_tokens; /* pairs: (n, src_len) source ids; otherwise NULL */
    int64_t src_len, tgt_len;  /* pairs: this batch's widths, its longest rows (padded with 0);
                                  tokens: 0 and T; images: 0 and 0 */
    double wait_s;          /* seconds the caller was blocked in ddpc_loader_next for it */
} ddpc_batch;

typedef struct ddpc_loader ddpc_loader;

/* A loader over `datasets` (num_datasets, borrowed until destroy) concatenated in order, visiting
 * the indices of `sampler` (borrowed until destroy; the loader sets its epoch, so nobody else may
 * while the loader exists). The datasets must share kind and sample shape, and the sampler's
 * sources must match them in number and size; a streaming sampler's batch_size must equal c's.
 * Allocates every batch buffer and starts the workers, which wait for start_epoch. Errors:
 * DDPC_EINVAL naming the mismatch or field, DDPC_ENOMEM, DDPC_EINTERNAL if a thread cannot start.
 */
ddpc_status ddpc_loader_create(const ddpc_dataset *const *datasets, int num_datasets,
                               ddpc_sampler *sampler, const ddpc_loader_config *c,
                               ddpc_loader **out);
/* Stops and joins the workers, even mid-epoch, and frees the buffers; NULL is a no-op. */
void ddpc_loader_destroy(ddpc_loader *l);

/* Begins `epoch` (>= 0): waits for batches being loaded, drops what was prefetched, sets the
 * sampler's epoch and starts loading from batch 0. Allowed at any point, also mid-epoch. */
ddpc_status ddpc_loader_start_epoch(ddpc_loader *l, int64_t epoch);
/* *batch = the next batch of the epoch, or NULL at its end (then again NULL until the next
 * start_epoch). The batch stays valid until the next call of next, start_epoch or destroy on this
 * loader. A dataset error raised while loading this batch is returned here with its message, and
 * again on every later call until start_epoch. DDPC_EINVAL before the first start_epoch. */
ddpc_status ddpc_loader_next(ddpc_loader *l, const ddpc_batch **batch);

/* Batches per epoch. */
int64_t ddpc_loader_len(const ddpc_loader *l);
/* The configured batch size. */
int64_t ddpc_loader_batch_size(const ddpc_loader *l);
/* Seconds the caller was blocked in ddpc_loader_next during the current epoch (sum of wait_s). */
double ddpc_loader_epoch_wait(const ddpc_loader *l);

#ifdef __cplusplus
}
#endif
#endif
