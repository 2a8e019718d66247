// SPDX-License-Identifier: MIT
/* Models: named layers over the CPU kernels, selected by name ("mlp", "cnn", "gpt", "seq2seq").
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

/* The loss a model ends in (torch's names in docs/losses.md). Cross-entropy takes class labels
 * (ddpc_model_input.targets); the others take float targets (float_targets), one per output. */
typedef enum {
    DDPC_LOSS_CROSS_ENTROPY = 0, /* softmax cross-entropy (label_smoothing for seq2seq) */
    DDPC_LOSS_MSE,               /* torch MSELoss */
    DDPC_LOSS_L1,                /* torch L1Loss */
    DDPC_LOSS_SMOOTH_L1,         /* torch SmoothL1Loss(beta = loss_beta) */
    DDPC_LOSS_BCE_LOGITS,        /* torch BCEWithLogitsLoss: multi-label, targets in [0, 1] */
    DDPC_LOSS_COUNT
} ddpc_loss;

/* The losses' names in ddpc_loss order, then NULL (a config key's choices). */
const char *const *ddpc_loss_names(void);
/* "cross_entropy" / "mse" / "l1" / "smooth_l1" / "bce_logits"; "unknown" outside the enum. */
const char *ddpc_loss_name(ddpc_loss l);
/* The loss named s (as above); false for any other string. */
bool ddpc_loss_from_name(const char *s, ddpc_loss *out);
/* Whether loss l fits real-valued targets (mse, l1, smooth_l1): reported as RMSE/MAE, not
 * accuracy. */
static inline bool ddpc_loss_is_regression(ddpc_loss l)
{
    return l >= DDPC_LOSS_MSE && l <= DDPC_LOSS_SMOOTH_L1;
}

/* What every model type shares; a type's own sizes are in its config struct (type_config). */
typedef struct {
    char type[16]; /* "mlp" | "cnn" | "gpt" | "seq2seq" | a registered type */
    /* Inputs, usually taken from the dataset. */
    int64_t in_channels, in_height, in_width; /* images (mlp flattens them) */
    int64_t num_classes; /* classes, the vocabulary for gpt, or outputs (the width of the float
                            targets) for a loss other than cross-entropy */
    /* Multi-task (mlp, cnn): n_heads > 0 replaces the classifier "fc.<n_hidden>" by heads
     * "heads.<k>.weight" (head_classes[k], trunk width) and "heads.<k>.bias" over the shared trunk
     * (every hidden layer, ReLU included); num_classes is then unused. 0: one head of num_classes,
     * the single-task layout. */
    int64_t head_classes[DDPC_MODEL_MAX_HEADS];
    size_t n_heads;
    /* mlp and cnn: the loss (cross-entropy, the default; gpt and seq2seq refuse any other) and
     * smooth_l1's beta (1.0, torch's default; >= 0). A loss other than cross-entropy needs one
     * head and runs on the CPU only (the CUDA table has no kernels for it yet). */
    ddpc_loss loss;
    float loss_beta;
    float dropout; /* after hidden activations (mlp/cnn) or residual branches (gpt, seq2seq) */
    /* gpt (per transformer block) and cnn (per conv stage): forward keeps only each block's input
     * and backward recomputes the block just before its own backward, into one shared set of
     * activation buffers. Same kernels, order and dropout streams: the gradients are bitwise those
     * of the run without it. Not supported by mlp (DDPC_EINVAL). */
    bool activation_checkpointing;
    ddpc_precision precision; /* of the matrix products (linear, attention, conv); fp32 */
    /* The kernel table the model runs on (ddpc_backend_select): its parameters, gradients,
     * buffers and activations live in that device's memory. NULL: the CPU's. */
    const struct ddpc_kernel_table *backend;
    /* On a device: the flat parameter and gradient buffers are reserved as releasable memory
     * (CUDA virtual memory), so that ZeRO-2/3 give back what a rank does not own; false: plain
     * allocations, and ZeRO zeroes instead. The trainer sets it for zero.stage >= 2. */
    bool releasable_flat;
    uint64_t seed; /* initialisation */
    /* The type's own config (ddpc/model_ops.h: its config_size bytes, copied by create; NULL:
     * the type's defaults). The built-in types' are ddpc/models.h's ddpc_mlp_config and the like;
     * every field above is shared by all types. */
    const void *type_config;
} ddpc_model_config;

ddpc_model_config ddpc_model_config_default(void);

typedef struct ddpc_model ddpc_model;

