// SPDX-License-Identifier: MIT
/* The combined multi-task loader (Lightning CombinedLoader's four modes, see combined.h).
 * Invariant: pos[t] counts the batches taken from loader t since its last start_epoch, so a
 * loader is asked for a batch only while pos[t] < its length, and the step count is fixed by the
 * lengths at start_epoch rather than by discovering exhaustion. */
#include <ddpc/combined.h>

#include <ddpc/alloc.h>

#include <string.h>

static const char *const mode_names[DDPC_COMBINED_COUNT] = {"max_size_cycle", "min_size",
                                                            "max_size", "sequential"};

struct ddpc_combined {
    ddpc_combined_mode mode;
    int n;
    ddpc_loader **loaders;      /* (n) borrowed */
    char **names;               /* (n) owned copies */
    int64_t *len;               /* (n) batches per epoch of each loader */
    int64_t *pos;               /* (n) batches taken since the loader's last start_epoch */
    const ddpc_batch **batches; /* (n) the current step's batches */
    ddpc_combined_step cur;
    int64_t epoch, steps, done;
    int task; /* sequential: the loader being consumed */
    double wait_total;
    bool started;
};

const char *ddpc_combined_mode_name(ddpc_combined_mode mode)
{
    return (unsigned)mode < DDPC_COMBINED_COUNT ? mode_names[mode] : "unknown";
}

ddpc_status ddpc_combined_mode_parse(const char *name, ddpc_combined_mode *out)
{
    for (int m = 0; m < DDPC_COMBINED_COUNT; m++)
        if (name && strcmp(name, mode_names[m]) == 0) {
            *out = (ddpc_combined_mode)m;
            return DDPC_OK;
        }
    return ddpc_errorf(DDPC_EINVAL,
                       "combined loader: unknown mode '%s' (expected max_size_cycle, min_size, "
                       "max_size or sequential)",
                       name ? name : "(null)");
}

static ddpc_status check_args(ddpc_loader *const *loaders, const char *const *names, int n,
                              ddpc_combined_mode mode)
{
    if ((unsigned)mode >= DDPC_COMBINED_COUNT)
        return ddpc_errorf(DDPC_EINVAL, "combined loader: mode %d is not a mode", (int)mode);
    if (n < 1 || !loaders || !names)
        return ddpc_errorf(DDPC_EINVAL, "combined loader: needs at least one named loader, got %d",
                           n);
    for (int t = 0; t < n; t++) {
        if (!names[t] || !names[t][0])
            return ddpc_errorf(DDPC_EINVAL, "combined loader: task %d has no name", t);
        if (!loaders[t])
            return ddpc_errorf(DDPC_EINVAL, "combined loader: task '%s' has no loader", names[t]);
        for (int u = 0; u < t; u++)
            if (strcmp(names[u], names[t]) == 0)
                return ddpc_errorf(DDPC_EINVAL, "combined loader: task name '%s' is used twice",
                                   names[t]);
    }
    return DDPC_OK;
}

ddpc_status ddpc_combined_create(ddpc_loader *const *loaders, const char *const *names,
                                 int num_tasks, ddpc_combined_mode mode, ddpc_combined **out)
{
    *out = NULL;
    DDPC_TRY(check_args(loaders, names, num_tasks, mode));
    ddpc_combined *c = ddpc_calloc(1, sizeof *c);
    if (!c)
        return ddpc_errorf(DDPC_ENOMEM, "combined loader: out of memory");
    c->mode = mode;
    c->n = num_tasks;
    size_t n = (size_t)num_tasks;
    c->loaders = ddpc_malloc(n * sizeof *c->loaders);
    c->names = ddpc_calloc(n, sizeof *c->names);
    c->len = ddpc_malloc(n * sizeof *c->len);
    c->pos = ddpc_malloc(n * sizeof *c->pos);
    c->batches = ddpc_calloc(n, sizeof *c->batches);
    bool ok = c->loaders && c->names && c->len && c->pos && c->batches;
    for (int t = 0; ok && t < num_tasks; t++) {
        c->loaders[t] = loaders[t];
        size_t len = strlen(names[t]) + 1;
        c->names[t] = ddpc_malloc(len);
        ok = c->names[t] != NULL;
        if (ok)
            memcpy(c->names[t], names[t], len);
    }
    if (!ok) {
        ddpc_combined_destroy(c);
        return ddpc_errorf(DDPC_ENOMEM, "combined loader: out of memory for %d tasks", num_tasks);
    }
    c->cur.batches = c->batches;
    *out = c;
    return DDPC_OK;
}

