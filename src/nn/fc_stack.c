// SPDX-License-Identifier: MIT
/* Fully connected stack: Linear [+ BatchNorm1d] + ReLU (+ Dropout) layers and a final Linear, on
 * the model's flat buffers. Backward ping-pongs between two arena buffers; nothing is allocated per step. */
#include "nn/fc_stack.h"
#include "nn/loss.h"

#include <ddpc/kernels.h>

#include <math.h>
#include <stdio.h>

static ddpc_status add_layer(ddpc_model *m, const char *prefix, int i, int64_t in, int64_t out,
                             int *w, int *b)
{
    char name[DDPC_PARAM_NAME_MAX];
    int64_t wshape[2] = {out, in};
    snprintf(name, sizeof name, "%s.%d.weight", prefix, i);
    *w = ddpc__model_add_param(m, name, 2, wshape, true);
    snprintf(name, sizeof name, "%s.%d.bias", prefix, i);
    *b = ddpc__model_add_param(m, name, 1, &wshape[0], false);
    if (*w < 0 || *b < 0)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory registering %s parameters", prefix);
    return DDPC_OK;
}

ddpc_status ddpc__fc_stack_build(ddpc__fc_stack *s, ddpc_model *m, const char *prefix, int64_t in,
                                 const int64_t *hidden, size_t n_hidden, int64_t out,
                                 const int64_t *heads, size_t n_heads, const ddpc__bn_opts *bn)
{
    if (n_hidden > DDPC_MODEL_MAX_LAYERS)
        return ddpc_errorf(DDPC_EINVAL, "at most %d hidden layers, got %zu", DDPC_MODEL_MAX_LAYERS,
                           n_hidden);
    if (n_heads > DDPC_MODEL_MAX_HEADS)
        return ddpc_errorf(DDPC_EINVAL, "at most %d heads, got %zu", DDPC_MODEL_MAX_HEADS, n_heads);
    s->n_layers = (int)n_hidden + 1;
    s->n_heads = (int)n_heads;
    s->dims[0] = in;
    for (size_t i = 0; i < n_hidden; i++) {
        if (hidden[i] <= 0)
            return ddpc_errorf(DDPC_EINVAL, "hidden layer %zu must have a positive size, got %lld",
                               i, (long long)hidden[i]);
        s->dims[i + 1] = hidden[i];
    }
    for (size_t k = 0; k < n_heads; k++)
        if (heads[k] < 2)
            return ddpc_errorf(DDPC_EINVAL, "head %zu needs at least 2 classes, got %lld", k,
                               (long long)heads[k]);
    s->dims[s->n_layers] = n_heads ? heads[0] : out;
    int last = n_heads ? s->n_layers - 1 : s->n_layers;
    s->bn = bn != NULL;
    char bn_prefix[DDPC_PARAM_NAME_MAX];
    snprintf(bn_prefix, sizeof bn_prefix, "%s_bn", prefix);
    for (int i = 0; i < last; i++) {
        DDPC_TRY(add_layer(m, prefix, i, s->dims[i], s->dims[i + 1], &s->w_idx[i], &s->b_idx[i]));
        if (bn && i + 1 < s->n_layers)
            DDPC_TRY(ddpc__bn_layer_add(&s->bnl[i], m, bn_prefix, i, s->dims[i + 1], *bn));
    }
    for (int k = 0; k < s->n_heads; k++) {
        s->head_out[k] = heads[k];
        DDPC_TRY(add_layer(m, "heads", k, s->dims[last], heads[k], &s->head_w[k], &s->head_b[k]));
    }
    if (s->n_heads)
        ddpc__fc_stack_select(s, 0);
    return DDPC_OK;
}

void ddpc__fc_stack_free(ddpc__fc_stack *s)
{
    for (int i = 0; i < DDPC_MODEL_MAX_LAYERS; i++)
        ddpc__bn_layer_free(&s->bnl[i]);
}

void ddpc__fc_stack_select(ddpc__fc_stack *s, int task)
{
    if (s->n_heads == 0)
        return;
    s->w_idx[s->n_layers - 1] = s->head_w[task];
    s->b_idx[s->n_layers - 1] = s->head_b[task];
    s->dims[s->n_layers] = s->head_out[task];
}

