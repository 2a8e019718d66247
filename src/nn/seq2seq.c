// SPDX-License-Identifier: MIT
/* "seq2seq": an encoder-decoder Transformer (Vaswani et al. 2017) laid out as torch.nn.Transformer
 * (batch_first, post-LayerNorm, ReLU feed-forward, final encoder and decoder norms), with token
 * embeddings scaled by sqrt(d_model) plus sinusoidal positions and an output projection
 * "generator". Parameters carry torch.nn.Transformer's state_dict names and are registered in
 * forward order, so backward reports them ready from the last to the first. */
#include "nn/seq2seq_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/kernels.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    ddpc_model *m;
    bool bad;
} reg;

static int add(reg *r, const char *prefix, const char *name, int ndim, int64_t a, int64_t b,
               bool decay)
{
    char full[DDPC_PARAM_NAME_MAX];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    int64_t shape[2] = {a, b};
    int idx = ddpc__model_add_param(r->m, full, ndim, shape, decay);
    r->bad |= idx < 0;
    return idx;
}

static void add_attn(reg *r, const char *prefix, s2s_attn_params *a, int64_t C)
{
    a->inw = add(r, prefix, "in_proj_weight", 2, 3 * C, C, true);
    a->inb = add(r, prefix, "in_proj_bias", 1, 3 * C, 0, false);
    a->outw = add(r, prefix, "out_proj.weight", 2, C, C, true);
    a->outb = add(r, prefix, "out_proj.bias", 1, C, 0, false);
}

static void add_norm(reg *r, const char *prefix, const char *norm, int *w, int *b, int64_t C)
{
    char name[DDPC_PARAM_NAME_MAX];
    snprintf(name, sizeof name, "%s.weight", norm);
    *w = add(r, prefix, name, 1, C, 0, false);
    snprintf(name, sizeof name, "%s.bias", norm);
    *b = add(r, prefix, name, 1, C, 0, false);
}

static void add_ffn(reg *r, const char *prefix, s2s_layer_params *p, int64_t C, int64_t F)
{
    p->l1w = add(r, prefix, "linear1.weight", 2, F, C, true);
    p->l1b = add(r, prefix, "linear1.bias", 1, F, 0, false);
    p->l2w = add(r, prefix, "linear2.weight", 2, C, F, true);
    p->l2b = add(r, prefix, "linear2.bias", 1, C, 0, false);
}

static const ddpc_seq2seq_config defaults = {
    .d_model = 512, .num_heads = 8, .num_encoder_layers = 6, .num_decoder_layers = 6,
    .d_ff = 2048, .max_len = 256, .label_smoothing = 0.1f};

ddpc_seq2seq_config ddpc_seq2seq_config_default(void) { return defaults; }

const ddpc_seq2seq_config *ddpc_seq2seq_config_of(const ddpc_model *m)
{
    return m->ops == &ddpc__seq2seq_ops ? m->type_cfg : NULL;
}

/* The network's keys; the vocabularies and max_len come from the data (read_data below). */
static ddpc_status s2s_read_config(ddpc_config *cfg, const char *prefix, void *type_cfg)
{
    ddpc_seq2seq_config *o = type_cfg;
    char key[DDPC_CONFIG_KEY_MAX];
    double ls;
    DDPC_TRY(ddpc_config_int(cfg, ddpc_config_key(key, sizeof key, prefix, "d_model"),
                             defaults.d_model, 1, 1 << 16, &o->d_model));
    DDPC_TRY(ddpc_config_int(cfg, ddpc_config_key(key, sizeof key, prefix, "num_heads"),
                             defaults.num_heads, 1, 1024, &o->num_heads));
    DDPC_TRY(ddpc_config_int(cfg, ddpc_config_key(key, sizeof key, prefix, "num_encoder_layers"),
                             defaults.num_encoder_layers, 1, DDPC_MODEL_MAX_LAYERS,
                             &o->num_encoder_layers));
    DDPC_TRY(ddpc_config_int(cfg, ddpc_config_key(key, sizeof key, prefix, "num_decoder_layers"),
                             defaults.num_decoder_layers, 1, DDPC_MODEL_MAX_LAYERS,
                             &o->num_decoder_layers));
    DDPC_TRY(ddpc_config_int(cfg, ddpc_config_key(key, sizeof key, prefix, "d_ff"), defaults.d_ff,
                             1, 1 << 20, &o->d_ff));
    /* 0.1 written as a double: the float default widened would be 0.10000000149011612 in
     * config.yaml. */
    DDPC_TRY(ddpc_config_float(cfg, ddpc_config_key(key, sizeof key, prefix, "label_smoothing"),
                               0.1, 0.0, 1.0, &ls));
    o->label_smoothing = (float)ls;
    return DDPC_OK;
}

