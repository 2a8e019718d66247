/* metrics.jsonl: one JSON object per line, appended and flushed as each event happens, so a
 * crashed run keeps everything it logged. Also creates the run directory. */
#include "train/trainer_impl.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

ddpc_status ddpc__make_dirs(const char *path)
{
    char buf[1024];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return ddpc_errorf(DDPC_EINVAL, "directory path too long: '%s'", path);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char saved = *p;
            *p = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return ddpc_errorf(DDPC_EIO, "cannot create directory '%s': %s", buf, strerror(errno));
            *p = saved;
            if (saved == '\0')
                break;
        }
    }
    return DDPC_OK;
}

ddpc_status ddpc__metrics_open(ddpc_trainer *t)
{
    if (t->rank != 0) /* one metrics file per run, written by global rank 0 */
        return DDPC_OK;
    DDPC_TRY(ddpc__make_dirs(t->set.run_dir));
    char path[1100];
    snprintf(path, sizeof path, "%s/metrics.jsonl", t->set.run_dir);
    /* A resumed or restarted run appends: the file keeps every attempt's records. */
    bool append = t->resumed_from[0] || t->restart_count > 0;
    t->metrics = fopen(path, append ? "a" : "w");
    if (!t->metrics)
        return ddpc_errorf(DDPC_EIO, "cannot write '%s': %s", path, strerror(errno));
    if (t->resumed_from[0] || t->restart_count > 0) {
        char fields[1400];
        snprintf(fields, sizeof fields, "\"step\": %lld, \"event\": \"%s\", \"restart\": %d, "
                 "\"checkpoint\": \"%s\"", (long long)ddpc_engine_step(t->engine),
                 t->resumed_from[0] ? "resume" : "restart", t->restart_count, t->resumed_from);
        ddpc__metrics_write(t, fields);
    }
    return DDPC_OK;
}

void ddpc__metrics_write(ddpc_trainer *t, const char *json_fields)
{
    if (!t->metrics)
        return;
    fprintf(t->metrics, "{%s}\n", json_fields);
    fflush(t->metrics);
}
