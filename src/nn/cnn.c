// SPDX-License-Identifier: MIT
/* "cnn": per entry of channels, Conv2d(k x k, stride 1, pad k/2) -> ReLU -> MaxPool2d(2), then the
 * flattened features go through the fully connected stack (hidden sizes, then classes). With
 * batchnorm a stage is Conv2d (no bias) -> BatchNorm2d -> ReLU -> MaxPool2d(2), parameters
 * "bn.<i>.weight/bias" and buffers "bn.<i>.running_mean/running_var"; through the stat-sync hook
 * its batch statistics are those of every replica's batch together (SyncBatchNorm).
 * Parameters "conv.<i>.weight" (k_out, c_in, k, k), "conv.<i>.bias", then "fc.<i>.*"; a multi-head
 * cnn ends in "heads.<k>.weight/bias" instead of the last "fc" layer. With activation checkpointing
 * a stage (conv -> ReLU -> pool) keeps only its pooled output, the next stage's input; its pool
 * indices live in one shared buffer, refilled for stage i by recomputing the stage (same kernels,
 * same bits) just before its backward, and its conv output only passes through the scratch dB:
 * backward takes the ReLU's mask from the pooled output, which holds the ReLU outputs it routes. */
#include "nn/bn_layer.h"
#include "nn/fc_stack.h"

#include <ddpc/alloc.h>
#include <ddpc/kernels.h>

#include <math.h>
#include <stdio.h>

typedef struct {
    int n_conv;
    ddpc_conv2d_shape conv[DDPC_MODEL_MAX_LAYERS]; /* n set per forward */
    int64_t pool_h[DDPC_MODEL_MAX_LAYERS], pool_w[DDPC_MODEL_MAX_LAYERS];
    int w_idx[DDPC_MODEL_MAX_LAYERS], b_idx[DDPC_MODEL_MAX_LAYERS]; /* b_idx -1 with bn */
    /* BatchNorm2d per stage (bn): gamma, beta (k); running statistics buffers (k). */
    bool bn;
    ddpc__bn_layer bnl[DDPC_MODEL_MAX_LAYERS];
    ddpc__fc_stack fc;
    /* Set by forward. With checkpointing every act[i] is dB and every idx[i] one shared buffer. */
    const float *in[DDPC_MODEL_MAX_LAYERS]; /* conv inputs: x, then pooled outputs */
    float *act[DDPC_MODEL_MAX_LAYERS];      /* conv outputs after ReLU (n, k, h, w) */
    float *bn_in[DDPC_MODEL_MAX_LAYERS];    /* bn: conv outputs before BN (n, k, h, w) */
    float *pooled[DDPC_MODEL_MAX_LAYERS];   /* stage outputs (n, k, h/2, w/2) */
    int32_t *idx[DDPC_MODEL_MAX_LAYERS];    /* pool argmax (n, k, h/2, w/2) */
    float *ws;                              /* conv workspace */
    float *dA, *dB;     /* gradients of a pooled output (and conv input), of a conv output */
    float *recomputed;  /* checkpointing: a recomputed pooled output, not needed again */
    int64_t n;
    bool ckpt;
} cnn_impl;

static const ddpc_cnn_config defaults = {.channels = {32, 64}, .n_channels = 2, .kernel_size = 3,
                                         .hidden = {128}, .n_hidden = 1, .bn_momentum = 0.1f,
                                         .bn_eps = 1e-5f};

ddpc_cnn_config ddpc_cnn_config_default(void) { return defaults; }

const ddpc_cnn_config *ddpc_cnn_config_of(const ddpc_model *m)
{
    return m->ops == &ddpc__cnn_ops ? m->type_cfg : NULL;
}

/* model.hidden, model.channels, model.batchnorm (bn_momentum, bn_eps), model.kernel_size. */
static ddpc_status cnn_read_config(ddpc_config *cfg, const char *prefix, void *type_cfg)
{
    ddpc_cnn_config *o = type_cfg;
    char key[DDPC_CONFIG_KEY_MAX];
    DDPC_TRY(ddpc_config_int_list(cfg, ddpc_config_key(key, sizeof key, prefix, "hidden"),
                                  defaults.hidden, defaults.n_hidden, 1, 1 << 20, o->hidden,
                                  DDPC_MODEL_MAX_LAYERS, &o->n_hidden));
    DDPC_TRY(ddpc_config_int_list(cfg, ddpc_config_key(key, sizeof key, prefix, "channels"),
                                  defaults.channels, defaults.n_channels, 1, 1 << 16, o->channels,
                                  DDPC_MODEL_MAX_LAYERS, &o->n_channels));
    DDPC_TRY(ddpc__bn_read_config(cfg, prefix, &o->batchnorm, &o->bn_momentum, &o->bn_eps));
    return ddpc_config_int(cfg, ddpc_config_key(key, sizeof key, prefix, "kernel_size"),
                           defaults.kernel_size, 1, 31, &o->kernel_size);
}

