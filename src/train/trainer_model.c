// SPDX-License-Identifier: MIT
/* The model, its optimizer and the step engine from the config. Each model type reads its own keys
 * (its ops' read_config, in its own file): only the chosen type's keys are read, so a key of
 * another type is reported unused. The optimizer keys (optim.*) and the step keys (grad_clip,
 * on_nonfinite) become the engine's config. The loaders are trainer_loaders.c's. */
#include <ddpc/device.h>
#include <ddpc/model_ops.h>
#include <ddpc/models.h>

#include "train/trainer_impl.h"

#include <ddpc/alloc.h>

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* model.type among the registered types (the built-ins included): *ops is its table. */
static ddpc_status read_model_type(ddpc_config *c, const ddpc_model_ops **ops)
{
    const char *names[DDPC_MODEL_MAX_TYPES + 1];
    size_t n = ddpc_model_type_names(names, DDPC_MODEL_MAX_TYPES);
    names[n] = NULL;
    int chosen;
    DDPC_TRY(ddpc_config_choice(c, "model.type", "mlp", names, &chosen));
    *ops = ddpc_model_lookup(names[chosen]);
    return DDPC_OK;
}

/* The type's own keys into *own, starting from its defaults (the caller frees it once the model
 * has copied it). */
static ddpc_status read_type_config(ddpc_trainer *t, const ddpc_model_ops *ops,
                                    ddpc_model_config *mc, void **own)
{
    if (ops->config_size == 0)
        return DDPC_OK;
    *own = ddpc_calloc(1, ops->config_size);
    if (!*own)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for model.type %s's config", ops->name);
    if (ops->default_config)
        memcpy(*own, ops->default_config, ops->config_size);
    mc->type_config = *own;
    return ops->read_config ? ops->read_config(t->cfg, "model", *own) : DDPC_OK;
}

/* Needs of each dataset kind, for the error when model and data do not fit. */
static const char *const kind_needs[] = {
    "an image dataset (data.type fmnist, npy, imagefolder or synthetic_images)",
    "a token dataset (data.type text or synthetic_tokens)",
    "a translation dataset (data.type translation)",
};

/* One head per task, as wide as its num_classes; the samples of every task must have one shape. */
static ddpc_status task_heads(const ddpc_trainer *t, ddpc_model_config *mc)
{
    int64_t shape0[3];
    ddpc_dataset_sample_shape(t->data.task[0].train, shape0);
    for (int i = 0; i < t->data.n_tasks; i++) {
        int64_t shape[3];
        ddpc_dataset_sample_shape(t->data.task[i].train, shape);
        if (memcmp(shape, shape0, sizeof shape) != 0)
            return ddpc_errorf(DDPC_EINVAL,
                               "tasks.%d ('%s') has samples of shape (%lld, %lld, %lld), tasks.0 "
                               "of (%lld, %lld, %lld): the trunk is shared",
                               i, t->data.task[i].name, (long long)shape[0], (long long)shape[1],
                               (long long)shape[2], (long long)shape0[0], (long long)shape0[1],
                               (long long)shape0[2]);
        mc->head_classes[i] = t->data.task[i].num_classes;
    }
    mc->n_heads = (size_t)t->data.n_tasks;
    return DDPC_OK;
}

/* `loss` and `loss_beta` (top level: they belong to the run, not the network's shape). A loss
 * other than cross_entropy needs float targets (data.type csv), one task and DDP rather than
 * parallel.mode dp; the model refuses it on gpt, seq2seq and a GPU. */