ddpc_status ddpc_seq2seq_config_read_data(ddpc_config *cfg, const char *prefix,
                                          const ddpc_seq2seq_data *d, ddpc_seq2seq_config *c)
{
    char key[DDPC_CONFIG_KEY_MAX];
    c->src_vocab = d->src_vocab;
    c->tgt_vocab = d->tgt_vocab;
    c->vocab_digests = true;
    c->src_vocab_digest = d->src_digest;
    c->tgt_vocab_digest = d->tgt_digest;
    return ddpc_config_int(cfg, ddpc_config_key(key, sizeof key, prefix, "max_len"), d->max_len,
                           d->max_len, 1 << 16, &c->max_len);
}

static ddpc_status check_config(const ddpc_model_config *common, const ddpc_seq2seq_config *c)
{
    if (c->num_encoder_layers < 1 || c->num_encoder_layers > DDPC_MODEL_MAX_LAYERS ||
        c->num_decoder_layers < 1 || c->num_decoder_layers > DDPC_MODEL_MAX_LAYERS)
        return ddpc_errorf(DDPC_EINVAL,
                           "seq2seq num_encoder_layers and num_decoder_layers must be "
                           "in [1, %d], got %lld and %lld",
                           DDPC_MODEL_MAX_LAYERS, (long long)c->num_encoder_layers,
                           (long long)c->num_decoder_layers);
    if (c->num_heads < 1 || c->d_model < 1 || c->d_model % c->num_heads != 0)
        return ddpc_errorf(DDPC_EINVAL,
                           "seq2seq d_model (%lld) must be a positive multiple of "
                           "num_heads (%lld)",
                           (long long)c->d_model, (long long)c->num_heads);
    if (c->d_ff < 1 || c->max_len < 1)
        return ddpc_errorf(DDPC_EINVAL,
                           "seq2seq needs d_ff >= 1 and max_len >= 1, got %lld and "
                           "%lld",
                           (long long)c->d_ff, (long long)c->max_len);
    if (c->src_vocab < 4 || c->tgt_vocab < 4)
        return ddpc_errorf(DDPC_EINVAL,
                           "seq2seq vocabularies need the 4 special tokens (<pad>, "
                           "<bos>, <eos>, <unk>) at least, got src_vocab %lld and tgt_vocab %lld",
                           (long long)c->src_vocab, (long long)c->tgt_vocab);
    if (!(c->label_smoothing >= 0.0f && c->label_smoothing <= 1.0f))
        return ddpc_errorf(DDPC_EINVAL, "seq2seq label_smoothing must be in [0, 1], got %g",
                           c->label_smoothing);
    if (common->n_heads > 0)
        return ddpc_errorf(DDPC_EINVAL,
                           "seq2seq has one output head (its generator); model heads "
                           "are for mlp and cnn, got %zu",
                           common->n_heads);
    return DDPC_OK;
}

/* Training FLOPs of one pair at source width S and decoder width T: 6 per weight a token passes
 * through (encoder 4C^2 + 2CF per source token; decoder 4C^2 self-attention, 2C^2 cross-attention
 * query and output, 2CF per target token, and the cross-attention keys/values 2C^2 per source
 * token; generator CV per target token), plus attention's score and value products, 4 C per key
 * forward, times 3. */
static double s2s_train_flops(const ddpc_seq2seq_config *c, int64_t S, int64_t T)
{
    double Sd = (double)S, Td = (double)T, C = (double)c->d_model, F = (double)c->d_ff;
    double enc = Sd * (6.0 * (4 * C * C + 2 * C * F) + 12.0 * Sd * C);
    double dec = Td * (6.0 * (6 * C * C + 2 * C * F) + 12.0 * (Td + Sd) * C) + Sd * 12.0 * C * C;
    return enc * (double)c->num_encoder_layers + dec * (double)c->num_decoder_layers +
           Td * 6.0 * C * (double)c->tgt_vocab;
}

double ddpc_model_train_flops_pair(const ddpc_model *m, int64_t src_len, int64_t tgt_len)
{
    return m->ops == &ddpc__seq2seq_ops ? s2s_train_flops(ddpc__s2s_cfg(m), src_len, tgt_len)
                                        : m->train_flops_per_sample;
}

bool ddpc__s2s_table_ok(const ddpc_kernel_table *k)
{
    return k->mha_workspace_floats && k->mha_forward && k->mha_backward &&
           k->cross_entropy_smooth_forward && k->cross_entropy_smooth_backward &&
           k->sinusoidal_positions && k->embedding_scaled_forward && k->embedding_scaled_backward &&
           k->pad_mask && k->copy2d;
}