/* Inputs of one batch; unused pointers may be NULL. Borrowed until the matching backward. */
typedef struct {
    int64_t n;              /* samples */
    const float *x;         /* images (n, c, h, w) */
    const int32_t *tokens;  /* gpt (n, block_size); seq2seq decoder input (n, tgt_len):
                               <bos> y0 y1 ... padded with 0 */
    const int32_t *targets; /* (n) labels or (n, block_size) next tokens, seq2seq (n, tgt_len):
                               y0 y1 ... <eos> padded with 0 (ignored); NULL: no loss */
    const float *float_targets; /* (n, num_classes) targets of a loss other than cross-entropy
                                   (regression values, or multi-label 0/1); NULL: no loss */
    const int32_t *src_tokens; /* seq2seq source (n, src_len), padded with 0 */
    int64_t src_len, tgt_len;  /* seq2seq: in [1, max_len] */
    uint64_t rng_stream;    /* dropout stream: distinct per step and rank */
    int task;               /* head to run, in [0, n_heads); 0 for a single-head model. Backward
                               then reaches only that head and the trunk. */
} ddpc_model_input;

typedef struct {
    float loss;        /* the mean loss over valid targets (cross-entropy: samples or tokens;
                          other losses: every element of the (n, outputs) targets) */
    int64_t n_valid;   /* targets counted in the loss (samples, tokens for gpt, elements) */
    int64_t n_correct; /* argmax hits among them; bce_logits: labels decided right (p > 0.5);
                          regression: 0 */
    double sum_abs_err, sum_sq_err; /* regression losses: sums of |pred - target| and its square
                                       over the n_valid = n * outputs elements; else 0 */
} ddpc_model_output;

/* Builds and initialises (from cfg->seed) a model of cfg->type, a built-in or a registered type
 * (ddpc_model_register). Errors name the bad field. */
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
/* Comma-separated names of the registered model types (built-ins and ddpc_model_register's);
 * not to be read while another thread registers a type. */
const char *ddpc_model_types(void);

const ddpc_model_config *ddpc_model_config_of(const ddpc_model *m);
size_t ddpc_model_num_params(const ddpc_model *m); /* floats in each buffer */
float *ddpc_model_params(ddpc_model *m);          /* (num_params) */
float *ddpc_model_grads(ddpc_model *m);           /* (num_params) */
const uint8_t *ddpc_model_decay_mask(const ddpc_model *m); /* (num_params), 1 = decay */
size_t ddpc_model_num_tensors(const ddpc_model *m);
const ddpc_param *ddpc_model_tensor(const ddpc_model *m, size_t i);
/* Forward + backward FLOPs of one training sample (GEMM-dominated estimate, 3x forward); for
 * seq2seq at source and decoder width max_len, an upper bound. */
double ddpc_model_train_flops_per_sample(const ddpc_model *m);
/* The same for a seq2seq pair at a batch's widths src_len (source with <eos>) and tgt_len
 * (decoder input); other models: ddpc_model_train_flops_per_sample. */
double ddpc_model_train_flops_pair(const ddpc_model *m, int64_t src_len, int64_t tgt_len);
/* Floats in each output row: classes (head 0's for a multi-head model; head k has
 * head_classes[k]), block_size * vocab for gpt, max_len * tgt_vocab for seq2seq (whose last
 * forward's probabilities are (n, tgt_len, tgt_vocab)). */
int64_t ddpc_model_outputs_per_sample(const ddpc_model *m);
/* What one row of `in` holds for this model: floats of x (c*h*w for mlp/cnn, else 0), tokens
 * (gpt block_size, seq2seq in->tgt_len, else 0), targets (as tokens, or 1 for a class label),
 * src_tokens (seq2seq in->src_len, else 0) and float_targets (num_classes for a loss on float
 * targets, else 0). Splitting a batch by rows (DataParallel's scatter) copies these many elements
 * per row. */
typedef struct {
    int64_t x, tokens, targets, src_tokens, float_targets;
} ddpc_sample_sizes;
ddpc_sample_sizes ddpc_model_sample_sizes(const ddpc_model *m, const ddpc_model_input *in);

/* Bytes of the activation arena (activations, scratch and backward temporaries) that a training
 * step on a batch of n needs, with or without activation checkpointing, whatever the model's own
 * setting: the peak activation memory. A model without checkpointing (mlp) gives the same figure
 * both ways. */
size_t ddpc_model_activation_bytes(const ddpc_model *m, int64_t n, bool checkpointing);
/* Whether the model's type implements activation checkpointing (gpt, cnn). */
bool ddpc_model_can_checkpoint(const ddpc_model *m);

/* Buffers: state that is not trained but belongs to the model (BatchNorm's running statistics),
 * in one flat fp32 buffer of named views like the parameters; saved with the weights and in
 * checkpoints, broadcast by DDP (ddpc_reducer_config.broadcast_buffers). No gradient. */
size_t ddpc_model_num_buffers(const ddpc_model *m);
const ddpc_param *ddpc_model_buffer(const ddpc_model *m, size_t i); /* offset into the buffer */
size_t ddpc_model_num_buffer_floats(const ddpc_model *m);
float *ddpc_model_buffer_data(ddpc_model *m); /* (num_buffer_floats); NULL when there are none */

