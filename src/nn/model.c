// SPDX-License-Identifier: MIT
/* The model registry and the parts every model shares: parameter registration into one flat
 * buffer, the activation arena (grown only when a larger batch arrives), forward/backward
 * dispatch. Invariant: tensors[i].offset increases with i and views never overlap. */
#include "nn/loss.h"
#include "nn/model_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/device.h>
#include <ddpc/kernels.h>
#include <ddpc/models.h>
#include <ddpc/rng.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


ddpc_model_config ddpc_model_config_default(void)
{
    return (ddpc_model_config){
        .type = "mlp",
        .in_channels = 1, .in_height = 28, .in_width = 28, .num_classes = 10,
        .loss_beta = 1.0f, .dropout = 0.0f, .seed = 1337,
    };
}

/* Appends a view to a table of views, growing it; the new view's offset is *total. */
static ddpc_param *add_view(ddpc_param **table, size_t *n, size_t *cap, size_t *total,
                            const char *name, int ndim, const int64_t *shape)
{
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 16;
        ddpc_param *t = ddpc_malloc(c * sizeof *t);
        if (!t)
            return NULL;
        if (*n)
            memcpy(t, *table, *n * sizeof *t);
        ddpc_free(*table);
        *table = t;
        *cap = c;
    }
    ddpc_param *p = &(*table)[*n];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->ndim = ndim;
    p->numel = 1;
    for (int i = 0; i < ndim; i++) {
        p->shape[i] = shape[i];
        p->numel *= (size_t)shape[i];
    }
    /* 16-float alignment keeps every view 64-byte aligned for vector loads. */
    p->offset = *total;
    *total += ddpc__round16(p->numel);
    ++*n;
    return p;
}

int ddpc__model_add_buffer(ddpc_model *m, const char *name, int ndim, const int64_t *shape)
{
    ddpc_param *p = add_view(&m->buffer_views, &m->n_buffers, &m->cap_buffers,
                             &m->n_buffer_floats, name, ndim, shape);
    return p ? (int)m->n_buffers - 1 : -1;
}

int ddpc__model_add_param(ddpc_model *m, const char *name, int ndim, const int64_t *shape,
                          bool decay)
{
    ddpc_param *p = add_view(&m->tensors, &m->n_tensors, &m->cap_tensors, &m->n_params, name,
                             ndim, shape);
    if (!p)
        return -1;
    p->decay = decay;
    return (int)m->n_tensors - 1;
}

void ddpc__init_uniform(float *w, size_t n, float bound, uint64_t seed, uint64_t stream)
{
    for (size_t i = 0; i < n; i++)
        w[i] = (2.0f * ddpc_rng_uniform_at(seed, stream, i) - 1.0f) * bound;
}

void ddpc__init_normal(float *w, size_t n, float std, uint64_t seed, uint64_t stream)
{
    ddpc_rng r = ddpc_rng_make(seed, stream);
    for (size_t i = 0; i < n; i++)
        w[i] = std * ddpc_rng_normal(&r);
}

/* A device model's own copies of the parameters, gradients, decay mask and buffers (the host ones
 * stay for init, checkpoints and export); on the CPU the k-buffers are the host ones. */
static ddpc_status allocate_device_buffers(ddpc_model *m)
{
    const ddpc_kernel_table *k = m->k;
    if (k->kind == DDPC_DEVICE_CPU) {
        m->kparams = m->params;
        m->kgrads = m->grads;
        m->kbuffers = m->buffers;
        m->kdecay_mask = m->decay_mask;
        return DDPC_OK;
    }
    size_t bytes = m->n_params * sizeof(float);
    /* Only where ZeRO-2/3 will give memory back: other runs keep plain device allocations. */
    void *(*flat)(size_t) = m->cfg.releasable_flat ? k->reserve : k->alloc;
    m->kparams = flat(bytes);
    m->kgrads = flat(bytes);
    m->kdecay_mask = k->alloc(m->n_params);
    m->kbuffers = m->n_buffer_floats ? k->alloc(m->n_buffer_floats * sizeof(float)) : NULL;
    if (!m->kparams || !m->kgrads || !m->kdecay_mask || (m->n_buffer_floats && !m->kbuffers))
        return ddpc_errorf(DDPC_ENOMEM, "out of %s memory for %zu model parameters", k->name,
                           m->n_params);
    k->to_device(m->kdecay_mask, m->decay_mask, m->n_params);
    return DDPC_OK;
}

