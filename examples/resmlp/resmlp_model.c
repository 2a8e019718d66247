// SPDX-License-Identifier: MIT
/* "resmlp": x (n, D) -> h = relu(fc1(x)) (n, H) -> y = x + fc2(h) (n, D) -> logits = head(y)
 * (n, C), softmax cross-entropy. Every pass calls the model's kernel table (ddpc/device.h), never
 * a device's functions, and reaches weights only through ddpc_model_param_ptr/grad_ptr, so DDP and
 * ZeRO work on it as on ddpc's own models. Parameter names are torch's state_dict keys of
 * resmlp_torch.py's module, so `ddpc ckpt export` loads there with strict=True. */
#include "resmlp.h"

#include <ddpc/alloc.h>
#include <ddpc/rng.h>

#include <math.h>
#include <stdio.h>

enum { FC1_W, FC1_B, FC2_W, FC2_B, HEAD_W, HEAD_B, N_PARAMS };

typedef struct {
    int64_t d, h, c;    /* input width, hidden width, classes */
    int idx[N_PARAMS];  /* parameter indices */
    /* set by forward for backward: */
    int64_t n, n_valid;
    const float *x;     /* (n, D), borrowed from the input */
    const int32_t *targets;
} resmlp;

static size_t round16(size_t n) { return (n + 15) & ~(size_t)15; }

/* Arena layout for a batch of n: h1 (n, H), y (n, D), logits (n, C), losses (n), then backward's
 * dlogits (n, C), dy (n, D), dh (n, H). */
static size_t arena_floats(const ddpc_model *m, int64_t n, bool checkpointing)
{
    (void)checkpointing; /* nothing to recompute */
    const resmlp *r = ddpc_model_impl(m);
    size_t un = (size_t)n;
    return 2 * round16(un * (size_t)r->h) + 2 * round16(un * (size_t)r->d) +
           2 * round16(un * (size_t)r->c) + round16(un);
}

static ddpc_status build(ddpc_model *m)
{
    const ddpc_model_config *common = ddpc_model_config_of(m);
    const resmlp_config *own = ddpc_model_type_config(m);
    if (own->hidden < 1)
        return ddpc_errorf(DDPC_EINVAL, "model.hidden must be >= 1 for resmlp, got %lld",
                           (long long)own->hidden);
    if (common->dropout != 0.0f)
        return ddpc_errorf(DDPC_EINVAL, "model.dropout: resmlp has no dropout");
    if (common->n_heads > 0)
        return ddpc_errorf(DDPC_EINVAL, "resmlp has one head: it trains a single task");
    resmlp *r = ddpc_calloc(1, sizeof *r);
    if (!r)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory building resmlp");
    ddpc_model_set_impl(m, r);
    r->d = common->in_channels * common->in_height * common->in_width;
    r->h = own->hidden;
    r->c = common->num_classes;
    const struct {
        const char *name;
        int64_t shape[2];
        int ndim;
    } t[N_PARAMS] = {
        {"block.fc1.weight", {r->h, r->d}, 2}, {"block.fc1.bias", {r->h}, 1},
        {"block.fc2.weight", {r->d, r->h}, 2}, {"block.fc2.bias", {r->d}, 1},
        {"head.weight", {r->c, r->d}, 2},      {"head.bias", {r->c}, 1},
    };
    for (int i = 0; i < N_PARAMS; i++) /* forward order: backward reports them in reverse */
        DDPC_TRY(ddpc_model_add_param(m, t[i].name, t[i].ndim, t[i].shape, t[i].ndim == 2,
                                      &r->idx[i]));
    double macs = (double)(r->d * r->h * 2 + r->d * r->c);
    ddpc_model_set_train_flops(m, 6.0 * macs); /* 2 per MAC forward, twice that backward */
    ddpc_model_set_outputs_per_sample(m, r->c);
    return DDPC_OK;
}

/* torch.nn.Linear's default: weight and bias uniform in +-1/sqrt(fan_in). */
static void init(ddpc_model *m)
{
    const resmlp *r = ddpc_model_impl(m);
    uint64_t seed = ddpc_model_config_of(m)->seed;
    const int64_t fan_in[N_PARAMS] = {r->d, r->d, r->h, r->h, r->d, r->d};
    const int64_t count[N_PARAMS] = {r->h * r->d, r->h, r->d * r->h, r->d, r->c * r->d, r->c};
    for (int i = 0; i < N_PARAMS; i++) {
        float bound = 1.0f / sqrtf((float)fan_in[i]);
        float *w = ddpc_model_host_param(m, r->idx[i]);
        for (int64_t j = 0; j < count[i]; j++) /* stream i: each tensor its own numbers */
            w[j] = (2.0f * ddpc_rng_uniform_at(seed, (uint64_t)i, (uint64_t)j) - 1.0f) * bound;
    }
}

