// SPDX-License-Identifier: MIT
/* gpt forward and backward passes over the arena. Forward carves the activations in a fixed
 * order, so arena_floats() and forward() must agree: both walk carve_all(). Backward keeps one
 * running residual gradient `dres` and accumulates each branch's input gradient into it. With
 * activation checkpointing, backward first recomputes block l from its kept input (the same
 * kernels and dropout sites as forward, so the same bits) into the shared activation set. Where
 * the table takes 16-bit activations (act16_applies, asked once per forward), ln1, ln2 and
 * fch_gelu hold only their 16-bit copies, which just the linear layers after them read (LayerNorm's
 * and GELU's backward read their inputs), forward, backward and recomputation alike. */
#include "nn/gpt_impl.h"
#include "nn/loss.h"

#include <ddpc/kernels.h>

#define P(idx) ddpc__param_ptr(m, (idx))
#define G(idx) ddpc__grad_ptr(m, (idx))

/* Carves every buffer for a batch of B from `base` (NULL: only counts). Returns floats used. With
 * ckpt, layers past the first view layer 0's activations and own only their output res3. */
static size_t carve_all(const ddpc_model *m, gpt_impl *g, int64_t B, bool ckpt, float *base)
{
    const ddpc_model_config *c = &m->cfg;
    const ddpc_gpt_config *o = ddpc__gpt_cfg(m);
    size_t T = (size_t)o->block_size, C = (size_t)o->n_embd, V = (size_t)c->num_classes;
    size_t NH = (size_t)o->n_head, BT = (size_t)B * T;
    float *p = base;
#define TAKE(field, count)                                                                         \
    do {                                                                                           \
        float *t_ = ddpc__take(&p, (count));                                                       \
        if (g)                                                                                     \
            g->field = t_;                                                                         \
    } while (0)
    TAKE(encoded, BT * C);
    for (int l = 0; l < o->n_layer; l++) {
        if (ckpt && l > 0) {
            if (g)
                g->acts[l] = g->acts[0];
        } else {
            TAKE(acts[l].ln1, BT * C);
            TAKE(acts[l].ln1_mean, BT);
            TAKE(acts[l].ln1_rstd, BT);
            TAKE(acts[l].qkv, BT * 3 * C);
            TAKE(acts[l].att, m->k->attention_saved_floats(c->precision, B, (int64_t)T,
                                                           (int64_t)C, (int64_t)NH));
            TAKE(acts[l].atty, BT * C);
            TAKE(acts[l].res2, BT * C);
            TAKE(acts[l].ln2, BT * C);
            TAKE(acts[l].ln2_mean, BT);
            TAKE(acts[l].ln2_rstd, BT);
            TAKE(acts[l].fch, BT * 4 * C);
            TAKE(acts[l].fch_gelu, BT * 4 * C);
        }
        TAKE(acts[l].res3, BT * C);
    }
    TAKE(lnf, BT * C);
    TAKE(lnf_mean, BT);
    TAKE(lnf_rstd, BT);
    TAKE(logits, BT * V);
    TAKE(losses, BT);
    TAKE(ws, m->k->attention_workspace_floats(c->precision, B, o->block_size, o->n_embd,
                                              o->n_head));
    TAKE(dres, BT * C);
    TAKE(dbranch, BT * C);
    TAKE(dln, BT * C);
    TAKE(datty, BT * C);
    TAKE(dqkv, BT * 3 * C);
    TAKE(dfch, BT * 4 * C);
#undef TAKE
    return (size_t)(p - base);
}

size_t ddpc__gpt_arena_floats(const ddpc_model *m, int64_t n, bool ckpt)
{
    return carve_all(m, NULL, n, ckpt, NULL);
}

/* Whether this forward keeps ln1, ln2 and fch_gelu in 16 bits: the table has the members and
 * takes both shapes at this precision. */
static bool act16_applies(const ddpc_model *m, int64_t BT, int64_t C)
{
    const ddpc_kernel_table *k = m->k;
    ddpc_precision prec = m->cfg.precision;
    return k->act16_applies && k->layernorm_forward16 && k->gelu_forward16 && k->linear_forward16 &&
           k->linear_backward16 && k->act16_applies(prec, BT, C) &&
           k->act16_applies(prec, BT, 4 * C);
}

