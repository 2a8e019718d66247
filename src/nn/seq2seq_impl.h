// SPDX-License-Identifier: MIT
/* Private to the seq2seq model: parameter indices and the activations forward saves for backward.
 * Shapes: B batch, S source length, T target length (each <= max_len), C d_model, H num_heads,
 * F d_ff, V target vocabulary. Layers are post-LayerNorm as torch.nn.Transformer's default. With
 * activation checkpointing every enc[l] (dec[l]) but its output views one shared set (enc[0]'s,
 * dec[0]'s), which holds the last layer's activations after forward and layer l's after its
 * recomputation in backward. */
#ifndef DDPC_NN_SEQ2SEQ_IMPL_H
#define DDPC_NN_SEQ2SEQ_IMPL_H

#include "nn/model_impl.h"

/* torch.nn.MultiheadAttention: in_proj_weight (3C, C) = q | k | v rows, in_proj_bias (3C),
 * out_proj.weight (C, C), out_proj.bias (C). */
typedef struct {
    int inw, inb, outw, outb;
} s2s_attn_params;

typedef struct {
    s2s_attn_params self, cross;      /* cross: decoder layers only */
    int n1w, n1b, n2w, n2b, n3w, n3b; /* norm3: decoder layers only */
    int l1w, l1b, l2w, l2b;           /* linear1 (F, C), linear2 (C, F) */
} s2s_layer_params;

typedef struct {
    float *qkv;                /* (B,L,3C) self-attention projections, L = S or T */
    float *att;                /* (B,H,L,L) */
    float *atty;               /* (B,L,C) */
    float *res1;               /* (B,L,C) x + dropout(out_proj(atty)) */
    float *h1, *mean1, *rstd1; /* (B,L,C), (B,L), (B,L): norm1(res1) */
    float *q2;                 /* decoder: (B,T,C) cross-attention queries */
    float *kv2;                /* decoder: (B,S,2C) keys | values from the encoder's output */
    float *att2;               /* decoder: (B,H,T,S) */
    float *atty2;              /* decoder: (B,T,C) */
    float *res2;               /* decoder: (B,T,C) h1 + dropout(out_proj(atty2)) */
    float *h2, *mean2, *rstd2; /* decoder: norm2(res2) */
    float *ff;                 /* (B,L,F) dropout(relu(linear1(h))), h = h1 or h2 */
    float *resf;               /* (B,L,C) h + dropout(linear2(ff)) */
    float *meanf, *rstdf;      /* (B,L), (B,L) stats of the last norm */
    float *out;                /* (B,L,C) the layer's output (last norm): kept per layer always */
} s2s_layer_acts;

typedef struct {
    int src_embed, tgt_embed, enc_nw, enc_nb, dec_nw, dec_nb, gen_w, gen_b;
    s2s_layer_params enc_p[DDPC_MODEL_MAX_LAYERS], dec_p[DDPC_MODEL_MAX_LAYERS];
    /* Set by carve(). */
    s2s_layer_acts enc[DDPC_MODEL_MAX_LAYERS], dec[DDPC_MODEL_MAX_LAYERS];
    float *pe;                           /* (max(S,T), C) sinusoidal positions */
    uint8_t *src_pad, *tgt_pad;          /* (B,S), (B,T): 1 where the token is <pad> */
    float *src_x, *tgt_x;                /* (B,S,C), (B,T,C) dropout(embeddings + positions) */
    float *memory, *mem_mean, *mem_rstd; /* (B,S,C), (B,S), (B,S) encoder.norm output */
    float *dec_y, *dec_mean, *dec_rstd;  /* (B,T,C), (B,T), (B,T) decoder.norm output */
    float *logits;                       /* (B,T,V), softmax in place after the loss */
    float *losses;                       /* (B,T) */
    float *ws; /* the attention's (mha_workspace_floats at B, max_len, max_len): both passes' */
    /* Backward temporaries; L = max(S, T). */
    float *dlogits;         /* (B,T,V) */
    float *d[3];            /* (B,L,C) rotating residual-stream gradients */
    float *dbranch, *datty; /* (B,L,C) */
    float *dqkv;            /* (B,L,3C) */
    float *dq2, *dkv2;      /* (B,T,C), (B,S,2C) */
    float *dff[2];          /* (B,L,F) */
    float *dmem;            /* (B,S,C) gradient of the encoder's output */
    float *search;          /* translate's key/value cache and scratch, k's memory (decode.c) */
    size_t search_floats;   /* its size: grown, never shrunk */
    const int32_t *src, *tgt, *targets;
    int64_t B, S, T, n_valid;
    const double *sums; /* a deferred loss's {sum, valid rows} in k's memory, else NULL */
    bool training;
    bool ckpt;
    uint64_t rng_stream;
} s2s_impl;

