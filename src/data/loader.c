// SPDX-License-Identifier: MIT
/* The prefetching loader: persistent worker threads claim batch numbers in order and fill the
 * ring slot seq % num_slots; the consumer takes batches strictly in order, so worker timing never
 * changes what a batch holds (see loader_impl.h for the ring invariant). With num_workers = 0 the
 * consumer fills slot 0 itself. Every buffer is allocated at create; epochs allocate nothing. */
#include "data/loader_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/timer.h>
#include <ddpc/trace.h>

#include <stdio.h>
#include <string.h>

ddpc_loader_config ddpc_loader_config_default(void)
{
    return (ddpc_loader_config){.batch_size = 64, .num_workers = 0, .prefetch_factor = 2};
}

static void *worker_main(void *arg)
{
    ddpc_loader *l = arg;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (!l->shutdown && !(l->active && l->next_claim < l->num_batches &&
                                 l->next_claim < l->released + l->num_slots))
            pthread_cond_wait(&l->work_cv, &l->mu);
        if (l->shutdown)
            break;
        int64_t seq = l->next_claim++;
        ddpc__loader_slot *slot = &l->slots[seq % l->num_slots];
        slot->b.epoch = l->epoch;
        l->busy++;
        pthread_mutex_unlock(&l->mu);
        double t0 = ddpc_trace_on() ? ddpc_time_now() : 0.0;
        ddpc__loader_fill(l, slot, seq);
        if (t0 > 0.0)
            ddpc_trace_add(DDPC_TRACE_LOADER, "batch", t0, ddpc_time_now(), -1, NULL, 0);
        pthread_mutex_lock(&l->mu);
        l->busy--;
        slot->seq = seq;
        slot->ready = true;
        pthread_cond_broadcast(&l->ready_cv);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

/* Checks datasets, sampler and config against each other; sets kind and per-sample sizes. */
static ddpc_status check_inputs(ddpc_loader *l, const ddpc_dataset *const *ds, int nds,
                                const ddpc_sampler *s, const ddpc_loader_config *c)
{
    if (!ds || nds < 1 || !s || !c)
        return ddpc_errorf(DDPC_EINVAL, "loader: needs datasets (got %d), a sampler and a config",
                           nds);
    if (c->batch_size < 1 || c->batch_size > (1 << 24))
        return ddpc_errorf(DDPC_EINVAL, "loader: batch_size must be in [1, 2^24], got %lld",
                           (long long)c->batch_size);
    if (c->num_workers < 0 || c->num_workers > DDPC__LOADER_MAX_WORKERS)
        return ddpc_errorf(DDPC_EINVAL, "loader: num_workers must be in [0, %d], got %d",
                           DDPC__LOADER_MAX_WORKERS, c->num_workers);
    if (c->num_workers > 0 && (c->prefetch_factor < 1 || c->prefetch_factor > 64))
        return ddpc_errorf(DDPC_EINVAL, "loader: prefetch_factor must be in [1, 64], got %d",
                           c->prefetch_factor);
    if (c->random_shift < 0 || c->random_shift > 8)
        return ddpc_errorf(DDPC_EINVAL, "loader: random_shift must be in [0, 8], got %d",
                           c->random_shift);
    if (ddpc_sampler_num_sources(s) != nds)
        return ddpc_errorf(DDPC_EINVAL, "loader: %d datasets but the sampler has %d sources", nds,
                           ddpc_sampler_num_sources(s));
    int64_t sb = ddpc_sampler_batch_size(s);
    if (sb > 0 && sb != c->batch_size)
        return ddpc_errorf(DDPC_EINVAL,
                           "loader: batch_size %lld differs from the streaming sampler's %lld",
                           (long long)c->batch_size, (long long)sb);
    int64_t shape0[3], shape[3];
    for (int i = 0; i < nds; i++) {
        if (!ds[i])
            return ddpc_errorf(DDPC_EINVAL, "loader: dataset %d is NULL", i);
        if (ddpc_dataset_size(ds[i]) != ddpc_sampler_source_size(s, i))
            return ddpc_errorf(DDPC_EINVAL,
                               "loader: dataset %d has %lld samples but sampler source %d has %lld",
                               i, (long long)ddpc_dataset_size(ds[i]), i,
                               (long long)ddpc_sampler_source_size(s, i));
        ddpc_dataset_sample_shape(ds[i], i ? shape : shape0);
        bool pairs = ddpc_dataset_kind_of(ds[0]) == DDPC_DATASET_PAIRS;
        /* Pairs are padded per batch: datasets of different widths mix. */
        if (i && (ddpc_dataset_kind_of(ds[i]) != ddpc_dataset_kind_of(ds[0]) ||
                  ddpc_dataset_target_width(ds[i]) != ddpc_dataset_target_width(ds[0]) ||
                  (!pairs && memcmp(shape, shape0, sizeof shape) != 0)))
            return ddpc_errorf(DDPC_EINVAL,
                               "loader: dataset %d differs from dataset 0 in kind or sample shape",
                               i);
        const int64_t *sh = i ? shape : shape0;
        if (pairs) {
            l->s_per = sh[0] > l->s_per ? sh[0] : l->s_per;
            l->t_per = sh[1] > l->t_per ? sh[1] : l->t_per;
        }
    }
    l->kind = ddpc_dataset_kind_of(ds[0]);
    l->x_per = l->kind == DDPC_DATASET_IMAGES ? shape0[0] * shape0[1] * shape0[2] : 0;
    l->y_per = ddpc_dataset_target_width(ds[0]);
    memcpy(l->shape, shape0, sizeof l->shape);
    if (l->kind == DDPC_DATASET_TOKENS)
        l->t_per = shape0[0];
    if (l->x_per > (INT64_MAX / 8) / c->batch_size || l->t_per > (INT64_MAX / 8) / c->batch_size ||
        l->s_per > (INT64_MAX / 8) / c->batch_size)
        return ddpc_errorf(DDPC_EINVAL, "loader: batch_size %lld is too large for the samples",
                           (long long)c->batch_size);
    return DDPC_OK;
}

/* Allocates the ring's buffers (the slot array is zeroed, so unset buffers stay NULL). */
static ddpc_status alloc_slots(ddpc_loader *l)
{
    int64_t bs = l->cfg.batch_size;
    l->num_slots = l->cfg.num_workers > 0 ? l->cfg.num_workers * l->cfg.prefetch_factor + 1 : 1;
    l->slots = ddpc_calloc((size_t)l->num_slots, sizeof *l->slots);
    if (!l->slots)
        return ddpc_errorf(DDPC_ENOMEM, "loader: out of memory for %d batch slots", l->num_slots);
    for (int i = 0; i < l->num_slots; i++) {
        ddpc__loader_slot *s = &l->slots[i];
        s->seq = -1;
        s->idx = ddpc_malloc((size_t)bs * sizeof *s->idx);
        s->local = ddpc_malloc((size_t)bs * sizeof *s->local);
        if (l->kind == DDPC_DATASET_IMAGES) {
            s->x = ddpc_malloc((size_t)(bs * l->x_per) * sizeof *s->x);
            if (l->y_per > 0)
                s->ftargets = ddpc_malloc((size_t)(bs * l->y_per) * sizeof *s->ftargets);
            else
                s->targets = ddpc_malloc((size_t)bs * sizeof *s->targets);
            if (l->cfg.random_shift > 0 &&
                !(s->scratch = ddpc_malloc((size_t)(l->shape[1] * l->shape[2]) * sizeof(float))))
                return ddpc_errorf(DDPC_ENOMEM, "loader: out of memory for augmentation");
        } else {
            s->tokens = ddpc_malloc((size_t)(bs * l->t_per) * sizeof *s->tokens);
            s->targets = ddpc_malloc((size_t)(bs * l->t_per) * sizeof *s->targets);
        }
        if (l->kind == DDPC_DATASET_PAIRS)
            s->src = ddpc_malloc((size_t)(bs * l->s_per) * sizeof *s->src);
        if (!s->idx || !s->local || (!s->targets && !s->ftargets) || (!s->x && !s->tokens) ||
            (l->kind == DDPC_DATASET_PAIRS && !s->src))
            return ddpc_errorf(DDPC_ENOMEM, "loader: out of memory for %d batches of %lld samples",
                               l->num_slots, (long long)bs);
        s->b = (ddpc_batch){.idx = s->idx,
                            .x = s->x,
                            .tokens = s->tokens,
                            .targets = s->targets,
                            .float_targets = s->ftargets,
                            .src_tokens = s->src,
                            .tgt_len = l->kind == DDPC_DATASET_TOKENS ? l->t_per : 0};
    }
    return DDPC_OK;
}

static ddpc_status start_workers(ddpc_loader *l)
{
    if (l->cfg.num_workers == 0)
        return DDPC_OK;
    l->threads = ddpc_calloc((size_t)l->cfg.num_workers, sizeof *l->threads);
    if (!l->threads)
        return ddpc_errorf(DDPC_ENOMEM, "loader: out of memory for %d workers", l->cfg.num_workers);
    for (; l->num_threads < l->cfg.num_workers; l->num_threads++)
        if (pthread_create(&l->threads[l->num_threads], NULL, worker_main, l) != 0)
            return ddpc_errorf(DDPC_EINTERNAL, "loader: cannot start worker thread %d of %d",
                               l->num_threads, l->cfg.num_workers);
    return DDPC_OK;
}

ddpc_status ddpc_loader_create(const ddpc_dataset *const *datasets, int num_datasets,
                               ddpc_sampler *sampler, const ddpc_loader_config *c,
                               ddpc_loader **out)
{
    *out = NULL;
    ddpc_loader *l = ddpc_calloc(1, sizeof *l);
    if (!l)
        return ddpc_errorf(DDPC_ENOMEM, "loader: out of memory");
    ddpc_status st = check_inputs(l, datasets, num_datasets, sampler, c);
    if (st != DDPC_OK) {
        ddpc_free(l);
        return st;
    }
    l->cfg = *c;
    l->sampler = sampler;
    l->num_datasets = num_datasets;
    int64_t n = ddpc_sampler_len(sampler), bs = c->batch_size;
    l->num_batches = c->drop_last ? n / bs : (n + bs - 1) / bs;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->work_cv, NULL);
    pthread_cond_init(&l->ready_cv, NULL);
    l->datasets = ddpc_malloc((size_t)num_datasets * sizeof *l->datasets);
    if (!l->datasets)
        st = ddpc_errorf(DDPC_ENOMEM, "loader: out of memory for %d datasets", num_datasets);
    else
        memcpy(l->datasets, datasets, (size_t)num_datasets * sizeof *l->datasets);
    if (st == DDPC_OK)
        st = alloc_slots(l);
    if (st == DDPC_OK)
        st = start_workers(l);
    if (st != DDPC_OK) {
        ddpc_loader_destroy(l);
        return st;
    }
    *out = l;
    return DDPC_OK;
}

