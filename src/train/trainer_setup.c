/* Trainer construction: every config key the trainer understands is read here, with its default
 * and range, so docs/config.md and this file list the same keys. */
#include "train/trainer_impl.h"
#include "train/trainer_tasks.h"

#include <ddpc/alloc.h>
#include <ddpc/kernels.h>
#include <ddpc/weights.h>

#include <stdio.h>
#include <string.h>


static const char *const state_names[] = {"train", "val", "test", "predict", NULL};
static const char *const data_types[] = {"fmnist", "text", "synthetic_images", "synthetic_tokens", NULL};
static const char *const optim_types[] = {"sgd", "adamw", NULL};
static const char *const schedules[] = {"constant", "cosine", "linear", NULL};
static const char *const lr_scales[] = {"none", "linear", "sqrt", NULL};

ddpc_status ddpc__trainer_read_settings(ddpc_trainer *t, const char *config_name)
{
    ddpc_config *c = t->cfg;
    trainer_settings *s = &t->set;
    int64_t v;
    int state;
    double f;
    const char *run_dir;
    DDPC_TRY(ddpc_config_int(c, "seed", 1337, 0, INT64_MAX, &v));
    s->seed = (uint64_t)v;
    DDPC_TRY(ddpc_config_int(c, "num_threads", 0, 0, 1024, &v));
    s->threads = (int)v;
    DDPC_TRY(ddpc_config_choice(c, "state", "train", state_names, &state));
    s->state = (trainer_state)state;
    DDPC_TRY(ddpc_config_int(c, "epochs", 1, 0, 1000000, &s->epochs));
    DDPC_TRY(ddpc_config_int(c, "max_steps", 0, 0, INT64_MAX, &s->max_steps));
    DDPC_TRY(ddpc_config_int(c, "eval_every", 0, 0, INT64_MAX, &s->eval_every));
    DDPC_TRY(ddpc_config_int(c, "eval_batches", 0, 0, INT64_MAX, &s->eval_batches));
    DDPC_TRY(ddpc_config_int(c, "log_every", 50, 1, INT64_MAX, &s->log_every));
    char def_dir[512];
    snprintf(def_dir, sizeof def_dir, "runs/%s", config_name);
    DDPC_TRY(ddpc_config_string(c, "run_dir", def_dir, &run_dir));
    snprintf(s->run_dir, sizeof s->run_dir, "%s", run_dir);
    DDPC_TRY(ddpc_config_string(c, "weights_out", NULL, &s->weights_out));
    DDPC_TRY(ddpc_config_string(c, "init_from", NULL, &s->init_from));
    DDPC_TRY(ddpc_config_int(c, "data.batch_size", 64, 1, 1 << 20, &s->batch_size));
    DDPC_TRY(ddpc_config_int(c, "data.eval_batch_size", s->batch_size, 1, 1 << 20, &s->eval_batch_size));
    DDPC_TRY(ddpc_config_bool(c, "data.shuffle", true, &s->shuffle));
    DDPC_TRY(ddpc_config_int(c, "data.num_workers", 1, 0, 64, &v));
    s->num_workers = (int)v;
    DDPC_TRY(ddpc_config_int(c, "data.prefetch_factor", 2, 1, 1024, &v));
    s->prefetch_factor = (int)v;
    DDPC_TRY(ddpc_config_int(c, "optim.grad_accum_steps", 1, 1, DDPC_TRAIN_MAX_ACCUM, &s->accum_steps));
    int scale;
    DDPC_TRY(ddpc_config_choice(c, "optim.lr_scale", "none", lr_scales, &scale));
    s->lr_scale = (lr_scale_kind)scale;
    DDPC_TRY(ddpc_config_int(c, "stats_sync_every", s->log_every, 1, INT64_MAX, &s->stats_sync_every));
    DDPC_TRY(ddpc_config_float(c, "optim.grad_clip", 0.0, 0.0, 1e9, &f));
    s->grad_clip = (float)f;
    DDPC_TRY(ddpc_config_int(c, "predict.samples", 20, 0, INT64_MAX, &s->predict_samples));
    DDPC_TRY(ddpc_config_int(c, "predict.max_new_tokens", 200, 1, 1 << 20, &s->predict_tokens));
    DDPC_TRY(ddpc_config_string(c, "predict.prompt", "\n", &s->prompt));
    DDPC_TRY(ddpc_config_float(c, "predict.temperature", 0.8, 0.0, 100.0, &f));
    s->temperature = (float)f;
    return DDPC_OK;
}