static ddpc_status read_loss(ddpc_trainer *t, ddpc_model_config *mc)
{
    int loss;
    double beta;
    DDPC_TRY(ddpc_config_choice(t->cfg, "loss", "cross_entropy", ddpc_loss_names(), &loss));
    mc->loss = (ddpc_loss)loss;
    if (mc->loss == DDPC_LOSS_SMOOTH_L1)
        DDPC_TRY(ddpc_config_float(t->cfg, "loss_beta", 1.0, 0.0, 1e30, &beta));
    mc->loss_beta = mc->loss == DDPC_LOSS_SMOOTH_L1 ? (float)beta : 1.0f;
    if (mc->loss == DDPC_LOSS_CROSS_ENTROPY)
        return DDPC_OK;
    if (strcmp(mc->type, "mlp") != 0 && strcmp(mc->type, "cnn") != 0) /* as the model says */
        return ddpc_errorf(DDPC_EINVAL, "loss '%s' needs model type mlp or cnn; '%s' trains with "
                           "cross_entropy only", ddpc_loss_name(mc->loss), mc->type);
    if (ddpc_dataset_target_width(t->data.task[0].train) == 0)
        return ddpc_errorf(DDPC_EINVAL,
                           "loss '%s' needs float targets (data.type csv with "
                           "data.label); data.type %s has class labels",
                           ddpc_loss_name(mc->loss), t->data.task[0].data_type);
    if (t->dist.dp_replicas > 0)
        return ddpc_errorf(DDPC_EINVAL, "loss '%s' needs DDP; parallel.mode: dp splits class "
                           "labels only", ddpc_loss_name(mc->loss));
    return DDPC_OK;
}

static ddpc_status read_model_config(ddpc_trainer *t, ddpc_model_config *mc, void **own)
{
    ddpc_config *c = t->cfg;
    double dropout;
    *mc = ddpc_model_config_default();
    const ddpc_model_ops *ops;
    DDPC_TRY(read_model_type(c, &ops));
    const ddpc_model_ops *b = ops; /* what the trainer needs of the type: data, BN, GPU */
    snprintf(mc->type, sizeof mc->type, "%s", b->name);
    DDPC_TRY(read_type_config(t, ops, mc, own));
    bool s2s = b->data_kind == DDPC_DATASET_PAIRS;
    DDPC_TRY(ddpc_config_float(c, "model.dropout", s2s ? 0.1 : 0.0, 0.0, 0.99, &dropout));
    mc->dropout = (float)dropout;
    DDPC_TRY(ddpc_config_bool(c, "model.activation_checkpointing", false,
                              &mc->activation_checkpointing));
    if (mc->activation_checkpointing && !ops->checkpointing)
        return ddpc_errorf(DDPC_EINVAL,
                           "model.activation_checkpointing: model.type '%s' has no blocks to "
                           "recompute (gpt, cnn and seq2seq support it)",
                           b->name);
    /* Whether model.batchnorm is on is the type's own key: build_model checks it on the model. */
    if (b->batchnorm) /* torch.nn.SyncBatchNorm.convert_sync_batchnorm */
        DDPC_TRY(ddpc_config_bool(c, "model.sync_batchnorm", false,
                                  &t->dist.reducer_cfg.sync_batchnorm));
    if (t->dist.reducer_cfg.sync_batchnorm && t->dist.dp_replicas > 0) /* torch's is DDP-only too */
        return ddpc_errorf(DDPC_EINVAL,
                           "model.sync_batchnorm synchronises batch statistics "
                           "across DDP ranks; parallel.mode: dp has none (its replicas normalise "
                           "their own rows, as torch's DataParallel does)");
    DDPC_TRY(read_loss(t, mc));
    mc->seed = t->set.seed;
    mc->precision = t->set.precision;
    int stage;
    DDPC_TRY(ddpc__trainer_zero_stage(c, &stage));
    mc->releasable_flat = stage >= 2; /* ZeRO-2/3 give device memory back */
    int64_t shape[3];
    ddpc_dataset_sample_shape(t->data.task[0].train, shape);
    mc->num_classes = ddpc_dataset_num_classes(t->data.task[0].train);
    if (ddpc_dataset_kind_of(t->data.task[0].train) != b->data_kind)
        return ddpc_errorf(DDPC_EINVAL, "model.type '%s' needs %s, not data.type %s", b->name,
                           kind_needs[b->data_kind], t->data.task[0].data_type);
    if (b->data_kind == DDPC_DATASET_TOKENS) /* wider than the data's, as llm.c pads 50257 */
        DDPC_TRY(ddpc_config_int(c, "model.vocab_size", mc->num_classes, mc->num_classes,
                                 INT32_MAX, &mc->num_classes));
    if (t->kind->model_config) /* translation: vocabularies and longest sequence */
        DDPC_TRY(t->kind->model_config(t, mc, *own));
    if (b->data_kind == DDPC_DATASET_IMAGES)
        mc->in_channels = shape[0], mc->in_height = shape[1], mc->in_width = shape[2];
    if (t->data.multi)
        DDPC_TRY(task_heads(t, mc));
    /* Last, once the config is known good: cuda opens the GPU. */
    ddpc__device_ask ask = {.kind = t->set.device,
                            .model_type = b->name,
                            .model_on_gpu = b->gpu,
                            .dp_replicas = t->dist.dp_replicas,
                            .local_rank = t->dist.pg ? ddpc_pg_local_rank(t->dist.pg) : 0};
    DDPC_TRY(ddpc__device_select(&ask, &mc->backend, t->notes, sizeof t->notes));
    if (mc->backend->allow_tf32) /* the process's GPU, as torch's flag is the process's */
        mc->backend->allow_tf32(t->set.tf32);
    return DDPC_OK;
}