/* ---- the model's device (cfg.backend) ----
 * A model on a GPU keeps its working parameters, gradients, decay mask and buffers in device memory
 * (the "device" accessors; on the CPU they return the host buffers above), and the host buffers
 * above are a copy that moves only when asked: ddpc_model_to_host before reading parameters or
 * buffers on the host (checkpoints, export), ddpc_model_to_device after writing them there (a
 * loaded checkpoint, init_from). Gradients stay on the device (the optimizer runs there). Both are
 * no-ops on the CPU. */
const struct ddpc_kernel_table *ddpc_model_backend(const ddpc_model *m);
float *ddpc_model_device_params(ddpc_model *m);
float *ddpc_model_device_grads(ddpc_model *m);
const uint8_t *ddpc_model_device_decay_mask(const ddpc_model *m);
float *ddpc_model_device_buffer_data(ddpc_model *m);
/* Makes room now for batches of up to n samples (seq_len: seq2seq's longest sequence, 0 for its
 * max_len; else 0): the activation arena and, on a device, the input buffers, so later forwards of
 * any batch up to n (training or evaluation) allocate nothing. A seq2seq on a device also runs one
 * training pass at that widest shape (gradients zeroed after, nothing else changed), so that its
 * kernels' scratch is grown too. DDPC_ENOMEM naming the device. */
ddpc_status ddpc_model_reserve(ddpc_model *m, int64_t n, int64_t seq_len);
void ddpc_model_to_host(ddpc_model *m);
ddpc_status ddpc_model_to_device(ddpc_model *m); /* DDPC_ENOMEM naming the device */

/* SyncBatchNorm: called inside forward (and backward) with `count` doubles of per-channel sums
 * that must be replaced, in place, by their sum over every replica; every replica calls it in the
 * same order. `sums` is the model's memory (its kernel table's: the GPU's for a model on a GPU),
 * or host memory when `host` is set (a device model's batch size, once per training forward, from
 * which the host knows the element counts without waiting for the device). An error fails the
 * forward (or the backward) with the hook's status.
 * Installs (or with fn NULL removes) the hook; ctx is borrowed. Without it, batch statistics are
 * local. */
typedef ddpc_status (*ddpc_stat_sync_fn)(void *ctx, double *sums, size_t count, bool host);
void ddpc_model_set_stat_sync_hook(ddpc_model *m, ddpc_stat_sync_fn fn, void *ctx);

/* Forward pass; with targets, computes the loss and accuracy into *out. `training` enables
 * dropout. Input shapes must match the config; tokens outside the vocabulary and a task outside
 * the model's heads are DDPC_EINVAL. */
ddpc_status ddpc_model_forward(ddpc_model *m, const ddpc_model_input *in, bool training,
                               ddpc_model_output *out);
/* Probabilities (n, classes of the head that ran, or outputs_per_sample) of the last forward;
 * valid until the next forward, or the next backward of a softmax cross-entropy model (gpt, mlp,
 * cnn), which writes the loss's gradient over them (no second buffer of that size): NULL after
 * it. */
const float *ddpc_model_probs(ddpc_model *m);
/* Accumulates d(dloss * loss)/d(params) into the gradient buffer; needs a forward with targets.
 * Another backward of the same forward adds the same again; for a softmax cross-entropy model
 * it must pass the first one's dloss (the logits hold that gradient), else DDPC_EINVAL. */
ddpc_status ddpc_model_backward(ddpc_model *m, float dloss);
/* A device model's cross-entropy without a wait for the device: while `sink` (3 doubles of the
 * model's device memory) is set, a forward with targets writes {loss sum, valid targets, correct}
 * there instead of reading them back (*out's loss is NaN, n_valid and n_correct -1; the loss is
 * sum / valid as a float) and backward takes the count from it. NULL (the default) reads them
 * back. No effect on the CPU, whose table has no such kernels. Borrows sink until reset. */
void ddpc_model_set_loss_sink(ddpc_model *m, double *sink);
/* Announces that the next forward, if a training forward with targets, is followed by
 * ddpc_model_backward(m, dloss): a cross-entropy model may then compute the loss's gradient in
 * that forward (one sweep over the logits, the same bits), after which ddpc_model_probs is NULL
 * and a backward with another dloss is DDPC_EINVAL. The next forward consumes the announcement. */
void ddpc_model_expect_backward(ddpc_model *m, float dloss);
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

/* seq2seq decoding: translates n sources src (n, src_len), padded with 0, into out (n, max_out):
 * each row the generated target ids (no <bos>), up to and excluding <eos>, then 0s. beam_size 1 is
 * greedy decoding; beam_size k > 1 keeps the k best hypotheses by log-probability and returns the
 * finished one of highest log-probability / length (length counting <eos>). Needs src_len and
 * max_out in [1, max_len]; DDPC_EINVAL for a model that is not seq2seq. Leaves no forward for
 * backward to use. */
ddpc_status ddpc_model_translate(ddpc_model *m, const int32_t *src, int64_t n, int64_t src_len,
                                 int beam_size, int64_t max_out, int32_t *out);

#ifdef __cplusplus
}
#endif
#endif
