// SPDX-License-Identifier: MIT
/* The step's phases in device time (engine_clock.c): at every lap of the engine's host clock a
 * mark on the device's stream, and a span from the previous lap's mark for each phase the lap
 * closes; finished spans are added up without waiting, in the order they were made (one stream
 * passes marks in order). Invariant: a ring slot is never recorded again while an unread span
 * holds it; a span that would have to wait for that is dropped (counted), never waited for. */
#ifndef DDPC_PARALLEL_ENGINE_CLOCK_H
#define DDPC_PARALLEL_ENGINE_CLOCK_H

#include <ddpc/device.h>
#include <ddpc/engine.h>

#include <stddef.h>
#include <stdint.h>

/* Marks in the ring and spans waiting to be read: the host runs at most a few steps (of about
 * six marks each) ahead of the device, so neither fills in steady state. */
enum { DDPC__CLOCK_MARKS = 256, DDPC__CLOCK_SPANS = 96 };

typedef struct {
    int a, b;     /* its marks */
    size_t field; /* the ddpc_engine_timing field it adds to (offsetof) */
} ddpc__clock_span;

typedef struct {
    const ddpc_kernel_table *k;
    void *marks;                              /* NULL: off */
    int next;                                 /* the next ring slot to record */
    int last;                                 /* the previous lap's mark, -1 before the first */
    ddpc__clock_span span[DDPC__CLOCK_SPANS]; /* a ring: `pending` from `head` */
    int head, pending;
    ddpc_engine_timing done; /* the finished spans' device seconds since the last take */
    uint64_t dropped;
} ddpc__clock;

/* On where the table has marks and can make them; else off (every call below does nothing). */
void ddpc__clock_init(ddpc__clock *c, const ddpc_kernel_table *k);
void ddpc__clock_fini(ddpc__clock *c);
static inline bool ddpc__clock_on(const ddpc__clock *c)
{
    return c->marks != NULL;
}
/* A mark now; with field (offsetof a ddpc_engine_timing field; (size_t)-1 for none), the span
 * from the previous lap's mark to it counts toward that phase. */
void ddpc__clock_lap(ddpc__clock *c, size_t field);
/* The finished spans' seconds since the last take, per field (the rest stay pending); resets. */
ddpc_engine_timing ddpc__clock_take(ddpc__clock *c);

#endif