static ddpc_status forward(ddpc_model *m, const ddpc_model_input *in, bool training,
                           ddpc_model_output *out)
{
    (void)training; /* no dropout */
    resmlp *r = ddpc_model_impl(m);
    const ddpc_kernel_table *k = ddpc_model_backend(m);
    ddpc_precision p = ddpc_model_config_of(m)->precision;
    if (!in->x)
        return ddpc_errorf(DDPC_EINVAL, "resmlp forward needs inputs x (n, %lld)",
                           (long long)r->d);
    int64_t n = in->n;
    float *a = ddpc_model_arena(m);
    float *h = a, *y = h + round16((size_t)(n * r->h)), *logits = y + round16((size_t)(n * r->d));
    float *losses = logits + round16((size_t)(n * r->c));
    k->linear_forward(p, h, in->x, ddpc_model_param_ptr(m, r->idx[FC1_W]),
                      ddpc_model_param_ptr(m, r->idx[FC1_B]), n, r->d, r->h);
    k->relu_forward(h, h, n * r->h);
    k->linear_residual_forward(p, y, h, ddpc_model_param_ptr(m, r->idx[FC2_W]),
                               ddpc_model_param_ptr(m, r->idx[FC2_B]), in->x, n, r->h, r->d);
    k->linear_forward(p, logits, y, ddpc_model_param_ptr(m, r->idx[HEAD_W]),
                      ddpc_model_param_ptr(m, r->idx[HEAD_B]), n, r->d, r->c);
    r->n = n;
    r->x = in->x;
    r->targets = in->targets;
    ddpc_model_set_probs(m, logits, (size_t)(n * r->c)); /* softmax'd in place below */
    *out = (ddpc_model_output){0};
    if (!in->targets) {
        k->softmax_rows(logits, n, r->c);
        return DDPC_OK;
    }
    out->n_correct = k->argmax_correct(logits, in->targets, n, r->c, -1);
    out->loss = k->cross_entropy_forward(logits, losses, logits, in->targets, n, r->c, -1,
                                         &out->n_valid);
    r->n_valid = out->n_valid;
    return DDPC_OK;
}

/* Reverse order of forward; each weight/bias pair reported ready as soon as it is final. */
static void backward(ddpc_model *m, float dloss)
{
    resmlp *r = ddpc_model_impl(m);
    const ddpc_kernel_table *k = ddpc_model_backend(m);
    ddpc_precision p = ddpc_model_config_of(m)->precision;
    int64_t n = r->n;
    float *a = ddpc_model_arena(m);
    float *h = a, *y = h + round16((size_t)(n * r->h)), *probs = y + round16((size_t)(n * r->d));
    float *dlogits = probs + round16((size_t)(n * r->c)) + round16((size_t)n);
    float *dy = dlogits + round16((size_t)(n * r->c)), *dh = dy + round16((size_t)(n * r->d));
    k->fill_f32(dlogits, 0.0f, n * r->c); /* backward kernels accumulate */
    k->cross_entropy_backward(dlogits, probs, r->targets, n, r->c, -1, r->n_valid, dloss);
    k->fill_f32(dy, 0.0f, n * r->d);
    k->linear_backward(p, dy, ddpc_model_grad_ptr(m, r->idx[HEAD_W]),
                       ddpc_model_grad_ptr(m, r->idx[HEAD_B]), dlogits, y,
                       ddpc_model_param_ptr(m, r->idx[HEAD_W]), n, r->d, r->c);
    ddpc_model_grad_ready(m, r->idx[HEAD_B]);
    ddpc_model_grad_ready(m, r->idx[HEAD_W]);
    /* dy reaches x directly (the residual) and through fc2; x needs no gradient. */
    k->fill_f32(dh, 0.0f, n * r->h);
    k->linear_backward(p, dh, ddpc_model_grad_ptr(m, r->idx[FC2_W]),
                       ddpc_model_grad_ptr(m, r->idx[FC2_B]), dy, h,
                       ddpc_model_param_ptr(m, r->idx[FC2_W]), n, r->h, r->d);
    ddpc_model_grad_ready(m, r->idx[FC2_B]);
    ddpc_model_grad_ready(m, r->idx[FC2_W]);
    k->relu_mask(dh, h, n * r->h); /* ReLU's backward in place: dh = h > 0 ? dh : 0 */
    k->linear_backward(p, NULL, ddpc_model_grad_ptr(m, r->idx[FC1_W]),
                       ddpc_model_grad_ptr(m, r->idx[FC1_B]), dh, r->x,
                       ddpc_model_param_ptr(m, r->idx[FC1_W]), n, r->d, r->h);
    ddpc_model_grad_ready(m, r->idx[FC1_B]);
    ddpc_model_grad_ready(m, r->idx[FC1_W]);
}

static void destroy(ddpc_model *m)
{
    ddpc_free(ddpc_model_impl(m));
}

/* model.hidden (default 64). */
static ddpc_status read_config(ddpc_config *cfg, const char *prefix, void *type_cfg)
{
    resmlp_config *c = type_cfg;
    char key[64];
    snprintf(key, sizeof key, "%s.hidden", prefix);
    return ddpc_config_int(cfg, key, 64, 1, 1 << 20, &c->hidden);
}

const ddpc_model_ops resmlp_ops = {
    .name = "resmlp",
    .config_size = sizeof(resmlp_config),
    .read_config = read_config,
    .build = build,
    .init = init,
    .arena_floats = arena_floats,
    .forward = forward,
    .backward = backward,
    .destroy = destroy,
};