void ddpc_loader_destroy(ddpc_loader *l)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->mu);
    l->shutdown = true;
    pthread_cond_broadcast(&l->work_cv);
    pthread_mutex_unlock(&l->mu);
    for (int i = 0; i < l->num_threads; i++)
        pthread_join(l->threads[i], NULL);
    for (int i = 0; l->slots && i < l->num_slots; i++) {
        ddpc__loader_slot *s = &l->slots[i];
        ddpc_free(s->idx);
        ddpc_free(s->local);
        ddpc_free(s->x);
        ddpc_free(s->scratch);
        ddpc_free(s->tokens);
        ddpc_free(s->targets);
        ddpc_free(s->ftargets);
        ddpc_free(s->src);
    }
    ddpc_free(l->slots);
    ddpc_free(l->threads);
    ddpc_free(l->datasets);
    pthread_cond_destroy(&l->ready_cv);
    pthread_cond_destroy(&l->work_cv);
    pthread_mutex_destroy(&l->mu);
    ddpc_free(l);
}

ddpc_status ddpc_loader_start_epoch(ddpc_loader *l, int64_t epoch)
{
    if (epoch < 0)
        return ddpc_errorf(DDPC_EINVAL, "loader: epoch must be >= 0, got %lld", (long long)epoch);
    pthread_mutex_lock(&l->mu);
    l->active = false; /* no new claims; wait for the batches being filled */
    while (l->busy > 0)
        pthread_cond_wait(&l->ready_cv, &l->mu);
    ddpc_sampler_set_epoch(l->sampler, epoch);
    for (int i = 0; i < l->num_slots; i++) {
        l->slots[i].seq = -1;
        l->slots[i].ready = false;
    }
    l->epoch = epoch;
    l->next_claim = l->released = 0;
    l->started = l->active = true;
    pthread_cond_broadcast(&l->work_cv);
    pthread_mutex_unlock(&l->mu);
    l->delivered = 0;
    l->wait_total = 0;
    l->failed = DDPC_OK;
    l->fail_msg[0] = '\0';
    return DDPC_OK;
}

