// SPDX-License-Identifier: MIT
/* The model seam: the table of operations behind every model type, public so that a program can
 * bring its own network and get ddpc's trainer, DDP buckets, ZeRO shards, checkpoints and export
 * unchanged. ddpc's mlp, cnn, gpt and seq2seq are tables of this kind too (their own configs are
 * in ddpc/models.h). Invariant: a type's build registers every parameter and buffer (by name and
 * shape) into the model's flat buffers before anything is allocated, and its passes reach them
 * only through the accessors below, so the hooks DDP and ZeRO install see every read and every
 * gradient. See docs/extending.md. */
#ifndef DDPC_MODEL_OPS_H
#define DDPC_MODEL_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ddpc/config.h>
#include <ddpc/data.h>
#include <ddpc/device.h>
#include <ddpc/nn.h>
#include <ddpc/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Longest model type name, NUL included (ddpc_model_config.type). */
#define DDPC_MODEL_TYPE_MAX 16
/* Model types a process can hold: the four built-ins and at most 32 registered ones. */
#define DDPC_MODEL_MAX_TYPES 36

/* One model type. Members marked optional may be NULL; the comment says what ddpc does then.
 * Every member receives the model being built or run; the type keeps its own state behind
 * ddpc_model_impl. Members are called from one thread at a time, the one using the model. */
typedef struct ddpc_model_ops {
    /* model.type: 1 to 15 characters of [a-z0-9_]. */
    const char *name;
    /* Bytes of the type's own config struct: ddpc_model_create copies that many bytes from
     * ddpc_model_config.type_config into the model (ddpc_model_type_config reads the copy), so
     * the struct must be plain data (no pointers the model would borrow). 0: none. */
    size_t config_size;
    /* Optional: config_size bytes of defaults, what a model gets when type_config is NULL and
     * what read_config starts from (ddpc's types point at their _default() values). NULL: zeros. */
    const void *default_config;
    /* Optional: reads the type's own keys from the trainer's config tree, under `prefix`
     * ("model"), into `type_cfg` (config_size bytes holding default_config, or zeros) with
     * ddpc_config_int and the other getters, which name file and line in errors and mark the
     * keys read (a key nobody reads is an error). NULL: the type has no keys of its own. */
    ddpc_status (*read_config)(ddpc_config *cfg, const char *prefix, void *type_cfg);
    /* Checks the configs and registers the parameters and buffers in forward order
     * (ddpc_model_add_param, ddpc_model_add_buffer); may set ddpc_model_set_impl,
     * ddpc_model_set_train_flops and ddpc_model_set_outputs_per_sample. Nothing is allocated yet:
     * parameter pointers are not valid here. Errors name the field that is wrong. */
    ddpc_status (*build)(ddpc_model *m);
    /* Fills the host parameters (ddpc_model_host_param) and buffers from the config's seed, the
     * same on every rank; the library copies them to the device afterwards. */
    void (*init)(ddpc_model *m);
    /* Optional: floats of activation arena that forward + backward need for a batch of n, with
     * or without activation checkpointing (ddpc_model_activation_bytes and `ddpc plan` report it;
     * forward finds that much at ddpc_model_arena). NULL: the type needs no arena. */
    size_t (*arena_floats)(const ddpc_model *m, int64_t n, bool checkpointing);
    /* Optional: checks a host batch before it is copied to the device (token ranges, say);
     * errors fail the forward. NULL: no check beyond the batch size. */
    ddpc_status (*check_input)(const ddpc_model *m, const ddpc_model_input *in);
    /* Whether the type implements ddpc_model_config.activation_checkpointing (false: asking for
     * it is DDPC_EINVAL). */
    bool checkpointing;
    /* Forward pass on the model's device: in->x (n, c, h, w) floats, in->targets (n) labels or
     * NULL. Must set the probabilities (ddpc_model_set_probs), and with targets the mean loss,
     * the valid count and argmax hits in *out. `training` enables dropout. */
    ddpc_status (*forward)(ddpc_model *m, const ddpc_model_input *in, bool training,
                           ddpc_model_output *out);
    /* Accumulates d(dloss * loss)/d(params) of the last forward with targets into the gradients
     * (ddpc_model_grad_ptr), reporting each tensor final (ddpc_model_grad_ready) as soon as it
     * is, roughly in reverse registration order. Cannot fail: check in forward. */
    void (*backward)(ddpc_model *m, float dloss);
    /* Optional: frees what build and the passes allocated (the impl). NULL: nothing to free. */
    void (*destroy)(ddpc_model *m);
    /* The samples the type consumes: DDPC_DATASET_IMAGES (the zero value: (c, h, w) floats with a
     * class label or float targets), DDPC_DATASET_TOKENS (next-token sequences, as gpt) or
     * DDPC_DATASET_PAIRS (source and target sequences, as seq2seq). The trainer refuses other
     * data with one line and fills in_channels/in_height/in_width from image data. */
    ddpc_dataset_kind data_kind;
    /* Whether the type offers model.batchnorm (BatchNorm layers, their running statistics as
     * buffers): the trainer then reads model.sync_batchnorm. */
    bool batchnorm;
    /* Whether the passes run on a GPU's kernel table (they call only ddpc_kernel_table members
     * and device memory, verified on a GPU): device cuda/auto may then put it there. false: the
     * CPU only, and device: cuda is refused naming the type. */
    bool gpu;
} ddpc_model_ops;

