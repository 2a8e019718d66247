// SPDX-License-Identifier: MIT
/* The per-step phase breakdown (log.phases) and the per-rank records of metrics.jsonl. Each rank
 * times its own steps with a handful of clock reads; rank 0's window means go into the progress
 * record, and one small all-reduce per logging window (each rank fills its own slots of a zeroed
 * vector) brings every rank's step time and memory to rank 0. Nothing here allocates after
 * ddpc__trainer_phases_start. */
#include "train/trainer_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/sysinfo.h>

#include <stdio.h>
#include <string.h>

ddpc_status ddpc__trainer_phases_start(ddpc_trainer *t, double start)
{
    ddpc__phases *p = &t->ph;
    if (!p->ranks) {
        p->ranks = ddpc_calloc(3 * (size_t)t->dist.world, sizeof *p->ranks);
        if (!p->ranks)
            return ddpc_errorf(DDPC_ENOMEM, "out of memory for the per-rank metrics of %d ranks",
                               t->dist.world);
    }
    p->mark = start;
    p->busy_mark = ddpc_pg_busy_seconds(t->dist.pg);
    return DDPC_OK;
}

void ddpc__trainer_phases_step(ddpc_trainer *t, double end)
{
    ddpc__phases *p = &t->ph;
    p->steps++;
    if (!t->set.phases)
        return;
    p->step += end - p->mark;
    p->mark = end;
    ddpc_engine_timing e = ddpc_engine_take_timing(t->engine);
    ddpc__timing_add(&p->eng, &e, 1.0);
    if (ddpc_engine_take_device_timing(t->engine, &e)) {
        p->gpu_on = true;
        ddpc__timing_add(&p->dev, &e, 1.0);
    }
}

void ddpc__timing_add(ddpc_engine_timing *acc, const ddpc_engine_timing *x, double scale)
{
    acc->forward_s += scale * x->forward_s;
    acc->backward_s += scale * x->backward_s;
    acc->comm_wait_s += scale * x->comm_wait_s;
    acc->optimizer_s += scale * x->optimizer_s;
    acc->replicate_s += scale * x->replicate_s;
    acc->scatter_s += scale * x->scatter_s;
    acc->replica_wait_s += scale * x->replica_wait_s;
    acc->reduce_s += scale * x->reduce_s;
}

/* On a GPU, the phases as the device ran them (docs/observability.md): spans are counted in the
 * window in which the host finds them finished, a few steps after they were queued, so a
 * window's GPU phases can exceed its wall time by that lag; other_s, the rest of the wall time
 * (the device idle, batch copies, evaluation), is then 0. */
static void gpu_fields(ddpc_trainer *t, double n)
{
    const ddpc__phases *p = &t->ph;
    const ddpc_engine_timing *d = &p->dev;
    double busy = d->forward_s + d->backward_s + d->comm_wait_s + d->optimizer_s;
    ddpc_metrics *m = t->metrics;
    ddpc_metrics_f64(m, "gpu_phase/forward_s", d->forward_s / n, -1);
    ddpc_metrics_f64(m, "gpu_phase/backward_s", d->backward_s / n, -1);
    ddpc_metrics_f64(m, "gpu_phase/comm_exposed_s", d->comm_wait_s / n, -1);
    ddpc_metrics_f64(m, "gpu_phase/optimizer_s", d->optimizer_s / n, -1);
    ddpc_metrics_f64(m, "gpu_phase/other_s", (p->step > busy ? p->step - busy : 0.0) / n, -1);
}

