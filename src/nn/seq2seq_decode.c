// SPDX-License-Identifier: MIT
/* ddpc_model_translate: incremental decoding with a key/value cache. The encoder runs once (on
 * each source repeated beam_size times, one row per hypothesis); each decoder layer's
 * cross-attention keys/values are projected from its output once; every search step then runs the
 * decoder on the one new position per row, appending its self-attention keys/values to the
 * layer's cache and attending over the cached positions. When beam search reorders hypotheses,
 * the caches' rows follow (gathered by the step's parent rows). Inference only: no dropout, and
 * no forward left for backward. Invariant: the same kernels as the full decoder at each position,
 * so translate equals a search over full teacher-forced forwards (the decode test checks it).
 * Everything runs through the model's kernel table on its memory; the host holds the prefixes and
 * reads each step's logits back (to_host) for the search. */
#include "nn/seq2seq_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/kernels.h>

#include <math.h>
#include <string.h>

#define P(idx) ddpc__param_ptr(m, (idx))

enum { PAD = 0 };

typedef struct {
    ddpc_model *m;
    s2s_impl *g;
    int64_t rows, S, max_out;
    float *kv_self[DDPC_MODEL_MAX_LAYERS];  /* (rows, max_out, 2C) k | v of positions so far */
    float *kv_cross[DDPC_MODEL_MAX_LAYERS]; /* (rows, S, 2C) from the encoder's output */
    float *pe;                              /* (max_out, C) */
    float *x, *qkv, *atty, *res, *h1, *q2, *h2, *ff; /* (rows, C | 3C | F) one position */
    float *mean, *rstd;                              /* (rows) */
    float *att;                                      /* (rows, H, max(max_out, S)) */
    float *logits;                                   /* (rows, V) */
    float *gather;                                   /* (rows, max_out, 2C) reorder scratch */
    int32_t *tok;                                    /* (rows) */
    int32_t *prefix;                                 /* (rows, max_out) the step's prefixes */
    uint8_t *tgt_pad;                                /* (rows, max_out) */
    int32_t *src;                                    /* (rows, S) the sources, per hypothesis */
    float *ws;                                       /* the attention's, one query, Tk keys */
    int32_t *host_tok;                               /* host (rows): tok before its upload */
    float *host_logits;                              /* host (rows, V): the logits read back */
} kv_cache;

/* The search's block of the table's memory, at least `floats` long: the model keeps it from one
 * translate to the next, grown, never shrunk, so repeated evaluations allocate nothing. */
static float *search_block(ddpc_model *m, s2s_impl *g, size_t floats)
{
    if (g->search && g->search_floats >= floats)
        return g->search;
    if (g->search)
        m->k->free(g->search);
    g->search = m->k->alloc(floats * sizeof(float));
    g->search_floats = g->search ? floats : 0;
    return g->search;
}

/* Carves the cache for `rows` hypotheses of S source tokens from the search block; the host's
 * buffers are the cache's own. */