static void init_layer(ddpc_model *m, int w_idx, int b_idx, int64_t fan_in)
{
    float bound = 1.0f / sqrtf((float)fan_in);
    const ddpc_param *w = &m->tensors[w_idx], *b = &m->tensors[b_idx];
    ddpc__init_uniform(m->params + w->offset, w->numel, bound, m->cfg.seed, (uint64_t)w_idx);
    ddpc__init_uniform(m->params + b->offset, b->numel, bound, m->cfg.seed, (uint64_t)b_idx);
}

void ddpc__fc_stack_init(const ddpc__fc_stack *s, ddpc_model *m)
{
    int last = s->n_heads ? s->n_layers - 1 : s->n_layers;
    for (int i = 0; i < last; i++)
        init_layer(m, s->w_idx[i], s->b_idx[i], s->dims[i]);
    for (int i = 0; s->bn && i + 1 < s->n_layers; i++)
        ddpc__bn_layer_init(&s->bnl[i], m);
    for (int k = 0; k < s->n_heads; k++)
        init_layer(m, s->head_w[k], s->head_b[k], s->dims[last]);
}

/* The widest output any head can produce. */
static int64_t max_out(const ddpc__fc_stack *s)
{
    int64_t d = s->dims[s->n_layers];
    for (int k = 0; k < s->n_heads; k++)
        d = s->head_out[k] > d ? s->head_out[k] : d;
    return d;
}

static int64_t max_dim(const ddpc__fc_stack *s)
{
    int64_t d = max_out(s);
    for (int i = 0; i < s->n_layers; i++)
        d = s->dims[i] > d ? s->dims[i] : d;
    return d;
}

/* Whether backward needs a gradient buffer for the outputs: cross-entropy writes its gradient
 * over the probabilities (nn/loss.h); the elementwise losses' kernels accumulate into another. */
static bool keeps_doutputs(const ddpc_model *m)
{
    return m->cfg.loss != DDPC_LOSS_CROSS_ENTROPY;
}

size_t ddpc__fc_stack_arena_floats(const ddpc__fc_stack *s, const ddpc_model *m, int64_t n)
{
    size_t outs = keeps_doutputs(m) ? 2 : 1; /* the outputs, and maybe their gradient */
    size_t total = 3 * ddpc__round16((size_t)(n * max_dim(s))) +
                   outs * ddpc__round16((size_t)(n * max_out(s))) + ddpc__round16((size_t)n);
    for (int i = 1; i < s->n_layers; i++) /* hidden activations, and pre-BN outputs */
        total += (s->bn ? 2 : 1) * ddpc__round16((size_t)(n * s->dims[i]));
    return total;
}

double ddpc__fc_stack_flops(const ddpc__fc_stack *s)
{
    double f = 0;
    for (int i = 0; i < s->n_layers; i++)
        f += 6.0 * (double)s->dims[i] * (double)s->dims[i + 1];
    return f;
}

/* The model's loss on the logits (n, classes) in place: softmax cross-entropy (ignore index -1)
 * makes them probabilities; the other losses as nn/loss.h says. Without targets, only the
 * probabilities. */
static void classify_loss(ddpc__fc_stack *s, ddpc_model *m, float *logits, ddpc_model_output *out)
{
    int64_t n = s->n, classes = s->dims[s->n_layers];
    m->probs = logits;
    m->probs_count = (size_t)(n * classes);
    *out = (ddpc_model_output){0};
    if (m->cfg.loss != DDPC_LOSS_CROSS_ENTROPY) {
        if (s->float_targets)
            ddpc__loss_forward(m, logits, s->float_targets, n * classes, out);
        else if (m->cfg.loss == DDPC_LOSS_BCE_LOGITS) /* the sigmoid, as with targets; the */
            m->k->bce_logits_forward(logits, logits, logits, n * classes); /* value is unused */
        s->n_valid = out->n_valid;
        return;
    }
    if (!s->targets) {
        m->k->softmax_rows(logits, n, classes);
        return;
    }
    ddpc__ce_forward(m, logits, s->losses, s->targets, n, classes, out);
    s->n_valid = out->n_valid;
}

