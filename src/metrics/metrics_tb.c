// SPDX-License-Identifier: MIT
/* The TensorBoard sink: every numeric field of a record becomes a scalar at the record's step in
 * `<dir>/events.out.tfevents.<time>.<host>.<pid>` (TFRecord-framed Event protobufs, tb_record.c and
 * tb_event.c). Tags: the field's key ("loss", "phase/data_s"); an evaluation record's keys go under
 * its split (and task): "test/eval_loss", "val/fmnist/eval_accuracy"; other events' under the
 * event's name. A "resume"/"restart" record of step S (the checkpoint's) is a session_log START
 * at S + 1, which makes TensorBoard drop the superseded attempt's points from S + 1 on; a "rerun"
 * record (a new run appending to an earlier one's metrics) is a START at its own step. Invariants:
 * each event reaches the file with one write() (a killed run keeps every earlier record whole); the
 * first failed write makes the sink fail for good, like metrics.jsonl. */
#include "metrics/metrics_impl.h"
#include "metrics/tb_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/fs.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define EVENT_CAP (DDPC_METRICS_MAX_FIELDS * 320 + 256)

typedef struct {
    int fd;
    char path[1200];
    ddpc_status failed;
    char why[128];
    ddpc__pb event;
    unsigned char event_buf[EVENT_CAP], sub_buf[EVENT_CAP];
    unsigned char framed[EVENT_CAP + DDPC__TFRECORD_OVERHEAD];
} tb_writer;

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Frames and writes the event built in w->event (one write()). */
static ddpc_status emit(tb_writer *w)
{
    if (w->failed)
        return ddpc_errorf(w->failed, "cannot write '%s': %s", w->path, w->why);
    if (w->event.overflow)
        return DDPC_OK; /* cannot happen with the record's limits; never write half an event */
    size_t n = ddpc__tfrecord_frame(w->event.buf, w->event.len, w->framed, sizeof w->framed);
    ssize_t put = n ? write(w->fd, w->framed, n) : -1;
    if (put == (ssize_t)n)
        return DDPC_OK;
    w->failed = DDPC_EIO;
    snprintf(w->why, sizeof w->why, "%s", put < 0 ? strerror(errno) : "short write");
    return ddpc_errorf(DDPC_EIO, "cannot write '%s': %s", w->path, w->why);
}

static const char *str_field(const ddpc__metrics_record *r, const char *key)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->field[i].kind == DDPC__FIELD_STR && strcmp(r->field[i].key, key) == 0)
            return r->str[r->field[i].str];
    return NULL;
}

static ddpc_status tb_record(void *state, const ddpc__metrics_record *r)
{
    tb_writer *w = state;
    const char *event = str_field(r, "event");
    if (event && (strcmp(event, "resume") == 0 || strcmp(event, "restart") == 0)) {
        /* TensorBoard drops every earlier point at or after START's step: the resumed run's
         * first step is the one after the checkpoint's, whose points stay */
        ddpc__tb_event_start(&w->event, wall_now(), r->step + 1);
        return emit(w);
    }
    if (event && strcmp(event, "rerun") == 0) { /* continues nothing: no earlier point stays */
        ddpc__tb_event_start(&w->event, wall_now(), r->step);
        return emit(w);
    }
    char prefix[256] = "";
    const char *split = str_field(r, "split"), *task = str_field(r, "task");
    if (split)
        snprintf(prefix, sizeof prefix, "%s/%s%s", split, task ? task : "", task ? "/" : "");
    else if (event)
        snprintf(prefix, sizeof prefix, "%s/", event);
    ddpc__tb_event_summary_begin(&w->event, wall_now(), r->step);
    size_t values = 0;
    for (size_t i = 0; i < r->n; i++) {
        const ddpc__metrics_field *f = &r->field[i];
        if (f->kind == DDPC__FIELD_STR)
            continue;
        char tag[DDPC__METRICS_KEY_MAX + 256];
        snprintf(tag, sizeof tag, "%s%s", prefix, f->key);
        ddpc__tb_event_summary_add(&w->event, tag,
                                   f->kind == DDPC__FIELD_I64 ? (float)f->i : (float)f->f);
        values++;
    }
    if (values == 0)
        return DDPC_OK;
    ddpc__tb_event_summary_end(&w->event);
    return emit(w);
}

static void tb_close(void *state)
{
    tb_writer *w = state;
    if (w->fd >= 0)
        close(w->fd);
    ddpc_free(w);
}

const ddpc__metrics_sink_ops ddpc__metrics_tb_ops = {tb_record, tb_close};

ddpc_status ddpc__metrics_tb_open(const char *dir, void **state)
{
    DDPC_TRY(ddpc_mkdirs(dir)); /* tolerates another rank creating the same parents */
    tb_writer *w = ddpc_calloc(1, sizeof *w);
    if (!w)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for the TensorBoard writer");
    w->event = (ddpc__pb){.buf = w->event_buf,
                          .cap = sizeof w->event_buf,
                          .sub = w->sub_buf,
                          .sub_cap = sizeof w->sub_buf};
    char host[128] = "host";
    gethostname(host, sizeof host - 1);
    /* a new file per process, as TensorBoard's writers do: a resumed run adds one beside */
    snprintf(w->path, sizeof w->path, "%s/events.out.tfevents.%lld.%s.%d", dir,
             (long long)time(NULL), host, (int)getpid());
    w->fd = open(w->path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0666);
    if (w->fd < 0) {
        int e = errno;
        char path[sizeof w->path];
        snprintf(path, sizeof path, "%s", w->path);
        ddpc_free(w);
        return ddpc_errorf(DDPC_EIO, "cannot write '%s': %s", path, strerror(e));
    }
    ddpc__tb_event_version(&w->event, wall_now(), "brain.Event:2");
    ddpc_status s = emit(w);
    if (s != DDPC_OK) {
        tb_close(w);
        return s;
    }
    *state = w;
    return DDPC_OK;
}
