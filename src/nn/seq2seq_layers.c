// SPDX-License-Identifier: MIT
/* seq2seq encoder and decoder layers, forward and backward: torch.nn.TransformerEncoderLayer and
 * TransformerDecoderLayer with norm_first=False (x = norm(x + dropout(sublayer(x))) per sublayer),
 * ReLU feed-forward with dropout inside, no dropout on attention probabilities. Backward walks the
 * sublayers in reverse with three rotating residual gradients g->d[0..2]; each parameter pair is
 * reported ready as soon as its gradient is final. The cross-attention's key/value projection
 * adds its input gradient into g->dmem, which the encoder's backward starts from. */
#include "nn/seq2seq_impl.h"

#include <ddpc/kernels.h>

#define P(idx) ddpc__param_ptr(m, (idx))
#define G(idx) ddpc__grad_ptr(m, (idx))

static float drop_p(const ddpc_model *m, const s2s_impl *g)
{
    return g->training ? m->cfg.dropout : 0.0f;
}

/* y (rows, C) = r + dropout(xin (rows, in) @ w^T + b): the end of a residual branch. */
static void residual_out(ddpc_model *m, const s2s_impl *g, float *y, const float *xin, int w, int b,
                         const float *r, int64_t rows, int64_t in, uint64_t site)
{
    int64_t C = ddpc__s2s_cfg(m)->d_model;
    float drop = drop_p(m, g);
    if (drop <= 0.0f) {
        m->k->linear_residual_forward(m->cfg.precision, y, xin, P(w), P(b), r, rows, in, C);
        return;
    }
    m->k->linear_forward(m->cfg.precision, y, xin, P(w), P(b), rows, in, C);
    m->k->dropout_forward(y, y, rows * C, drop, m->cfg.seed, ddpc__s2s_site(g, site));
    m->k->add_f32(y, y, r, rows * C);
}

/* Gradient through an (optional) dropout into tmp; returns the buffer that holds it. */
static const float *through_dropout(const ddpc_model *m, const s2s_impl *g, const float *d,
                                    float *tmp, int64_t n, uint64_t site)
{
    float drop = drop_p(m, g);
    if (drop <= 0.0f)
        return d;
    m->k->fill_f32(tmp, 0.0f, n);
    m->k->dropout_backward(tmp, d, n, drop, m->cfg.seed, ddpc__s2s_site(g, site));
    return tmp;
}

static void ready(ddpc_model *m, int a, int b)
{
    ddpc__model_grad_ready(m, a);
    ddpc__model_grad_ready(m, b);
}

static ddpc_mha_shape self_shape(const ddpc_model *m, const s2s_impl *g, int64_t L, bool causal)
{
    int64_t C = ddpc__s2s_cfg(m)->d_model;
    return (ddpc_mha_shape){.b = g->B,
                            .tq = L,
                            .tk = L,
                            .c = C,
                            .nh = ddpc__s2s_cfg(m)->num_heads,
                            .ldq = 3 * C,
                            .ldk = 3 * C,
                            .causal = causal};
}

static ddpc_mha_shape cross_shape(const ddpc_model *m, const s2s_impl *g)
{
    int64_t C = ddpc__s2s_cfg(m)->d_model;
    return (ddpc_mha_shape){.b = g->B,
                            .tq = g->T,
                            .tk = g->S,
                            .c = C,
                            .nh = ddpc__s2s_cfg(m)->num_heads,
                            .ldq = C,
                            .ldk = 2 * C,
                            .causal = false};
}

/* h1 = norm1(x + dropout(self_attn(x))) over L positions. */
static void self_block(ddpc_model *m, s2s_impl *g, const s2s_layer_params *p, s2s_layer_acts *a,
                       const float *x, int64_t L, const uint8_t *pad, bool causal, uint64_t site)
{
    int64_t C = ddpc__s2s_cfg(m)->d_model, rows = g->B * L;
    ddpc_mha_shape s = self_shape(m, g, L, causal);
    m->k->linear_forward(m->cfg.precision, a->qkv, x, P(p->self.inw), P(p->self.inb), rows, C,
                         3 * C);
    m->k->mha_forward(m->cfg.precision, a->atty, a->att, a->qkv, a->qkv + C, a->qkv + 2 * C, pad,
                      &s, g->ws);
    residual_out(m, g, a->res1, a->atty, p->self.outw, p->self.outb, x, rows, C, site);
    m->k->layernorm_forward(a->h1, a->mean1, a->rstd1, a->res1, P(p->n1w), P(p->n1b), rows, C);
}

