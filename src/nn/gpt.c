// SPDX-License-Identifier: MIT
/* "gpt": a GPT-2 style decoder (Radford et al. 2019): token + learned position embeddings,
 * n_layer pre-LayerNorm blocks (causal multi-head attention, GELU MLP of 4x), a final LayerNorm
 * and an output projection tied to the token embedding. Activations per layer are kept for
 * backward (or, with activation checkpointing, only each block's input, the block being recomputed
 * in backward); backward walks the blocks in reverse with one running residual gradient. */
#include "nn/gpt_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/kernels.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

static int add(ddpc_model *m, const char *fmt, int layer, int ndim, int64_t a, int64_t b, bool decay)
{
    char name[DDPC_PARAM_NAME_MAX];
    snprintf(name, sizeof name, fmt, layer);
    int64_t shape[2] = {a, b};
    return ddpc__model_add_param(m, name, ndim, shape, decay);
}

static const ddpc_gpt_config defaults = {
    .n_layer = 4, .n_head = 4, .n_embd = 256, .block_size = 128};

ddpc_gpt_config ddpc_gpt_config_default(void) { return defaults; }

const ddpc_gpt_config *ddpc_gpt_config_of(const ddpc_model *m)
{
    return m->ops == &ddpc__gpt_ops ? m->type_cfg : NULL;
}

/* model.n_layer, model.n_head, model.n_embd, model.block_size (which the token data reads too). */
static ddpc_status gpt_read_config(ddpc_config *cfg, const char *prefix, void *type_cfg)
{
    ddpc_gpt_config *o = type_cfg;
    char key[DDPC_CONFIG_KEY_MAX];
    DDPC_TRY(ddpc_config_int(cfg, ddpc_config_key(key, sizeof key, prefix, "n_layer"),
                             defaults.n_layer, 1, DDPC_MODEL_MAX_LAYERS, &o->n_layer));
    DDPC_TRY(ddpc_config_int(cfg, ddpc_config_key(key, sizeof key, prefix, "n_head"),
                             defaults.n_head, 1, 1024, &o->n_head));
    DDPC_TRY(ddpc_config_int(cfg, ddpc_config_key(key, sizeof key, prefix, "n_embd"),
                             defaults.n_embd, 1, 1 << 16, &o->n_embd));
    return ddpc_config_int(cfg, ddpc_config_key(key, sizeof key, prefix, "block_size"),
                           defaults.block_size, 1, 1 << 16, &o->block_size);
}