static ddpc_status allocate_buffers(ddpc_model *m)
{
    m->params = ddpc_calloc(m->n_params, sizeof(float));
    m->grads = ddpc_calloc(m->n_params, sizeof(float));
    m->decay_mask = ddpc_calloc(m->n_params, 1);
    m->buffers = m->n_buffer_floats ? ddpc_calloc(m->n_buffer_floats, sizeof(float)) : NULL;
    if (!m->params || !m->grads || !m->decay_mask || (m->n_buffer_floats && !m->buffers)) {
        ddpc_free(m->buffers);
        m->buffers = NULL;
        ddpc_free(m->params);
        ddpc_free(m->grads);
        ddpc_free(m->decay_mask);
        m->params = m->grads = NULL;
        m->decay_mask = NULL;
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for %zu model parameters", m->n_params);
    }
    for (size_t i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].decay)
            memset(m->decay_mask + m->tensors[i].offset, 1, m->tensors[i].numel);
    return allocate_device_buffers(m);
}

/* Validates the shared config against `ops` and runs its build: a shapes-only model. */
static ddpc_status create_shapes(ddpc_model **out, const ddpc_model_ops *ops,
                                 const ddpc_model_config *cfg)
{
    *out = NULL;
    if (cfg->dropout < 0.0f || cfg->dropout >= 1.0f)
        return ddpc_errorf(DDPC_EINVAL, "model dropout must be in [0, 1), got %g", cfg->dropout);
    if ((unsigned)cfg->precision >= DDPC_PREC_COUNT)
        return ddpc_errorf(DDPC_EINVAL, "model precision %d is not fp32, bf16 or fp16",
                           (int)cfg->precision);
    if (cfg->activation_checkpointing && !ops->checkpointing)
        return ddpc_errorf(DDPC_EINVAL, "model type '%s' has no activation checkpointing (gpt, "
                           "seq2seq and cnn do: they recompute their blocks in backward)",
                           ops->name);
    const ddpc_kernel_table *k = cfg->backend ? cfg->backend : ddpc_kernel_table_cpu();
    if (ops == &ddpc__seq2seq_ops && !ddpc__s2s_table_ok(k))
        return ddpc_errorf(DDPC_EINVAL, "model type 'seq2seq' does not run on GPUs yet (the %s "
                           "kernel table lacks its kernels); use device: cpu", k->name);
    DDPC_TRY(ddpc__loss_check(cfg, ops == &ddpc__mlp_ops || ops == &ddpc__cnn_ops, k));
    ddpc_model *m = ddpc_calloc(1, sizeof *m);
    if (!m)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory creating a %s model", ops->name);
    m->ops = ops;
    m->cfg = *cfg;
    snprintf(m->cfg.type, sizeof m->cfg.type, "%s", ops->name);
    m->cfg.type_config = NULL;
    m->k = k;
    if (ops->config_size) { /* the model's own copy: the caller's may go away */
        m->type_cfg = ddpc_calloc(1, ops->config_size);
        if (!m->type_cfg) {
            ddpc_model_destroy(m);
            return ddpc_errorf(DDPC_ENOMEM, "out of memory creating a %s model", ops->name);
        }
        const void *own = cfg->type_config ? cfg->type_config : ops->default_config;
        if (own)
            memcpy(m->type_cfg, own, ops->config_size);
        m->cfg.type_config = m->type_cfg;
    }
    ddpc_status s = ops->build(m);
    if (s != DDPC_OK) {
        ddpc_model_destroy(m);
        return s;
    }
    *out = m;
    return DDPC_OK;
}

ddpc_status ddpc_model_create_shapes(ddpc_model **out, const ddpc_model_config *cfg)
{
    *out = NULL;
    const ddpc_model_ops *ops = ddpc_model_lookup(cfg->type);
    if (!ops)
        return ddpc_errorf(DDPC_EINVAL, "unknown model type '%s' (choose one of: %s)", cfg->type,
                           ddpc_model_types());
    return create_shapes(out, ops, cfg);
}

ddpc_status ddpc_model_create_custom(ddpc_model **out, const ddpc_model_ops *ops,
                                     const void *type_cfg, const ddpc_model_config *common)
{
    *out = NULL;
    DDPC_TRY(ddpc__model_ops_check(ops));
    ddpc_model_config cfg = *common;
    cfg.type_config = type_cfg;
    DDPC_TRY(create_shapes(out, ops, &cfg));
    ddpc_status s = ddpc_model_allocate(*out);
    if (s != DDPC_OK) {
        ddpc_model_destroy(*out);
        *out = NULL;
    }
    return s;
}