ddpc_status ddpc__fc_stack_forward(ddpc__fc_stack *s, ddpc_model *m, const float *x,
                                   const ddpc_model_input *in, bool training, float **arena,
                                   ddpc_model_output *out)
{
    int64_t n = in->n;
    ddpc__fc_stack_select(s, in->task);
    s->n = n;
    s->training = training;
    s->rng_stream = in->rng_stream;
    s->targets = in->targets;
    s->float_targets = in->float_targets;
    s->acts[0] = x;
    float p = training ? m->cfg.dropout : 0.0f;
    for (int i = 0; i < s->n_layers; i++) {
        float *y = ddpc__take(arena, (size_t)(n * s->dims[i + 1]));
        bool bn = s->bn && i + 1 < s->n_layers;
        if (bn)
            s->pre[i + 1] = ddpc__take(arena, (size_t)(n * s->dims[i + 1]));
        m->k->linear_forward(m->cfg.precision, bn ? s->pre[i + 1] : y, s->acts[i],
                            ddpc__param_ptr(m, s->w_idx[i]), ddpc__param_ptr(m, s->b_idx[i]), n,
                            s->dims[i], s->dims[i + 1]);
        if (bn)
            DDPC_TRY(ddpc__bn_layer_forward(&s->bnl[i], m, y, s->pre[i + 1], n, 1, training));
        if (i + 1 < s->n_layers) {
            m->k->relu_forward(y, y, n * s->dims[i + 1]);
            if (p > 0.0f)
                m->k->dropout_forward(y, y, n * s->dims[i + 1], p, m->cfg.seed,
                                     in->rng_stream * 64 + (uint64_t)i);
        }
        s->acts[i + 1] = y;
    }
    size_t buf = (size_t)(n * max_dim(s));
    s->dbuf[0] = ddpc__take(arena, buf);
    s->dbuf[1] = ddpc__take(arena, buf);
    s->dtmp = ddpc__take(arena, buf);
    s->dlogits = NULL;
    if (keeps_doutputs(m))
        s->dlogits = ddpc__take(arena, (size_t)(n * s->dims[s->n_layers]));
    s->losses = ddpc__take(arena, (size_t)n);
    classify_loss(s, m, (float *)s->acts[s->n_layers], out);
    return DDPC_OK;
}

void ddpc__fc_stack_backward(ddpc__fc_stack *s, ddpc_model *m, float dloss, float *dx)
{
    int64_t n = s->n, k = s->dims[s->n_layers];
    float p = s->training ? m->cfg.dropout : 0.0f;
    /* dy is the gradient of layer i's output; din (the other buffer) receives its input's. The
     * last layer's backward never reads its output, the logits: cross-entropy leaves dy there. */
    const float *dy = s->dlogits;
    if (!keeps_doutputs(m)) {
        dy = ddpc__ce_backward(m, (float *)s->acts[s->n_layers], s->targets, n, k, s->n_valid,
                               dloss);
    } else {
        m->k->fill_f32(s->dlogits, 0.0f, n * k);
        ddpc__loss_backward(m, s->dlogits, m->probs, s->float_targets, n * k, dloss);
    }
    float *din = s->dbuf[1], *dpre = s->dbuf[0];
    for (int i = s->n_layers - 1; i >= 0; i--) {
        float *dlayer_in = i > 0 ? din : dx;
        if (i > 0)
            m->k->fill_f32(din, 0.0f, n * s->dims[i]);
        m->k->linear_backward(m->cfg.precision, dlayer_in, ddpc__grad_ptr(m, s->w_idx[i]),
                             ddpc__grad_ptr(m, s->b_idx[i]), dy, s->acts[i],
                             ddpc__param_ptr(m, s->w_idx[i]), n, s->dims[i], s->dims[i + 1]);
        ddpc__model_grad_ready(m, s->w_idx[i]);
        ddpc__model_grad_ready(m, s->b_idx[i]);
        if (i == 0)
            break;
        int64_t cnt = n * s->dims[i];
        const float *dact = din;
        if (p > 0.0f) {
            m->k->fill_f32(s->dtmp, 0.0f, cnt);
            m->k->dropout_backward(s->dtmp, din, cnt, p, m->cfg.seed,
                                  s->rng_stream * 64 + (uint64_t)(i - 1));
            dact = s->dtmp;
        }
        m->k->fill_f32(dpre, 0.0f, cnt);
        m->k->relu_backward(dpre, dact, s->acts[i], cnt);
        /* BatchNorm1d: dpre, its output's gradient, becomes Linear i-1's output's in place. */
        if (s->bn && ddpc__bn_layer_backward(&s->bnl[i - 1], m, dpre, s->pre[i], n, 1) != DDPC_OK)
            return;
        dy = dpre;
    }
}