static ddpc_status s2s_build(ddpc_model *m)
{
    const ddpc_model_config *c = &m->cfg;
    const ddpc_seq2seq_config *o = ddpc__s2s_cfg(m);
    DDPC_TRY(check_config(c, o));
    s2s_impl *g = ddpc_calloc(1, sizeof *g);
    if (!g)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory building seq2seq");
    m->impl = g;
    int64_t C = o->d_model, F = o->d_ff, V = o->tgt_vocab;
    reg r = {m, false};
    char prefix[DDPC_PARAM_NAME_MAX];
    g->src_embed = add(&r, "", "src_embed.weight", 2, o->src_vocab, C, true);
    for (int l = 0; l < o->num_encoder_layers; l++) {
        s2s_layer_params *p = &g->enc_p[l];
        snprintf(prefix, sizeof prefix, "encoder.layers.%d.self_attn.", l);
        add_attn(&r, prefix, &p->self, C);
        snprintf(prefix, sizeof prefix, "encoder.layers.%d.", l);
        add_norm(&r, prefix, "norm1", &p->n1w, &p->n1b, C);
        add_ffn(&r, prefix, p, C, F);
        add_norm(&r, prefix, "norm2", &p->n2w, &p->n2b, C);
    }
    add_norm(&r, "encoder.", "norm", &g->enc_nw, &g->enc_nb, C);
    g->tgt_embed = add(&r, "", "tgt_embed.weight", 2, V, C, true);
    for (int l = 0; l < o->num_decoder_layers; l++) {
        s2s_layer_params *p = &g->dec_p[l];
        snprintf(prefix, sizeof prefix, "decoder.layers.%d.self_attn.", l);
        add_attn(&r, prefix, &p->self, C);
        snprintf(prefix, sizeof prefix, "decoder.layers.%d.", l);
        add_norm(&r, prefix, "norm1", &p->n1w, &p->n1b, C);
        snprintf(prefix, sizeof prefix, "decoder.layers.%d.multihead_attn.", l);
        add_attn(&r, prefix, &p->cross, C);
        snprintf(prefix, sizeof prefix, "decoder.layers.%d.", l);
        add_norm(&r, prefix, "norm2", &p->n2w, &p->n2b, C);
        add_ffn(&r, prefix, p, C, F);
        add_norm(&r, prefix, "norm3", &p->n3w, &p->n3b, C);
    }
    add_norm(&r, "decoder.", "norm", &g->dec_nw, &g->dec_nb, C);
    g->gen_w = add(&r, "", "generator.weight", 2, V, C, true);
    g->gen_b = add(&r, "", "generator.bias", 1, V, 0, false);
    if (r.bad)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory registering seq2seq parameters");
    m->train_flops_per_sample = s2s_train_flops(o, o->max_len, o->max_len);
    m->outputs_per_sample = o->max_len * V;
    return DDPC_OK;
}

/* torch.nn.Transformer's _reset_parameters: xavier_uniform_ for every matrix (the embeddings and
 * generator included, as in the Annotated Transformer); biases 0, LayerNorm weights 1. */
static void s2s_init(ddpc_model *m)
{
    for (size_t i = 0; i < m->n_tensors; i++) {
        const ddpc_param *p = &m->tensors[i];
        float *w = m->params + p->offset;
        if (p->ndim == 2) {
            float bound = sqrtf(6.0f / (float)(p->shape[0] + p->shape[1]));
            ddpc__init_uniform(w, p->numel, bound, m->cfg.seed, i);
        } else {
            bool norm_weight = strstr(p->name, "norm") && strstr(p->name, ".weight");
            ddpc_fill_f32(w, norm_weight ? 1.0f : 0.0f, (int64_t)p->numel);
        }
    }
}

static void s2s_destroy(ddpc_model *m)
{
    s2s_impl *g = m->impl;
    if (g && g->search)
        m->k->free(g->search);
    ddpc_free(g);
}

const ddpc_model_ops ddpc__seq2seq_ops = {
    .name = "seq2seq",
    .config_size = sizeof(ddpc_seq2seq_config),
    .default_config = &defaults,
    .read_config = s2s_read_config,
    .build = s2s_build,
    .init = s2s_init,
    .arena_floats = ddpc__s2s_arena_floats,
    .check_input = ddpc__s2s_check_input,
    .forward = ddpc__s2s_forward,
    .backward = ddpc__s2s_backward,
    .checkpointing = true,
    .destroy = s2s_destroy,
    .data_kind = DDPC_DATASET_PAIRS,
    .gpu = true,
};
