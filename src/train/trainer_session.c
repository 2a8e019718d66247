// SPDX-License-Identifier: MIT
/* The records that frame one training session in metrics.jsonl: a "rerun" record when a run that
 * continues nothing (no checkpoint resumed, no restart) finds an earlier run's metrics in its
 * run directory — it appends to them, and TensorBoard gets a session_log START at the step it
 * starts from, as on a restart — then a "run" record saying how the session runs (ranks,
 * precision, ZeRO stage, device, config file), and an "end" record with its wall time, which
 * `ddpc report` summarises. Invariant: whether the metrics existed is seen by every rank before
 * any rank writes (ddpc__trainer_note_metrics runs before resume's collective). */
#include "train/trainer_device.h"
#include "train/trainer_impl.h"

#include <ddpc/kernels.h>

#include <stdio.h>
#include <sys/stat.h>

void ddpc__trainer_note_metrics(ddpc_trainer *t)
{
    char path[1100];
    struct stat sb;
    snprintf(path, sizeof path, "%s/metrics.jsonl", t->set.run_dir);
    t->resume.had_metrics = stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0;
}

bool ddpc__trainer_appends_metrics(const ddpc_trainer *t)
{
    return t->resumed_from[0] || t->pos.restart_count > 0 || t->resume.had_metrics;
}

/* An earlier run's metrics, continued by nothing: said, and a new TensorBoard session. */
static ddpc_status record_rerun(ddpc_trainer *t)
{
    const trainer_settings *s = &t->set;
    bool train = s->state == STATE_TRAIN;
    if (t->log)
        fprintf(t->log,
                "run_dir '%s' holds an earlier run's metrics: appending to its metrics.jsonl%s "
                "(use another run_dir to keep the runs apart)\n",
                s->run_dir,
                train && s->tensorboard ? ", and TensorBoard starts a new session at this step"
                                        : "");
    if (!train) /* an evaluation adds its records to the run it evaluates */
        return DDPC_OK;
    ddpc_metrics_begin(t->metrics, ddpc_engine_step(t->engine));
    ddpc_metrics_str(t->metrics, "event", "rerun");
    return ddpc_metrics_end(t->metrics);
}

ddpc_status ddpc__trainer_record_session(ddpc_trainer *t)
{
    if (!t->resumed_from[0] && t->pos.restart_count == 0 && t->resume.had_metrics)
        DDPC_TRY(record_rerun(t));
    if (t->set.state != STATE_TRAIN)
        return DDPC_OK;
    const char *source = ddpc_config_source(t->cfg);
    char written[1100];
    snprintf(written, sizeof written, "%s/config.yaml", t->set.run_dir);
    ddpc_metrics *m = t->metrics;
    ddpc_metrics_begin(m, ddpc_engine_step(t->engine));
    ddpc_metrics_str(m, "event", "run");
    ddpc_metrics_i64(m, "world", t->dist.world);
    ddpc_metrics_i64(m, "zero_stage", ddpc_engine_zero_stage(t->engine)); /* in effect */
    ddpc_metrics_str(m, "precision", ddpc_precision_name(t->set.precision));
    ddpc_metrics_str(m, "device", ddpc__device_describe(ddpc_model_config_of(t->model)->backend));
    ddpc_metrics_str(m, "config", source ? source : written);
    return ddpc_metrics_end(m);
}

ddpc_status ddpc__trainer_record_end(ddpc_trainer *t, double wall_s)
{
    ddpc_metrics_begin(t->metrics, ddpc_engine_step(t->engine));
    ddpc_metrics_str(t->metrics, "event", "end");
    ddpc_metrics_f64(t->metrics, "wall_s", wall_s, 3);
    return ddpc_metrics_end(t->metrics);
}
