/* ddpc_model_translate: the encoder runs once on the sources (each repeated beam_size times, one
 * row per hypothesis), then every search step runs the decoder on the whole prefix so far and
 * takes the log-softmax of its last position (no key/value cache: step t costs a decoder pass
 * over t tokens). Inference only: no dropout, no checkpointing, and no forward left for backward. */
#include "nn/seq2seq_impl.h"

#include <ddpc/alloc.h>

#include <math.h>
#include <string.h>

typedef struct {
    ddpc_model *m;
    s2s_impl *g;
} step_ctx;

/* logp (rows, V) = log_softmax of the decoder's logits at position t-1 of prefix (rows, t). */
static ddpc_status model_step(void *p, const int32_t *prefix, int64_t rows, int64_t t, float *logp)
{
    step_ctx *c = p;
    int64_t V = c->m->cfg.tgt_vocab;
    c->g->T = t;
    ddpc__s2s_decode(c->m, c->g, prefix);
    for (int64_t r = 0; r < rows; r++) {
        const float *z = c->g->logits + (r * t + t - 1) * V;
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
    const ddpc_model_config *c = &m->cfg;
    if (n < 1 || beam_size < 1 || src_len < 1 || src_len > c->max_len || max_out < 1 ||
        max_out > c->max_len)
        return ddpc_errorf(DDPC_EINVAL, "translate needs n >= 1 and beam_size >= 1, and src_len "
                           "and max_out in [1, max_len %lld], got n %lld, beam %d, src_len %lld, "
                           "max_out %lld", (long long)c->max_len, (long long)n, beam_size,
                           (long long)src_len, (long long)max_out);
    if (!m->params)
        return ddpc_errorf(DDPC_EINVAL, "translate needs an allocated model");
    for (int64_t i = 0; i < n * src_len; i++)
        if (src[i] < 0 || src[i] >= c->src_vocab)
            return ddpc_errorf(DDPC_EINVAL, "translate: source token %d at position %lld is "
                               "outside the vocabulary of %lld", src[i], (long long)i,
                               (long long)c->src_vocab);
    s2s_impl *g = m->impl;
    int64_t rows = n * beam_size;
    m->last_n = 0;
    DDPC_TRY(ddpc__model_reserve_arena(m, ddpc__s2s_carve(m, NULL, rows, src_len, max_out, false,
                                                          NULL), rows));
    int32_t *rep = ddpc_malloc((size_t)(rows * src_len) * sizeof(int32_t));
    if (!rep)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for %lld source rows", (long long)rows);
    for (int64_t r = 0; r < rows; r++)
        memcpy(rep + r * src_len, src + (r / beam_size) * src_len, (size_t)src_len * sizeof(int32_t));
    ddpc__s2s_carve(m, g, rows, src_len, max_out, false, m->arena);
    g->ckpt = false, g->training = false, g->rng_stream = 0, g->targets = NULL;
    g->B = rows, g->S = src_len, g->T = max_out; /* positions for the longest prefix */
    ddpc__s2s_encode(m, g, rep);
    step_ctx ctx = {m, g};
    ddpc_status s = beam_size == 1
                        ? ddpc__s2s_greedy(model_step, &ctx, n, c->tgt_vocab, max_out, out)
                        : ddpc__s2s_beam(model_step, &ctx, n, beam_size, c->tgt_vocab, max_out, out);
    ddpc_free(rep);
    m->probs = NULL;
    return s;
}