static ddpc_status cnn_build(ddpc_model *m)
{
    const ddpc_model_config *c = &m->cfg;
    const ddpc_cnn_config *o = m->type_cfg;
    if (o->n_channels < 1 || o->n_channels > DDPC_MODEL_MAX_LAYERS)
        return ddpc_errorf(DDPC_EINVAL, "cnn needs 1 to %d conv layers, got %zu",
                           DDPC_MODEL_MAX_LAYERS, o->n_channels);
    if (o->kernel_size < 1 || o->kernel_size % 2 == 0)
        return ddpc_errorf(DDPC_EINVAL, "cnn kernel_size must be odd and positive, got %lld",
                           (long long)o->kernel_size);
    cnn_impl *impl = ddpc_calloc(1, sizeof *impl);
    if (!impl)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory building cnn");
    m->impl = impl;
    impl->n_conv = (int)o->n_channels;
    impl->bn = o->batchnorm;
    if (impl->bn && c->activation_checkpointing)
        return ddpc_errorf(DDPC_EINVAL, "cnn batchnorm does not support activation checkpointing "
                           "(a recomputed stage would update the running statistics twice)");
    if (impl->bn && (!(o->bn_momentum >= 0.0f && o->bn_momentum <= 1.0f) || !(o->bn_eps > 0.0f)))
        return ddpc_errorf(DDPC_EINVAL, "cnn batchnorm needs momentum in [0, 1] and eps > 0, got "
                           "%g and %g", o->bn_momentum, o->bn_eps);
    int64_t ch = c->in_channels, h = c->in_height, w = c->in_width;
    double flops = 0;
    for (int i = 0; i < impl->n_conv; i++) {
        if (o->channels[i] <= 0 || h < 2 || w < 2)
            return ddpc_errorf(DDPC_EINVAL,
                               "cnn conv layer %d: %lld channels on a %lldx%lld input "
                               "cannot be pooled",
                               i, (long long)o->channels[i], (long long)h, (long long)w);
        impl->conv[i] = (ddpc_conv2d_shape){.c = ch,
                                            .h = h,
                                            .w = w,
                                            .k = o->channels[i],
                                            .r = o->kernel_size,
                                            .s = o->kernel_size,
                                            .stride = 1,
                                            .pad = o->kernel_size / 2};
        char name[DDPC_PARAM_NAME_MAX];
        int64_t shape[4] = {o->channels[i], ch, o->kernel_size, o->kernel_size};
        snprintf(name, sizeof name, "conv.%d.weight", i);
        impl->w_idx[i] = ddpc__model_add_param(m, name, 4, shape, true);
        impl->b_idx[i] = -1;
        if (!impl->bn) {
            snprintf(name, sizeof name, "conv.%d.bias", i);
            impl->b_idx[i] = ddpc__model_add_param(m, name, 1, shape, false);
        } else {
            ddpc__bn_opts bn = {o->bn_momentum, o->bn_eps};
            DDPC_TRY(ddpc__bn_layer_add(&impl->bnl[i], m, "bn", i, shape[0], bn));
        }
        if (impl->w_idx[i] < 0 || (!impl->bn && impl->b_idx[i] < 0))
            return ddpc_errorf(DDPC_ENOMEM, "out of memory registering cnn parameters");
        flops += 6.0 * (double)(h * w) * (double)(shape[0] * shape[1] * shape[2] * shape[3]);
        ch = o->channels[i];
        h /= 2;
        w /= 2;
        impl->pool_h[i] = h;
        impl->pool_w[i] = w;
    }
    DDPC_TRY(ddpc__fc_stack_build(&impl->fc, m, "fc", ch * h * w, o->hidden, o->n_hidden,
                                  c->num_classes, c->head_classes, c->n_heads, NULL));
    m->train_flops_per_sample = flops + ddpc__fc_stack_flops(&impl->fc);
    m->outputs_per_sample = impl->fc.dims[impl->fc.n_layers];
    return DDPC_OK;
}