ddpc_status ddpc_model_allocate(ddpc_model *m)
{
    if (m->params)
        return DDPC_OK;
    DDPC_TRY(allocate_buffers(m));
    m->ops->init(m);
    return ddpc_model_to_device(m);
}

ddpc_status ddpc_model_create(ddpc_model **out, const ddpc_model_config *cfg)
{
    DDPC_TRY(ddpc_model_create_shapes(out, cfg));
    ddpc_status s = ddpc_model_allocate(*out);
    if (s != DDPC_OK) {
        ddpc_model_destroy(*out);
        *out = NULL;
    }
    return s;
}

void ddpc_model_destroy(ddpc_model *m)
{
    if (!m)
        return;
    if (m->ops && m->ops->destroy)
        m->ops->destroy(m);
    if (m->k && m->k->kind != DDPC_DEVICE_CPU) {
        m->k->free(m->kparams);
        m->k->free(m->kgrads);
        m->k->free(m->kdecay_mask);
        m->k->free(m->kbuffers);
        m->k->free(m->ktokens);
        m->k->free(m->ktargets);
        m->k->free(m->ksrc);
        m->k->free(m->kx);
        m->k->free(m->kftargets);
    }
    if (m->k)
        m->k->free(m->arena);
    if (m->k && m->ce_sums)
        m->k->free(m->ce_sums);
    ddpc_free(m->host_probs);
    ddpc_free(m->tensors);
    ddpc_free(m->params);
    ddpc_free(m->grads);
    ddpc_free(m->decay_mask);
    ddpc_free(m->buffer_views);
    ddpc_free(m->buffers);
    ddpc_free(m->type_cfg);
    ddpc_free(m);
}

const ddpc_model_config *ddpc_model_config_of(const ddpc_model *m) { return &m->cfg; }
size_t ddpc_model_num_params(const ddpc_model *m) { return m->n_params; }
float *ddpc_model_params(ddpc_model *m) { return m->params; }
float *ddpc_model_grads(ddpc_model *m) { return m->grads; }
const uint8_t *ddpc_model_decay_mask(const ddpc_model *m) { return m->decay_mask; }
size_t ddpc_model_num_tensors(const ddpc_model *m) { return m->n_tensors; }
const ddpc_param *ddpc_model_tensor(const ddpc_model *m, size_t i) { return &m->tensors[i]; }
double ddpc_model_train_flops_per_sample(const ddpc_model *m) { return m->train_flops_per_sample; }
int64_t ddpc_model_outputs_per_sample(const ddpc_model *m) { return m->outputs_per_sample; }
const float *ddpc_model_probs(ddpc_model *m)
{
    if (!m->probs || m->k->kind == DDPC_DEVICE_CPU)
        return m->probs;
    if (m->probs_count > m->host_probs_cap) {
        ddpc_free(m->host_probs);
        m->host_probs = ddpc_malloc(m->probs_count * sizeof(float));
        m->host_probs_cap = m->host_probs ? m->probs_count : 0;
        if (!m->host_probs)
            return NULL;
    }
    m->k->to_host(m->host_probs, m->probs, m->probs_count * sizeof(float));
    return m->host_probs;
}
const ddpc_kernel_table *ddpc_model_backend(const ddpc_model *m) { return m->k; }
float *ddpc_model_device_params(ddpc_model *m) { return m->kparams; }
float *ddpc_model_device_grads(ddpc_model *m) { return m->kgrads; }
const uint8_t *ddpc_model_device_decay_mask(const ddpc_model *m) { return m->kdecay_mask; }

void ddpc_model_to_host(ddpc_model *m)
{
    if (m->k->kind == DDPC_DEVICE_CPU || !m->kparams)
        return;
    m->k->to_host(m->params, m->kparams, m->n_params * sizeof(float));
    if (m->n_buffer_floats)
        m->k->to_host(m->buffers, m->kbuffers, m->n_buffer_floats * sizeof(float));
}