ddpc_status ddpc__trainer_load_data(ddpc_trainer *t)
{
    ddpc_config *c = t->cfg;
    int type;
    const char *path;
    double val_fraction;
    int64_t block = 0, size;
    DDPC_TRY(ddpc_config_choice(c, "data.type", "fmnist", data_types, &type));
    if (type == 1 || type == 3)
        DDPC_TRY(ddpc_config_int(c, "model.block_size", 128, 1, 1 << 16, &block));
    switch (type) {
    case 0:
        DDPC_TRY(ddpc_config_string(c, "data.path", DDPC__FMNIST_DIR, &path));
        DDPC_TRY(ddpc_dataset_fmnist_create(&t->train, path, true));
        DDPC_TRY(ddpc_dataset_fmnist_create(&t->test, path, false));
        break;
    case 1:
        DDPC_TRY(ddpc_config_string(c, "data.path", DDPC__FORTUNES_DIR, &path));
        DDPC_TRY(ddpc_config_float(c, "data.val_fraction", 0.1, 0.001, 0.999, &val_fraction));
        DDPC_TRY(ddpc_dataset_text_create(&t->train, path, block, val_fraction, true));
        DDPC_TRY(ddpc_dataset_text_create(&t->test, path, block, val_fraction, false));
        break;
    case 2:
        DDPC_TRY(ddpc_config_int(c, "data.size", 1024, 1, INT64_MAX, &size));
        /* One seed for both splits: they share the labelling map and differ only in samples. */
        DDPC_TRY(ddpc_dataset_synthetic_images_create(&t->train, size, 1, 28, 28, 10, t->set.seed,
                                                      true));
        DDPC_TRY(ddpc_dataset_synthetic_images_create(&t->test, size / 4 + 1, 1, 28, 28, 10,
                                                      t->set.seed, false));
        break;
    default:
        DDPC_TRY(ddpc_config_int(c, "data.size", 1 << 16, 2, INT64_MAX, &size));
        DDPC_TRY(ddpc_dataset_synthetic_tokens_create(&t->train, size, 256, block, t->set.seed,
                                                      true));
        DDPC_TRY(ddpc_dataset_synthetic_tokens_create(&t->test, size / 4 + block + 1, 256, block,
                                                      t->set.seed, false));
        break;
    }
    /* Debian ships Fashion-MNIST as train and test only, so validation uses the test split;
     * text has one held-out split. */
    t->val = t->test;
    return DDPC_OK;
}

static ddpc_status read_model_config(ddpc_trainer *t, ddpc_model_config *mc)
{
    ddpc_config *c = t->cfg;
    static const char *const types[] = {"mlp", "cnn", "gpt", NULL};
    static const int64_t mlp_hidden[] = {256, 128}, cnn_hidden[] = {128}, channels[] = {32, 64};
    int type;
    double dropout;
    *mc = ddpc_model_config_default();
    DDPC_TRY(ddpc_config_choice(c, "model.type", "mlp", types, &type));
    snprintf(mc->type, sizeof mc->type, "%s", types[type]);
    /* Only the keys of the chosen type are read, so a key for another type is reported unused. */
    if (type == 0 || type == 1)
        DDPC_TRY(ddpc_config_int_list(c, "model.hidden", type == 0 ? mlp_hidden : cnn_hidden,
                                      type == 0 ? 2 : 1, 1, 1 << 20, mc->hidden,
                                      DDPC_MODEL_MAX_LAYERS, &mc->n_hidden));
    if (type == 1) {
        DDPC_TRY(ddpc_config_int_list(c, "model.channels", channels, 2, 1, 1 << 16, mc->channels,
                                      DDPC_MODEL_MAX_LAYERS, &mc->n_channels));
        DDPC_TRY(ddpc_config_int(c, "model.kernel_size", 3, 1, 31, &mc->kernel_size));
    }
    if (type == 2) {
        DDPC_TRY(ddpc_config_int(c, "model.n_layer", 4, 1, DDPC_MODEL_MAX_LAYERS, &mc->n_layer));
        DDPC_TRY(ddpc_config_int(c, "model.n_head", 4, 1, 1024, &mc->n_head));
        DDPC_TRY(ddpc_config_int(c, "model.n_embd", 256, 1, 1 << 16, &mc->n_embd));
        DDPC_TRY(ddpc_config_int(c, "model.block_size", 128, 1, 1 << 16, &mc->block_size));
    }
    DDPC_TRY(ddpc_config_float(c, "model.dropout", 0.0, 0.0, 0.99, &dropout));
    mc->dropout = (float)dropout;
    mc->seed = t->set.seed;
    int64_t shape[3];
    ddpc_dataset_sample_shape(t->train, shape);
    mc->num_classes = ddpc_dataset_num_classes(t->train);
    if (ddpc_dataset_kind_of(t->train) == DDPC_DATASET_IMAGES) {
        if (type == 2)
            return ddpc_errorf(DDPC_EINVAL, "model.type 'gpt' needs a token dataset (data.type text "
                               "or synthetic_tokens), not images");
        mc->in_channels = shape[0], mc->in_height = shape[1], mc->in_width = shape[2];
    } else if (type != 2) {
        return ddpc_errorf(DDPC_EINVAL, "model.type '%s' needs an image dataset (data.type fmnist "
                           "or synthetic_images)", types[type]);
    }
    if (t->tasks)
        DDPC_TRY(ddpc__tasks_model_heads(t, mc));
    return DDPC_OK;
}

