// SPDX-License-Identifier: MIT
/* The run's outputs, opened before anything is trained: rank 0 locks, for the whole job, the run
 * directory, the checkpoint directory and weights_out (one job each: a second one is refused at
 * start), refuses a weights_out or predict.output that is not a regular file (so that is not
 * discovered after training), writes config.yaml (and a translation run's vocabularies), checks
 * that the checkpoint directory can be written, and opens metrics.jsonl — appended to by a
 * resumed or restarted run, which records why and which newer checkpoints it skipped — and a
 * TensorBoard event file in <run_dir>/tb/. Only global rank 0 writes run outputs. */
#include "train/trainer_impl.h"

#include <ddpc/rundir.h>

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static ddpc_status record_start(ddpc_trainer *t)
{
    if (!t->resumed_from[0] && t->pos.restart_count == 0)
        return ddpc__trainer_record_session(t);
    ddpc_metrics_begin(t->metrics, ddpc_engine_step(t->engine));
    ddpc_metrics_str(t->metrics, "event", t->resumed_from[0] ? "resume" : "restart");
    ddpc_metrics_i64(t->metrics, "restart", t->pos.restart_count);
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
    return ddpc__trainer_record_session(t);
}

/* The checkpoint directory is the job's when it saves there, or resumes (resume: auto) from one
 * that exists: a second job would resume the first one's state and interleave its saves. */
static ddpc_status lock_ckpt_dir(ddpc_trainer *t)
{
    const trainer_settings *s = &t->set;
    bool saves = ddpc__trainer_checkpoints_on(t);
    struct stat sb;
    bool auto_resume = strcmp(s->resume, "auto") == 0 || strcmp(s->resume, "force") == 0;
    if (!saves && !(auto_resume && stat(s->ckpt_dir, &sb) == 0))
        return DDPC_OK;
    char path[1100];
    ddpc_status st = saves ? ddpc_mkdirs(s->ckpt_dir) : DDPC_OK;
    if (st != DDPC_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", ddpc_last_error());
        return ddpc_errorf(st, "cannot write checkpoint.dir '%s' (%s)", s->ckpt_dir, why);
    }
    /* Not ".lock": checkpoint.dir may be the run directory, whose .lock this job already holds. */
    if (snprintf(path, sizeof path, "%s/.ckpt.lock", s->ckpt_dir) >= (int)sizeof path)
        return ddpc_errorf(DDPC_EINVAL, "checkpoint.dir is too long: '%.60s...'", s->ckpt_dir);
    return ddpc_fs_lock_acquire(path, "checkpoint directory", s->ckpt_dir,
                                "use another checkpoint.dir or stop that job", true,
                                &t->locks.ckpt_dir);
}

/* weights_out: refused now, not after training, when it is a device, FIFO or socket (or its
 * directory cannot be written); then locked for the job. The lock is a sibling file of the
 * file finally written (a symlink's target), not the file itself: the save renames a new file
 * over it, so a lock on the old one would no longer guard the path; and a sibling works before
 * the file exists. It is removed when the job ends, so it litters only after a crash. */
static ddpc_status lock_weights_out(ddpc_trainer *t)
{
    const char *w = t->set.weights_out;
    char target[DDPC_FS_PATH_MAX], path[DDPC_FS_PATH_MAX + 8];
    DDPC_TRY(ddpc_fs_out_target(w, "weights_out", target, sizeof target));
    DDPC_TRY(ddpc_path_check_writable(w));
    if (snprintf(path, sizeof path, "%s.lock", target) >= (int)sizeof path)
        return ddpc_errorf(DDPC_EINVAL, "weights_out is too long: '%.60s...'", w);
    return ddpc_fs_lock_acquire(path, "weights_out", w, "use another weights_out or stop that job",
                                true, &t->locks.weights_out);
}

ddpc_status ddpc__trainer_lock_outputs(ddpc_trainer *t)
{
    const trainer_settings *s = &t->set;
    if (t->dist.rank != 0)
        return DDPC_OK;
    DDPC_TRY(ddpc_rundir_lock_acquire(s->run_dir, &t->locks.run_dir));
    if (s->state == STATE_PREDICT && t->kind->check_predict_output)
        return t->kind->check_predict_output(t);
    if (s->state != STATE_TRAIN)
        return DDPC_OK;
    DDPC_TRY(lock_ckpt_dir(t));
    return s->weights_out ? lock_weights_out(t) : DDPC_OK;
}

void ddpc__trainer_unlock_outputs(ddpc_trainer *t)
{
    ddpc_fs_lock_release(t->locks.weights_out);
    ddpc_fs_lock_release(t->locks.ckpt_dir);
    ddpc_rundir_unlock(t->locks.run_dir);
    t->locks = (ddpc__trainer_locks){0};
}

ddpc_status ddpc__trainer_open_outputs(ddpc_trainer *t)
{
    DDPC_TRY(ddpc_metrics_create(&t->metrics)); /* every rank records; only rank 0's are kept */
    const trainer_settings *s = &t->set;
    char path[1100];
    if (s->tensorboard && s->tensorboard_per_rank) { /* each rank's own view, tb/rank<k>/ */
        snprintf(path, sizeof path, "%s/tb/rank%d", s->run_dir, t->dist.rank);
        DDPC_TRY(ddpc_metrics_add_tensorboard(t->metrics, path));
    }
    if (t->dist.rank != 0)
        return s->tensorboard && s->tensorboard_per_rank ? record_start(t) : DDPC_OK;
    DDPC_TRY(ddpc_rundir_write_config(s->run_dir, t->config_text));
    if (t->kind->write_outputs)
        DDPC_TRY(t->kind->write_outputs(t));
    if (s->state == STATE_TRAIN && ddpc__trainer_checkpoints_on(t))
        DDPC_TRY(ddpc_dir_check_writable(s->ckpt_dir));
    snprintf(path, sizeof path, "%s/metrics.jsonl", s->run_dir);
    /* A resumed or restarted run, or a rerun, appends: the file keeps every attempt's records. */
    DDPC_TRY(ddpc_metrics_add_jsonl(t->metrics, path, ddpc__trainer_appends_metrics(t)));
    if (s->tensorboard) {
        snprintf(path, sizeof path, "%s/tb", s->run_dir);
        DDPC_TRY(ddpc_metrics_add_tensorboard(t->metrics, path));
    }
    return record_start(t);
}