/* Carves every buffer for a batch of (B, S, T) from base (NULL: only counts); returns floats. */
size_t ddpc__s2s_carve(const ddpc_model *m, s2s_impl *g, int64_t B, int64_t S, int64_t T, bool ckpt,
                       float *base);
size_t ddpc__s2s_arena_floats(const ddpc_model *m, int64_t n, bool ckpt);
/* Encoder on src (B,S) into g->memory; decoder on tgt (B,T) into g->logits (raw). The arena must
 * have been carved for at least (B, S, T) with g->ckpt. */
void ddpc__s2s_encode(ddpc_model *m, s2s_impl *g, const int32_t *src);
void ddpc__s2s_decode(ddpc_model *m, s2s_impl *g, const int32_t *tgt);
/* The host batch's lengths and tokens, before it is staged (ops->check_input). */
ddpc_status ddpc__s2s_check_input(const ddpc_model *m, const ddpc_model_input *in);
ddpc_status ddpc__s2s_forward(ddpc_model *m, const ddpc_model_input *in, bool training,
                              ddpc_model_output *out);
void ddpc__s2s_backward(ddpc_model *m, float dloss);
/* Layer passes (seq2seq_layers.c). x is the layer's input; backward takes the gradient of the
 * layer's output in d[0] and leaves the gradient of its input in d[0] (rotating d). */
void ddpc__s2s_enc_layer_forward(ddpc_model *m, s2s_impl *g, int l, const float *x);
void ddpc__s2s_dec_layer_forward(ddpc_model *m, s2s_impl *g, int l, const float *x);
void ddpc__s2s_enc_layer_backward(ddpc_model *m, s2s_impl *g, int l, const float *x);
void ddpc__s2s_dec_layer_backward(ddpc_model *m, s2s_impl *g, int l, const float *x);
/* The model's own seq2seq config (ddpc/models.h). */
static inline const ddpc_seq2seq_config *ddpc__s2s_cfg(const ddpc_model *m)
{
    return (const ddpc_seq2seq_config *)m->type_cfg;
}
/* Dropout sites: distinct streams per step (rng_stream) and place. */
static inline uint64_t ddpc__s2s_site(const s2s_impl *g, uint64_t site)
{
    return g->rng_stream * 256 + site;
}
enum { S2S_SITE_SRC = 0, S2S_SITE_TGT = 1, S2S_SITE_ENC = 2, S2S_SITE_DEC = 2 + 3 * 16 };

/* One decoding step for the search (seq2seq_beam.c): logp (rows, V) = log-probabilities of the
 * next token after each prefix row (rows, t) (row r's prefix starts with <bos>). parent (rows):
 * the row of the previous step whose prefix row r extends (beam search reorders hypotheses; a
 * key/value cache follows it); NULL when every row extends itself. */
typedef ddpc_status (*ddpc__s2s_step_fn)(void *ctx, const int32_t *prefix, const int64_t *parent,
                                         int64_t rows, int64_t t, float *logp);
/* Greedy search for n sequences: out (n, max_out) as ddpc_model_translate's. */
ddpc_status ddpc__s2s_greedy(ddpc__s2s_step_fn step, void *ctx, int64_t n, int64_t vocab,
                             int64_t max_out, int32_t *out);
/* Beam search (k hypotheses per sequence) with length-normalised final scores; see nn.h. */
ddpc_status ddpc__s2s_beam(ddpc__s2s_step_fn step, void *ctx, int64_t n, int k, int64_t vocab,
                           int64_t max_out, int32_t *out);

#endif
