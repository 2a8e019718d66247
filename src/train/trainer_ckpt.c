// SPDX-License-Identifier: MIT
/* Checkpoints in the trainer: the checkpoint.* and resume keys, saving at step and epoch
 * boundaries (rank 0 writes the replicated state; under ZeRO every rank writes its shard,
 * ddpc_ckpt_save_sharded; both commit atomically), and resuming from the newest committed
 * checkpoint of either format, resharding the optimizer state to this run's partition. Invariant: a
 * checkpoint records the position of the next step (epoch, optimizer steps done in it), and
 * everything a step depends on — parameters, optimizer state, step counter (LR schedule and dropout
 * streams derive from it) — so a resumed run at the same world size repeats the uninterrupted one
 * bit for bit. Resume never starts over silently: checkpoints that exist but none of which
 * verifies are refused, newer ones passed over are reported, and every rank must have loaded the
 * same state (trainer_ckpt_agree.c). */
#include "train/trainer_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/checkpoint.h>
#include <ddpc/data.h>
#include <ddpc/timer.h>

#include <stdio.h>
#include <string.h>

ddpc_status ddpc__trainer_read_ckpt_settings(ddpc_trainer *t)
{
    ddpc_config *c = t->cfg;
    trainer_settings *s = &t->set;
    char def_dir[1100];
    const char *dir;
    DDPC_TRY(ddpc_config_int(c, "checkpoint.every_steps", 0, 0, INT64_MAX, &s->ckpt_every_steps));
    DDPC_TRY(ddpc_config_int(c, "checkpoint.every_epochs", 0, 0, INT64_MAX, &s->ckpt_every_epochs));
    DDPC_TRY(ddpc_config_int(c, "checkpoint.keep", 3, 0, INT64_MAX, &s->ckpt_keep));
    snprintf(def_dir, sizeof def_dir, "%s/checkpoints", s->run_dir);
    DDPC_TRY(ddpc_config_string(c, "checkpoint.dir", def_dir, &dir));
    if (snprintf(s->ckpt_dir, sizeof s->ckpt_dir, "%s", dir) >= (int)sizeof s->ckpt_dir)
        return ddpc_errorf(DDPC_EINVAL, "checkpoint.dir is too long (%zu bytes)", strlen(dir));
    return ddpc_config_string(c, "resume", "auto", &s->resume);
}

bool ddpc__trainer_checkpoints_on(const ddpc_trainer *t)
{
    return t->set.ckpt_every_steps > 0 || t->set.ckpt_every_epochs > 0;
}

int64_t ddpc__trainer_global_batch(const ddpc_trainer *t)
{
    int64_t per_rank = 0;
    for (int i = 0; i < t->data.n_tasks; i++)
        per_rank += t->data.task[i].batch_size;
    return per_rank * ddpc__trainer_dp_degree(t) * t->set.accum_steps;
}

/* "none of the N checkpoints in DIR can be resumed from (step-...: why; ...)" */
static ddpc_status refuse_none(const char *dir, const ddpc_ckpt_entry *e, size_t n)
{
    char why[900];
    size_t at = 0;
    why[0] = '\0';
    for (size_t i = 0; i < n && at < sizeof why; i++) {
        int w = snprintf(why + at, sizeof why - at, "%s%s: %s", i ? "; " : "", e[i].name,
                         e[i].problem);
        at += w > 0 ? (size_t)w : 0;
    }
    return ddpc_errorf(DDPC_EFORMAT,
                       "resume: none of the %zu checkpoint%s in '%s' can be resumed from (%s); "
                       "nothing was changed: to start over deliberately, set resume=never and a "
                       "new checkpoint.dir",
                       n, n == 1 ? "" : "s", dir, why);
}

/* The newest usable checkpoint of run directory dir into path; what it passed over is kept in
 * t->resume. Checkpoints that exist but none verifies is an error, never a silent fresh start. */
static ddpc_status find(ddpc_trainer *t, const char *dir, char *path, size_t cap, bool *found)
{
    ddpc_ckpt_entry *skipped = NULL;
    size_t n = 0;
    DDPC_TRY(ddpc_ckpt_find_usable(dir, path, cap, found, &skipped, &n));
    ddpc_status s = !*found && n ? refuse_none(dir, skipped, n) : DDPC_OK;
    t->resume.n_skipped = n;
    snprintf(t->resume.dir, sizeof t->resume.dir, "%s", dir);
    for (size_t i = 0; i < n && i < DDPC__RESUME_NOTES; i++)
        t->resume.skipped[i] = skipped[i];
    ddpc_free(skipped);
    return s;
}

