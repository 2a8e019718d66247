// SPDX-License-Identifier: MIT
/* The dataset struct shared by the dataset constructors (fmnist.c, text.c, synthetic.c) and the
 * accessors in dataset.c. Invariant: after a constructor returns, nothing in it changes, and it
 * owns every buffer it points to. Images keep either u8 pixels normalised through `lut` on copy
 * or fp32 pixels (a relabelled view keeps neither and reads its base's); tokens keep either a u8 or
 * an i32 stream, and sample i is stream[i*T, i*T+T+1); pairs keep two id streams with offsets. */
#ifndef DDPC_DATA_DATASET_IMPL_H
#define DDPC_DATA_DATASET_IMPL_H

#include <ddpc/data.h>
#include <ddpc/dataset_ops.h>

#include <stddef.h>

struct ddpc_dataset {
    ddpc_dataset_kind kind;
    int64_t n;        /* samples */
    int64_t classes;  /* classes, or vocabulary */
    int64_t shape[3]; /* (c, h, w), or (T, 1, 1) */
    /* images */
    uint8_t *pix_u8;   /* (n, c, h, w) raw bytes, mapped through lut; or NULL */
    float *pix_f32;    /* (n, c, h, w) ready pixels; or NULL */
    float lut[256];    /* u8 pixel value -> normalised float */
    float (*chan_lut)[256]; /* (c, 256) per-channel tables replacing lut (imagefolder); or NULL */
    char **class_names;     /* (classes) class folder names (imagefolder); or NULL */
    uint8_t *labels;   /* (n); NULL when the targets are floats */
    float *ftargets;   /* (n, target_width) float targets (csv regression, multi-label); or NULL */
    int64_t target_width; /* 0: class labels */
    const ddpc_dataset *base; /* relabelled view: pixels come from base (borrowed); or NULL */
    /* tokens */
    uint8_t *tok_u8;   /* (n_tokens) byte stream; or NULL */
    int32_t *tok_i32;  /* (n_tokens) token stream; or NULL */
    int64_t n_tokens;
    struct ddpc__token_shard *shards; /* (n_shards) mapped token files (token_shards.c); or NULL */
    int64_t n_shards;
    /* pairs: sample i's source ids (with its <eos>) are src_ids[src_off[i], src_off[i+1]), its
     * target ids (no <bos> or <eos>) tgt_ids[tgt_off[i], tgt_off[i+1]) */
    int32_t *src_ids, *tgt_ids;
    int64_t *src_off, *tgt_off; /* (n + 1) */
    /* from callbacks (dataset_callbacks.c): samples come from cb alone; or NULL */
    ddpc_dataset_callbacks *cb;
};

/* Copies samples idx[0..n) of a callback dataset (indices already checked). */
ddpc_status ddpc__dataset_callbacks_get(const ddpc_dataset *d, const int64_t *idx, int64_t n,
                                        float *x, int32_t *tokens, int32_t *targets);

/* One token file mapped read-only: tokens [start, start + n) of the stream, `width` bytes each
 * (2: uint16, 4: uint32), little-endian, at `tok`. */
typedef struct ddpc__token_shard {
    void *map;
    size_t map_len;
    const uint8_t *tok;
    int width;
    int64_t start, n;
} ddpc__token_shard;

/* Copies stream[start, start+len) of a sharded token dataset into out as int32 (token_shards.c). */
void ddpc__token_shards_copy(const ddpc_dataset *d, int64_t start, int64_t len, int32_t *out);
/* Unmaps and frees d's shards (token_shards.c). */
void ddpc__token_shards_free(ddpc_dataset *d);

/* A zeroed dataset of the given kind, or NULL when out of memory. */
ddpc_dataset *ddpc__dataset_alloc(ddpc_dataset_kind kind);

/* Sets d->n from the stream length and block size T; DDPC_EINVAL naming `what` if the stream has
 * fewer than T+1 tokens. */
ddpc_status ddpc__dataset_set_windows(ddpc_dataset *d, int64_t block_size, const char *what);

#endif
