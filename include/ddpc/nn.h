/* Models: named layers over the CPU kernels, selected by name ("mlp", "cnn", "gpt").
 * A model owns ONE contiguous fp32 parameter buffer and ONE gradient buffer of the same layout;
 * each parameter is a named view {name, shape, offset}, registered in forward order, so backward
 * produces gradients from the end of the buffer towards its start. Activations live in an arena
 * sized for the largest batch seen: after the first step of a size, a step allocates nothing. */
#ifndef DDPC_NN_H
#define DDPC_NN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ddpc/kernels.h>
#include <ddpc/status.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DDPC_MODEL_MAX_LAYERS 16
#define DDPC_MODEL_MAX_HEADS 16
#define DDPC_PARAM_NAME_MAX 64

/* A parameter: a view of `numel` floats at `offset` in the parameter and gradient buffers. */
typedef struct {
    char name[DDPC_PARAM_NAME_MAX]; /* "blocks.0.attn.qkv.weight" */
    int ndim;
    int64_t shape[4];
    size_t offset;
    size_t numel;
    bool decay; /* weight decay applies (matrices and embeddings; not biases or norms) */
} ddpc_param;

typedef struct {
    char type[16]; /* "mlp" | "cnn" | "gpt" */
    /* Inputs, usually taken from the dataset. */
    int64_t in_channels, in_height, in_width; /* images (mlp flattens them) */
    int64_t num_classes;                      /* classes, or the vocabulary for gpt */
    /* mlp: hidden sizes. cnn: conv channels (each conv k x k, pad k/2, then ReLU and 2x2 max-pool)
     * followed by hidden fully connected sizes. */
    int64_t hidden[DDPC_MODEL_MAX_LAYERS];
    size_t n_hidden;
    int64_t channels[DDPC_MODEL_MAX_LAYERS];
    size_t n_channels;
    int64_t kernel_size;
    /* Multi-task (mlp, cnn): n_heads > 0 replaces the classifier "fc.<n_hidden>" by heads
     * "heads.<k>.weight" (head_classes[k], trunk width) and "heads.<k>.bias" over the shared trunk
     * (every hidden layer, ReLU included); num_classes is then unused. 0: one head of num_classes,
     * the single-task layout. */
    int64_t head_classes[DDPC_MODEL_MAX_HEADS];
    size_t n_heads;
    /* gpt */
    int64_t n_layer, n_head, n_embd, block_size;
    float dropout; /* after hidden activations (mlp/cnn) or residual branches (gpt) */
    /* gpt (per transformer block) and cnn (per conv stage): forward keeps only each block's input
     * and backward recomputes the block just before its own backward, into one shared set of
     * activation buffers. Same kernels, order and dropout streams: the gradients are bitwise those
     * of the run without it. Not supported by mlp (DDPC_EINVAL). */
    bool activation_checkpointing;
    ddpc_precision precision; /* of the matrix products (linear, attention, conv); fp32 */
    uint64_t seed; /* initialisation */
} ddpc_model_config;

ddpc_model_config ddpc_model_config_default(void);

typedef struct ddpc_model ddpc_model;

/* Inputs of one batch; unused pointers may be NULL. Borrowed until the matching backward. */
typedef struct {
    int64_t n;              /* samples */
    const float *x;         /* images (n, c, h, w) */
    const int32_t *tokens;  /* gpt (n, block_size) */
    const int32_t *targets; /* (n) labels or (n, block_size) next tokens; NULL: no loss */
    uint64_t rng_stream;    /* dropout stream: distinct per step and rank */
    int task;               /* head to run, in [0, n_heads); 0 for a single-head model. Backward
                               then reaches only that head and the trunk. */
} ddpc_model_input;

typedef struct {
    float loss;        /* mean cross-entropy over valid targets */
    int64_t n_valid;   /* targets counted in the loss (samples, or tokens for gpt) */
    int64_t n_correct; /* argmax hits among them */
} ddpc_model_output;

/* Builds and initialises (from cfg->seed) a model of cfg->type. Errors name the bad field. */
ddpc_status ddpc_model_create(ddpc_model **out, const ddpc_model_config *cfg);
void ddpc_model_destroy(ddpc_model *m);
/* The first half of ddpc_model_create: validates cfg and builds the tensor table (names, shapes,
 * offsets, num_params, activation_bytes) but allocates no parameter or gradient buffer, so a
 * memory plan can be made before committing to it. Until ddpc_model_allocate, params, grads and
 * the decay mask are NULL and the model must not run. Errors as ddpc_model_create's. */
ddpc_status ddpc_model_create_shapes(ddpc_model **out, const ddpc_model_config *cfg);
/* The second half: allocates and initialises (from cfg->seed) a shapes-only model's buffers; a
 * no-op on an allocated one. DDPC_ENOMEM leaves the model shapes-only (destroy it as usual). */