static const char *const optim_types[] = {"sgd", "adamw", NULL};
static const char *const schedules[] = {"constant", "cosine", "linear", NULL};
static const char *const nonfinite_names[] = {"stop", "skip", NULL};
static const char *const scaling_modes[] = {"auto", "true", "false", NULL};

/* loss_scale.*: GradScaler's keys; `enabled: auto` scales exactly when precision is fp16. */
static ddpc_status read_loss_scale(ddpc_trainer *t, ddpc_engine_config *ec)
{
    ddpc_config *c = t->cfg;
    ddpc_loss_scale_config *l = &ec->loss_scale;
    int mode;
    double init, growth, backoff;
    DDPC_TRY(ddpc_config_choice(c, "loss_scale.enabled", "auto", scaling_modes, &mode));
    DDPC_TRY(ddpc_config_float(c, "loss_scale.init_scale", l->init_scale, 1e-30, 3e38, &init));
    DDPC_TRY(ddpc_config_float(c, "loss_scale.growth_factor", l->growth_factor, 1.0, 1e6, &growth));
    DDPC_TRY(
        ddpc_config_float(c, "loss_scale.backoff_factor", l->backoff_factor, 0.0, 1.0, &backoff));
    DDPC_TRY(ddpc_config_int(c, "loss_scale.growth_interval", l->growth_interval, 1, INT64_MAX,
                             &l->growth_interval));
    l->init_scale = (float)init, l->growth_factor = (float)growth,
    l->backoff_factor = (float)backoff;
    ec->loss_scaling = mode == 0 ? t->set.precision == DDPC_PREC_FP16 : mode == 1;
    if (ec->loss_scaling)
        return ddpc_loss_scale_check(l);
    return DDPC_OK;
}

void ddpc__trainer_add_note(ddpc_trainer *t, const char *fmt, ...)
{
    size_t len = strlen(t->notes);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->notes + len, sizeof t->notes - len, fmt, ap);
    va_end(ap);
}

