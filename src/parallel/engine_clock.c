// SPDX-License-Identifier: MIT
/* The step's phases in device time: engine_clock.h. */
#include "parallel/engine_clock.h"

#include <string.h>

#define NO_FIELD ((size_t)-1)

void ddpc__clock_init(ddpc__clock *c, const ddpc_kernel_table *k)
{
    memset(c, 0, sizeof *c);
    c->k = k;
    c->last = -1;
    if (k->marks_create && k->marks_destroy && k->mark && k->mark_seconds)
        c->marks = k->marks_create(DDPC__CLOCK_MARKS);
}

void ddpc__clock_fini(ddpc__clock *c)
{
    if (c->marks)
        c->k->marks_destroy(c->marks);
    c->marks = NULL;
}

/* Adds the finished spans, oldest first, up to the first the device has not passed. */
static void collect(ddpc__clock *c)
{
    while (c->pending > 0) {
        const ddpc__clock_span *s = &c->span[c->head];
        double sec;
        if (!c->k->mark_seconds(c->marks, s->a, s->b, &sec))
            return;
        *(double *)((char *)&c->done + s->field) += sec;
        c->head = (c->head + 1) % DDPC__CLOCK_SPANS;
        c->pending--;
    }
}

static void drop_oldest(ddpc__clock *c)
{
    c->head = (c->head + 1) % DDPC__CLOCK_SPANS;
    c->pending--;
    c->dropped++;
}

/* Whether a pending span holds ring slot `slot`. */
static bool held(const ddpc__clock *c, int slot)
{
    for (int i = 0; i < c->pending; i++) {
        const ddpc__clock_span *s = &c->span[(c->head + i) % DDPC__CLOCK_SPANS];
        if (s->a == slot || s->b == slot)
            return true;
    }
    return false;
}

void ddpc__clock_lap(ddpc__clock *c, size_t field)
{
    if (!c->marks)
        return;
    const int slot = c->next;
    if (held(c, slot))
        collect(c);
    while (held(c, slot)) /* the device is a whole ring behind: lose the oldest, never wait */
        drop_oldest(c);
    c->k->mark(c->marks, slot);
    c->next = (slot + 1) % DDPC__CLOCK_MARKS;
    if (field != NO_FIELD && c->last >= 0) {
        if (c->pending == DDPC__CLOCK_SPANS)
            collect(c);
        if (c->pending == DDPC__CLOCK_SPANS)
            drop_oldest(c);
        c->span[(c->head + c->pending) % DDPC__CLOCK_SPANS] =
            (ddpc__clock_span){.a = c->last, .b = slot, .field = field};
        c->pending++;
    }
    c->last = slot;
}

ddpc_engine_timing ddpc__clock_take(ddpc__clock *c)
{
    if (c->marks)
        collect(c);
    ddpc_engine_timing r = c->done;
    c->done = (ddpc_engine_timing){0};
    return r;
}
