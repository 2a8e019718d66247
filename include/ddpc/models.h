// SPDX-License-Identifier: MIT
/* The built-in model types' own configs: one struct per type, passed through
 * ddpc_model_config.type_config exactly as a registered type's (ddpc/model_ops.h), with a default
 * constructor each. ddpc_model_config keeps what every model shares. A type_config of NULL means
 * the type's defaults. Each type reads its own YAML keys ("model.hidden", ...) in its own file,
 * through its ops' read_config. */
#ifndef DDPC_MODELS_H
#define DDPC_MODELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ddpc/config.h>
#include <ddpc/nn.h>
#include <ddpc/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/* "mlp": images flattened, Linear + ReLU per hidden size, then Linear to the classes (or heads). */
typedef struct {
    int64_t hidden[DDPC_MODEL_MAX_LAYERS]; /* hidden widths; model.hidden, [256, 128] */
    size_t n_hidden;
    /* BatchNorm1d after every hidden Linear (before its ReLU), with torch's momentum and eps;
     * model.batchnorm, model.bn_momentum (0.1), model.bn_eps (1e-5). */
    bool batchnorm;
    float bn_momentum, bn_eps;
} ddpc_mlp_config;

/* "cnn": per entry of channels a k x k convolution (pad k/2) [-> BatchNorm2d] -> ReLU -> 2x2
 * max-pool, then the hidden fully connected layers and the classifier (or heads). With batchnorm
 * the convolutions have no bias, as torch models written for BN do; BN's running statistics are
 * buffers (ddpc_model_buffers). */
typedef struct {
    int64_t channels[DDPC_MODEL_MAX_LAYERS]; /* model.channels, [32, 64] */
    size_t n_channels;
    int64_t kernel_size;                   /* model.kernel_size, odd, 3 */
    int64_t hidden[DDPC_MODEL_MAX_LAYERS]; /* model.hidden, [128] */
    size_t n_hidden;
    bool batchnorm;            /* model.batchnorm, false */
    float bn_momentum, bn_eps; /* 0.1, 1e-5 */
} ddpc_cnn_config;

/* "gpt": a GPT-2 style decoder over a vocabulary of ddpc_model_config.num_classes tokens. */
typedef struct {
    int64_t n_layer;    /* model.n_layer, 4 */
    int64_t n_head;     /* model.n_head, 4 */
    int64_t n_embd;     /* model.n_embd, 256: a multiple of n_head */
    int64_t block_size; /* model.block_size, 128: the context, which the token data shares */
} ddpc_gpt_config;

/* "seq2seq": an encoder-decoder Transformer (Vaswani et al. 2017) laid out as torch.nn.Transformer
 * (post-LayerNorm, ReLU feed-forward of d_ff), with sinusoidal positions, embeddings scaled by
 * sqrt(d_model) and an output projection; source and target sequences of at most max_len.
 * Token ids 0 <pad>, 1 <bos>, 2 <eos> in both vocabularies; targets 0 are ignored. */
typedef struct {
    int64_t d_model, num_heads;                     /* model.d_model 512, model.num_heads 8 */
    int64_t num_encoder_layers, num_decoder_layers; /* 6 and 6 */
    int64_t d_ff;                                   /* model.d_ff, 2048 */
    int64_t max_len;                                /* 256; the trainer: the data's (below) */
    float label_smoothing; /* model.label_smoothing, 0.1: CrossEntropyLoss(label_smoothing=) */
    /* From the translation data (ddpc_seq2seq_config_read_data): the vocabularies' sizes and,
     * when vocab_digests is set, their ddpc_vocab_digest values, recorded with the weights and
     * checked when they are loaded. */
    int64_t src_vocab, tgt_vocab;
    bool vocab_digests;
    uint32_t src_vocab_digest, tgt_vocab_digest;
} ddpc_seq2seq_config;

ddpc_mlp_config ddpc_mlp_config_default(void);
ddpc_cnn_config ddpc_cnn_config_default(void);
ddpc_gpt_config ddpc_gpt_config_default(void);
ddpc_seq2seq_config ddpc_seq2seq_config_default(void);

/* The model's own copy of its type's config, or NULL when m is of another type. */
const ddpc_mlp_config *ddpc_mlp_config_of(const ddpc_model *m);
const ddpc_cnn_config *ddpc_cnn_config_of(const ddpc_model *m);
const ddpc_gpt_config *ddpc_gpt_config_of(const ddpc_model *m);
const ddpc_seq2seq_config *ddpc_seq2seq_config_of(const ddpc_model *m);

/* What a translation data set fixes in a seq2seq model. */
typedef struct {
    int64_t src_vocab, tgt_vocab;    /* vocabulary sizes, the special tokens included */
    uint32_t src_digest, tgt_digest; /* ddpc_vocab_digest of each */
    int64_t max_len;                 /* the data's longest sequence (data.max_len) */
} ddpc_seq2seq_data;

/* The trainer's door into a seq2seq config it does not otherwise know: sets the vocabularies'
 * sizes and digests (vocab_digests on) from `d`, and reads `<prefix>.max_len`, whose default and
 * least value are the data's. Errors name file, line and key. */
ddpc_status ddpc_seq2seq_config_read_data(ddpc_config *cfg, const char *prefix,
                                          const ddpc_seq2seq_data *d, ddpc_seq2seq_config *c);

#ifdef __cplusplus
}
#endif
#endif
