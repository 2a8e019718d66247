// SPDX-License-Identifier: MIT
/* Gathers one batch for the loader: the sampler's indices of the batch, split into runs of
 * consecutive rows from one dataset, each copied by one ddpc_dataset_get_batch call (pairs: by
 * ddpc_dataset_get_pairs, at the widths of the batch's longest rows).
 * Invariant: reads only immutable state (datasets, the sampler's list for the current epoch,
 * config), so any number of workers may fill different slots at once. */
#include "data/loader_impl.h"

#include <stdio.h>
#include <string.h>

/* Records the calling thread's last error in the slot (the message is thread-local). */
static void fail(ddpc__loader_slot *slot, ddpc_status st)
{
    slot->status = st;
    snprintf(slot->msg, sizeof slot->msg, "%s", ddpc_last_error());
}

/* Copies rows [a, e) of the slot, all from dataset d, into the slot's buffers. Pairs go in at
 * the batch's widths (set before the first run is copied), rows packed (n, src_len). */
static ddpc_status copy_run(const ddpc_loader *l, ddpc__loader_slot *slot, int d, int64_t a,
                            int64_t e)
{
    if (l->kind == DDPC_DATASET_PAIRS) {
        int64_t S = slot->b.src_len, T = slot->b.tgt_len;
        return ddpc_dataset_get_pairs(l->datasets[d], slot->local + a, e - a, S, T,
                                      slot->src + a * S, slot->tokens + a * T,
                                      slot->targets + a * T);
    }
    float *x = l->kind == DDPC_DATASET_IMAGES ? slot->x + a * l->x_per : NULL;
    int32_t *tok = slot->tokens ? slot->tokens + a * l->t_per : NULL;
    if (l->y_per > 0) {
        DDPC_TRY(ddpc_dataset_get_batch(l->datasets[d], slot->local + a, e - a, x, NULL, NULL));
        return ddpc_dataset_get_float_targets(l->datasets[d], slot->local + a, e - a,
                                              slot->ftargets + a * l->y_per);
    }
    int32_t *tgt = slot->targets + a * (l->kind == DDPC_DATASET_TOKENS ? l->t_per : 1);
    return ddpc_dataset_get_batch(l->datasets[d], slot->local + a, e - a, x, tok, tgt);
}

/* Pairs: the batch's widths = its longest source and target among rows [0, n). */
static ddpc_status pair_widths(const ddpc_loader *l, ddpc__loader_slot *slot, int64_t n)
{
    int64_t S = 0, T = 0;
    for (int64_t a = 0; a < n; a++) {
        int d = ddpc_sampler_source_of(l->sampler, slot->idx[a], &slot->local[a]);
        int64_t ls, lt;
        if (d < 0)
            return ddpc_errorf(DDPC_EINTERNAL, "loader: sampler index %lld is outside the datasets",
                               (long long)slot->idx[a]);
        DDPC_TRY(ddpc_dataset_pair_lengths(l->datasets[d], &slot->local[a], 1, &ls, &lt));
        S = ls > S ? ls : S;
        T = lt > T ? lt : T;
    }
    slot->b.src_len = S;
    slot->b.tgt_len = T;
    return DDPC_OK;
}

void ddpc__loader_fill(const ddpc_loader *l, ddpc__loader_slot *slot, int64_t seq)
{
    int64_t bs = l->cfg.batch_size, total = ddpc_sampler_len(l->sampler);
    int64_t start = seq * bs, n = total - start < bs ? total - start : bs;
    const int64_t *src = ddpc_sampler_indices(l->sampler) + start;
    memcpy(slot->idx, src, (size_t)n * sizeof *src);
    slot->status = DDPC_OK;
    slot->msg[0] = '\0';
    slot->b.n = n;
    slot->b.index = seq;
    slot->b.source = -1;
    if (l->kind == DDPC_DATASET_PAIRS) {
        ddpc_status st = pair_widths(l, slot, n);
        if (st != DDPC_OK) {
            fail(slot, st);
            return;
        }
    }
    int64_t a = 0;
    while (a < n) {
        int d = ddpc_sampler_source_of(l->sampler, slot->idx[a], &slot->local[a]);
        int64_t e = a + 1;
        while (e < n && ddpc_sampler_source_of(l->sampler, slot->idx[e], &slot->local[e]) == d)
            e++;
        ddpc_status st = d < 0 ? ddpc_errorf(DDPC_EINTERNAL,
                                             "loader: sampler index %lld is outside the datasets",
                                             (long long)slot->idx[a])
                               : copy_run(l, slot, d, a, e);
        if (st != DDPC_OK) {
            fail(slot, st);
            return;
        }
        slot->b.source = a == 0 && e == n ? d : -1;
        a = e;
    }
    if (l->kind == DDPC_DATASET_IMAGES && (l->cfg.hflip || l->cfg.random_shift > 0))
        ddpc__augment_images(slot->x, slot->idx, n, l->shape[0], l->shape[1], l->shape[2], &l->cfg,
                             ddpc_sampler_epoch(l->sampler), slot->scratch);
}