/* The checkpoint `resume` names: *found false when there is none to resume from (auto). */
static ddpc_status pick(ddpc_trainer *t, char *path, size_t cap, bool *found)
{
    const char *r = t->set.resume;
    *found = false;
    if (strcmp(r, "never") == 0)
        return DDPC_OK;
    if (strcmp(r, "auto") == 0 || strcmp(r, "force") == 0)
        return find(t, t->set.ckpt_dir, path, cap, found);
    if (ddpc_ckpt_is_dir(r)) {
        snprintf(path, cap, "%s", r);
        *found = true;
        return DDPC_OK;
    }
    DDPC_TRY(find(t, r, path, cap, found));
    if (!*found)
        return ddpc_errorf(DDPC_EINVAL, "resume: '%s' is not a checkpoint and holds none", r);
    return DDPC_OK;
}

/* Whether a step at this world size takes the same samples as a step of the checkpoint's run.
 * The distributed sampler deals the epoch's permutation out round-robin, so the micro-batches
 * of all ranks in a step cover one contiguous block of global_batch positions of it, whatever
 * the world size: the same samples, split over the ranks differently. That holds for one task
 * with the same global batch and no padding (its dataset size a multiple of both world sizes). */
static bool same_samples(const ddpc_trainer *t, const ddpc_ckpt_state *st)
{
    if (t->data.n_tasks != 1 || st->global_batch != ddpc__trainer_global_batch(t) ||
        st->world < 1 || t->data.samp.kind != DDPC_SAMPLER_DISTRIBUTED || t->data.sharding)
        return false;
    int64_t n = ddpc_dataset_size(t->data.task[0].train);
    return n % st->world == 0 && n % t->dist.world == 0;
}

/* The position of the checkpoint in this run's epochs. At another world size the same global
 * sample position is kept (rounded down to a step). */
static void place(ddpc_trainer *t, const ddpc_ckpt_state *st)
{
    t->pos.epoch = st->epoch;
    t->pos.epoch_step = st->epoch_step;
    bool moved = st->world != t->dist.world || st->global_batch != ddpc__trainer_global_batch(t);
    if (moved && same_samples(t, st)) {
        if (t->log)
            fprintf(t->log,
                    "the checkpoint was written by %d rank%s with the same global batch of %lld; "
                    "at %d rank%s every step takes the same samples as in the original run, "
                    "split over the ranks differently\n",
                    st->world, st->world == 1 ? "" : "s", (long long)st->global_batch,
                    t->dist.world, t->dist.world == 1 ? "" : "s");
    } else if (moved) {
        int64_t samples = st->epoch_step * st->global_batch;
        t->pos.epoch_step = samples / ddpc__trainer_global_batch(t);
        if (t->log)
            fprintf(t->log,
                    "the checkpoint was written by %d rank%s with a global batch of %lld; at %d "
                    "rank%s (global batch %lld) training continues from sample %lld of epoch "
                    "%lld, and the data order from there on differs from the original run's\n",
                    st->world, st->world == 1 ? "" : "s", (long long)st->global_batch,
                    t->dist.world, t->dist.world == 1 ? "" : "s",
                    (long long)ddpc__trainer_global_batch(t),
                    (long long)(t->pos.epoch_step * ddpc__trainer_global_batch(t)),
                    (long long)t->pos.epoch);
    }
    if (t->steps_per_epoch > 0 && t->pos.epoch_step >= t->steps_per_epoch) {
        t->pos.epoch++;
        t->pos.epoch_step = 0;
    }
}

/* The ZeRO stage in effect: the configured one on several ranks, 0 on one (the engine's rule). */
static int stage_in_effect(const ddpc_trainer *t)
{
    return ddpc_engine_zero_stage(t->engine);
}

/* "resuming from P: ..." and, when the optimizer state is resharded (the checkpoint's stage
 * differs from this run's, or its world does while either is sharded), what wrote it. */