static ddpc_status read_optim(ddpc_trainer *t, int64_t total_steps)
{
    ddpc_config *c = t->cfg;
    ddpc_optim_config oc = ddpc_optim_config_default();
    int type, sched;
    double lr, mom, wd, b1, b2, eps, min_lr;
    int64_t warmup;
    DDPC_TRY(ddpc_config_choice(c, "optim.type", "sgd", optim_types, &type));
    oc.type = type == 0 ? DDPC_OPTIM_SGD : DDPC_OPTIM_ADAMW;
    DDPC_TRY(ddpc_config_float(c, "optim.lr", type == 0 ? 0.01 : 1e-3, 0.0, 10.0, &lr));
    DDPC_TRY(ddpc_config_float(c, "optim.momentum", 0.0, 0.0, 1.0, &mom));
    DDPC_TRY(ddpc_config_bool(c, "optim.nesterov", false, &oc.nesterov));
    DDPC_TRY(ddpc_config_float(c, "optim.weight_decay", 0.0, 0.0, 10.0, &wd));
    DDPC_TRY(ddpc_config_float(c, "optim.beta1", 0.9, 0.0, 0.999999, &b1));
    DDPC_TRY(ddpc_config_float(c, "optim.beta2", 0.999, 0.0, 0.999999, &b2));
    DDPC_TRY(ddpc_config_float(c, "optim.eps", 1e-8, 0.0, 1.0, &eps));
    DDPC_TRY(ddpc_config_choice(c, "optim.schedule", "constant", schedules, &sched));
    DDPC_TRY(ddpc_config_int(c, "optim.warmup_steps", 0, 0, INT64_MAX, &warmup));
    DDPC_TRY(ddpc_config_float(c, "optim.min_lr", 0.0, 0.0, 10.0, &min_lr));
    if (oc.nesterov && mom <= 0.0)
        return ddpc_errorf(DDPC_EINVAL, "optim.nesterov needs optim.momentum > 0");
    oc.lr = (float)lr, oc.momentum = (float)mom, oc.weight_decay = (float)wd;
    oc.beta1 = (float)b1, oc.beta2 = (float)b2, oc.eps = (float)eps;
    t->sched = (ddpc_lr_schedule){.kind = sched == 0 ? DDPC_LR_CONSTANT
                                          : sched == 1 ? DDPC_LR_COSINE : DDPC_LR_LINEAR,
                                  .base_lr = (float)lr, .warmup_steps = warmup,
                                  .total_steps = total_steps, .min_lr = (float)min_lr};
    return ddpc_optim_create(&t->opt, &oc, ddpc_model_num_params(t->model));
}

