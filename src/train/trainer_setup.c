// SPDX-License-Identifier: MIT
/* Trainer construction and teardown: settings, process group, tasks and their data, model, the
 * reducer (which broadcasts rank 0's parameters, so it comes after init_from) and the engine. */
#include "train/trainer_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/kernels.h>
#include <ddpc/weights.h>

#include <stdio.h>

/* init_from: a safetensors file or a checkpoint directory; init_strict: false loads what
 * matches and says what did not. */
static ddpc_status load_init(ddpc_trainer *t)
{
    ddpc_status s = ddpc_weights_load_opts(t->model, t->set.init_from, t->set.init_strict,
                                           t->init_report, sizeof t->init_report);
    if (s != DDPC_OK && t->kind->explain_weights)
        s = t->kind->explain_weights(t, s);
    DDPC_TRY(s);
    return ddpc_model_to_device(t->model); /* the loaded host copy is what a GPU run trains */
}

static ddpc_status build(ddpc_trainer *t, const char *config_name)
{
    DDPC_TRY(ddpc__trainer_read_settings(t, config_name));
    ddpc_kernels_set_threads(t->set.threads);
    DDPC_TRY(ddpc__trainer_init_dist(t));
    DDPC_TRY(ddpc__trainer_load_tasks(t));
    DDPC_TRY(ddpc__trainer_build_model(t));
    if (t->dist.plan_world > 0)
        return DDPC_OK; /* a plan only: nothing else is built */
    DDPC_TRY(ddpc__trainer_init_gpus(t));
    if (t->set.init_from)
        DDPC_TRY(load_init(t));
    DDPC_TRY(ddpc__trainer_init_ddp(t));
    size_t need = ddpc_config_dump(t->cfg, NULL, 0) + 1;
    t->config_text = ddpc_malloc(need);
    if (!t->config_text)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for the configuration text");
    ddpc_config_dump(t->cfg, t->config_text, need);
    t->engine_cfg.timing = t->set.phases;
    DDPC_TRY(ddpc__trainer_pending_init(t));
    return ddpc_engine_create(t->model, t->dist.reducer, t->dist.rank, t->dist.world,
                              &t->engine_cfg, &t->engine);
}

static ddpc_status create(ddpc_trainer **out, ddpc_config *cfg, const char *config_name,
                          int plan_world)
{
    *out = NULL;
    ddpc_trainer *t = ddpc_calloc(1, sizeof *t);
    if (!t)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory creating the trainer");
    t->cfg = cfg;
    t->dist.world = 1;
    t->dist.local_world = 1;
    t->dist.plan_world = plan_world;
    t->pos.last_saved_step = -1;
    ddpc_status s = build(t, config_name);
    if (s != DDPC_OK) {
        ddpc_trainer_destroy(t);
        return s;
    }
    *out = t;
    return DDPC_OK;
}

ddpc_status ddpc_trainer_create(ddpc_trainer **out, ddpc_config *cfg, const char *config_name)
{
    return create(out, cfg, config_name, 0);
}

ddpc_status ddpc_trainer_create_plan(ddpc_trainer **out, ddpc_config *cfg,
                                     const char *config_name, int world)
{
    if (world < 1) {
        ddpc_comm_env env;
        DDPC_TRY(ddpc_comm_env_discover(&env));
        world = env.world_size > 0 ? env.world_size : 1;
    }
    return create(out, cfg, config_name, world);
}

void ddpc_trainer_destroy(ddpc_trainer *t)
{
    if (!t)
        return;
    ddpc_metrics_destroy(t->metrics);
    ddpc__trainer_unlock_outputs(t);
    ddpc_engine_destroy(t->engine);
    ddpc__trainer_pending_fini(t);
    ddpc__trainer_free_tasks(t);
    ddpc__trainer_fini_dist(t);
    ddpc_trace_close(); /* profile.steps: no loader or comm thread can be recording now */
    ddpc_free(t->buf.x);
    ddpc_free(t->buf.tokens);
    ddpc_free(t->buf.targets);
    ddpc_free(t->buf.perm);
    ddpc_free(t->buf.ftargets);
    ddpc_free(t->config_text);
    ddpc_free(t->mem.buckets);
    ddpc_free(t->ph.ranks);
    ddpc_model_destroy(t->model);
    ddpc_free(t);
}

void ddpc_trainer_set_log(ddpc_trainer *t, FILE *log)
{
    t->log = t->dist.rank == 0 ? log : NULL; /* progress comes from global rank 0 only */
}

ddpc_eval_result ddpc_trainer_last_eval(const ddpc_trainer *t)
{
    return t->last_eval;
}

double ddpc_trainer_last_train_loss(const ddpc_trainer *t)
{
    return t->win.last_train_loss;
}