ddpc_status ddpc_model_to_device(ddpc_model *m)
{
    if (m->k->kind == DDPC_DEVICE_CPU || !m->kparams)
        return DDPC_OK;
    /* ZeRO-3 may have released parts: they are backed again before the copy writes them. */
    DDPC_TRY(m->k->back(m->kparams, m->n_params * sizeof(float)));
    m->k->to_device(m->kparams, m->params, m->n_params * sizeof(float));
    if (m->n_buffer_floats)
        m->k->to_device(m->kbuffers, m->buffers, m->n_buffer_floats * sizeof(float));
    return DDPC_OK;
}
size_t ddpc_model_num_buffers(const ddpc_model *m) { return m->n_buffers; }
const ddpc_param *ddpc_model_buffer(const ddpc_model *m, size_t i) { return &m->buffer_views[i]; }
size_t ddpc_model_num_buffer_floats(const ddpc_model *m) { return m->n_buffer_floats; }
float *ddpc_model_buffer_data(ddpc_model *m) { return m->buffers; }
float *ddpc_model_device_buffer_data(ddpc_model *m) { return m->kbuffers; }

void ddpc_model_set_stat_sync_hook(ddpc_model *m, ddpc_stat_sync_fn fn, void *ctx)
{
    m->stat_sync = fn;
    m->stat_sync_ctx = fn ? ctx : NULL;
}

ddpc_sample_sizes ddpc_model_sample_sizes(const ddpc_model *m, const ddpc_model_input *in)
{
    const ddpc_model_config *c = &m->cfg;
    if (m->ops == &ddpc__gpt_ops) {
        int64_t block = ddpc_gpt_config_of(m)->block_size;
        return (ddpc_sample_sizes){.tokens = block, .targets = block};
    }
    if (m->ops == &ddpc__seq2seq_ops)
        return (ddpc_sample_sizes){
            .tokens = in->tgt_len, .targets = in->tgt_len, .src_tokens = in->src_len};
    const bool floats = c->loss != DDPC_LOSS_CROSS_ENTROPY; /* one per output */
    return (ddpc_sample_sizes){.x = c->in_channels * c->in_height * c->in_width,
                               .targets = 1,
                               .float_targets = floats ? c->num_classes : 0};
}

void ddpc_model_zero_grad(ddpc_model *m)
{
    /* After ZeRO-2/3 released parts (a caller outside the reducer): backed again first. */
    if (m->k->back(m->kgrads, m->n_params * sizeof(float)) != DDPC_OK)
        return; /* out of device memory: the next kernel's check reports it */
    m->k->fill_f32(m->kgrads, 0.0f, (int64_t)m->n_params);
}

bool ddpc_model_can_checkpoint(const ddpc_model *m)
{
    return m->ops->checkpointing;
}

/* The arena a batch of n needs: 0 for a type without arena_floats. */
static size_t arena_need(const ddpc_model *m, int64_t n, bool checkpointing)
{
    if (!m->ops->arena_floats)
        return 0;
    return m->ops->arena_floats(m, n, checkpointing && m->ops->checkpointing);
}

size_t ddpc_model_activation_bytes(const ddpc_model *m, int64_t n, bool checkpointing)
{
    return arena_need(m, n, checkpointing) * sizeof(float);
}

ddpc_status ddpc__model_reserve_arena(ddpc_model *m, size_t need, int64_t n)
{
    if (need <= m->arena_floats)
        return DDPC_OK;
    float *a = m->k->alloc(need * sizeof(float));
    if (!a)
        return ddpc_errorf(DDPC_ENOMEM, "out of %s memory for activations of a batch of %lld",
                           m->k->name, (long long)n);
    m->k->free(m->arena);
    m->arena = a;
    m->arena_floats = need;
    return DDPC_OK;
}

/* Grows device input buffer *buf to `cap` elements of `size` bytes (contents not kept). */
static ddpc_status grow_input(ddpc_model *m, void **buf, size_t cap, size_t size)
{
    m->k->free(*buf);
    *buf = m->k->alloc(cap * size);
    return *buf ? DDPC_OK
                : ddpc_errorf(DDPC_ENOMEM, "out of %s memory for a batch's inputs", m->k->name);
}

/* Makes the device input buffers hold a batch shaped as `in` (every array of it, the largest of
 * its per-sample sizes times n), growing all together; returns its sample sizes. */