static ddpc_status read_engine_config(ddpc_trainer *t, int64_t total_steps, ddpc_engine_config *ec)
{
    ddpc_config *c = t->cfg;
    ddpc_optim_config *oc = &ec->optim;
    int type, sched, policy;
    double lr, mom, wd, b1, b2, eps, min_lr, clip;
    int64_t warmup;
    *ec = ddpc_engine_config_default();
    DDPC_TRY(ddpc_config_choice(c, "optim.type", "sgd", optim_types, &type));
    oc->type = type == 0 ? DDPC_OPTIM_SGD : DDPC_OPTIM_ADAMW;
    DDPC_TRY(ddpc_config_float(c, "optim.lr", type == 0 ? 0.01 : 1e-3, 0.0, 10.0, &lr));
    DDPC_TRY(ddpc_config_float(c, "optim.momentum", 0.0, 0.0, 1.0, &mom));
    DDPC_TRY(ddpc_config_bool(c, "optim.nesterov", false, &oc->nesterov));
    DDPC_TRY(ddpc_config_float(c, "optim.weight_decay", 0.0, 0.0, 10.0, &wd));
    DDPC_TRY(ddpc_config_float(c, "optim.beta1", 0.9, 0.0, 0.999999, &b1));
    DDPC_TRY(ddpc_config_float(c, "optim.beta2", 0.999, 0.0, 0.999999, &b2));
    DDPC_TRY(ddpc_config_float(c, "optim.eps", 1e-8, 0.0, 1.0, &eps));
    DDPC_TRY(ddpc_config_choice(c, "optim.schedule", "constant", schedules, &sched));
    DDPC_TRY(ddpc_config_int(c, "optim.warmup_steps", 0, 0, INT64_MAX, &warmup));
    DDPC_TRY(ddpc_config_float(c, "optim.min_lr", 0.0, 0.0, 10.0, &min_lr));
    DDPC_TRY(ddpc_config_float(c, "optim.grad_clip", 0.0, 0.0, 1e9, &clip));
    DDPC_TRY(ddpc_config_choice(c, "on_nonfinite", "stop", nonfinite_names, &policy));
    /* A warm-up longer than the run ends with the run, as if the run were the warm-up:
     * transformers' get_*_schedule_with_warmup accepts it (the LR never reaches its peak), a
     * refusal would stop a short trial of a long config (max_steps=50 on a 100-step warm-up). The
     * decay span is then 0 steps, which ddpc_lr_at treats as finished. */
    if (t->set.state == STATE_TRAIN && total_steps > 0 && warmup > total_steps) {
        ddpc__trainer_add_note(t,
                 "optim.warmup_steps %lld is more than the run's %lld steps: warm-up takes the "
                 "whole run\n",
                 (long long)warmup, (long long)total_steps);
        warmup = total_steps;
    }
    if (oc->nesterov && mom <= 0.0)
        return ddpc_errorf(DDPC_EINVAL, "optim.nesterov needs optim.momentum > 0");
    oc->lr = (float)lr, oc->momentum = (float)mom, oc->weight_decay = (float)wd;
    oc->beta1 = (float)b1, oc->beta2 = (float)b2, oc->eps = (float)eps;
    ec->schedule = (ddpc_lr_schedule){.kind = sched == 0   ? DDPC_LR_CONSTANT
                                              : sched == 1 ? DDPC_LR_COSINE
                                                           : DDPC_LR_LINEAR,
                                      .warmup_steps = warmup,
                                      .total_steps = total_steps,
                                      .min_lr = (float)min_lr};
    /* val, test and predict take no optimizer step, and count none: an epochs-long schedule with
     * warm-up would be refused for its 0 total steps. */
    if (t->set.state != STATE_TRAIN)
        ec->schedule.kind = DDPC_LR_CONSTANT;
    ec->lr_scale = ddpc__trainer_lr_scale(t);
    ec->grad_clip = (float)clip;
    ec->accum_steps = t->set.accum_steps;
    ec->num_tasks = t->data.n_tasks;
    ec->on_nonfinite = (ddpc_nonfinite_policy)policy; /* the table follows the enum's order */
    ec->dp_replicas = t->dist.dp_replicas;
    return read_loss_scale(t, ec);
}

/* Batch buffers for prediction and the step benchmark: the largest batch of any task. */
/* A model on a GPU makes room for the largest training or evaluation batch at once, so that no
 * step or evaluation allocates device memory later (the arena grows on demand otherwise). */
static ddpc_status reserve_batches(ddpc_trainer *t)
{
    if (ddpc_model_backend(t->model)->kind == DDPC_DEVICE_CPU)
        return DDPC_OK;
    int64_t n = 0;
    for (int i = 0; i < t->data.n_tasks; i++) {
        n = t->data.task[i].batch_size > n ? t->data.task[i].batch_size : n;
        n = t->data.task[i].eval_batch_size > n ? t->data.task[i].eval_batch_size : n;
    }
    return ddpc_model_reserve(t->model, n, 0);
}

