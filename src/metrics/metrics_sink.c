// SPDX-License-Identifier: MIT
/* The typed metrics sink: builds one record in place (no allocation) and hands it to each sink.
 * Invariant: between begin and end the record holds only copied keys and strings. */
#include "metrics/metrics_impl.h"

#include <ddpc/alloc.h>

#include <stdio.h>
#include <string.h>

#define MAX_SINKS 4

struct ddpc_metrics {
    const ddpc__metrics_sink_ops *ops[MAX_SINKS];
    void *state[MAX_SINKS];
    int n_sinks;
    bool open;
    ddpc__metrics_record rec;
};

ddpc_status ddpc_metrics_create(ddpc_metrics **out)
{
    *out = ddpc_calloc(1, sizeof **out);
    return *out ? DDPC_OK : ddpc_errorf(DDPC_ENOMEM, "out of memory for the metrics sink");
}

void ddpc_metrics_destroy(ddpc_metrics *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->n_sinks; i++)
        m->ops[i]->close(m->state[i]);
    ddpc_free(m);
}

ddpc_status ddpc_metrics_add_jsonl(ddpc_metrics *m, const char *path, bool append)
{
    if (m->n_sinks == MAX_SINKS)
        return ddpc_errorf(DDPC_EINVAL, "metrics: at most %d sinks", MAX_SINKS);
    DDPC_TRY(ddpc__metrics_jsonl_open(path, append, &m->state[m->n_sinks]));
    m->ops[m->n_sinks++] = &ddpc__metrics_jsonl_ops;
    return DDPC_OK;
}

ddpc_status ddpc_metrics_add_tensorboard(ddpc_metrics *m, const char *dir)
{
    if (m->n_sinks == MAX_SINKS)
        return ddpc_errorf(DDPC_EINVAL, "metrics: at most %d sinks", MAX_SINKS);
    DDPC_TRY(ddpc__metrics_tb_open(dir, &m->state[m->n_sinks]));
    m->ops[m->n_sinks++] = &ddpc__metrics_tb_ops;
    return DDPC_OK;
}

void ddpc_metrics_begin(ddpc_metrics *m, int64_t step)
{
    m->open = true;
    m->rec.step = step;
    m->rec.n = 0;
    m->rec.n_str = 0;
}

static ddpc__metrics_field *add(ddpc_metrics *m, const char *key, ddpc__field_kind kind)
{
    if (!m->open || m->rec.n == DDPC_METRICS_MAX_FIELDS)
        return NULL;
    ddpc__metrics_field *f = &m->rec.field[m->rec.n++];
    f->kind = kind;
    snprintf(f->key, sizeof f->key, "%s", key);
    return f;
}

void ddpc_metrics_i64(ddpc_metrics *m, const char *key, int64_t v)
{
    ddpc__metrics_field *f = add(m, key, DDPC__FIELD_I64);
    if (f)
        f->i = v;
}

void ddpc_metrics_f64(ddpc_metrics *m, const char *key, double v, int digits)
{
    ddpc__metrics_field *f = add(m, key, DDPC__FIELD_F64);
    if (f) {
        f->f = v;
        f->digits = digits > 17 ? 17 : digits;
    }
}

void ddpc_metrics_str(ddpc_metrics *m, const char *key, const char *v)
{
    size_t cap = sizeof m->rec.str / sizeof m->rec.str[0];
    if (m->rec.n_str == cap)
        return;
    ddpc__metrics_field *f = add(m, key, DDPC__FIELD_STR);
    if (f) {
        f->str = (int)m->rec.n_str++;
        snprintf(m->rec.str[f->str], DDPC__METRICS_STR_MAX, "%s", v ? v : "");
    }
}

ddpc_status ddpc_metrics_end(ddpc_metrics *m)
{
    ddpc_status first = DDPC_OK;
    if (!m->open)
        return DDPC_OK;
    m->open = false;
    for (int i = 0; i < m->n_sinks; i++) {
        ddpc_status st = m->ops[i]->record(m->state[i], &m->rec);
        if (first == DDPC_OK)
            first = st;
    }
    return first;
}
