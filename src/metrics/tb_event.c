// SPDX-License-Identifier: MIT
/* The Event protobuf of TensorBoard's event files, encoded by hand. Field numbers, from
 * tensorboard/compat/proto/event.proto and summary.proto:
 *   Event:      wall_time 1 (double), step 2 (int64), file_version 3 (string), summary 5,
 *               session_log 7
 *   Summary:    value 1 (repeated Value);  Value: tag 1 (string), simple_value 2 (float)
 *   SessionLog: status 1 (enum; START = 1)
 * Wire types: 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32. */
#include "metrics/tb_impl.h"

#include <string.h>

enum { VARINT = 0, FIXED64 = 1, BYTES = 2, FIXED32 = 5 };

static void raw(unsigned char *buf, size_t cap, size_t *len, bool *overflow, const void *p,
                size_t n)
{
    if (*len + n > cap) {
        *overflow = true;
        return;
    }
    memcpy(buf + *len, p, n);
    *len += n;
}

static size_t varint(unsigned char *out, uint64_t v)
{
    size_t n = 0;
    do {
        out[n] = (unsigned char)(v & 0x7F);
        v >>= 7;
        if (v)
            out[n] |= 0x80;
        n++;
    } while (v);
    return n;
}

/* Appends field `field` of wire type `wire` to (buf, len): the key, then for BYTES a length. */
static void key(unsigned char *buf, size_t cap, size_t *len, bool *ovf, int field, int wire)
{
    unsigned char tmp[10];
    raw(buf, cap, len, ovf, tmp, varint(tmp, ((uint64_t)field << 3) | (uint64_t)wire));
}

static void put_varint(unsigned char *buf, size_t cap, size_t *len, bool *ovf, uint64_t v)
{
    unsigned char tmp[10];
    raw(buf, cap, len, ovf, tmp, varint(tmp, v));
}

static void put_bytes(unsigned char *buf, size_t cap, size_t *len, bool *ovf, int field,
                      const void *p, size_t n)
{
    key(buf, cap, len, ovf, field, BYTES);
    put_varint(buf, cap, len, ovf, n);
    raw(buf, cap, len, ovf, p, n);
}

static void head(ddpc__pb *e, double wall_time, int64_t step)
{
    e->len = 0;
    e->overflow = false;
    unsigned char d[8];
    uint64_t bits;
    memcpy(&bits, &wall_time, 8);
    for (int i = 0; i < 8; i++)
        d[i] = (unsigned char)(bits >> (8 * i));
    key(e->buf, e->cap, &e->len, &e->overflow, 1, FIXED64);
    raw(e->buf, e->cap, &e->len, &e->overflow, d, 8);
    key(e->buf, e->cap, &e->len, &e->overflow, 2, VARINT);
    put_varint(e->buf, e->cap, &e->len, &e->overflow, (uint64_t)step);
}

void ddpc__tb_event_version(ddpc__pb *e, double wall_time, const char *version)
{
    head(e, wall_time, 0);
    put_bytes(e->buf, e->cap, &e->len, &e->overflow, 3, version, strlen(version));
}

void ddpc__tb_event_start(ddpc__pb *e, double wall_time, int64_t step)
{
    head(e, wall_time, step);
    const unsigned char session_log[] = {(1 << 3) | VARINT, 1}; /* status: START */
    put_bytes(e->buf, e->cap, &e->len, &e->overflow, 7, session_log, sizeof session_log);
}

void ddpc__tb_event_summary_begin(ddpc__pb *e, double wall_time, int64_t step)
{
    head(e, wall_time, step);
    e->sub_len = 0;
}

void ddpc__tb_event_summary_add(ddpc__pb *e, const char *tag, float value)
{
    unsigned char v[300];
    size_t n = 0;
    bool ovf = false;
    size_t tag_len = strlen(tag);
    if (tag_len > 250)
        tag_len = 250;
    put_bytes(v, sizeof v, &n, &ovf, 1, tag, tag_len);
    uint32_t bits;
    memcpy(&bits, &value, 4);
    unsigned char f[4] = {(unsigned char)bits, (unsigned char)(bits >> 8),
                          (unsigned char)(bits >> 16), (unsigned char)(bits >> 24)};
    key(v, sizeof v, &n, &ovf, 2, FIXED32);
    raw(v, sizeof v, &n, &ovf, f, 4);
    put_bytes(e->sub, e->sub_cap, &e->sub_len, &e->overflow, 1, v, n);
    e->overflow = e->overflow || ovf;
}

void ddpc__tb_event_summary_end(ddpc__pb *e)
{
    put_bytes(e->buf, e->cap, &e->len, &e->overflow, 5, e->sub, e->sub_len);
}
