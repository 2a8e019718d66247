/* The run's outputs, opened before anything is trained: rank 0 locks the run directory (one job
 * per directory), writes config.yaml (and a translation run's vocabularies), checks that weights_out and the checkpoint directory can be
 * written (so that is not discovered after training), and opens metrics.jsonl — appended to by a
 * resumed or restarted run, which records why and which newer checkpoints it skipped — and a
 * TensorBoard event file in <run_dir>/tb/. Only global rank 0 writes run outputs. */
#include "train/trainer_impl.h"

#include <ddpc/rundir.h>

#include <stdio.h>

static ddpc_status record_start(ddpc_trainer *t)
{
    if (!t->resumed_from[0] && t->restart_count == 0)
        return DDPC_OK;
    ddpc_metrics_begin(t->metrics, ddpc_engine_step(t->engine));
    ddpc_metrics_str(t->metrics, "event", t->resumed_from[0] ? "resume" : "restart");
    ddpc_metrics_i64(t->metrics, "restart", t->restart_count);
    ddpc_metrics_str(t->metrics, "checkpoint", t->resumed_from);
    const ddpc__resume_notes *n = &t->resume;
    if (t->resumed_from[0])
        ddpc_metrics_i64(t->metrics, "skipped", (int64_t)n->n_skipped);
    DDPC_TRY(ddpc_metrics_end(t->metrics));
    /* Then one record per newer checkpoint it passed over: a record holds few strings. */
    for (size_t i = 0; t->resumed_from[0] && i < n->n_skipped && i < DDPC__RESUME_NOTES; i++) {
        char path[sizeof n->dir + sizeof n->skipped[i].name + 1];
        snprintf(path, sizeof path, "%s/%s", n->dir, n->skipped[i].name);
        ddpc_metrics_begin(t->metrics, ddpc_engine_step(t->engine));
        ddpc_metrics_str(t->metrics, "event", "skipped_checkpoint");
        ddpc_metrics_str(t->metrics, "checkpoint", path);
        ddpc_metrics_str(t->metrics, "reason", n->skipped[i].problem);
        DDPC_TRY(ddpc_metrics_end(t->metrics));
    }
    return DDPC_OK;
}

ddpc_status ddpc__trainer_open_outputs(ddpc_trainer *t)
{
    DDPC_TRY(ddpc_metrics_create(&t->metrics)); /* every rank records; only rank 0's are kept */
    const trainer_settings *s = &t->set;
    char path[1100];
    if (s->tensorboard && s->tensorboard_per_rank) { /* each rank's own view, tb/rank<k>/ */
        snprintf(path, sizeof path, "%s/tb/rank%d", s->run_dir, t->rank);
        DDPC_TRY(ddpc_metrics_add_tensorboard(t->metrics, path));
    }
    if (t->rank != 0)
        return s->tensorboard && s->tensorboard_per_rank ? record_start(t) : DDPC_OK;
    DDPC_TRY(ddpc_rundir_lock_acquire(s->run_dir, &t->lock));
    DDPC_TRY(ddpc_rundir_write_config(s->run_dir, t->config_text));
    DDPC_TRY(ddpc__trainer_save_vocab(t));
    if (s->state == STATE_TRAIN && s->weights_out)
        DDPC_TRY(ddpc_path_check_writable(s->weights_out));
    if (s->state == STATE_TRAIN && ddpc__trainer_checkpoints_on(t))
        DDPC_TRY(ddpc_dir_check_writable(s->ckpt_dir));
    snprintf(path, sizeof path, "%s/metrics.jsonl", s->run_dir);
    /* A resumed or restarted run appends: the file keeps every attempt's records. */
    DDPC_TRY(ddpc_metrics_add_jsonl(t->metrics, path, t->resumed_from[0] || t->restart_count > 0));
    if (s->tensorboard) {
        snprintf(path, sizeof path, "%s/tb", s->run_dir);
        DDPC_TRY(ddpc_metrics_add_tensorboard(t->metrics, path));
    }
    return record_start(t);
}