/* out = norm(h + dropout(linear2(dropout(relu(linear1(h)))))) over L positions. */
static void ffn_block(ddpc_model *m, s2s_impl *g, const s2s_layer_params *p, s2s_layer_acts *a,
                      const float *h, int64_t L, int nw, int nb, uint64_t site)
{
    int64_t C = ddpc__s2s_cfg(m)->d_model, F = ddpc__s2s_cfg(m)->d_ff, rows = g->B * L;
    float drop = drop_p(m, g);
    m->k->linear_forward(m->cfg.precision, a->ff, h, P(p->l1w), P(p->l1b), rows, C, F);
    m->k->relu_forward(a->ff, a->ff, rows * F);
    if (drop > 0.0f)
        m->k->dropout_forward(a->ff, a->ff, rows * F, drop, m->cfg.seed, ddpc__s2s_site(g, site));
    residual_out(m, g, a->resf, a->ff, p->l2w, p->l2b, h, rows, F, site + 1);
    m->k->layernorm_forward(a->out, a->meanf, a->rstdf, a->resf, P(nw), P(nb), rows, C);
}

void ddpc__s2s_enc_layer_forward(ddpc_model *m, s2s_impl *g, int l, const float *x)
{
    const s2s_layer_params *p = &g->enc_p[l];
    s2s_layer_acts *a = &g->enc[l];
    uint64_t site = S2S_SITE_ENC + 3 * (uint64_t)l;
    self_block(m, g, p, a, x, g->S, g->src_pad, false, site);
    ffn_block(m, g, p, a, a->h1, g->S, p->n2w, p->n2b, site + 1);
}

void ddpc__s2s_dec_layer_forward(ddpc_model *m, s2s_impl *g, int l, const float *x)
{
    const ddpc_model_config *c = &m->cfg;
    const ddpc_seq2seq_config *o = ddpc__s2s_cfg(m);
    int64_t C = o->d_model, rowsT = g->B * g->T, rowsS = g->B * g->S;
    const s2s_layer_params *p = &g->dec_p[l];
    s2s_layer_acts *a = &g->dec[l];
    uint64_t site = S2S_SITE_DEC + 4 * (uint64_t)l;
    self_block(m, g, p, a, x, g->T, g->tgt_pad, true, site);
    /* Cross-attention: queries from h1 (rows 0..C of in_proj), keys and values from the memory. */
    ddpc_mha_shape s = cross_shape(m, g);
    m->k->linear_forward(c->precision, a->q2, a->h1, P(p->cross.inw), P(p->cross.inb), rowsT, C, C);
    m->k->linear_forward(c->precision, a->kv2, g->memory, P(p->cross.inw) + C * C,
                         P(p->cross.inb) + C, rowsS, C, 2 * C);
    m->k->mha_forward(c->precision, a->atty2, a->att2, a->q2, a->kv2, a->kv2 + C, g->src_pad, &s,
                      g->ws);
    residual_out(m, g, a->res2, a->atty2, p->cross.outw, p->cross.outb, a->h1, rowsT, C, site + 1);
    m->k->layernorm_forward(a->h2, a->mean2, a->rstd2, a->res2, P(p->n2w), P(p->n2b), rowsT, C);
    ffn_block(m, g, p, a, a->h2, g->T, p->n3w, p->n3b, site + 2);
}

/* Rotates g->d left: d[0] <- d[1] <- d[2] <- d[0]. */
static void rotate(s2s_impl *g)
{
    float *t = g->d[0];
    g->d[0] = g->d[1], g->d[1] = g->d[2], g->d[2] = t;
}

/* Given d[0] = gradient of out, leaves the gradient of h (the FFN's input) in d[0]. */
static void ffn_backward(ddpc_model *m, s2s_impl *g, const s2s_layer_params *p,
                         const s2s_layer_acts *a, const float *h, int64_t L, int nw, int nb,
                         uint64_t site)
{
    int64_t C = ddpc__s2s_cfg(m)->d_model, F = ddpc__s2s_cfg(m)->d_ff, rows = g->B * L;
    ddpc_precision prec = m->cfg.precision;
    float *dres = g->d[1];
    m->k->fill_f32(dres, 0.0f, rows * C);
    m->k->layernorm_backward(dres, G(nw), G(nb), g->d[0], a->resf, P(nw), a->meanf, a->rstdf, rows,
                             C);
    ready(m, nw, nb);
    /* resf = h + dropout(linear2(ff)): dres is also h's gradient, and gains the FFN's. */
    const float *dproj = through_dropout(m, g, dres, g->dbranch, rows * C, site + 1);
    m->k->fill_f32(g->dff[0], 0.0f, rows * F);
    m->k->linear_backward(prec, g->dff[0], G(p->l2w), G(p->l2b), dproj, a->ff, P(p->l2w), rows, F,
                          C);
    ready(m, p->l2w, p->l2b);
    /* ff = dropout(relu(pre)), kept after the dropout: ff > 0 exactly where relu passed and the
     * unit was kept, and a dropped unit's gradient is 0 anyway. */
    const float *dff = through_dropout(m, g, g->dff[0], g->dff[1], rows * F, site);
    float *dpre = dff == g->dff[0] ? g->dff[1] : g->dff[0];
    m->k->fill_f32(dpre, 0.0f, rows * F);
    m->k->relu_backward(dpre, dff, a->ff, rows * F);
    m->k->linear_backward(prec, dres, G(p->l1w), G(p->l1b), dpre, h, P(p->l1w), rows, C, F);
    ready(m, p->l1w, p->l1b);
    rotate(g);
}