static ddpc_status cache_create(kv_cache *c, ddpc_model *m, s2s_impl *g, int64_t rows, int64_t S,
                                int64_t max_out)
{
    const ddpc_seq2seq_config *o = ddpc__s2s_cfg(m);
    size_t C = (size_t)o->d_model, F = (size_t)o->d_ff, V = (size_t)o->tgt_vocab;
    size_t H = (size_t)o->num_heads, R = (size_t)rows, L = (size_t)o->num_decoder_layers;
    size_t Tk = (size_t)(max_out > S ? max_out : S);
    ddpc_mha_shape ws = {
        .b = rows, .tq = 1, .tk = (int64_t)Tk, .c = o->d_model, .nh = o->num_heads};
    size_t sizes[] = {L * R * (size_t)max_out * 2 * C,
                      L * R * (size_t)S * 2 * C,
                      (size_t)max_out * C,
                      R * C,
                      R * 3 * C,
                      R * C,
                      R * C,
                      R * C,
                      R * C,
                      R * C,
                      R * F,
                      R,
                      R,
                      R * H * Tk,
                      R * V,
                      R * (size_t)max_out * 2 * C,
                      R,
                      R * (size_t)max_out,
                      (R * (size_t)max_out + 3) / 4,
                      R * (size_t)S,
                      m->k->mha_workspace_floats(&ws)};
    size_t total = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        total += ddpc__round16(sizes[i]);
    *c = (kv_cache){.m = m, .g = g, .rows = rows, .S = S, .max_out = max_out};
    float *block = search_block(m, g, total);
    c->host_tok = ddpc_malloc(R * sizeof(int32_t));
    c->host_logits = ddpc_malloc(R * V * sizeof(float));
    if (!block || !c->host_tok || !c->host_logits)
        return ddpc_errorf(DDPC_ENOMEM,
                           "out of memory for the key/value cache of %lld "
                           "hypotheses (%zu MiB)",
                           (long long)rows, total * sizeof(float) >> 20);
    float *p = block;
    float *self = ddpc__take(&p, sizes[0]), *cross = ddpc__take(&p, sizes[1]);
    for (size_t l = 0; l < L; l++) {
        c->kv_self[l] = self + l * R * (size_t)max_out * 2 * C;
        c->kv_cross[l] = cross + l * R * (size_t)S * 2 * C;
    }
    c->pe = ddpc__take(&p, sizes[2]);
    c->x = ddpc__take(&p, sizes[3]);
    c->qkv = ddpc__take(&p, sizes[4]);
    c->atty = ddpc__take(&p, sizes[5]);
    c->res = ddpc__take(&p, sizes[6]);
    c->h1 = ddpc__take(&p, sizes[7]);
    c->q2 = ddpc__take(&p, sizes[8]);
    c->h2 = ddpc__take(&p, sizes[9]);
    c->ff = ddpc__take(&p, sizes[10]);
    c->mean = ddpc__take(&p, sizes[11]);
    c->rstd = ddpc__take(&p, sizes[12]);
    c->att = ddpc__take(&p, sizes[13]);
    c->logits = ddpc__take(&p, sizes[14]);
    c->gather = ddpc__take(&p, sizes[15]);
    c->tok = (int32_t *)ddpc__take(&p, sizes[16]);
    c->prefix = (int32_t *)ddpc__take(&p, sizes[17]);
    c->tgt_pad = (uint8_t *)ddpc__take(&p, sizes[18]);
    c->src = (int32_t *)ddpc__take(&p, sizes[19]);
    c->ws = ddpc__take(&p, sizes[20]);
    return DDPC_OK;
}

/* After the encoder: the positions, and each decoder layer's cross-attention keys/values. */
static void cache_project(kv_cache *c)
{
    ddpc_model *m = c->m;
    const ddpc_seq2seq_config *o = ddpc__s2s_cfg(m);
    int64_t C = o->d_model;
    m->k->sinusoidal_positions(c->pe, c->max_out, C);
    for (int l = 0; l < o->num_decoder_layers; l++) { /* rows C..3C of in_proj */
        const s2s_attn_params *a = &c->g->dec_p[l].cross;
        m->k->linear_forward(m->cfg.precision, c->kv_cross[l], c->g->memory, P(a->inw) + C * C,
                             P(a->inb) + C, c->rows * c->S, C, 2 * C);
    }
}

/* Frees the host buffers cache_create made (a failed one's included); the block stays. */
static void cache_destroy(kv_cache *c)
{
    ddpc_free(c->host_tok);
    ddpc_free(c->host_logits);
}

/* Row r of every self-attention cache takes row parent[r]'s (host) first `len` positions. */
static void cache_reorder(kv_cache *c, const int64_t *parent, int64_t len)
{
    const ddpc_kernel_table *k = c->m->k;
    int64_t C2 = 2 * ddpc__s2s_cfg(c->m)->d_model, row = c->max_out * C2;
    for (int l = 0; l < ddpc__s2s_cfg(c->m)->num_decoder_layers; l++) {
        float *kv = c->kv_self[l];
        k->copy(c->gather, kv, (size_t)(c->rows * row) * sizeof(float));
        for (int64_t r = 0; r < c->rows; r++)
            if (parent[r] != r)
                k->copy(kv + r * row, c->gather + parent[r] * row,
                        (size_t)(len * C2) * sizeof(float));
    }
}

