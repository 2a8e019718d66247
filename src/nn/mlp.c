// SPDX-License-Identifier: MIT
/* "mlp": images flattened to (n, c*h*w), then Linear+ReLU per hidden size (with batchnorm,
 * Linear -> BatchNorm1d "fc_bn.<i>" -> ReLU, as torch's nn.BatchNorm1d), then Linear to the
 * classes. Parameters "fc.<i>.weight" (out, in) and "fc.<i>.bias" (out); a multi-head mlp ends
 * in "heads.<k>.weight/bias" instead of the last "fc" layer. */
#include "nn/fc_stack.h"

#include <ddpc/alloc.h>
#include <ddpc/kernels.h>

typedef struct {
    ddpc__fc_stack fc;
} mlp_impl;

static const ddpc_mlp_config defaults = {
    .hidden = {256, 128}, .n_hidden = 2, .bn_momentum = 0.1f, .bn_eps = 1e-5f};

ddpc_mlp_config ddpc_mlp_config_default(void) { return defaults; }

const ddpc_mlp_config *ddpc_mlp_config_of(const ddpc_model *m)
{
    return m->ops == &ddpc__mlp_ops ? m->type_cfg : NULL;
}

/* model.batchnorm (with bn_momentum and bn_eps), then model.hidden. */
static ddpc_status mlp_read_config(ddpc_config *cfg, const char *prefix, void *type_cfg)
{
    ddpc_mlp_config *o = type_cfg;
    char key[DDPC_CONFIG_KEY_MAX];
    DDPC_TRY(ddpc__bn_read_config(cfg, prefix, &o->batchnorm, &o->bn_momentum, &o->bn_eps));
    return ddpc_config_int_list(cfg, ddpc_config_key(key, sizeof key, prefix, "hidden"),
                                defaults.hidden, defaults.n_hidden, 1, 1 << 20, o->hidden,
                                DDPC_MODEL_MAX_LAYERS, &o->n_hidden);
}

static ddpc_status mlp_build(ddpc_model *m)
{
    const ddpc_model_config *c = &m->cfg;
    const ddpc_mlp_config *o = m->type_cfg;
    if (c->in_channels <= 0 || c->in_height <= 0 || c->in_width <= 0 ||
        (c->n_heads == 0 && c->num_classes < (c->loss == DDPC_LOSS_CROSS_ENTROPY ? 2 : 1)))
        return ddpc_errorf(DDPC_EINVAL, "mlp needs positive input dims and at least 2 classes "
                           "(1 output for a loss other than cross_entropy)");
    mlp_impl *impl = ddpc_calloc(1, sizeof *impl);
    if (!impl)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory building mlp");
    m->impl = impl;
    int64_t in = c->in_channels * c->in_height * c->in_width;
    ddpc__bn_opts bn = {o->bn_momentum, o->bn_eps};
    DDPC_TRY(ddpc__fc_stack_build(&impl->fc, m, "fc", in, o->hidden, o->n_hidden, c->num_classes,
                                  c->head_classes, c->n_heads, o->batchnorm ? &bn : NULL));
    m->train_flops_per_sample = ddpc__fc_stack_flops(&impl->fc);
    m->outputs_per_sample = impl->fc.dims[impl->fc.n_layers];
    return DDPC_OK;
}

static void mlp_init(ddpc_model *m)
{
    ddpc__fc_stack_init(&((mlp_impl *)m->impl)->fc, m);
}

static size_t mlp_arena_floats(const ddpc_model *m, int64_t n, bool ckpt)
{
    (void)ckpt; /* no blocks to recompute */
    const mlp_impl *impl = m->impl;
    return ddpc__fc_stack_arena_floats(&impl->fc, m, n);
}

static ddpc_status mlp_forward(ddpc_model *m, const ddpc_model_input *in, bool training,
                               ddpc_model_output *out)
{
    mlp_impl *impl = m->impl;
    if (!in->x)
        return ddpc_errorf(DDPC_EINVAL, "mlp forward needs image inputs");
    float *arena = m->arena;
    return ddpc__fc_stack_forward(&impl->fc, m, in->x, in, training, &arena, out);
}

static void mlp_backward(ddpc_model *m, float dloss)
{
    ddpc__fc_stack_backward(&((mlp_impl *)m->impl)->fc, m, dloss, NULL);
}

static void mlp_destroy(ddpc_model *m)
{
    if (m->impl)
        ddpc__fc_stack_free(&((mlp_impl *)m->impl)->fc);
    ddpc_free(m->impl);
}

const ddpc_model_ops ddpc__mlp_ops = {
    .name = "mlp",
    .config_size = sizeof(ddpc_mlp_config),
    .default_config = &defaults,
    .read_config = mlp_read_config,
    .build = mlp_build,
    .init = mlp_init,
    .arena_floats = mlp_arena_floats,
    .forward = mlp_forward,
    .backward = mlp_backward,
    .destroy = mlp_destroy,
    .batchnorm = true,
    .gpu = true,
};