static void log_resume(const ddpc_trainer *t, const char *path, const ddpc_ckpt_state *st)
{
    if (!t->log)
        return;
    int stage = stage_in_effect(t);
    bool reshard = st->zero_stage != stage ||
                   (st->world != t->dist.world && (stage > 0 || st->zero_stage > 0));
    if (reshard)
        fprintf(t->log,
                "resuming from %s (zero stage %d, %d rank%s) at zero stage %d on %d "
                "rank%s, resharding the optimizer state: step %lld, epoch %lld, step %lld of the "
                "epoch\n",
                path, st->zero_stage, st->world, st->world == 1 ? "" : "s", stage, t->dist.world,
                t->dist.world == 1 ? "" : "s", (long long)st->step, (long long)t->pos.epoch,
                (long long)t->pos.epoch_step);
    else
        fprintf(t->log, "resuming from %s: step %lld, epoch %lld, step %lld of the epoch\n", path,
                (long long)st->step, (long long)t->pos.epoch, (long long)t->pos.epoch_step);
}

/* Loads checkpoint path into this rank's model, optimizer shard and counters. */
static ddpc_status load(ddpc_trainer *t, const char *path, ddpc_ckpt_state *st)
{
    const ddpc_range *ranges;
    size_t n_ranges;
    ddpc_engine_shard(t->engine, &ranges, &n_ranges);
    /* Every rank reads all parameters and the optimizer state of its own shard. */
    DDPC_TRY(
        ddpc_ckpt_load_shard(path, t->model, ddpc_engine_optim(t->engine), ranges, n_ranges, st));
    /* The host copies now hold the checkpoint; a GPU run's kernels read the device's. */
    DDPC_TRY(ddpc_model_to_device(t->model));
    ddpc_optim_to_device(ddpc_engine_optim(t->engine));
    ddpc_engine_params_written(t->engine); /* ZeRO-3 keeps only its chunks resident */
    ddpc_engine_restore(t->engine, st->step, st->skipped_steps);
    if (st->loss_scaling)
        ddpc_engine_restore_loss_scale(
            t->engine, (ddpc_loss_scale_state){.scale = st->loss_scale,
                                               .growth_tracker = st->loss_scale_growth_tracker});
    place(t, st);
    t->pos.last_saved_step = st->step;
    snprintf(t->resumed_from, sizeof t->resumed_from, "%s", path);
    return DDPC_OK;
}

ddpc_status ddpc__trainer_resume(ddpc_trainer *t)
{
    char path[1100] = "";
    bool found = false;
    ddpc_ckpt_state st = {0};
    char changes[2048] = ""; /* what the configuration comparison reports */
    ddpc_status s = pick(t, path, sizeof path, &found);
    if (s == DDPC_OK && found) /* before anything is loaded: a refusal changes nothing */
        s = ddpc_ckpt_read_state(path, &st);
    if (s == DDPC_OK && found)
        s = ddpc__trainer_compare_config(t, path, &st, changes, sizeof changes);
    ddpc_ckpt_state_fini(&st);
    if (s == DDPC_OK && found)
        s = load(t, path, &st);
    /* Every rank takes part whatever happened here, so a local failure cannot hang the others. */
    s = ddpc__trainer_resume_agree(t, s, s == DDPC_OK && found ? &st : NULL, path);
    if (s == DDPC_OK && found && t->log) {
        const ddpc__resume_notes *n = &t->resume;
        for (size_t i = 0; i < n->n_skipped && i < DDPC__RESUME_NOTES; i++)
            fprintf(t->log, "skipped checkpoint %s/%s: %s\n", n->dir, n->skipped[i].name,
                    n->skipped[i].problem);
        if (n->n_skipped > DDPC__RESUME_NOTES)
            fprintf(t->log, "skipped %zu more checkpoints that did not verify\n",
                    n->n_skipped - DDPC__RESUME_NOTES);
        log_resume(t, path, &st);
        fputs(changes, t->log);
    }
    ddpc_ckpt_state_fini(&st);
    return s;
}

/* Writes the checkpoint of this step: rank 0 alone (replicated state) or every rank its shard;
 * path (cap) gets the committed directory where this rank knows it. */