/* One decoder layer on position pos of every row: c->x (rows, C) in, c->x out. */
static void layer_step(kv_cache *c, int l, int64_t pos)
{
    ddpc_model *m = c->m;
    s2s_impl *g = c->g;
    const ddpc_model_config *cfg = &m->cfg;
    const ddpc_seq2seq_config *o = ddpc__s2s_cfg(m);
    const s2s_layer_params *p = &g->dec_p[l];
    ddpc_precision prec = cfg->precision;
    int64_t C = o->d_model, F = o->d_ff, R = c->rows, t = pos + 1;
    m->k->linear_forward(prec, c->qkv, c->x, P(p->self.inw), P(p->self.inb), R, C, 3 * C);
    float *kv = c->kv_self[l]; /* each row's k | v appended at pos */
    m->k->copy2d(kv + pos * 2 * C, (size_t)(c->max_out * 2 * C) * sizeof(float), c->qkv + C,
                 (size_t)(3 * C) * sizeof(float), (size_t)(2 * C) * sizeof(float), (size_t)R);
    ddpc_mha_shape s = {.b = R,
                        .tq = 1,
                        .tk = t,
                        .c = C,
                        .nh = o->num_heads,
                        .ldq = 3 * C,
                        .ldk = 2 * C,
                        .bsq = 3 * C,
                        .bsk = c->max_out * 2 * C};
    m->k->mha_forward(prec, c->atty, c->att, c->qkv, kv, kv + C, c->tgt_pad, &s, c->ws);
    m->k->linear_residual_forward(prec, c->res, c->atty, P(p->self.outw), P(p->self.outb), c->x, R,
                                  C, C);
    m->k->layernorm_forward(c->h1, c->mean, c->rstd, c->res, P(p->n1w), P(p->n1b), R, C);
    m->k->linear_forward(prec, c->q2, c->h1, P(p->cross.inw), P(p->cross.inb), R, C, C);
    ddpc_mha_shape x = {
        .b = R, .tq = 1, .tk = c->S, .c = C, .nh = o->num_heads, .ldq = C, .ldk = 2 * C};
    m->k->mha_forward(prec, c->atty, c->att, c->q2, c->kv_cross[l], c->kv_cross[l] + C, g->src_pad,
                      &x, c->ws);
    m->k->linear_residual_forward(prec, c->res, c->atty, P(p->cross.outw), P(p->cross.outb), c->h1,
                                  R, C, C);
    m->k->layernorm_forward(c->h2, c->mean, c->rstd, c->res, P(p->n2w), P(p->n2b), R, C);
    m->k->linear_forward(prec, c->ff, c->h2, P(p->l1w), P(p->l1b), R, C, F);
    m->k->relu_forward(c->ff, c->ff, R * F);
    m->k->linear_residual_forward(prec, c->res, c->ff, P(p->l2w), P(p->l2b), c->h2, R, F, C);
    m->k->layernorm_forward(c->x, c->mean, c->rstd, c->res, P(p->n3w), P(p->n3b), R, C);
}

/* logp (rows, V) = log_softmax of the decoder's logits at position t-1 of each prefix row. */
static ddpc_status cached_step(void *ctx, const int32_t *prefix, const int64_t *parent,
                               int64_t rows, int64_t t, float *logp)
{
    kv_cache *c = ctx;
    ddpc_model *m = c->m;
    s2s_impl *g = c->g;
    const ddpc_model_config *cfg = &m->cfg;
    const ddpc_seq2seq_config *o = ddpc__s2s_cfg(m);
    int64_t C = o->d_model, V = o->tgt_vocab, pos = t - 1;
    const ddpc_kernel_table *k = m->k;
    if (parent && pos > 0)
        cache_reorder(c, parent, pos);
    for (int64_t r = 0; r < rows; r++)
        c->host_tok[r] = prefix[r * t + pos];
    k->to_device(c->tok, c->host_tok, (size_t)rows * sizeof(int32_t));
    k->to_device(c->prefix, prefix, (size_t)(rows * t) * sizeof(int32_t));
    k->pad_mask(c->tgt_pad, c->prefix, rows * t, PAD);
    m->k->embedding_scaled_forward(c->x, c->tok, P(g->tgt_embed), sqrtf((float)C), c->pe + pos * C,
                                   rows, 1, C);
    for (int l = 0; l < o->num_decoder_layers; l++)
        layer_step(c, l, pos);
    m->k->layernorm_forward(c->h1, c->mean, c->rstd, c->x, P(g->dec_nw), P(g->dec_nb), rows, C);
    k->linear_forward(cfg->precision, c->logits, c->h1, P(g->gen_w), P(g->gen_b), rows, C, V);
    k->to_host(c->host_logits, c->logits, (size_t)(rows * V) * sizeof(float));
    for (int64_t r = 0; r < rows; r++) {
        const float *z = c->host_logits + r * V;
        float *lp = logp + r * V;
        float mx = z[0];
        for (int64_t v = 1; v < V; v++)
            mx = z[v] > mx ? z[v] : mx;
        double sum = 0.0;
        for (int64_t v = 0; v < V; v++)
            sum += exp((double)(z[v] - mx));
        float lse = (float)log(sum);
        for (int64_t v = 0; v < V; v++)
            lp[v] = z[v] - mx - lse;
    }
    return DDPC_OK;
}

