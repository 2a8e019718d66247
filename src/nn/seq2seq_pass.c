// SPDX-License-Identifier: MIT
/* seq2seq forward and backward over the arena. carve() lays the buffers out in a fixed order for a
 * batch of (B, S, T); the arena is sized for S = T = max_len, so any shorter batch fits. Forward:
 * masks from the <pad> tokens, the encoder into `memory`, the decoder into logits, the
 * label-smoothed loss. Backward: generator, decoder layers in reverse (each adding its
 * cross-attention's gradient into dmem), the target embedding, then the encoder from dmem. */
#include "nn/seq2seq_impl.h"

#include <ddpc/kernels.h>

#include <math.h>

#define P(idx) ddpc__param_ptr(m, (idx))
#define G(idx) ddpc__grad_ptr(m, (idx))

enum { PAD = 0 };

/* One layer's activations over L positions (decoder: with cross-attention on S source rows) into
 * *a (NULL: only counting). shared: *a already views layer 0's set; only its output is its own. */
static void carve_layer(float **p, s2s_layer_acts *a, int64_t B, int64_t L, int64_t S,
                        const ddpc_seq2seq_config *c, bool decoder, bool shared)
{
    size_t C = (size_t)c->d_model, F = (size_t)c->d_ff, H = (size_t)c->num_heads;
    size_t BL = (size_t)(B * L), BS = (size_t)(B * S);
    s2s_layer_acts t = a && shared ? *a : (s2s_layer_acts){0};
    if (!shared) {
        t.qkv = ddpc__take(p, BL * 3 * C);
        t.att = ddpc__take(p, (size_t)B * H * (size_t)(L * L));
        t.atty = ddpc__take(p, BL * C);
        t.res1 = ddpc__take(p, BL * C);
        t.h1 = ddpc__take(p, BL * C);
        t.mean1 = ddpc__take(p, BL);
        t.rstd1 = ddpc__take(p, BL);
        if (decoder) {
            t.q2 = ddpc__take(p, BL * C);
            t.kv2 = ddpc__take(p, BS * 2 * C);
            t.att2 = ddpc__take(p, (size_t)B * H * (size_t)(L * S));
            t.atty2 = ddpc__take(p, BL * C);
            t.res2 = ddpc__take(p, BL * C);
            t.h2 = ddpc__take(p, BL * C);
            t.mean2 = ddpc__take(p, BL);
            t.rstd2 = ddpc__take(p, BL);
        }
        t.ff = ddpc__take(p, BL * F);
        t.resf = ddpc__take(p, BL * C);
        t.meanf = ddpc__take(p, BL);
        t.rstdf = ddpc__take(p, BL);
    }
    t.out = ddpc__take(p, BL * C);
    if (a)
        *a = t;
}

size_t ddpc__s2s_carve(const ddpc_model *m, s2s_impl *g, int64_t B, int64_t S, int64_t T, bool ckpt,
                       float *base)
{
    const ddpc_seq2seq_config *o = ddpc__s2s_cfg(m);
    size_t C = (size_t)o->d_model, V = (size_t)o->tgt_vocab, F = (size_t)o->d_ff;
    size_t L = (size_t)(S > T ? S : T), BS = (size_t)(B * S), BT = (size_t)(B * T);
    size_t BL = (size_t)B * L;
    float *p = base;
    s2s_impl *n = g; /* NULL when only counting */
#define TAKE(field, count)                                                                         \
    do {                                                                                           \
        float *t_ = ddpc__take(&p, (count));                                                       \
        if (n)                                                                                     \
            n->field = t_;                                                                         \
    } while (0)
    TAKE(pe, L * C);
    float *src_pad = ddpc__take(&p, (BS + 3) / 4), *tgt_pad = ddpc__take(&p, (BT + 3) / 4);
    if (n)
        n->src_pad = (uint8_t *)src_pad, n->tgt_pad = (uint8_t *)tgt_pad;
    TAKE(src_x, BS * C);
    for (int l = 0; l < o->num_encoder_layers; l++) {
        s2s_layer_acts *a = n ? &n->enc[l] : NULL;
        if (a && ckpt && l > 0)
            *a = n->enc[0];
        carve_layer(&p, a, B, S, S, o, false, ckpt && l > 0);
    }
    TAKE(memory, BS * C);
    TAKE(mem_mean, BS);
    TAKE(mem_rstd, BS);
    TAKE(tgt_x, BT * C);
    for (int l = 0; l < o->num_decoder_layers; l++) {
        s2s_layer_acts *a = n ? &n->dec[l] : NULL;
        if (a && ckpt && l > 0)
            *a = n->dec[0];
        carve_layer(&p, a, B, T, S, o, true, ckpt && l > 0);
    }
    TAKE(dec_y, BT * C);
    TAKE(dec_mean, BT);
    TAKE(dec_rstd, BT);
    TAKE(logits, BT * V);
    TAKE(losses, BT);
    ddpc_mha_shape ws = {
        .b = B, .tq = (int64_t)L, .tk = (int64_t)L, .c = o->d_model, .nh = o->num_heads};
    TAKE(ws, m->k->mha_workspace_floats(&ws));
    TAKE(dlogits, BT * V);
    for (int i = 0; i < 3; i++)
        TAKE(d[i], BL * C);
    TAKE(dbranch, BL * C);
    TAKE(datty, BL * C);
    TAKE(dqkv, BL * 3 * C);
    TAKE(dq2, BT * C);
    TAKE(dkv2, BS * 2 * C);
    TAKE(dff[0], BL * F);
    TAKE(dff[1], BL * F);
    TAKE(dmem, BS * C);
#undef TAKE
    return (size_t)(p - base);
}

