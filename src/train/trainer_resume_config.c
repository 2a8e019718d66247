// SPDX-License-Identifier: MIT
/* A resume compares the checkpoint's effective configuration with this run's, so that rerunning
 * into a run directory with other hyper-parameters never silently continues the old experiment:
 * changes that alter the training (config_diff.c's table, and the global batch world x batch x
 * accumulation) are refused unless resume=force; a reshard, a longer run and cosmetic keys are
 * reported. Invariant: the verdict depends only on the two texts, the checkpoint's counters and
 * this run's world, so every rank reaches the same one before anything is loaded or written. */
#include "train/config_diff.h"
#include "train/trainer_impl.h"

#include <ddpc/alloc.h>

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define MAX_CHANGES 256
#define LIST_BYTES 640 /* of one list in a message; the rest is "and N more" */

/* A bounded list "a 1 -> 2, b x -> y" that counts what did not fit. */
typedef struct {
    char text[LIST_BYTES];
    size_t len, n, left_out;
} list;

static void list_add(list *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void list_add(list *l, const char *fmt, ...)
{
    char item[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(item, sizeof item, fmt, ap);
    va_end(ap);
    l->n++;
    size_t need = strlen(item) + (l->len ? 2 : 0);
    if (l->left_out || l->len + need + 24 >= sizeof l->text) { /* room for ", and N more" */
        l->left_out++;
        return;
    }
    l->len += (size_t)snprintf(l->text + l->len, sizeof l->text - l->len, "%s%s",
                               l->len ? ", " : "", item);
}

/* The list as text, with ", and N more" when it was cut. */
static const char *list_text(list *l)
{
    if (l->left_out)
        snprintf(l->text + l->len, sizeof l->text - l->len, ", and %zu more", l->left_out);
    return l->text;
}

static void add_change(list *l, const ddpc__config_change *c)
{
    list_add(l, "%s %s -> %s", c->key, c->old_value, c->new_value);
}

/* Appends a line to the report (rank 0's log, after the resume line). */
static void say(char *report, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void say(char *report, size_t cap, const char *fmt, ...)
{
    size_t len = strlen(report);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(report + len, cap - len, fmt, ap);
    va_end(ap);
}

/* The lists of one comparison. */
typedef struct {
    list training, layout, length, cosmetic;
} verdict;

static void classify(const ddpc_trainer *t, const ddpc_ckpt_state *st, const ddpc__config_change *c,
                     size_t n, verdict *v)
{
    int64_t gb_old = st->global_batch, gb_new = ddpc__trainer_global_batch(t);
    bool batch_changed = gb_old > 0 && gb_old != gb_new;
    list batch = {0};
    if (st->world != t->dist.world)
        list_add(&batch, "world %d -> %d", st->world, t->dist.world);
    for (size_t i = 0; i < n && i < MAX_CHANGES; i++) {
        if (c[i].one_sided) { /* only one run read it: another key or the device decided that */
            add_change(&v->cosmetic, &c[i]);
            continue;
        }
        switch (c[i].kind) {
        case DDPC__CHANGE_TRAINING:
            add_change(&v->training, &c[i]);
            break;
        case DDPC__CHANGE_BATCH:
            add_change(&batch, &c[i]);
            break;
        case DDPC__CHANGE_RESHARD:
            add_change(&v->layout, &c[i]);
            break;
        case DDPC__CHANGE_LENGTH:
            add_change(&v->length, &c[i]);
            break;
        case DDPC__CHANGE_COSMETIC:
            add_change(&v->cosmetic, &c[i]);
            break;
        }
    }
    if (batch_changed && batch.n)
        list_add(&v->training, "global batch %lld -> %lld (%s)", (long long)gb_old,
                 (long long)gb_new, list_text(&batch));
    else if (batch_changed)
        list_add(&v->training, "global batch %lld -> %lld", (long long)gb_old, (long long)gb_new);
    else if (batch.n)
        list_add(&v->layout, "%s (global batch %lld either way)", list_text(&batch),
                 (long long)gb_new);
}

/* How to start a new run instead: another run_dir, unless checkpoint.dir was set apart from it. */
static const char *new_run_hint(const ddpc_trainer *t)
{
    char def[sizeof t->set.run_dir + 16];
    snprintf(def, sizeof def, "%s/checkpoints", t->set.run_dir);
    return strcmp(def, t->set.ckpt_dir) == 0 ? "another run_dir" : "another checkpoint.dir";
}

/* The report lines of what is accepted: layout, length, cosmetic keys. */
static void report_accepted(const ddpc_trainer *t, verdict *v, char *report, size_t cap)
{
    if (v->layout.n)
        say(report, cap, "resume: resharded to this run's layout: %s\n", list_text(&v->layout));
    if (v->length.n) {
        char sched[32] = "constant";
        ddpc__config_text_value(t->config_text, "optim.schedule", sched, sizeof sched);
        bool decays = strcmp(sched, "constant") != 0;
        say(report, cap, "resume: %s changes the run's length%s\n", list_text(&v->length),
            decays ? "; the LR schedule now spans the new length from this step on" : "");
    }
    if (v->cosmetic.n)
        say(report, cap, "resume: accepted changes that do not affect training: %s\n",
            list_text(&v->cosmetic));
}

ddpc_status ddpc__trainer_compare_config(const ddpc_trainer *t, const char *path,
                                         const ddpc_ckpt_state *st, char *report, size_t cap)
{
    report[0] = '\0';
    if (!st->config || !st->config[0]) {
        say(report, cap,
            "resume: %s records no configuration (an older ddpc wrote it): its settings are "
            "unknown and not compared with this run's\n",
            path);
        return DDPC_OK;
    }
    ddpc__config_change *changes = ddpc_calloc(MAX_CHANGES, sizeof *changes); /* 60 KB */
    if (!changes)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory comparing the checkpoint's configuration");
    size_t n;
    ddpc__config_diff(st->config, t->config_text, changes, MAX_CHANGES, &n);
    verdict v = {0};
    classify(t, st, changes, n, &v);
    ddpc_free(changes);
    if (v.training.n && strcmp(t->set.resume, "auto") == 0)
        return ddpc_errorf(DDPC_EINVAL,
                           "resume: checkpoint %s was trained with another configuration: %s; "
                           "nothing was changed: set resume=force to continue it with these "
                           "changes, or use %s to start a new run",
                           path, list_text(&v.training), new_run_hint(t));
    /* resume=force, or a checkpoint named as resume: the user chose to continue it */
    if (v.training.n && strcmp(t->set.resume, "force") == 0)
        say(report, cap, "warning: resume=force continues %s with changes to its training: %s\n",
            path, list_text(&v.training));
    else if (v.training.n)
        say(report, cap,
            "warning: resume continues the named checkpoint %s with changes to its "
            "training: %s\n",
            path, list_text(&v.training));
    report_accepted(t, &v, report, cap);
    return DDPC_OK;
}