static ddpc_status alloc_buffers(ddpc_trainer *t)
{
    int64_t shape[3];
    ddpc_dataset_sample_shape(t->data.task[0].train, shape);
    bool images = ddpc_dataset_kind_of(t->data.task[0].train) == DDPC_DATASET_IMAGES;
    t->buf.sample_floats = images ? shape[0] * shape[1] * shape[2] : 0;
    /* pairs vary in length: their rates count samples */
    bool pairs = ddpc_dataset_kind_of(t->data.task[0].train) == DDPC_DATASET_PAIRS;
    t->buf.tokens_per_sample = images || pairs ? 1 : shape[0];
    int64_t n = 1, replicas = t->dist.dp_replicas > 0 ? t->dist.dp_replicas : 1;
    for (int i = 0; i < t->data.n_tasks; i++) {
        int64_t train = t->data.task[i].batch_size * replicas; /* dp: the step benchmark's batch */
        n = train > n ? train : n;
        n = t->data.task[i].eval_batch_size > n ? t->data.task[i].eval_batch_size : n;
    }
    t->buf.max_batch = n;
    t->buf.x = images ? ddpc_malloc((size_t)(n * t->buf.sample_floats) * sizeof(float)) : NULL;
    t->buf.tokens =
        images ? NULL : ddpc_malloc((size_t)(n * t->buf.tokens_per_sample) * sizeof(int32_t));
    t->buf.targets = ddpc_malloc((size_t)(n * t->buf.tokens_per_sample) * sizeof(int32_t));
    t->buf.perm = ddpc_malloc((size_t)ddpc_dataset_size(t->data.task[0].train) * sizeof(int64_t));
    t->buf.target_width = ddpc_dataset_target_width(t->data.task[0].train);
    if (t->buf.target_width > 0)
        t->buf.ftargets = ddpc_malloc((size_t)(n * t->buf.target_width) * sizeof(float));
    if ((images && !t->buf.x) || (!images && !t->buf.tokens) || !t->buf.targets || !t->buf.perm ||
        (t->buf.target_width > 0 && !t->buf.ftargets))
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for batch buffers of %lld samples",
                           (long long)n);
    return DDPC_OK;
}

ddpc_status ddpc__trainer_build_model(ddpc_trainer *t)
{
    ddpc_model_config mc;
    void *own = NULL; /* a registered type's own config, until the model has its copy */
    ddpc_status s = read_model_config(t, &mc, &own);
    /* Shapes first: the memory plan is made, and a plan that cannot fit refused, before the
     * parameter and gradient buffers or the optimizer are allocated. */
    if (s == DDPC_OK)
        s = ddpc_model_create_shapes(&t->model, &mc);
    ddpc_free(own);
    DDPC_TRY(s);
    /* BatchNorm's running statistics are the only buffers the types with model.batchnorm have. */
    if (t->dist.reducer_cfg.sync_batchnorm && ddpc_model_num_buffers(t->model) == 0)
        return ddpc_errorf(DDPC_EINVAL, "model.sync_batchnorm: true needs model.batchnorm: true "
                                        "(there is no BatchNorm layer to synchronise)");
    int64_t per_epoch = 0;
    if (t->set.state == STATE_TRAIN && t->dist.plan_world == 0)
        DDPC_TRY(ddpc__trainer_build_loaders(t, &per_epoch));
    /* max_steps, when set, is the run's length whatever `epochs` says (more epochs, the last one
     * partial, or fewer): Hugging Face's max_steps, Lightning's max_steps without max_epochs. */
    int64_t total = t->set.max_steps > 0 ? t->set.max_steps : t->set.epochs * per_epoch;
    t->total_steps = total;
    t->steps_per_epoch = per_epoch;
    /* The engine comes after the reducer, which broadcasts rank 0's (maybe loaded) parameters. */
    DDPC_TRY(read_engine_config(t, total, &t->engine_cfg));
    DDPC_TRY(ddpc__trainer_read_ddp(t));
    DDPC_TRY(ddpc__trainer_plan_memory(t));
    if (t->dist.plan_world > 0)
        return DDPC_OK;
    DDPC_TRY(ddpc_model_allocate(t->model));
    DDPC_TRY(reserve_batches(t));
    return alloc_buffers(t);
}
