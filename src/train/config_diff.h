// SPDX-License-Identifier: MIT
/* Differences between two effective configurations (ddpc_config_dump text: "dotted.key: value"
 * lines), each key classified by what changing it does to a run that resumes a checkpoint.
 * Invariant: the classification is one table (config_diff.c); a key no rule of it names counts
 * as changing the training, so a key added later is refused on resume until it is classified. */
#ifndef DDPC_TRAIN_CONFIG_DIFF_H
#define DDPC_TRAIN_CONFIG_DIFF_H

#include <ddpc/status.h>

#include <stdbool.h>
#include <stddef.h>

typedef enum {
    DDPC__CHANGE_TRAINING, /* what is trained or how: model, optimizer, data, seed, precision */
    DDPC__CHANGE_BATCH,    /* a factor of the global batch: judged by the global batch itself */
    DDPC__CHANGE_RESHARD,  /* how the same training is laid out: ZeRO stage, buckets, device */
    DDPC__CHANGE_LENGTH,   /* how long the run is: max_steps, epochs */
    DDPC__CHANGE_COSMETIC, /* logging, cadences, paths, threads, workers: nothing trained */
} ddpc__change_kind;

#define DDPC__CHANGE_VALUE 48 /* bytes kept of a value; longer ones end in "..." */

typedef struct {
    char key[128];
    char old_value[DDPC__CHANGE_VALUE]; /* "(none)" when only the new text has the key */
    char new_value[DDPC__CHANGE_VALUE]; /* "(none)" when only the old text has it */
    ddpc__change_kind kind;
    bool one_sided; /* only one of the two runs read the key (another version, another device) */
} ddpc__config_change;

/* The kind of a dotted key ("optim.lr", "tasks.1.batch_size") by the table's first rule that
 * matches it; DDPC__CHANGE_TRAINING when none does. */
ddpc__change_kind ddpc__config_key_kind(const char *key);

/* The keys whose values differ between old_text and new_text — in new_text's order, then the
 * keys only old_text has — into out (at most cap; *n gets the total). Two values differ unless
 * their text is equal or both are numbers of equal value ("0.01" and "1e-2"). Never fails. */
void ddpc__config_diff(const char *old_text, const char *new_text, ddpc__config_change *out,
                       size_t cap, size_t *n);

/* The value of `key` in a dump text into buf (cap), unquoted as written; false when absent. */
bool ddpc__config_text_value(const char *text, const char *key, char *buf, size_t cap);

#endif