static void cnn_init(ddpc_model *m)
{
    cnn_impl *impl = m->impl;
    for (int i = 0; i < impl->n_conv; i++) {
        const ddpc_conv2d_shape *s = &impl->conv[i];
        float bound = 1.0f / sqrtf((float)(s->c * s->r * s->s));
        const ddpc_param *w = &m->tensors[impl->w_idx[i]];
        ddpc__init_uniform(m->params + w->offset, w->numel, bound, m->cfg.seed,
                           (uint64_t)impl->w_idx[i]);
        if (impl->bn) {
            ddpc__bn_layer_init(&impl->bnl[i], m);
        } else {
            const ddpc_param *b = &m->tensors[impl->b_idx[i]];
            ddpc__init_uniform(m->params + b->offset, b->numel, bound, m->cfg.seed,
                               (uint64_t)impl->b_idx[i]);
        }
    }
    ddpc__fc_stack_init(&impl->fc, m);
}

/* Carves the conv stages' buffers for a batch of n from `base` (NULL: only counts; impl is then
 * only read). Returns floats used; the fc stack takes its buffers after them. */
static size_t carve(const ddpc_model *m, cnn_impl *impl, int64_t n, bool ckpt, float *base)
{
    const cnn_impl *c = m->impl;
    size_t ws = 0, biggest = 0, biggest_pooled = 0;
    for (int i = 0; i < c->n_conv; i++) {
        ddpc_conv2d_shape s = c->conv[i];
        s.n = n;
        size_t need = m->k->conv2d_workspace_floats(&s), conv_out = (size_t)(n * s.k * s.h * s.w);
        size_t pooled = (size_t)(n * s.k * c->pool_h[i] * c->pool_w[i]);
        ws = need > ws ? need : ws;
        biggest = conv_out > biggest ? conv_out : biggest;
        biggest_pooled = pooled > biggest_pooled ? pooled : biggest_pooled;
    }
    float *p = base;
#define TAKE(field, count)                                                                         \
    do {                                                                                           \
        float *t_ = ddpc__take(&p, (count));                                                       \
        if (impl)                                                                                  \
            impl->field = (void *)t_; /* idx: int32_t, as wide as a float */                       \
    } while (0)
    TAKE(ws, ws);
    /* A conv input is the previous pooled output and the fc input the last one. */
    TAKE(dA, biggest_pooled);
    TAKE(dB, biggest);
    if (ckpt) {
        TAKE(idx[0], biggest_pooled);
        TAKE(recomputed, biggest_pooled);
    }
    for (int i = 0; i < c->n_conv; i++) {
        size_t conv_out = (size_t)(n * c->conv[i].k * c->conv[i].h * c->conv[i].w);
        size_t pooled = (size_t)(n * c->conv[i].k * c->pool_h[i] * c->pool_w[i]);
        if (ckpt && impl) {
            impl->act[i] = impl->dB;
            impl->idx[i] = impl->idx[0];
        } else if (!ckpt) {
            TAKE(act[i], conv_out);
        }
        if (c->bn)
            TAKE(bn_in[i], conv_out);
        TAKE(pooled[i], pooled);
        if (!ckpt)
            TAKE(idx[i], pooled);
    }
#undef TAKE
    return (size_t)(p - base);
}

static size_t cnn_arena_floats(const ddpc_model *m, int64_t n, bool ckpt)
{
    const cnn_impl *impl = m->impl;
    return carve(m, NULL, n, ckpt, NULL) + ddpc__fc_stack_arena_floats(&impl->fc, m, n);
}

/* Stage i: conv [-> BN] -> ReLU into act[i], then the pool into y (n, k, h/2, w/2) and idx[i].
 * The recomputation in backward is this same call, so it reproduces forward's bits. */
static ddpc_status stage_forward(ddpc_model *m, cnn_impl *impl, int i, float *y, bool training)
{
    const ddpc_conv2d_shape *s = &impl->conv[i];
    int64_t cnt = s->n * s->k * s->h * s->w;
    const float *bias = impl->bn ? NULL : ddpc__param_ptr(m, impl->b_idx[i]);
    m->k->conv2d_forward(m->cfg.precision, impl->bn ? impl->bn_in[i] : impl->act[i], impl->in[i],
                        ddpc__param_ptr(m, impl->w_idx[i]), bias, s, impl->ws);
    if (impl->bn) /* BatchNorm2d from bn_in[i] into act[i] */
        DDPC_TRY(ddpc__bn_layer_forward(&impl->bnl[i], m, impl->act[i], impl->bn_in[i], s->n,
                                        s->h * s->w, training));
    m->k->relu_forward(impl->act[i], impl->act[i], cnt);
    m->k->maxpool2d_forward(y, impl->idx[i], impl->act[i], s->n, s->k, s->h, s->w, 2, 2);
    return DDPC_OK;
}

