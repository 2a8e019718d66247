// SPDX-License-Identifier: MIT
/* A GPU run's losses, read at logged steps: with a deferred engine (ddpc_engine_deferred) the
 * passes' losses stay on the device, and the trainer keeps, in order, which task each pass ran and
 * where each step ended, then accounts them when the engine reads them back. Invariant: passes
 * are accounted by account_pass/account_step alone, read now or later, in the order they ran, so
 * the logged numbers are the same bits either way. */
#include <ddpc/alloc.h>
#include <ddpc/device.h>

#include "train/trainer_impl.h"

enum { STEP_END = -1, MAX_PASSES = 4096 };

/* The step's weighted sum, and the task's window, as the step loop always did. */
static void account_pass(ddpc_trainer *t, int task, float loss)
{
    ddpc__task *k = &t->data.task[task];
    t->pend.step_sum += (double)k->loss_weight * loss;
    k->unsynced_loss += loss;
    k->unsynced_passes += 1;
}

/* The step's loss, averaged over micro-steps, into the logging window. */
static void account_step(ddpc_trainer *t)
{
    t->win.unsynced_loss += t->pend.step_sum / (double)t->set.accum_steps;
    t->win.unsynced_steps++;
    t->pend.step_sum = 0;
}

ddpc_status ddpc__trainer_pending_init(ddpc_trainer *t)
{
    ddpc__pending *p = &t->pend;
    t->engine_cfg.defer_passes = 0;
    const trainer_settings *s = &t->set;
    /* Training only (the loaders, and so n_local, exist then). */
    if (ddpc_model_backend(t->model)->kind == DDPC_DEVICE_CPU || t->dist.world > 1 ||
        t->dist.dp_replicas > 0 || s->state != STATE_TRAIN || t->data.n_local < 1)
        return DDPC_OK;
    /* Room for the steps between two reads (every stats sync, which every logged step does),
     * capped; a step that might not fit reads first (make_room). */
    int64_t every = s->stats_sync_every < s->log_every ? s->stats_sync_every : s->log_every;
    p->per_step = s->accum_steps * t->data.n_local;
    int64_t passes = every > MAX_PASSES / p->per_step ? MAX_PASSES : p->per_step * every;
    passes = passes < p->per_step ? p->per_step : passes; /* one step always fits */
    p->cap_passes = (size_t)passes;
    p->cap_entries = 2 * (size_t)passes + 1; /* each step ends once, after at most per_step */
    p->entry = ddpc_calloc(p->cap_entries, sizeof *p->entry);
    p->outs = ddpc_calloc(p->cap_passes, sizeof *p->outs);
    if (!p->entry || !p->outs)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for %zu deferred losses", p->cap_passes);
    t->engine_cfg.defer_passes = p->cap_passes;
    return DDPC_OK;
}

void ddpc__trainer_pending_fini(ddpc_trainer *t)
{
    ddpc_free(t->pend.entry);
    ddpc_free(t->pend.outs);
    t->pend = (ddpc__pending){0};
}

ddpc_status ddpc__trainer_note_pass(ddpc_trainer *t, int task, const ddpc_model_output *out)
{
    ddpc__pending *p = &t->pend;
    if (!ddpc_engine_deferred(t->engine)) {
        account_pass(t, task, out->loss);
        return DDPC_OK;
    }
    if (p->n_entries + 2 > p->cap_entries) /* make_room keeps this from happening */
        return ddpc_errorf(DDPC_EINTERNAL, "deferred losses: %zu entries are full",
                           p->cap_entries);
    p->entry[p->n_entries++] = task;
    p->n_passes++;
    return DDPC_OK;
}

void ddpc__trainer_note_step(ddpc_trainer *t)
{
    if (!ddpc_engine_deferred(t->engine))
        account_step(t);
    else
        t->pend.entry[t->pend.n_entries++] = STEP_END; /* room kept by note_pass's check */
}

ddpc_status ddpc__trainer_read_pending(ddpc_trainer *t)
{
    ddpc__pending *p = &t->pend;
    if (!t->engine || !ddpc_engine_deferred(t->engine))
        return DDPC_OK;
    size_t n = 0;
    double norm;
    ddpc_status st = ddpc_engine_read(t->engine, p->outs, &n, &norm);
    if (n != p->n_passes && st == DDPC_OK)
        st = ddpc_errorf(DDPC_EINTERNAL, "deferred losses: the engine read %zu passes, the "
                         "trainer noted %zu", n, p->n_passes);
    /* Accounted even when the read found a non-finite value: the stop error follows. */
    size_t pass = 0;
    for (size_t i = 0; i < p->n_entries; i++) {
        if (p->entry[i] == STEP_END)
            account_step(t);
        else if (pass < n)
            account_pass(t, p->entry[i], p->outs[pass++].loss);
    }
    p->n_entries = p->n_passes = 0;
    t->win.last_grad_norm = norm;
    return st;
}

ddpc_status ddpc__trainer_make_room(ddpc_trainer *t)
{
    ddpc__pending *p = &t->pend;
    if (!t->engine || !ddpc_engine_deferred(t->engine))
        return DDPC_OK;
    bool fits = p->n_passes + (size_t)p->per_step <= p->cap_passes &&
                p->n_entries + (size_t)p->per_step + 1 <= p->cap_entries;
    return fits ? DDPC_OK : ddpc__trainer_read_pending(t);
}