/* y (BT, out) = x (BT, in) @ w^T + b (+ r (BT, out) when given), x 16-bit where x16. */
static void linear_in(ddpc_model *m, bool x16, float *y, const float *x, int w, int b,
                      const float *r, int64_t BT, int64_t in, int64_t out)
{
    ddpc_precision prec = m->cfg.precision;
    if (x16)
        m->k->linear_forward16(prec, y, x, P(w), P(b), r, BT, in, out);
    else if (r)
        m->k->linear_residual_forward(prec, y, x, P(w), P(b), r, BT, in, out);
    else
        m->k->linear_forward(prec, y, x, P(w), P(b), BT, in, out);
}

/* linear_backward onto dx (zeroed first), dw, db, x 16-bit where x16. */
static void linear_back(ddpc_model *m, bool x16, float *dx, int w, int b, const float *dy,
                        const float *x, int64_t BT, int64_t in, int64_t out)
{
    ddpc_precision prec = m->cfg.precision;
    m->k->fill_f32(dx, 0.0f, BT * in);
    if (x16)
        m->k->linear_backward16(prec, dx, G(w), G(b), dy, x, P(w), BT, in, out);
    else
        m->k->linear_backward(prec, dx, G(w), G(b), dy, x, P(w), BT, in, out);
}

/* y (BT, C) = r (BT, C) + dropout(xin (BT, in) @ w^T + b), the end of a residual branch; without
 * dropout, r and b seed the sgemm's output, so the sum costs no extra pass. xin is 16-bit where
 * x16. */
static void residual_out(ddpc_model *m, const gpt_impl *g, bool x16, float *y, const float *xin,
                         int w, int b, const float *r, int64_t BT, int64_t in, uint64_t site)
{
    const ddpc_model_config *c = &m->cfg;
    const ddpc_gpt_config *o = ddpc__gpt_cfg(m);
    float drop = g->training ? c->dropout : 0.0f;
    if (drop <= 0.0f) {
        linear_in(m, x16, y, xin, w, b, r, BT, in, o->n_embd);
        return;
    }
    linear_in(m, x16, y, xin, w, b, NULL, BT, in, o->n_embd);
    m->k->dropout_forward(y, y, BT * o->n_embd, drop, c->seed, g->rng_stream * 64 + site);
    m->k->add_f32(y, y, r, BT * o->n_embd);
}

/* Block l on its input x (BT, C) up to the MLP's GELU: every activation its backward reads. The
 * recomputation in backward is this same call, so it reproduces forward's bits. */
static void block_activations(ddpc_model *m, gpt_impl *g, int l, const float *x, int64_t BT,
                              int64_t B)
{
    const ddpc_gpt_config *o = ddpc__gpt_cfg(m);
    int64_t C = o->n_embd, T = o->block_size;
    const gpt_layer_params *p = &g->layer[l];
    gpt_layer_acts *a = &g->acts[l];
    const ddpc_precision prec = m->cfg.precision;
    if (g->act16)
        m->k->layernorm_forward16(prec, a->ln1, a->ln1_mean, a->ln1_rstd, x, P(p->ln1w), P(p->ln1b),
                                  BT, C);
    else
        m->k->layernorm_forward(a->ln1, a->ln1_mean, a->ln1_rstd, x, P(p->ln1w), P(p->ln1b), BT, C);
    linear_in(m, g->act16, a->qkv, a->ln1, p->qkvw, p->qkvb, NULL, BT, C, 3 * C);
    m->k->attention_forward(prec, a->atty, a->att, a->qkv, B, T, C, o->n_head, g->ws);
    residual_out(m, g, false, a->res2, a->atty, p->projw, p->projb, x, BT, C, 2 * (uint64_t)l);
    if (g->act16)
        m->k->layernorm_forward16(prec, a->ln2, a->ln2_mean, a->ln2_rstd, a->res2, P(p->ln2w),
                                  P(p->ln2b), BT, C);
    else
        m->k->layernorm_forward(a->ln2, a->ln2_mean, a->ln2_rstd, a->res2, P(p->ln2w), P(p->ln2b),
                                BT, C);
    linear_in(m, g->act16, a->fch, a->ln2, p->fcw, p->fcb, NULL, BT, C, 4 * C);
    if (g->act16)
        m->k->gelu_forward16(prec, a->fch_gelu, a->fch, BT * 4 * C);
    else
        m->k->gelu_forward(a->fch_gelu, a->fch, BT * 4 * C);
}