static ddpc_status gpt_build(ddpc_model *m)
{
    const ddpc_model_config *c = &m->cfg;
    const ddpc_gpt_config *o = ddpc__gpt_cfg(m);
    if (o->n_layer < 1 || o->n_layer > DDPC_MODEL_MAX_LAYERS)
        return ddpc_errorf(DDPC_EINVAL, "gpt n_layer must be in [1, %d], got %lld",
                           DDPC_MODEL_MAX_LAYERS, (long long)o->n_layer);
    if (o->n_head < 1 || o->n_embd < 1 || o->n_embd % o->n_head != 0)
        return ddpc_errorf(DDPC_EINVAL, "gpt n_embd (%lld) must be a positive multiple of n_head (%lld)",
                           (long long)o->n_embd, (long long)o->n_head);
    if (o->block_size < 1 || c->num_classes < 2)
        return ddpc_errorf(DDPC_EINVAL, "gpt needs block_size >= 1 and a vocabulary of at least 2");
    if (c->n_heads > 0)
        return ddpc_errorf(DDPC_EINVAL, "gpt has one output head (its tied embedding); model heads "
                           "are for mlp and cnn, got %zu", c->n_heads);
    gpt_impl *g = ddpc_calloc(1, sizeof *g);
    if (!g)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory building gpt");
    m->impl = g;
    int64_t C = o->n_embd, V = c->num_classes, T = o->block_size;
    g->wte = add(m, "wte.weight", 0, 2, V, C, true);
    g->wpe = add(m, "wpe.weight", 0, 2, T, C, true);
    int bad = g->wte < 0 || g->wpe < 0;
    for (int l = 0; l < o->n_layer; l++) {
        gpt_layer_params *p = &g->layer[l];
        p->ln1w = add(m, "blocks.%d.ln1.weight", l, 1, C, 0, false);
        p->ln1b = add(m, "blocks.%d.ln1.bias", l, 1, C, 0, false);
        p->qkvw = add(m, "blocks.%d.attn.qkv.weight", l, 2, 3 * C, C, true);
        p->qkvb = add(m, "blocks.%d.attn.qkv.bias", l, 1, 3 * C, 0, false);
        p->projw = add(m, "blocks.%d.attn.proj.weight", l, 2, C, C, true);
        p->projb = add(m, "blocks.%d.attn.proj.bias", l, 1, C, 0, false);
        p->ln2w = add(m, "blocks.%d.ln2.weight", l, 1, C, 0, false);
        p->ln2b = add(m, "blocks.%d.ln2.bias", l, 1, C, 0, false);
        p->fcw = add(m, "blocks.%d.mlp.fc.weight", l, 2, 4 * C, C, true);
        p->fcb = add(m, "blocks.%d.mlp.fc.bias", l, 1, 4 * C, 0, false);
        p->fcprojw = add(m, "blocks.%d.mlp.proj.weight", l, 2, C, 4 * C, true);
        p->fcprojb = add(m, "blocks.%d.mlp.proj.bias", l, 1, C, 0, false);
        bad |= p->ln1w < 0 || p->ln1b < 0 || p->qkvw < 0 || p->qkvb < 0 || p->projw < 0 ||
               p->projb < 0 || p->ln2w < 0 || p->ln2b < 0 || p->fcw < 0 || p->fcb < 0 ||
               p->fcprojw < 0 || p->fcprojb < 0;
    }
    g->lnfw = add(m, "lnf.weight", 0, 1, C, 0, false);
    g->lnfb = add(m, "lnf.bias", 0, 1, C, 0, false);
    if (bad || g->lnfw < 0 || g->lnfb < 0)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory registering gpt parameters");
    /* Per token: 6 FLOPs per matrix weight (12 C^2 per layer + the tied V x C head), plus
     * attention's QK^T and PV, 4 T C forward per layer (counted as if not causal), times 3. */
    double per_token = 6.0 * (double)(12 * C * C * o->n_layer + V * C) +
                       12.0 * (double)(T * C * o->n_layer);
    m->train_flops_per_sample = per_token * (double)T;
    m->outputs_per_sample = T * V;
    return DDPC_OK;
}

/* GPT-2 initialisation: N(0, 0.02), residual projections N(0, 0.02 / sqrt(2 n_layer)),
 * biases 0, LayerNorm weights 1. */
static void gpt_init(ddpc_model *m)
{
    uint64_t seed = m->cfg.seed;
    for (size_t i = 0; i < m->n_tensors; i++) {
        const ddpc_param *p = &m->tensors[i];
        float *w = m->params + p->offset;
        if (p->ndim == 2) {
            bool residual = strstr(p->name, ".proj.weight") != NULL;
            float std = residual ? 0.02f / sqrtf(2.0f * (float)ddpc__gpt_cfg(m)->n_layer) : 0.02f;
            ddpc__init_normal(w, p->numel, std, seed, i);
        } else {
            bool ln_weight = strstr(p->name, "ln") && strstr(p->name, ".weight");
            ddpc_fill_f32(w, ln_weight ? 1.0f : 0.0f, (int64_t)p->numel);
        }
    }
}

static void gpt_destroy(ddpc_model *m)
{
    ddpc_free(m->impl);
}

const ddpc_model_ops ddpc__gpt_ops = {
    .name = "gpt",
    .config_size = sizeof(ddpc_gpt_config),
    .default_config = &defaults,
    .read_config = gpt_read_config,
    .build = gpt_build,
    .init = gpt_init,
    .arena_floats = ddpc__gpt_arena_floats,
    .check_input = ddpc__gpt_check_input,
    .forward = ddpc__gpt_forward,
    .backward = ddpc__gpt_backward,
    .checkpointing = true,
    .destroy = gpt_destroy,
    .data_kind = DDPC_DATASET_TOKENS,
    .gpu = true,
};