static ddpc_status reserve_inputs(ddpc_model *m, const ddpc_model_input *in, ddpc_sample_sizes *z)
{
    *z = ddpc_model_sample_sizes(m, in);
    int64_t per = z->x > z->tokens ? z->x : z->tokens;
    per = per > z->targets ? per : z->targets;
    per = per > z->src_tokens ? per : z->src_tokens;
    per = per > z->float_targets ? per : z->float_targets;
    size_t need = (size_t)in->n * (size_t)per, slots = m->k->stage_in ? 2 : 1;
    if (need <= m->in_cap)
        return DDPC_OK;
    m->in_cap = 0; /* until all have grown */
    DDPC_TRY(grow_input(m, (void **)&m->ktokens, need * slots, sizeof(int32_t)));
    DDPC_TRY(grow_input(m, (void **)&m->ktargets, need * slots, sizeof(int32_t)));
    DDPC_TRY(grow_input(m, (void **)&m->ksrc, need * slots, sizeof(int32_t)));
    DDPC_TRY(grow_input(m, (void **)&m->kx, need * slots, sizeof(float)));
    if (z->float_targets > 0) /* fixed by the model's loss: always, or never */
        DDPC_TRY(grow_input(m, (void **)&m->kftargets, need * slots, sizeof(float)));
    m->in_cap = need;
    return DDPC_OK;
}

/* A device model's copy of the host batch `in`: every array copied into the model's device input
 * buffers (grown for the largest batch seen), the rest as it is; through the table's copy stream
 * into the two slots in turn where it has one. The checks that read inputs (token ranges) run on
 * the host copy before this. */
static ddpc_status stage_inputs(ddpc_model *m, const ddpc_model_input *in, ddpc_model_input *out)
{
    ddpc_sample_sizes z;
    DDPC_TRY(reserve_inputs(m, in, &z));
    size_t n = (size_t)in->n, at = m->k->stage_in ? (size_t)m->in_slot * m->in_cap : 0;
    void *dst[5];
    const void *src[5];
    size_t bytes[5];
    int count = 0;
    *out = *in;
    if (in->x) {
        out->x = m->kx + at;
        dst[count] = m->kx + at, src[count] = in->x;
        bytes[count++] = n * (size_t)z.x * sizeof(float);
    }
    if (in->float_targets && m->kftargets) {
        out->float_targets = m->kftargets + at;
        dst[count] = m->kftargets + at, src[count] = in->float_targets;
        bytes[count++] = n * (size_t)z.float_targets * sizeof(float);
    }
    const int32_t *ints[3] = {in->tokens, in->targets, in->src_tokens};
    int32_t *kints[3] = {m->ktokens + at, m->ktargets + at, m->ksrc + at};
    const int32_t **outs[3] = {&out->tokens, &out->targets, &out->src_tokens};
    const int64_t per[3] = {z.tokens, z.targets, z.src_tokens};
    for (int i = 0; i < 3; i++) {
        if (!ints[i])
            continue;
        *outs[i] = kints[i];
        dst[count] = kints[i], src[count] = ints[i];
        bytes[count++] = n * (size_t)per[i] * sizeof(int32_t);
    }
    if (m->k->stage_in) {
        m->k->stage_in(m->in_slot, dst, src, bytes, count);
        m->in_slot ^= 1;
        return DDPC_OK;
    }
    for (int i = 0; i < count; i++)
        m->k->to_device(dst[i], src[i], bytes[i]);
    return DDPC_OK;
}

/* One training pass of n pairs seq_len wide, every token <unk> (3: no padding, no mask), then
 * the gradients zeroed: the device kernels' own scratch (a 16-bit product's rounded operands, the
 * loss's rows) grows to the widest batch now, not at the first wider batch of a run. It leaves no
 * trace: dropout draws from a counter of rng_stream, and seq2seq keeps no running statistics. */
static ddpc_status warm_widest_pairs(ddpc_model *m, int64_t n, int64_t seq_len)
{
    const size_t count = (size_t)(n * seq_len);
    int32_t *ids = ddpc_malloc(count * sizeof *ids);
    if (!ids)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for a %lld x %lld warm-up batch",
                           (long long)n, (long long)seq_len);
    for (size_t i = 0; i < count; i++)
        ids[i] = 3;
    ddpc_model_input in = {.n = n, .tokens = ids, .targets = ids, .src_tokens = ids,
                           .src_len = seq_len, .tgt_len = seq_len};
    ddpc_model_output out;
    ddpc_status st = ddpc_model_forward(m, &in, true, &out);
    if (st == DDPC_OK)
        st = ddpc_model_backward(m, 1.0f);
    ddpc_model_zero_grad(m);
    ddpc_free(ids);
    return st;
}