void ddpc__trainer_phases_fields(ddpc_trainer *t)
{
    ddpc__phases *p = &t->ph;
    if (!t->set.phases || p->steps == 0)
        return;
    double n = (double)p->steps, busy = ddpc_pg_busy_seconds(t->dist.pg);
    const ddpc_engine_timing *e = &p->eng;
    double dp = e->replicate_s + e->scatter_s + e->replica_wait_s + e->reduce_s;
    double other = p->step - p->data - e->forward_s - e->backward_s - e->comm_wait_s -
                   e->optimizer_s - p->ckpt - dp;
    ddpc_metrics *m = t->metrics;
    ddpc_metrics_f64(m, "phase/data_s", p->data / n, -1);
    ddpc_metrics_f64(m, "phase/forward_s", e->forward_s / n, -1);
    ddpc_metrics_f64(m, "phase/backward_s", e->backward_s / n, -1);
    ddpc_metrics_f64(m, "phase/comm_exposed_s", e->comm_wait_s / n, -1);
    ddpc_metrics_f64(m, "phase/optimizer_s", e->optimizer_s / n, -1);
    ddpc_metrics_f64(m, "phase/checkpoint_s", p->ckpt / n, -1);
    if (t->dist.dp_replicas > 0) { /* DataParallel's serial parts and its wait for the replicas */
        ddpc_metrics_f64(m, "phase/dp_replicate_s", e->replicate_s / n, -1);
        ddpc_metrics_f64(m, "phase/dp_scatter_s", e->scatter_s / n, -1);
        ddpc_metrics_f64(m, "phase/dp_wait_s", e->replica_wait_s / n, -1);
        ddpc_metrics_f64(m, "phase/dp_reduce_s", e->reduce_s / n, -1);
    }
    ddpc_metrics_f64(m, "phase/other_s", other / n, -1);
    if (p->gpu_on)
        gpu_fields(t, n);
    ddpc_metrics_f64(m, "step_s", p->step / n, -1);
    ddpc_metrics_f64(m, "comm_s", (busy - p->busy_mark) / n, -1);
}

/* One record per 60 ranks of "<prefix><k>" = v[k * stride], at `step`. */
static ddpc_status rank_record(ddpc_trainer *t, int64_t step, const char *const *prefix,
                               size_t n_prefix, bool integer)
{
    const double *v = t->ph.ranks;
    size_t per = 60 / n_prefix;
    for (size_t k0 = 0; k0 < (size_t)t->dist.world; k0 += per) {
        ddpc_metrics_begin(t->metrics, step);
        for (size_t i = 0; i < n_prefix; i++)
            for (size_t k = k0; k < k0 + per && k < (size_t)t->dist.world; k++) {
                char key[64];
                snprintf(key, sizeof key, "%s%zu", prefix[i], k);
                double x = v[k * n_prefix + i];
                if (integer)
                    ddpc_metrics_i64(t->metrics, key, (int64_t)x);
                else
                    ddpc_metrics_f64(t->metrics, key, x, -1);
            }
        DDPC_TRY(ddpc_metrics_end(t->metrics));
    }
    return DDPC_OK;
}

ddpc_status ddpc__trainer_phases_ranks(ddpc_trainer *t, int64_t step)
{
    ddpc__phases *p = &t->ph;
    if (t->set.phases && p->steps > 0) {
        memset(p->ranks, 0, (size_t)t->dist.world * sizeof *p->ranks);
        p->ranks[t->dist.rank] = p->step / (double)p->steps;
        DDPC_TRY(ddpc__trainer_sum(t, p->ranks, (size_t)t->dist.world));
        static const char *const prefix[] = {"rank_step_s/"};
        DDPC_TRY(rank_record(t, step, prefix, 1, false));
    }
    double mark = p->mark;
    double *ranks = p->ranks;
    *p =
        (ddpc__phases){.mark = mark, .busy_mark = ddpc_pg_busy_seconds(t->dist.pg), .ranks = ranks};
    return DDPC_OK;
}

ddpc_status ddpc__trainer_rank_memory(ddpc_trainer *t, int64_t step)
{
    uint64_t rss = 0, rss_peak = 0;
    DDPC_TRY(ddpc_sysinfo_process_memory(&rss, &rss_peak));
    double *v = t->ph.ranks;
    memset(v, 0, 3 * (size_t)t->dist.world * sizeof *v);
    v[3 * t->dist.rank] = (double)ddpc_alloc_peak_bytes();
    v[3 * t->dist.rank + 1] = (double)rss;
    v[3 * t->dist.rank + 2] = (double)rss_peak;
    DDPC_TRY(ddpc__trainer_sum(t, v, 3 * (size_t)t->dist.world));
    static const char *const prefix[] = {"mem/peak_alloc_bytes/", "mem/rss_bytes/",
                                         "mem/rss_peak_bytes/"};
    return rank_record(t, step, prefix, 3, true);
}