/* Releases the batch the caller held and returns the slot of batch `seq` once it is loaded. */
static ddpc__loader_slot *take(ddpc_loader *l, int64_t seq)
{
    ddpc__loader_slot *slot = &l->slots[seq % l->num_slots];
    pthread_mutex_lock(&l->mu);
    l->released = seq; /* frees exactly one slot: one worker may claim one more batch */
    if (l->num_threads > 0) {
        if (!(slot->ready && slot->seq == seq))
            pthread_cond_signal(&l->work_cv);
        while (!(slot->ready && slot->seq == seq))
            pthread_cond_wait(&l->ready_cv, &l->mu);
    } else {
        slot->b.epoch = l->epoch;
    }
    pthread_mutex_unlock(&l->mu);
    if (l->num_threads > 0)
        pthread_cond_signal(&l->work_cv); /* after unlocking, so the worker need not wait for mu */
    else
        ddpc__loader_fill(l, slot, seq);
    return slot;
}

ddpc_status ddpc_loader_next(ddpc_loader *l, const ddpc_batch **batch)
{
    *batch = NULL;
    if (!l->started)
        return ddpc_errorf(DDPC_EINVAL, "loader: next called before start_epoch");
    if (l->failed != DDPC_OK)
        return ddpc_errorf(l->failed, "%s", l->fail_msg);
    if (l->delivered == l->num_batches)
        return DDPC_OK;
    double t0 = ddpc_time_now();
    ddpc__loader_slot *slot = take(l, l->delivered);
    if (slot->status != DDPC_OK) {
        l->failed = slot->status;
        snprintf(l->fail_msg, sizeof l->fail_msg, "%s", slot->msg);
        return ddpc_errorf(l->failed, "%s", l->fail_msg);
    }
    l->delivered++;
    slot->b.wait_s = ddpc_time_now() - t0;
    l->wait_total += slot->b.wait_s;
    *batch = &slot->b;
    return DDPC_OK;
}

int64_t ddpc_loader_len(const ddpc_loader *l)
{
    return l->num_batches;
}

int64_t ddpc_loader_batch_size(const ddpc_loader *l)
{
    return l->cfg.batch_size;
}

double ddpc_loader_epoch_wait(const ddpc_loader *l)
{
    return l->wait_total;
}