/* Given d[0] = gradient of h1, leaves the gradient of x (the layer's input) in d[0]. */
static void self_backward(ddpc_model *m, s2s_impl *g, const s2s_layer_params *p,
                          const s2s_layer_acts *a, const float *x, int64_t L, bool causal,
                          uint64_t site)
{
    int64_t C = ddpc__s2s_cfg(m)->d_model, rows = g->B * L;
    ddpc_precision prec = m->cfg.precision;
    float *dx = g->d[1];
    m->k->fill_f32(dx, 0.0f, rows * C);
    m->k->layernorm_backward(dx, G(p->n1w), G(p->n1b), g->d[0], a->res1, P(p->n1w), a->mean1,
                             a->rstd1, rows, C);
    ready(m, p->n1w, p->n1b);
    const float *dproj = through_dropout(m, g, dx, g->dbranch, rows * C, site);
    m->k->fill_f32(g->datty, 0.0f, rows * C);
    m->k->linear_backward(prec, g->datty, G(p->self.outw), G(p->self.outb), dproj, a->atty,
                          P(p->self.outw), rows, C, C);
    ready(m, p->self.outw, p->self.outb);
    ddpc_mha_shape s = self_shape(m, g, L, causal);
    m->k->mha_backward(prec, g->dqkv, g->dqkv + C, g->dqkv + 2 * C, g->datty, a->qkv, a->qkv + C,
                       a->qkv + 2 * C, a->att, &s, g->ws);
    m->k->linear_backward(prec, dx, G(p->self.inw), G(p->self.inb), g->dqkv, x, P(p->self.inw),
                          rows, C, 3 * C);
    ready(m, p->self.inw, p->self.inb);
    rotate(g);
}

void ddpc__s2s_enc_layer_backward(ddpc_model *m, s2s_impl *g, int l, const float *x)
{
    const s2s_layer_params *p = &g->enc_p[l];
    const s2s_layer_acts *a = &g->enc[l];
    uint64_t site = S2S_SITE_ENC + 3 * (uint64_t)l;
    ffn_backward(m, g, p, a, a->h1, g->S, p->n2w, p->n2b, site + 1);
    self_backward(m, g, p, a, x, g->S, false, site);
}

void ddpc__s2s_dec_layer_backward(ddpc_model *m, s2s_impl *g, int l, const float *x)
{
    const ddpc_model_config *c = &m->cfg;
    const ddpc_seq2seq_config *o = ddpc__s2s_cfg(m);
    int64_t C = o->d_model, rowsT = g->B * g->T, rowsS = g->B * g->S;
    ddpc_precision prec = c->precision;
    const s2s_layer_params *p = &g->dec_p[l];
    const s2s_layer_acts *a = &g->dec[l];
    uint64_t site = S2S_SITE_DEC + 4 * (uint64_t)l;
    ffn_backward(m, g, p, a, a->h2, g->T, p->n3w, p->n3b, site + 2);
    /* h2 = norm2(h1 + dropout(cross(h1, memory))). */
    float *dh1 = g->d[1];
    m->k->fill_f32(dh1, 0.0f, rowsT * C);
    m->k->layernorm_backward(dh1, G(p->n2w), G(p->n2b), g->d[0], a->res2, P(p->n2w), a->mean2,
                             a->rstd2, rowsT, C);
    ready(m, p->n2w, p->n2b);
    const float *dproj = through_dropout(m, g, dh1, g->dbranch, rowsT * C, site + 1);
    m->k->fill_f32(g->datty, 0.0f, rowsT * C);
    m->k->linear_backward(prec, g->datty, G(p->cross.outw), G(p->cross.outb), dproj, a->atty2,
                          P(p->cross.outw), rowsT, C, C);
    ready(m, p->cross.outw, p->cross.outb);
    ddpc_mha_shape s = cross_shape(m, g);
    m->k->mha_backward(prec, g->dq2, g->dkv2, g->dkv2 + C, g->datty, a->q2, a->kv2, a->kv2 + C,
                       a->att2, &s, g->ws);
    m->k->linear_backward(prec, dh1, G(p->cross.inw), G(p->cross.inb), g->dq2, a->h1,
                          P(p->cross.inw), rowsT, C, C);
    m->k->linear_backward(prec, g->dmem, G(p->cross.inw) + C * C, G(p->cross.inb) + C, g->dkv2,
                          g->memory, P(p->cross.inw) + C * C, rowsS, C, 2 * C);
    ready(m, p->cross.inw, p->cross.inb);
    rotate(g);
    self_backward(m, g, p, a, x, g->T, true, site);
}