static void block_forward(ddpc_model *m, gpt_impl *g, int l, const float *x, int64_t BT, int64_t B)
{
    const gpt_layer_params *p = &g->layer[l];
    gpt_layer_acts *a = &g->acts[l];
    block_activations(m, g, l, x, BT, B);
    residual_out(m, g, g->act16, a->res3, a->fch_gelu, p->fcprojw, p->fcprojb, a->res2, BT,
                 4 * ddpc__gpt_cfg(m)->n_embd, 2 * (uint64_t)l + 1);
}

ddpc_status ddpc__gpt_check_input(const ddpc_model *m, const ddpc_model_input *in)
{
    int64_t BT = in->n * ddpc__gpt_cfg(m)->block_size, V = m->cfg.num_classes;
    if (!in->tokens)
        return ddpc_errorf(DDPC_EINVAL, "gpt forward needs token inputs");
    for (int64_t i = 0; i < BT; i++)
        if (in->tokens[i] < 0 || in->tokens[i] >= V)
            return ddpc_errorf(DDPC_EINVAL,
                               "token %d at position %lld is outside the vocabulary of %lld",
                               in->tokens[i], (long long)i, (long long)V);
    return DDPC_OK;
}

ddpc_status ddpc__gpt_forward(ddpc_model *m, const ddpc_model_input *in, bool training,
                              ddpc_model_output *out)
{
    gpt_impl *g = m->impl;
    const ddpc_model_config *c = &m->cfg;
    const ddpc_gpt_config *o = ddpc__gpt_cfg(m);
    int64_t B = in->n, T = o->block_size, C = o->n_embd, V = c->num_classes, BT = B * T;
    g->ckpt = c->activation_checkpointing;
    carve_all(m, g, B, g->ckpt, m->arena);
    g->B = B;
    g->training = training;
    g->rng_stream = in->rng_stream;
    g->tokens = in->tokens;
    g->targets = in->targets;
    g->act16 = act16_applies(m, BT, C);
    m->k->embedding_forward(g->encoded, in->tokens, P(g->wte), P(g->wpe), B, T, C);
    const float *x = g->encoded;
    for (int l = 0; l < o->n_layer; l++) {
        block_forward(m, g, l, x, BT, B);
        x = g->acts[l].res3;
    }
    m->k->layernorm_forward(g->lnf, g->lnf_mean, g->lnf_rstd, x, P(g->lnfw), P(g->lnfb), BT, C);
    *out = (ddpc_model_output){0};
    /* A training step at 16 bits may keep the logits in 16 bits, product and loss in one. wte is
     * asked for once (a ZeRO-3 hook gathers it), whichever path takes it. */
    const float *wte = P(g->wte);
    if (ddpc__ce_head16_forward(m, g->logits, g->losses, g->lnf, wte, in->targets, BT, C, V, out)) {
        g->n_valid = out->n_valid;
        return DDPC_OK;
    }
    m->k->linear_forward(m->cfg.precision, g->logits, g->lnf, wte, NULL, BT, C, V);
    m->probs = g->logits;
    m->probs_count = (size_t)(BT * V);
    if (!in->targets) {
        m->k->softmax_rows(g->logits, BT, V);
        return DDPC_OK;
    }
    ddpc__ce_forward(m, g->logits, g->losses, in->targets, BT, V, out);
    g->n_valid = out->n_valid;
    return DDPC_OK;
}

/* Gradient through an (optional) dropout into `tmp`; returns the buffer that holds it. */
static const float *through_dropout(const ddpc_model *m, const gpt_impl *g, const float *d,
                                    float *tmp, int64_t n, uint64_t site)
{
    float drop = g->training ? m->cfg.dropout : 0.0f;
    if (drop <= 0.0f)
        return d;
    m->k->fill_f32(tmp, 0.0f, n);
    m->k->dropout_backward(tmp, d, n, drop, m->cfg.seed, g->rng_stream * 64 + site);
    return tmp;
}

/* Reports a weight/bias (or gain/shift) pair's gradients as final. */
static void ready(ddpc_model *m, int a, int b)
{
    ddpc__model_grad_ready(m, a);
    ddpc__model_grad_ready(m, b);
}