size_t ddpc__s2s_arena_floats(const ddpc_model *m, int64_t n, bool ckpt)
{
    int64_t L = ddpc__s2s_cfg(m)->max_len;
    return ddpc__s2s_carve(m, NULL, n, L, L, ckpt, NULL);
}

static void embed(ddpc_model *m, s2s_impl *g, float *x, const int32_t *tok, int w, int64_t L,
                  uint64_t site)
{
    int64_t C = ddpc__s2s_cfg(m)->d_model, n = g->B * L;
    m->k->embedding_scaled_forward(x, tok, P(w), sqrtf((float)C), g->pe, g->B, L, C);
    if (g->training && m->cfg.dropout > 0.0f)
        m->k->dropout_forward(x, x, n * C, m->cfg.dropout, m->cfg.seed, ddpc__s2s_site(g, site));
}

void ddpc__s2s_encode(ddpc_model *m, s2s_impl *g, const int32_t *src)
{
    const ddpc_seq2seq_config *o = ddpc__s2s_cfg(m);
    int64_t S = g->S, T = g->T, C = o->d_model;
    g->src = src;
    m->k->sinusoidal_positions(g->pe, S > T ? S : T, C);
    m->k->pad_mask(g->src_pad, src, g->B * S, PAD);
    embed(m, g, g->src_x, src, g->src_embed, S, S2S_SITE_SRC);
    const float *x = g->src_x;
    for (int l = 0; l < o->num_encoder_layers; l++) {
        ddpc__s2s_enc_layer_forward(m, g, l, x);
        x = g->enc[l].out;
    }
    m->k->layernorm_forward(g->memory, g->mem_mean, g->mem_rstd, x, P(g->enc_nw), P(g->enc_nb),
                            g->B * S, C);
}

void ddpc__s2s_decode(ddpc_model *m, s2s_impl *g, const int32_t *tgt)
{
    const ddpc_model_config *c = &m->cfg;
    const ddpc_seq2seq_config *o = ddpc__s2s_cfg(m);
    int64_t T = g->T, C = o->d_model, BT = g->B * T;
    g->tgt = tgt;
    m->k->pad_mask(g->tgt_pad, tgt, BT, PAD);
    embed(m, g, g->tgt_x, tgt, g->tgt_embed, T, S2S_SITE_TGT);
    const float *x = g->tgt_x;
    for (int l = 0; l < o->num_decoder_layers; l++) {
        ddpc__s2s_dec_layer_forward(m, g, l, x);
        x = g->dec[l].out;
    }
    m->k->layernorm_forward(g->dec_y, g->dec_mean, g->dec_rstd, x, P(g->dec_nw), P(g->dec_nb), BT,
                            C);
    m->k->linear_forward(c->precision, g->logits, g->dec_y, P(g->gen_w), P(g->gen_b), BT, C,
                         o->tgt_vocab);
}