/* Builds and initialises a model of the type `ops` (borrowed for the model's life) without
 * registering it: type_cfg (ops->config_size bytes, copied; NULL: ops->default_config) is its own
 * config, common the shared one (seed, backend, precision, dropout, input shape and classes;
 * common->type is ignored). Errors as ddpc_model_create's. */
ddpc_status ddpc_model_create_custom(ddpc_model **out, const ddpc_model_ops *ops,
                                     const void *type_cfg, const ddpc_model_config *common);

/* Adds `ops` (borrowed for the life of the process: a static table) to the process-wide registry
 * that ddpc_model_create and the trainer's model.type look names up in. DDPC_EINVAL for a bad or
 * taken name (the built-ins' included), a required member (build, init, forward, backward) that
 * is NULL, or more than 32 registered types. Thread safe; register before creating trainers. */
ddpc_status ddpc_model_register(const ddpc_model_ops *ops);
/* The registered type called `name` (built-in or not), or NULL. Thread safe. */
const ddpc_model_ops *ddpc_model_lookup(const char *name);
/* Writes the names of at most `cap` registered types, the built-ins first, into names (borrowed
 * for the process's life); returns how many it wrote. Thread safe. */
size_t ddpc_model_type_names(const char **names, size_t cap);

/* ---- for a type's members ---- */
/* The type's own state (set by build), and its own config (the model's copy; NULL when
 * config_size is 0). */
void *ddpc_model_impl(const ddpc_model *m);
void ddpc_model_set_impl(ddpc_model *m, void *impl);
const void *ddpc_model_type_config(const ddpc_model *m);
/* In build only: registers a parameter of `ndim` (1 to 4) positive sizes in `shape`, decayed by
 * AdamW's weight decay when `decay` (matrices, embeddings; not biases or norms); *index (may be
 * NULL) is its index for the accessors below. The name is the one checkpoints and `ddpc ckpt
 * export` write, torch's state_dict key ("blocks.0.fc1.weight"). DDPC_EINVAL naming the tensor
 * for a bad name, shape or a name already taken; DDPC_ENOMEM. */
ddpc_status ddpc_model_add_param(ddpc_model *m, const char *name, int ndim, const int64_t *shape,
                                 bool decay, int *index);
/* The same for a buffer: state that is saved and broadcast but not trained (no gradient). */
ddpc_status ddpc_model_add_buffer(ddpc_model *m, const char *name, int ndim, const int64_t *shape,
                                  int *index);
/* In forward and backward: parameter `index`'s values for a kernel to read, and its gradient for
 * a backward kernel to accumulate into (device memory). Always go through these, once per kernel
 * call: ZeRO stage 3 gathers parameters and stage 2 pools gradients behind them. */
float *ddpc_model_param_ptr(ddpc_model *m, int index);
float *ddpc_model_grad_ptr(ddpc_model *m, int index);
/* In backward: parameter `index`'s gradient is final for this pass (DDP launches its bucket's
 * all-reduce from here while backward goes on). Report every tensor backward reached. */
void ddpc_model_grad_ready(ddpc_model *m, int index);
/* In init: parameter `index`'s host values, and buffer `index`'s. */
float *ddpc_model_host_param(ddpc_model *m, int index);
float *ddpc_model_host_buffer(ddpc_model *m, int index);
/* In forward and backward: buffer `index` in device memory. */
float *ddpc_model_buffer_ptr(ddpc_model *m, int index);
/* In forward and backward: the activation arena, arena_floats(n) floats for the batch of n of the
 * last forward (device memory; NULL when the type asks for none). It is the model's own from one
 * forward to the matching backward, so activations kept there survive for backward. */
float *ddpc_model_arena(ddpc_model *m);
/* In forward: the probabilities (n, outputs_per_sample) just computed, in device memory owned by
 * the model (usually in the arena), for ddpc_model_probs and prediction. */
void ddpc_model_set_probs(ddpc_model *m, const float *probs, size_t count);
/* In build: forward + backward FLOPs of one training sample (for MFU and `ddpc bench`), and the
 * floats of one output row (the classes). Both 0 unless set. */
void ddpc_model_set_train_flops(ddpc_model *m, double flops);
void ddpc_model_set_outputs_per_sample(ddpc_model *m, int64_t outputs);

#ifdef __cplusplus
}
#endif
#endif
