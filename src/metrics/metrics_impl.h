// SPDX-License-Identifier: MIT
/* Private to the metrics sink: the record being built and the sink function table. Invariant:
 * every string a record points to lives in the record itself (keys and str values are copied),
 * so a sink may read it only during its record call. */
#ifndef DDPC_METRICS_METRICS_IMPL_H
#define DDPC_METRICS_METRICS_IMPL_H

#include <ddpc/metrics.h>

#include <stddef.h>

#define DDPC__METRICS_KEY_MAX 64
#define DDPC__METRICS_STR_MAX 1024

typedef enum { DDPC__FIELD_I64, DDPC__FIELD_F64, DDPC__FIELD_STR } ddpc__field_kind;

typedef struct {
    ddpc__field_kind kind;
    char key[DDPC__METRICS_KEY_MAX];
    int64_t i;
    double f;
    int digits;
    int str; /* STR: index into the record's strings */
} ddpc__metrics_field;

typedef struct {
    int64_t step;
    size_t n;
    ddpc__metrics_field field[DDPC_METRICS_MAX_FIELDS];
    size_t n_str;
    char str[4][DDPC__METRICS_STR_MAX];
} ddpc__metrics_record;

typedef struct {
    /* Writes one record; errors are sticky inside the sink. */
    ddpc_status (*record)(void *state, const ddpc__metrics_record *r);
    void (*close)(void *state);
} ddpc__metrics_sink_ops;

/* metrics_jsonl.c */
ddpc_status ddpc__metrics_jsonl_open(const char *path, bool append, void **state);
extern const ddpc__metrics_sink_ops ddpc__metrics_jsonl_ops;
/* metrics_tb.c: a new TensorBoard event file in `dir` (created if missing). */
ddpc_status ddpc__metrics_tb_open(const char *dir, void **state);
extern const ddpc__metrics_sink_ops ddpc__metrics_tb_ops;

#endif