/* On the host batch, before ddpc_model_forward stages it on the model's device. */
static ddpc_status check_tokens(const int32_t *tok, int64_t n, int64_t vocab, const char *what)
{
    if (!tok)
        return ddpc_errorf(DDPC_EINVAL, "seq2seq forward needs %s tokens", what);
    for (int64_t i = 0; i < n; i++)
        if (tok[i] < 0 || tok[i] >= vocab)
            return ddpc_errorf(DDPC_EINVAL,
                               "seq2seq %s token %d at position %lld is outside the "
                               "vocabulary of %lld",
                               what, tok[i], (long long)i, (long long)vocab);
    return DDPC_OK;
}

ddpc_status ddpc__s2s_check_input(const ddpc_model *m, const ddpc_model_input *in)
{
    const ddpc_seq2seq_config *o = ddpc__s2s_cfg(m);
    int64_t B = in->n, S = in->src_len, T = in->tgt_len;
    if (S < 1 || S > o->max_len || T < 1 || T > o->max_len)
        return ddpc_errorf(DDPC_EINVAL,
                           "seq2seq src_len %lld and tgt_len %lld must be in [1, "
                           "max_len %lld]",
                           (long long)S, (long long)T, (long long)o->max_len);
    DDPC_TRY(check_tokens(in->src_tokens, B * S, o->src_vocab, "source"));
    return check_tokens(in->tokens, B * T, o->tgt_vocab, "target");
}

/* Whether this forward leaves its loss on the device, in the loss sink: the table has the
 * no-wait members (a GPU's) and the caller gave a sink (the engine, reading at logged steps). */
static bool deferred(const ddpc_model *m)
{
    return m->loss_sink && m->k->cross_entropy_smooth_forward_into && m->k->argmax_correct_into;
}

/* The label-smoothed loss and the argmax hits of the logits (B*T, V), which become the
 * probabilities. Deferred: into the sink {loss sum, valid rows, hits}, *out's loss NaN and counts
 * -1, and backward takes the count from there. Else read now (a wait on a device); a sink of a
 * table without the no-wait members gets the values anyway: loss * n_valid is exact in double
 * (24 + 29 bits, fewer than 2^29 rows), so its reader's sums[0] / sums[1] is the loss, bit for
 * bit. */
static void loss_forward(ddpc_model *m, s2s_impl *g, int64_t n, int64_t v, ddpc_model_output *out)
{
    const ddpc_kernel_table *k = m->k;
    float eps = ddpc__s2s_cfg(m)->label_smoothing;
    g->sums = NULL;
    if (deferred(m)) {
        k->argmax_correct_into(m->loss_sink + 2, g->logits, g->targets, n, v, PAD);
        k->cross_entropy_smooth_forward_into(m->loss_sink, g->logits, g->losses, g->logits,
                                             g->targets, n, v, PAD, eps);
        g->sums = m->loss_sink;
        out->loss = NAN;
        out->n_valid = out->n_correct = -1;
        return;
    }
    out->n_correct = k->argmax_correct(g->logits, g->targets, n, v, PAD);
    out->loss = k->cross_entropy_smooth_forward(g->logits, g->losses, g->logits, g->targets, n, v,
                                                PAD, eps, &out->n_valid);
    g->n_valid = out->n_valid;
    if (m->loss_sink) {
        double sums[3] = {(double)out->loss * (double)out->n_valid, (double)out->n_valid,
                          (double)out->n_correct};
        k->to_device(m->loss_sink, sums, sizeof sums);
    }
}

/* dlogits (n, v) = dloss * d(loss)/d(logits), from forward's probabilities. */
static void loss_backward(ddpc_model *m, s2s_impl *g, int64_t n, int64_t v, float dloss)
{
    const ddpc_kernel_table *k = m->k;
    float eps = ddpc__s2s_cfg(m)->label_smoothing;
    k->fill_f32(g->dlogits, 0.0f, n * v);
    if (g->sums)
        k->cross_entropy_smooth_backward_from(g->dlogits, g->logits, g->targets, n, v, PAD, eps,
                                              g->sums, dloss);
    else
        k->cross_entropy_smooth_backward(g->dlogits, g->logits, g->targets, n, v, PAD, eps,
                                         g->n_valid, dloss);
}