void ddpc_combined_destroy(ddpc_combined *c)
{
    if (!c)
        return;
    for (int t = 0; c->names && t < c->n; t++)
        ddpc_free(c->names[t]);
    ddpc_free(c->names);
    ddpc_free(c->loaders);
    ddpc_free(c->len);
    ddpc_free(c->pos);
    ddpc_free(c->batches);
    ddpc_free(c);
}

/* Steps per epoch for the loaders' current lengths; stores them in lens when not NULL. */
static int64_t count_steps(const ddpc_combined *c, int64_t *lens)
{
    int64_t lo = INT64_MAX, hi = 0, sum = 0;
    for (int t = 0; t < c->n; t++) {
        int64_t n = ddpc_loader_len(c->loaders[t]);
        if (lens)
            lens[t] = n;
        lo = n < lo ? n : lo;
        hi = n > hi ? n : hi;
        sum += n;
    }
    return c->mode == DDPC_COMBINED_MIN_SIZE ? lo : c->mode == DDPC_COMBINED_SEQUENTIAL ? sum : hi;
}

ddpc_status ddpc_combined_start_epoch(ddpc_combined *c, int64_t epoch)
{
    int64_t steps = count_steps(c, c->len);
    for (int t = 0; c->mode == DDPC_COMBINED_MAX_SIZE_CYCLE && steps > 0 && t < c->n; t++)
        if (c->len[t] == 0)
            return ddpc_errorf(DDPC_EINVAL,
                               "combined loader: task '%s' has no batches to cycle through in "
                               "max_size_cycle mode",
                               c->names[t]);
    for (int t = 0; t < c->n; t++) {
        DDPC_TRY(ddpc_loader_start_epoch(c->loaders[t], epoch));
        c->pos[t] = 0;
    }
    c->steps = steps;
    c->epoch = epoch;
    c->done = 0;
    c->task = 0;
    c->wait_total = 0;
    c->started = true;
    return DDPC_OK;
}

/* c->batches[t] = loader t's next batch (restarting it first when `cycle` and it ran out). */
static ddpc_status take(ddpc_combined *c, int t, bool cycle)
{
    if (cycle && c->pos[t] == c->len[t]) {
        DDPC_TRY(ddpc_loader_start_epoch(c->loaders[t], c->epoch));
        c->pos[t] = 0;
    }
    DDPC_TRY(ddpc_loader_next(c->loaders[t], &c->batches[t]));
    if (!c->batches[t])
        return ddpc_errorf(DDPC_EINTERNAL,
                           "combined loader: task '%s' ended after %lld of %lld batches",
                           c->names[t], (long long)c->pos[t], (long long)c->len[t]);
    c->pos[t]++;
    c->cur.wait_s += c->batches[t]->wait_s;
    return DDPC_OK;
}

ddpc_status ddpc_combined_next(ddpc_combined *c, const ddpc_combined_step **step)
{
    *step = NULL;
    if (!c->started)
        return ddpc_errorf(DDPC_EINVAL, "combined loader: next called before start_epoch");
    if (c->done == c->steps)
        return DDPC_OK;
    c->cur.step = c->cur.index = c->done;
    c->cur.task = -1;
    c->cur.wait_s = 0;
    for (int t = 0; t < c->n; t++)
        c->batches[t] = NULL;
    if (c->mode == DDPC_COMBINED_SEQUENTIAL) {
        while (c->pos[c->task] == c->len[c->task])
            c->task++; /* done < steps = sum of lengths, so a task with batches left exists */
        c->cur.task = c->task;
        c->cur.index = c->pos[c->task];
        DDPC_TRY(take(c, c->task, false));
    } else {
        for (int t = 0; t < c->n; t++)
            if (c->mode != DDPC_COMBINED_MAX_SIZE || c->pos[t] < c->len[t])
                DDPC_TRY(take(c, t, c->mode == DDPC_COMBINED_MAX_SIZE_CYCLE));
    }
    c->done++;
    c->wait_total += c->cur.wait_s;
    *step = &c->cur;
    return DDPC_OK;
}

int64_t ddpc_combined_len(const ddpc_combined *c)
{
    return count_steps(c, NULL);
}

int ddpc_combined_num_tasks(const ddpc_combined *c)
{
    return c->n;
}

const char *ddpc_combined_task_name(const ddpc_combined *c, int task)
{
    return task >= 0 && task < c->n ? c->names[task] : NULL;
}

ddpc_combined_mode ddpc_combined_mode_of(const ddpc_combined *c)
{
    return c->mode;
}

double ddpc_combined_epoch_wait(const ddpc_combined *c)
{
    return c->wait_total;
}
