// SPDX-License-Identifier: MIT
/* Private model machinery shared by the model files: the model struct behind the public
 * operation table (ddpc/model_ops.h), parameter registration while building, and the arena. A
 * model type registers its parameters in forward order from build(), then model.c allocates the
 * buffers once and calls init(). */
#ifndef DDPC_NN_MODEL_IMPL_H
#define DDPC_NN_MODEL_IMPL_H

#include <ddpc/device.h>
#include <ddpc/model_ops.h>
#include <ddpc/models.h>
#include <ddpc/nn.h>

#include <stdio.h>


struct ddpc_model {
    const ddpc_model_ops *ops;
    ddpc_model_config cfg; /* cfg.type_config points at type_cfg */
    void *type_cfg;        /* (ops->config_size bytes) the type's own config, owned */
    /* The kernel table every pass calls (cfg.backend, or the CPU's). On a device, k-prefixed
     * buffers are the device's copies the kernels use and the plain ones the host's (checkpoints,
     * export, init); on the CPU both names are the same memory. */
    const ddpc_kernel_table *k;
    float *kparams, *kgrads, *kbuffers;
    uint8_t *kdecay_mask;
    /* A device model's inputs, copied from the host batch by ddpc_model_forward: room for
     * `in_cap` int32/float elements each, grown once per larger batch; twice that where the
     * table stages batches on a copy stream (k->stage_in), slot in_slot's at in_slot * in_cap. */
    int32_t *ktokens, *ktargets, *ksrc;
    float *kx, *kftargets; /* kftargets only for a loss on float targets */
    size_t in_cap;
    int in_slot; /* the slot the next batch goes to */
    float *host_probs; /* a device model's probs read back for ddpc_model_probs */
    size_t probs_count, host_probs_cap;
    void *impl;
    ddpc_param *tensors; /* (n_tensors) */
    size_t n_tensors, cap_tensors;
    size_t n_params;
    float *params;       /* (n_params) */
    float *grads;        /* (n_params) */
    uint8_t *decay_mask; /* (n_params) */
    float *arena;        /* (arena_floats) activations, scratch, backward temporaries: k's memory */
    size_t arena_floats;
    const float *probs;  /* set by forward: (n, outputs_per_sample), k's memory */
    int64_t last_n;      /* batch of the last forward with targets, 0 if none */
    double *loss_sink;   /* ddpc_model_set_loss_sink's (3) doubles in k's memory, or NULL */
    float ce_dloss;      /* the dloss that gradient was (or will be) scaled by */
    bool ce_armed;       /* during a training forward: it may fuse cross-entropy's backward */
    bool ce_fused;       /* the logits hold the loss's gradient (fused forward or backward) */
    bool ce_half;        /* ... in 16 bits, from the table's head16_forward (nn/loss.h) */
    double *ce_sums;     /* (3) the fused loss's sums when no sink takes them, k's memory */
    ddpc_grad_ready_fn grad_ready; /* may be NULL */
    void *grad_ready_ctx;
    ddpc_param_use_fn param_use;   /* may be NULL */
    void *param_use_ctx;
    ddpc_grad_use_fn grad_use;     /* may be NULL */
    void *grad_use_ctx;
    ddpc_param *buffer_views; /* (n_buffers) offsets into buffers */
    size_t n_buffers, cap_buffers, n_buffer_floats;
    float *buffers;           /* (n_buffer_floats) */
    ddpc_stat_sync_fn stat_sync; /* may be NULL */
    void *stat_sync_ctx;
    double stat_rows; /* a device model's batch over every replica in this training forward, for
                         its BatchNorm counts (bn_layer.c); 0 until its first BatchNorm asks */
    ddpc_status backward_status; /* a failed stat sync inside backward (ops->backward is void) */
    double train_flops_per_sample;
    int64_t outputs_per_sample;
};

/* Registers a parameter of the given shape; returns its index, or -1 on out-of-memory (the
 * built-ins' short form of ddpc_model_add_param, whose checks their fixed names never fail). */
int ddpc__model_add_param(ddpc_model *m, const char *name, int ndim, const int64_t *shape,
                          bool decay);
/* Registers a buffer (no gradient, not trained); returns its index, or -1 on out-of-memory. */
int ddpc__model_add_buffer(ddpc_model *m, const char *name, int ndim, const int64_t *shape);
static inline float *ddpc__buffer_ptr(ddpc_model *m, int idx)
{
    return m->kbuffers + m->buffer_views[idx].offset;
}
/* The host copy of buffer idx (for init; a device model uploads it afterwards). */
static inline float *ddpc__host_buffer_ptr(ddpc_model *m, int idx)
{
    return m->buffers + m->buffer_views[idx].offset;
}
/* Sums `count` doubles over every replica through the stat-sync hook (a no-op without one):
 * sums in k's memory, or in the host's with `host`. */
static inline ddpc_status ddpc__model_sync_stats(ddpc_model *m, double *sums, size_t count,
                                                 bool host)
{
    return m->stat_sync ? m->stat_sync(m->stat_sync_ctx, sums, count, host) : DDPC_OK;
}

/* Tensor idx's parameters for a kernel to read, and its gradient for a backward kernel to
 * accumulate into: every forward/backward access goes through here, so the hooks (ZeRO's
 * gathered and pooled buckets) can point it elsewhere. */
static inline float *ddpc__param_ptr(ddpc_model *m, int idx)
{
    float *p = m->param_use ? m->param_use(m->param_use_ctx, (size_t)idx) : NULL;
    return p ? p : m->kparams + m->tensors[idx].offset;
}
static inline float *ddpc__grad_ptr(ddpc_model *m, int idx)
{
    float *g = m->grad_use ? m->grad_use(m->grad_use_ctx, (size_t)idx) : NULL;
    return g ? g : m->kgrads + m->tensors[idx].offset;
}

/* Reports tensor idx's gradient as final for this backward (see ddpc_model_set_grad_ready_hook). */
static inline void ddpc__model_grad_ready(ddpc_model *m, int idx)
{
    if (m->grad_ready)
        m->grad_ready(m->grad_ready_ctx, (size_t)idx);
}

/* Bump allocation in the arena: returns p and advances it by `count` floats rounded up to 16. */
static inline float *ddpc__take(float **p, size_t count)
{
    float *r = *p;
    *p += (count + 15) & ~(size_t)15;
    return r;
}
static inline size_t ddpc__round16(size_t count) { return (count + 15) & ~(size_t)15; }

/* Initialisers (deterministic from seed and the parameter's index). */
void ddpc__init_uniform(float *w, size_t n, float bound, uint64_t seed, uint64_t stream);
void ddpc__init_normal(float *w, size_t n, float std, uint64_t seed, uint64_t stream);


extern const ddpc_model_ops ddpc__mlp_ops;
extern const ddpc_model_ops ddpc__cnn_ops;
extern const ddpc_model_ops ddpc__gpt_ops;
extern const ddpc_model_ops ddpc__seq2seq_ops;

/* Whether kernel table k has every member the seq2seq model calls (seq2seq.c). */
bool ddpc__s2s_table_ok(const ddpc_kernel_table *k);

/* DDPC_EINVAL naming what is wrong with a table: a bad name or a required member missing. */
ddpc_status ddpc__model_ops_check(const ddpc_model_ops *ops);

/* Grows the arena to at least `need` floats (for a batch of n, named in the error); keeps it when
 * it is large enough already. */
ddpc_status ddpc__model_reserve_arena(ddpc_model *m, size_t need, int64_t n);

#endif