ddpc_status ddpc_model_translate(ddpc_model *m, const int32_t *src, int64_t n, int64_t src_len,
                                 int beam_size, int64_t max_out, int32_t *out)
{
    if (strcmp(m->cfg.type, "seq2seq") != 0)
        return ddpc_errorf(DDPC_EINVAL, "translate needs a seq2seq model, not '%s'", m->cfg.type);
    const ddpc_seq2seq_config *o = ddpc__s2s_cfg(m);
    if (n < 1 || beam_size < 1 || src_len < 1 || src_len > o->max_len || max_out < 1 ||
        max_out > o->max_len)
        return ddpc_errorf(DDPC_EINVAL,
                           "translate needs n >= 1 and beam_size >= 1, and src_len "
                           "and max_out in [1, max_len %lld], got n %lld, beam %d, src_len %lld, "
                           "max_out %lld",
                           (long long)o->max_len, (long long)n, beam_size, (long long)src_len,
                           (long long)max_out);
    if (!m->params)
        return ddpc_errorf(DDPC_EINVAL, "translate needs an allocated model");
    for (int64_t i = 0; i < n * src_len; i++)
        if (src[i] < 0 || src[i] >= o->src_vocab)
            return ddpc_errorf(DDPC_EINVAL,
                               "translate: source token %d at position %lld is "
                               "outside the vocabulary of %lld",
                               src[i], (long long)i, (long long)o->src_vocab);
    s2s_impl *g = m->impl;
    int64_t rows = n * beam_size;
    m->last_n = 0;
    m->probs = NULL;
    /* The arena holds the encoder's activations (a decoder of one position is carved, unused). */
    DDPC_TRY(ddpc__model_reserve_arena(m, ddpc__s2s_carve(m, NULL, rows, src_len, 1, false, NULL),
                                       rows));
    kv_cache cache;
    ddpc_status s = cache_create(&cache, m, g, rows, src_len, max_out);
    /* The sources repeated per hypothesis, built on the host and copied to the table's memory. */
    size_t rep_bytes = (size_t)(rows * src_len) * sizeof(int32_t);
    int32_t *rep = s == DDPC_OK ? ddpc_malloc(rep_bytes) : NULL;
    if (s == DDPC_OK && !rep)
        s = ddpc_errorf(DDPC_ENOMEM, "out of memory for %lld source rows", (long long)rows);
    if (s != DDPC_OK) {
        cache_destroy(&cache);
        return s;
    }
    for (int64_t r = 0; r < rows; r++)
        memcpy(rep + r * src_len, src + (r / beam_size) * src_len,
               (size_t)src_len * sizeof(int32_t));
    m->k->to_device(cache.src, rep, rep_bytes);
    ddpc_free(rep);
    ddpc__s2s_carve(m, g, rows, src_len, 1, false, m->arena);
    g->ckpt = false, g->training = false, g->rng_stream = 0, g->targets = NULL;
    g->B = rows, g->S = src_len, g->T = 1;
    ddpc__s2s_encode(m, g, cache.src);
    g->src = NULL; /* nothing reads the sources after the encoder */
    cache_project(&cache);
    s = beam_size == 1
            ? ddpc__s2s_greedy(cached_step, &cache, n, o->tgt_vocab, max_out, out)
            : ddpc__s2s_beam(cached_step, &cache, n, beam_size, o->tgt_vocab, max_out, out);
    cache_destroy(&cache);
    return s;
}
