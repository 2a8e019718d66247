// SPDX-License-Identifier: MIT
/* The loader struct shared by loader.c (threads, ring, epochs) and loader_fill.c (gathering one
 * batch). Invariant: slot s holds batch number seq with seq % num_slots == s; a worker may fill
 * batch b only once b < released + num_slots, i.e. once batch b - num_slots was handed back, so
 * no two parties ever touch one slot at once. Fields under "guarded by mu" change only with mu
 * held; a slot's buffers belong to the worker filling it until it sets `ready`, then to the
 * consumer until it is released. */
#ifndef DDPC_DATA_LOADER_IMPL_H
#define DDPC_DATA_LOADER_IMPL_H

#include <ddpc/loader.h>

#include <pthread.h>

#define DDPC__LOADER_MAX_WORKERS 64
#define DDPC__LOADER_MSG 512

typedef struct {
    ddpc_batch b;       /* the public view handed to the caller */
    int64_t *idx;       /* (batch_size) global indices */
    int64_t *local;     /* (batch_size) indices within their dataset */
    float *x;           /* images: (batch_size, c, h, w) */
    float *scratch;     /* augmentation: one plane (h, w) */
    int32_t *tokens;    /* tokens: (batch_size, T) */
    int32_t *targets;   /* images: (batch_size); tokens: (batch_size, T); pairs: (batch_size, T) */
    float *ftargets;    /* images with float targets: (batch_size, y_per), and targets NULL */
    int32_t *src;       /* pairs: (batch_size, S) */
    int64_t seq;        /* guarded by mu: batch number held, -1 when empty */
    bool ready;         /* guarded by mu */
    ddpc_status status; /* the fill's result; its message in msg */
    char msg[DDPC__LOADER_MSG];
} ddpc__loader_slot;

struct ddpc_loader {
    const ddpc_dataset **datasets; /* (num_datasets) borrowed */
    int num_datasets;
    ddpc_sampler *sampler; /* borrowed */
    ddpc_loader_config cfg;
    ddpc_dataset_kind kind;
    int64_t x_per; /* floats per image sample (c * h * w); 0 for tokens */
    int64_t y_per; /* float targets per sample (ddpc_dataset_target_width); 0: class labels */
    int64_t shape[3]; /* images: (c, h, w) of a sample */
    int64_t t_per; /* tokens per sample (T; pairs: the widest target of any dataset); 0 for images */
    int64_t s_per; /* pairs: the widest source of any dataset (S); 0 otherwise */
    int64_t num_batches;
    int num_slots;
    ddpc__loader_slot *slots;
    pthread_t *threads;
    int num_threads; /* started */
    pthread_mutex_t mu;
    pthread_cond_t work_cv;  /* workers: a batch may be claimed, or shutdown */
    pthread_cond_t ready_cv; /* consumer: a batch is ready, or a worker went idle */
    /* guarded by mu */
    bool started, active, shutdown;
    int64_t epoch;
    int64_t next_claim; /* next batch number a worker will load */
    int64_t released;   /* batches [0, released) were handed back: their slots are free */
    int busy;           /* workers filling a slot now */
    /* consumer's own (only the calling thread touches them) */
    int64_t delivered; /* batches returned by next this epoch */
    double wait_total;
    ddpc_status failed; /* sticky error of this epoch */
    char fail_msg[DDPC__LOADER_MSG];
};

/* Augments rows x (n, c, h, w) with global indices idx (n) for `epoch` as cfg says (augment.c);
 * scratch holds h * w floats. */
void ddpc__augment_images(float *x, const int64_t *idx, int64_t n, int64_t c, int64_t h, int64_t w,
                          const ddpc_loader_config *cfg, int64_t epoch, float *scratch);

/* Loads batch `seq` of the current epoch into `slot` (sets slot->b, status and msg); only reads
 * the loader's datasets, sampler and config. */
void ddpc__loader_fill(const ddpc_loader *l, ddpc__loader_slot *slot, int64_t seq);

#endif