static ddpc_status cnn_forward(ddpc_model *m, const ddpc_model_input *in, bool training,
                               ddpc_model_output *out)
{
    cnn_impl *impl = m->impl;
    if (!in->x)
        return ddpc_errorf(DDPC_EINVAL, "cnn forward needs image inputs");
    int64_t n = in->n;
    impl->n = n;
    impl->ckpt = m->cfg.activation_checkpointing;
    float *arena = m->arena + carve(m, impl, n, impl->ckpt, m->arena);
    const float *x = in->x;
    for (int i = 0; i < impl->n_conv; i++) {
        impl->conv[i].n = n;
        impl->in[i] = x;
        DDPC_TRY(stage_forward(m, impl, i, impl->pooled[i], training));
        x = impl->pooled[i];
    }
    return ddpc__fc_stack_forward(&impl->fc, m, x, in, training, &arena, out);
}

/* dB (the conv output's gradient) = ReLU'(maxpool'(dA)) for stage i; dA may be changed. */
static void pool_relu_backward(ddpc_model *m, cnn_impl *impl, int i)
{
    const ddpc_conv2d_shape *s = &impl->conv[i];
    int64_t n = impl->n, cnt = n * s->k * s->h * s->w;
    if (impl->ckpt) {
        /* The pool routes each gradient to its window's maximum, a ReLU output equal to the
         * pooled one: masking dA by the pooled output gives the bits of masking after routing. */
        m->k->relu_mask(impl->dA, impl->pooled[i], n * s->k * impl->pool_h[i] * impl->pool_w[i]);
    }
    m->k->fill_f32(impl->dB, 0.0f, cnt);
    m->k->maxpool2d_backward(impl->dB, impl->dA, impl->idx[i], n, s->k, s->h, s->w, 2, 2);
    if (impl->ckpt)
        return;
    /* ReLU backward in place: the gradient is zero where the activation was not positive. */
    m->k->relu_mask(impl->dB, impl->act[i], cnt);
}

static void cnn_backward(ddpc_model *m, float dloss)
{
    cnn_impl *impl = m->impl;
    int64_t n = impl->n;
    /* dA holds the gradient of the current pooled output, dB of the conv output. */
    int last = impl->n_conv - 1;
    m->k->fill_f32(impl->dA, 0.0f, n * impl->fc.dims[0]);
    ddpc__fc_stack_backward(&impl->fc, m, dloss, impl->dA);
    for (int i = last; i >= 0; i--) {
        const ddpc_conv2d_shape *s = &impl->conv[i];
        /* Only the pool indices are needed again (the shared buffer still holds the last
         * stage's from forward); the conv output goes to dB before it turns into a gradient. */
        if (impl->ckpt && i < last)
            (void)stage_forward(m, impl, i, impl->recomputed, true); /* no bn: cannot fail */
        pool_relu_backward(m, impl, i);
        /* dB, the BN output's gradient, becomes the conv output's in place. */
        if (impl->bn && ddpc__bn_layer_backward(&impl->bnl[i], m, impl->dB, impl->bn_in[i], n,
                                                s->h * s->w) != DDPC_OK)
            return;
        float *dx = NULL;
        if (i > 0) {
            dx = impl->dA;
            m->k->fill_f32(dx, 0.0f, n * s->c * s->h * s->w);
        }
        m->k->conv2d_backward(m->cfg.precision, dx, ddpc__grad_ptr(m, impl->w_idx[i]),
                             impl->bn ? NULL : ddpc__grad_ptr(m, impl->b_idx[i]), impl->dB,
                             impl->in[i], ddpc__param_ptr(m, impl->w_idx[i]), s, impl->ws);
        ddpc__model_grad_ready(m, impl->w_idx[i]);
        if (!impl->bn)
            ddpc__model_grad_ready(m, impl->b_idx[i]);
    }
}

static void cnn_destroy(ddpc_model *m)
{
    cnn_impl *impl = m->impl;
    if (impl) {
        for (int i = 0; i < DDPC_MODEL_MAX_LAYERS; i++)
            ddpc__bn_layer_free(&impl->bnl[i]);
    }
    ddpc_free(m->impl);
}

const ddpc_model_ops ddpc__cnn_ops = {
    .name = "cnn",
    .config_size = sizeof(ddpc_cnn_config),
    .default_config = &defaults,
    .read_config = cnn_read_config,
    .build = cnn_build,
    .init = cnn_init,
    .arena_floats = cnn_arena_floats,
    .forward = cnn_forward,
    .backward = cnn_backward,
    .checkpointing = true,
    .destroy = cnn_destroy,
    .batchnorm = true,
    .gpu = true,
};