ddpc_status ddpc_model_allocate(ddpc_model *m);
/* Comma-separated names of the registered model types. */
const char *ddpc_model_types(void);

const ddpc_model_config *ddpc_model_config_of(const ddpc_model *m);
size_t ddpc_model_num_params(const ddpc_model *m); /* floats in each buffer */
float *ddpc_model_params(ddpc_model *m);          /* (num_params) */
float *ddpc_model_grads(ddpc_model *m);           /* (num_params) */
const uint8_t *ddpc_model_decay_mask(const ddpc_model *m); /* (num_params), 1 = decay */
size_t ddpc_model_num_tensors(const ddpc_model *m);
const ddpc_param *ddpc_model_tensor(const ddpc_model *m, size_t i);
/* Forward + backward FLOPs of one training sample (GEMM-dominated estimate, 3x forward). */
double ddpc_model_train_flops_per_sample(const ddpc_model *m);
/* Floats in each output row: classes (head 0's for a multi-head model; head k has
 * head_classes[k]), or block_size * vocab for gpt. */
int64_t ddpc_model_outputs_per_sample(const ddpc_model *m);
/* What one sample of ddpc_model_input holds: floats of x (c*h*w for mlp/cnn, 0 for gpt), tokens
 * (block_size for gpt, else 0) and targets (block_size for gpt, else 1). Splitting a batch by
 * rows (DataParallel's scatter) copies these many elements per row. */
typedef struct {
    int64_t x, tokens, targets;
} ddpc_sample_sizes;
ddpc_sample_sizes ddpc_model_sample_sizes(const ddpc_model *m);

/* Bytes of the activation arena (activations, scratch and backward temporaries) that a training
 * step on a batch of n needs, with or without activation checkpointing, whatever the model's own
 * setting: the peak activation memory. A model without checkpointing (mlp) gives the same figure
 * both ways. */
size_t ddpc_model_activation_bytes(const ddpc_model *m, int64_t n, bool checkpointing);
/* Whether the model's type implements activation checkpointing (gpt, cnn). */
bool ddpc_model_can_checkpoint(const ddpc_model *m);

/* Forward pass; with targets, computes the loss and accuracy into *out. `training` enables
 * dropout. Input shapes must match the config; tokens outside the vocabulary and a task outside
 * the model's heads are DDPC_EINVAL. */
ddpc_status ddpc_model_forward(ddpc_model *m, const ddpc_model_input *in, bool training,
                               ddpc_model_output *out);
/* Probabilities (n, classes of the head that ran, or outputs_per_sample) of the last forward;
 * valid until the next forward. */
const float *ddpc_model_probs(const ddpc_model *m);
/* Accumulates d(dloss * loss)/d(params) into the gradient buffer; needs a forward with targets. */
ddpc_status ddpc_model_backward(ddpc_model *m, float dloss);
void ddpc_model_zero_grad(ddpc_model *m);

/* Called from inside ddpc_model_backward each time tensor `tensor`'s gradient is final for this
 * backward pass (DDP launches a bucket's all-reduce from here while backward goes on). Tensors
 * arrive roughly in reverse registration order; a tensor backward did not reach is never reported. */
typedef void (*ddpc_grad_ready_fn)(void *ctx, size_t tensor);
/* Installs (or with fn NULL removes) the hook; ctx is borrowed. */
void ddpc_model_set_grad_ready_hook(ddpc_model *m, ddpc_grad_ready_fn fn, void *ctx);

/* Called inside forward and backward just before tensor `tensor`'s parameters are read, every
 * time they are (ZeRO stage 3 gathers a bucket's parameters here): returns where the tensor's
 * values are for this read, or NULL for their place in the flat parameter buffer. A returned
 * pointer stays valid while the tensors used since belong to at most one other bucket of the
 * caller's (the model reads at most two tensors, registered next to each other, per kernel call).
 * The grad-use hook is the same for the gradients a backward kernel accumulates into (ZeRO stage
 * 2 accumulates a bucket in a reusable buffer); its pointer stays valid until the tensor's
 * gradient is reported ready. */
typedef float *(*ddpc_param_use_fn)(void *ctx, size_t tensor);
typedef float *(*ddpc_grad_use_fn)(void *ctx, size_t tensor);
/* Installs (or with fn NULL removes) the hook; ctx is borrowed. */
void ddpc_model_set_grad_use_hook(ddpc_model *m, ddpc_grad_use_fn fn, void *ctx);
/* Installs (or with fn NULL removes) the hook; ctx is borrowed. */
void ddpc_model_set_param_use_hook(ddpc_model *m, ddpc_param_use_fn fn, void *ctx);

#ifdef __cplusplus
}
#endif
#endif