ddpc_status ddpc__trainer_build_model(ddpc_trainer *t)
{
    ddpc_model_config mc;
    DDPC_TRY(read_model_config(t, &mc));
    DDPC_TRY(ddpc_model_create(&t->model, &mc));
    int64_t per_epoch = 0;
    if (t->set.state == STATE_TRAIN && t->tasks) {
        DDPC_TRY(ddpc__tasks_build_loaders(t, &per_epoch));
    } else if (t->set.state == STATE_TRAIN) {
        DDPC_TRY(ddpc__trainer_build_loader(t));
        per_epoch = ddpc_loader_len(t->train_loader) / t->set.accum_steps;
        if (per_epoch == 0)
            return ddpc_errorf(DDPC_EINVAL, "one step takes data.batch_size %lld x "
                               "optim.grad_accum_steps %lld samples on each of %d ranks, more than "
                               "the %lld training samples",
                               (long long)t->set.batch_size, (long long)t->set.accum_steps,
                               t->world, (long long)ddpc_dataset_size(t->train));
    }
    int64_t total = t->set.epochs * per_epoch;
    if (t->set.max_steps > 0 && (total == 0 || t->set.max_steps < total))
        total = t->set.max_steps;
    DDPC_TRY(read_optim(t, total));
    int64_t shape[3];
    ddpc_dataset_sample_shape(t->train, shape);
    bool images = ddpc_dataset_kind_of(t->train) == DDPC_DATASET_IMAGES;
    t->sample_floats = images ? shape[0] * shape[1] * shape[2] : 0;
    t->tokens_per_sample = images ? 1 : shape[0];
    t->max_batch = t->set.batch_size > t->set.eval_batch_size ? t->set.batch_size : t->set.eval_batch_size;
    if (t->tasks && ddpc__tasks_max_batch(t) > t->max_batch)
        t->max_batch = ddpc__tasks_max_batch(t);
    int64_t n = t->max_batch;
    t->x = images ? ddpc_malloc((size_t)(n * t->sample_floats) * sizeof(float)) : NULL;
    t->tokens = images ? NULL : ddpc_malloc((size_t)(n * t->tokens_per_sample) * sizeof(int32_t));
    t->targets = ddpc_malloc((size_t)(n * t->tokens_per_sample) * sizeof(int32_t));
    t->perm = ddpc_malloc((size_t)ddpc_dataset_size(t->train) * sizeof(int64_t));
    if ((images && !t->x) || (!images && !t->tokens) || !t->targets || !t->perm)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for batch buffers of %lld samples", (long long)n);
    return DDPC_OK;
}

ddpc_status ddpc_trainer_create(ddpc_trainer **out, ddpc_config *cfg, const char *config_name)
{
    *out = NULL;
    ddpc_trainer *t = ddpc_calloc(1, sizeof *t);
    if (!t)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory creating the trainer");
    t->cfg = cfg;
    t->world = 1;
    ddpc_status s = ddpc__trainer_read_settings(t, config_name);
    if (s == DDPC_OK) {
        ddpc_kernels_set_threads(t->set.threads);
        s = ddpc__trainer_init_dist(t);
    }
    if (s == DDPC_OK)
        s = ddpc__tasks_declared(cfg) ? ddpc__tasks_load(t) : ddpc__trainer_load_data(t);
    if (s == DDPC_OK)
        s = ddpc__trainer_build_model(t);
    if (s == DDPC_OK && t->set.init_from)
        s = ddpc_weights_load(t->model, t->set.init_from);
    if (s == DDPC_OK) /* last: the reducer copies rank 0's (possibly loaded) parameters */
        s = ddpc__trainer_init_ddp(t);
    if (s != DDPC_OK) {
        ddpc_trainer_destroy(t);
        return s;
    }
    *out = t;
    return DDPC_OK;
}

void ddpc_trainer_destroy(ddpc_trainer *t)
{
    if (!t)
        return;
    if (t->metrics)
        fclose(t->metrics);
    ddpc__tasks_destroy(t);
    ddpc_loader_destroy(t->train_loader);
    ddpc_sampler_destroy(t->train_sampler);
    ddpc__trainer_fini_dist(t);
    ddpc_free(t->x);
    ddpc_free(t->tokens);
    ddpc_free(t->targets);
    ddpc_free(t->perm);
    ddpc_optim_destroy(t->opt);
    ddpc_model_destroy(t->model);
    ddpc_dataset_destroy(t->train);
    ddpc_dataset_destroy(t->test);
    ddpc_free(t);
}

void ddpc_trainer_set_log(ddpc_trainer *t, FILE *log)
{
    t->log = t->rank == 0 ? log : NULL; /* progress comes from global rank 0 only */
}

ddpc_eval_result ddpc_trainer_last_eval(const ddpc_trainer *t)
{
    return t->last_eval;
}

double ddpc_trainer_last_train_loss(const ddpc_trainer *t)
{
    return t->last_train_loss;
}