static ddpc_status write_ckpt(ddpc_trainer *t, int stage, const ddpc_ckpt_state *st, char *path,
                              size_t cap)
{
    if (stage > 0) { /* collective: every rank writes its shard, from the host copies */
        const ddpc_range *ranges;
        size_t n_ranges;
        ddpc_engine_shard(t->engine, &ranges, &n_ranges);
        ddpc_model_to_host(t->model);
        ddpc_optim_to_host(ddpc_engine_optim(t->engine));
        return ddpc_ckpt_save_sharded(t->set.ckpt_dir, t->dist.pg, t->model,
                                      ddpc_engine_optim(t->engine), ranges, n_ranges, st,
                                      t->set.ckpt_keep, path, cap);
    }
    if (t->dist.rank != 0) /* the state is replicated: rank 0 writes it */
        return DDPC_OK;
    /* A GPU run's state is on the device: bring the host copies up to date first. */
    ddpc_model_to_host(t->model);
    ddpc_optim_to_host(ddpc_engine_optim(t->engine));
    return ddpc_ckpt_save(t->set.ckpt_dir, t->model, ddpc_engine_optim(t->engine), st,
                          t->set.ckpt_keep, path, cap);
}

static ddpc_status save(ddpc_trainer *t)
{
    /* A GPU run checks its deferred losses and norms first: never a checkpoint of NaNs. */
    DDPC_TRY(ddpc__trainer_read_pending(t));
    ddpc_pg_set_phase(t->dist.pg, DDPC_PHASE_CHECKPOINT);
    int64_t step = ddpc_engine_step(t->engine);
    t->pos.last_saved_step = step;
    int stage = stage_in_effect(t);
    ddpc_ckpt_state st = {
        .step = step,
        .epoch = t->pos.epoch,
        .epoch_step = t->pos.epoch_step,
        .samples_seen = step * ddpc__trainer_global_batch(t),
        .global_batch = ddpc__trainer_global_batch(t),
        .world = t->dist.world,
        .seed = t->set.seed,
        .skipped_steps = ddpc_engine_skipped(t->engine),
        .loss_scaling = ddpc_engine_config_of(t->engine)->loss_scaling,
        .loss_scale = ddpc_engine_loss_scale(t->engine).scale,
        .loss_scale_growth_tracker = ddpc_engine_loss_scale(t->engine).growth_tracker,
        .config = t->config_text,
        .zero_stage = stage,
    };
    char path[1100] = "";
    double t0 = ddpc_time_now();
    ddpc_status s = write_ckpt(t, stage, &st, path, sizeof path);
    if (!t->resume.save_seen_checked) { /* once per run: a node-local dir shows at once */
        t->resume.save_seen_checked = true;
        s = ddpc__trainer_save_seen(t, s, path);
    }
    DDPC_TRY(s);
    double seconds = ddpc_time_now() - t0;
    t->pos.ckpt_seconds += seconds;
    if (t->dist.rank != 0) /* rank 0 logs and records it */
        return DDPC_OK;
    ddpc__progress_clear(t);
    if (t->log)
        fprintf(t->log, "saved checkpoint %s in %.3f s\n", path, seconds);
    ddpc_metrics_begin(t->metrics, step);
    ddpc_metrics_str(t->metrics, "event", "checkpoint");
    ddpc_metrics_str(t->metrics, "checkpoint", path);
    ddpc_metrics_f64(t->metrics, "checkpoint_s", seconds, 4);
    return ddpc_metrics_end(t->metrics);
}

ddpc_status ddpc__trainer_after_step_save(ddpc_trainer *t, bool epoch_end)
{
    const trainer_settings *s = &t->set;
    int64_t step = ddpc_engine_step(t->engine);
    bool by_steps = s->ckpt_every_steps > 0 && step % s->ckpt_every_steps == 0;
    /* t->pos.epoch is already the next step's epoch: the one just finished is t->pos.epoch - 1. */
    bool by_epochs = s->ckpt_every_epochs > 0 && epoch_end && t->pos.epoch_step == 0 &&
                     t->pos.epoch % s->ckpt_every_epochs == 0;
    return by_steps || by_epochs ? save(t) : DDPC_OK;
}

ddpc_status ddpc__trainer_final_save(ddpc_trainer *t)
{
    if (!ddpc__trainer_checkpoints_on(t) || t->pos.last_saved_step == ddpc_engine_step(t->engine))
        return DDPC_OK;
    return save(t);
}
