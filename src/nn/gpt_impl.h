// SPDX-License-Identifier: MIT
/* Private to the gpt model: parameter indices and the activation pointers that forward saves
 * for backward. Shapes: B batch, T block_size, C n_embd, NH n_head, V vocabulary. With activation
 * checkpointing every acts[l] but res3 views one shared set (acts[0]'s), which holds the last
 * block's activations after forward and block l's after its recomputation in backward. */
#ifndef DDPC_NN_GPT_IMPL_H
#define DDPC_NN_GPT_IMPL_H

#include "nn/model_impl.h"

typedef struct {
    int ln1w, ln1b, qkvw, qkvb, projw, projb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb;
} gpt_layer_params;

typedef struct {
    float *ln1, *ln1_mean, *ln1_rstd; /* (B,T,C), (B,T), (B,T); ln1, ln2, fch_gelu 16-bit
                                       * copies (device.h's x16) where gpt_impl.act16 */
    float *qkv;                       /* (B,T,3C) */
    float *att; /* attention's saved state: (B,NH,T,T) probabilities on the CPU (device.h) */
    float *atty;                      /* (B,T,C) */
    float *res2;                      /* (B,T,C) residual after attention */
    float *ln2, *ln2_mean, *ln2_rstd; /* (B,T,C), (B,T), (B,T) */
    float *fch, *fch_gelu;            /* (B,T,4C) */
    float *res3; /* (B,T,C) residual after the MLP: the block's output, kept per layer always */
} gpt_layer_acts;

typedef struct {
    int wte, wpe, lnfw, lnfb;
    gpt_layer_params layer[DDPC_MODEL_MAX_LAYERS];
    /* Set by forward. */
    gpt_layer_acts acts[DDPC_MODEL_MAX_LAYERS];
    float *encoded;                   /* (B,T,C) */
    float *lnf, *lnf_mean, *lnf_rstd; /* (B,T,C), (B,T), (B,T) */
    float *logits; /* (B,T,V): softmax in place, then the loss's gradient (nn/loss.h) */
    float *losses;                    /* (B,T) */
    float *ws;                        /* attention workspace */
    /* Backward temporaries. */
    float *dres, *dbranch, *dln, *datty; /* (B,T,C) */
    float *dqkv;                      /* (B,T,3C) */
    float *dfch;                      /* (B,T,4C) */
    const int32_t *tokens, *targets;
    int64_t B, n_valid;
    bool training;
    bool ckpt; /* activation checkpointing: acts[l] share one set of buffers */
    bool act16; /* ln1, ln2, fch_gelu hold the table's 16-bit copies (gpt_pass.c) */
    uint64_t rng_stream;
} gpt_impl;

/* The model's own gpt config (ddpc/models.h). */
static inline const ddpc_gpt_config *ddpc__gpt_cfg(const ddpc_model *m)
{
    return (const ddpc_gpt_config *)m->type_cfg;
}

ddpc_status ddpc__gpt_check_input(const ddpc_model *m, const ddpc_model_input *in);
size_t ddpc__gpt_arena_floats(const ddpc_model *m, int64_t n, bool ckpt);
ddpc_status ddpc__gpt_forward(ddpc_model *m, const ddpc_model_input *in, bool training,
                              ddpc_model_output *out);
void ddpc__gpt_backward(ddpc_model *m, float dloss);

#endif
