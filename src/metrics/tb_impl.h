// SPDX-License-Identifier: MIT
/* Private to the TensorBoard writer (tb_record.c: TFRecord framing and CRC-32C; tb_event.c: the
 * Event protobuf; metrics_tb.c: the metrics sink). Nothing here depends on protobuf: the few
 * fields of event.proto and summary.proto that ddpc writes are encoded by hand. */
#ifndef DDPC_METRICS_TB_IMPL_H
#define DDPC_METRICS_TB_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* length (8) + its CRC (4) + the data's CRC (4) */
#define DDPC__TFRECORD_OVERHEAD 16

uint32_t ddpc__crc32c(const void *data, size_t len);
/* TFRecord's masked CRC-32C. */
uint32_t ddpc__crc32c_masked(const void *data, size_t len);
/* Frames `len` bytes of data into out; returns the framed size, 0 if it exceeds cap. */
size_t ddpc__tfrecord_frame(const void *data, size_t len, unsigned char *out, size_t cap);

/* An Event under construction (tb_event.c): bytes of the serialized message. */
typedef struct {
    unsigned char *buf; /* the Event */
    size_t cap, len;
    unsigned char *sub; /* a Summary's values, until they are appended as one field */
    size_t sub_cap, sub_len;
    bool overflow; /* something did not fit: the event is not to be written */
} ddpc__pb;

/* Event{wall_time, step, file_version: version}. */
void ddpc__tb_event_version(ddpc__pb *e, double wall_time, const char *version);
/* Event{wall_time, step, session_log: {status: START}}. */
void ddpc__tb_event_start(ddpc__pb *e, double wall_time, int64_t step);
/* Event{wall_time, step, summary: {value: [{tag, simple_value}, ...]}}: begin, add n values, end.
 */
void ddpc__tb_event_summary_begin(ddpc__pb *e, double wall_time, int64_t step);
void ddpc__tb_event_summary_add(ddpc__pb *e, const char *tag, float value);
void ddpc__tb_event_summary_end(ddpc__pb *e);

#endif