static void block_backward(ddpc_model *m, gpt_impl *g, int l, const float *x, int64_t BT, int64_t B)
{
    const ddpc_gpt_config *o = ddpc__gpt_cfg(m);
    int64_t C = o->n_embd, T = o->block_size;
    const gpt_layer_params *p = &g->layer[l];
    const gpt_layer_acts *a = &g->acts[l];
    /* res3 = res2 + mlp(ln2(res2)): dres passes through and gains the MLP branch's gradient. */
    const float *dproj = through_dropout(m, g, g->dres, g->dbranch, BT * C, 2 * (uint64_t)l + 1);
    /* dfch holds the gradient of fch_gelu, then (gelu backward in place) that of fch. */
    linear_back(m, g->act16, g->dfch, p->fcprojw, p->fcprojb, dproj, a->fch_gelu, BT, 4 * C, C);
    ready(m, p->fcprojw, p->fcprojb);
    m->k->gelu_backward(g->dfch, g->dfch, a->fch, BT * 4 * C);
    linear_back(m, g->act16, g->dln, p->fcw, p->fcb, g->dfch, a->ln2, BT, C, 4 * C);
    ready(m, p->fcw, p->fcb);
    m->k->layernorm_backward(g->dres, G(p->ln2w), G(p->ln2b), g->dln, a->res2, P(p->ln2w),
                            a->ln2_mean, a->ln2_rstd, BT, C);
    ready(m, p->ln2w, p->ln2b);
    /* res2 = x + attn(ln1(x)). */
    dproj = through_dropout(m, g, g->dres, g->dbranch, BT * C, 2 * (uint64_t)l);
    m->k->fill_f32(g->datty, 0.0f, BT * C);
    m->k->linear_backward(m->cfg.precision, g->datty, G(p->projw), G(p->projb), dproj, a->atty,
                         P(p->projw), BT, C, C);
    ready(m, p->projw, p->projb);
    m->k->attention_backward(m->cfg.precision, g->dqkv, g->datty, a->qkv, a->att, B, T, C,
                             o->n_head, g->ws);
    linear_back(m, g->act16, g->dln, p->qkvw, p->qkvb, g->dqkv, a->ln1, BT, C, 3 * C);
    ready(m, p->qkvw, p->qkvb);
    m->k->layernorm_backward(g->dres, G(p->ln1w), G(p->ln1b), g->dln, x, P(p->ln1w), a->ln1_mean,
                            a->ln1_rstd, BT, C);
    ready(m, p->ln1w, p->ln1b);
}

void ddpc__gpt_backward(ddpc_model *m, float dloss)
{
    gpt_impl *g = m->impl;
    const ddpc_model_config *c = &m->cfg;
    const ddpc_gpt_config *o = ddpc__gpt_cfg(m);
    int64_t B = g->B, T = o->block_size, C = o->n_embd, V = c->num_classes, BT = B * T;
    /* The LM head's backward reads dlogits and its input lnf, never the logits: the gradient is
     * written over them (B*T*V floats, GPT-2's 3.3 GB at B 16, T 1024, kept in no other buffer),
     * in 16 bits where the forward took the head into the loss. */
    if (m->ce_half) {
        m->k->fill_f32(g->dln, 0.0f, BT * C);
        m->k->head16_backward(m->cfg.precision, g->dln, G(g->wte), g->logits, g->lnf, P(g->wte), BT,
                              C, V);
    } else {
        const float *dlogits =
            ddpc__ce_backward(m, g->logits, g->targets, BT, V, g->n_valid, dloss);
        m->k->fill_f32(g->dln, 0.0f, BT * C);
        m->k->linear_backward(m->cfg.precision, g->dln, G(g->wte), NULL, dlogits, g->lnf, P(g->wte),
                              BT, C, V);
    }
    const float *last = o->n_layer > 0 ? g->acts[o->n_layer - 1].res3 : g->encoded;
    m->k->fill_f32(g->dres, 0.0f, BT * C);
    m->k->layernorm_backward(g->dres, G(g->lnfw), G(g->lnfb), g->dln, last, P(g->lnfw), g->lnf_mean,
                            g->lnf_rstd, BT, C);
    ready(m, g->lnfw, g->lnfb);
    for (int l = (int)o->n_layer - 1; l >= 0; l--) {
        const float *x = l > 0 ? g->acts[l - 1].res3 : g->encoded;
        /* The shared set still holds the last block's activations from forward. Backward never
         * reads res3, so the recomputation stops before the MLP's output projection. */
        if (g->ckpt && l < (int)o->n_layer - 1)
            block_activations(m, g, l, x, BT, B);
        block_backward(m, g, l, x, BT, B);
    }
    m->k->embedding_backward(G(g->wte), G(g->wpe), g->dres, g->tokens, B, T, C);
    /* wte is tied to the output projection: its gradient is final only now. */
    ready(m, g->wte, g->wpe);
}