ddpc_status ddpc__s2s_forward(ddpc_model *m, const ddpc_model_input *in, bool training,
                              ddpc_model_output *out)
{
    s2s_impl *g = m->impl;
    const ddpc_model_config *c = &m->cfg;
    const ddpc_seq2seq_config *o = ddpc__s2s_cfg(m);
    int64_t B = in->n, S = in->src_len, T = in->tgt_len, V = o->tgt_vocab;
    g->ckpt = c->activation_checkpointing;
    ddpc__s2s_carve(m, g, B, S, T, g->ckpt, m->arena);
    g->B = B, g->S = S, g->T = T;
    g->training = training;
    g->rng_stream = in->rng_stream;
    g->targets = in->targets;
    ddpc__s2s_encode(m, g, in->src_tokens);
    ddpc__s2s_decode(m, g, in->tokens);
    m->probs = g->logits;
    m->probs_count = (size_t)(B * T * V);
    *out = (ddpc_model_output){0};
    if (!in->targets) {
        m->k->softmax_rows(g->logits, B * T, V);
        return DDPC_OK;
    }
    loss_forward(m, g, B * T, V, out);
    return DDPC_OK;
}

static void ready(ddpc_model *m, int a, int b)
{
    ddpc__model_grad_ready(m, a);
    ddpc__model_grad_ready(m, b);
}

/* The embedding's gradient from d (B, L, C), through its dropout. */
static void embed_backward(ddpc_model *m, s2s_impl *g, const float *d, const int32_t *tok, int w,
                           int64_t L, uint64_t site)
{
    int64_t C = ddpc__s2s_cfg(m)->d_model, n = g->B * L * C;
    if (g->training && m->cfg.dropout > 0.0f) {
        m->k->fill_f32(g->dbranch, 0.0f, n);
        m->k->dropout_backward(g->dbranch, d, n, m->cfg.dropout, m->cfg.seed,
                               ddpc__s2s_site(g, site));
        d = g->dbranch;
    }
    m->k->embedding_scaled_backward(G(w), d, tok, sqrtf((float)C), g->B, L, C);
    ddpc__model_grad_ready(m, w);
}

void ddpc__s2s_backward(ddpc_model *m, float dloss)
{
    s2s_impl *g = m->impl;
    const ddpc_model_config *c = &m->cfg;
    const ddpc_seq2seq_config *o = ddpc__s2s_cfg(m);
    int64_t B = g->B, S = g->S, T = g->T, C = o->d_model, V = o->tgt_vocab, BT = B * T;
    int Le = (int)o->num_encoder_layers, Ld = (int)o->num_decoder_layers;
    loss_backward(m, g, BT, V, dloss);
    m->k->fill_f32(g->d[1], 0.0f, BT * C);
    m->k->linear_backward(c->precision, g->d[1], G(g->gen_w), G(g->gen_b), g->dlogits, g->dec_y,
                          P(g->gen_w), BT, C, V);
    ready(m, g->gen_w, g->gen_b);
    m->k->fill_f32(g->d[0], 0.0f, BT * C);
    m->k->layernorm_backward(g->d[0], G(g->dec_nw), G(g->dec_nb), g->d[1], g->dec[Ld - 1].out,
                             P(g->dec_nw), g->dec_mean, g->dec_rstd, BT, C);
    ready(m, g->dec_nw, g->dec_nb);
    m->k->fill_f32(g->dmem, 0.0f, B * S * C);
    for (int l = Ld - 1; l >= 0; l--) {
        const float *x = l > 0 ? g->dec[l - 1].out : g->tgt_x;
        /* The shared set holds the last layer's activations from forward. */
        if (g->ckpt && l < Ld - 1)
            ddpc__s2s_dec_layer_forward(m, g, l, x);
        ddpc__s2s_dec_layer_backward(m, g, l, x);
    }
    embed_backward(m, g, g->d[0], g->tgt, g->tgt_embed, T, S2S_SITE_TGT);
    m->k->fill_f32(g->d[0], 0.0f, B * S * C);
    m->k->layernorm_backward(g->d[0], G(g->enc_nw), G(g->enc_nb), g->dmem, g->enc[Le - 1].out,
                             P(g->enc_nw), g->mem_mean, g->mem_rstd, B * S, C);
    ready(m, g->enc_nw, g->enc_nb);
    for (int l = Le - 1; l >= 0; l--) {
        const float *x = l > 0 ? g->enc[l - 1].out : g->src_x;
        if (g->ckpt && l < Le - 1)
            ddpc__s2s_enc_layer_forward(m, g, l, x);
        ddpc__s2s_enc_layer_backward(m, g, l, x);
    }
    embed_backward(m, g, g->d[0], g->src, g->src_embed, S, S2S_SITE_SRC);
}