ddpc_status ddpc_model_reserve(ddpc_model *m, int64_t n, int64_t seq_len)
{
    if (n <= 0)
        return DDPC_OK;
    DDPC_TRY(ddpc__model_reserve_arena(m, arena_need(m, n, m->cfg.activation_checkpointing), n));
    if (m->k->kind == DDPC_DEVICE_CPU)
        return DDPC_OK;
    /* A seq2seq batch is as wide as its longest pair, up to max_len, as the arena assumes. */
    const ddpc_seq2seq_config *s2s = ddpc_seq2seq_config_of(m);
    if (s2s && seq_len <= 0)
        seq_len = s2s->max_len;
    ddpc_model_input probe = {.n = n, .src_len = seq_len, .tgt_len = seq_len};
    ddpc_sample_sizes z;
    DDPC_TRY(reserve_inputs(m, &probe, &z));
    /* Other models' batches have one shape per n: their first step grows the scratch. */
    return s2s ? warm_widest_pairs(m, n, seq_len) : DDPC_OK;
}

ddpc_status ddpc_model_forward(ddpc_model *m, const ddpc_model_input *in, bool training,
                               ddpc_model_output *out)
{
    const bool armed = m->ce_armed && training; /* this forward's, whatever happens */
    m->ce_armed = false;
    if (in->n <= 0)
        return ddpc_errorf(DDPC_EINVAL, "model forward needs a batch of at least 1, got %lld",
                           (long long)in->n);
    int heads = m->cfg.n_heads ? (int)m->cfg.n_heads : 1;
    if (in->task < 0 || in->task >= heads)
        return ddpc_errorf(DDPC_EINVAL, "model forward: task %d is not one of the model's %d "
                           "head%s", in->task, heads, heads == 1 ? "" : "s");
    DDPC_TRY(ddpc__model_reserve_arena(m, arena_need(m, in->n, m->cfg.activation_checkpointing),
                                       in->n));
    ddpc_model_output local = {0};
    m->last_n = 0;
    m->ce_fused = m->ce_half = false; /* with last_n: a backward meets this forward's or none */
    if (m->ops->check_input)
        DDPC_TRY(m->ops->check_input(m, in));
    ddpc_model_input staged;
    if (m->k->kind != DDPC_DEVICE_CPU) {
        DDPC_TRY(stage_inputs(m, in, &staged));
        in = &staged;
    }
    m->ce_armed = armed;
    m->stat_rows = 0.0;
    ddpc_status st = m->ops->forward(m, in, training, out ? out : &local);
    m->ce_armed = false;
    DDPC_TRY(st);
    /* The loss ran only on the targets it takes: a forward without them leaves nothing to
     * backward through. */
    if (m->cfg.loss == DDPC_LOSS_CROSS_ENTROPY ? in->targets != NULL : in->float_targets != NULL)
        m->last_n = in->n;
    return DDPC_OK;
}

void ddpc_model_set_grad_ready_hook(ddpc_model *m, ddpc_grad_ready_fn fn, void *ctx)
{
    m->grad_ready = fn;
    m->grad_ready_ctx = fn ? ctx : NULL;
}

void ddpc_model_set_param_use_hook(ddpc_model *m, ddpc_param_use_fn fn, void *ctx)
{
    m->param_use = fn;
    m->param_use_ctx = fn ? ctx : NULL;
}

void ddpc_model_set_grad_use_hook(ddpc_model *m, ddpc_grad_use_fn fn, void *ctx)
{
    m->grad_use = fn;
    m->grad_use_ctx = fn ? ctx : NULL;
}

ddpc_status ddpc_model_backward(ddpc_model *m, float dloss)
{
    if (m->last_n == 0)
        return ddpc_errorf(DDPC_EINVAL, "model backward needs a forward pass with targets first");
    if (m->ce_fused && dloss != m->ce_dloss) /* the logits hold the gradient scaled by that one */
        return ddpc_errorf(DDPC_EINVAL, "model backward: dloss %g is not the %g that "
                           "ddpc_model_expect_backward or this forward's first backward gave",
                           (double)dloss, (double)m->ce_dloss);
    m->backward_status = DDPC_OK;
    m->ops->backward(m, dloss);
    return m->backward_status;
}
