// SPDX-License-Identifier: MIT
/* `ddpc bench step`: times full training steps through the engine on gathered batches (the data
 * path is not benchmarked): the median step of the slowest rank, throughput, achieved GFLOP/s,
 * the reducer's exposed and total communication time, and the activation arena's bytes. Sentence
 * pairs are gathered as the loader gathers them: padded to the batch's longest rows. */
#include "train/trainer_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/device.h>
#include <ddpc/kernels.h>
#include <ddpc/rng.h>
#include <ddpc/timer.h>

#include <stdlib.h>

/* One step over accum_steps copies of `batch`, as the fit loop runs it. */
static ddpc_status bench_step(ddpc_trainer *t, const ddpc_batch *batch)
{
    int64_t accum = t->set.accum_steps;
    ddpc_engine_zero_grad(t->engine);
    for (int64_t k = 0; k < accum; k++) {
        ddpc_model_input in = ddpc__trainer_input_of(batch, 0);
        ddpc_model_output out;
        DDPC_TRY(ddpc_engine_pass(t->engine, &in, k, 1.0f, !t->data.multi && k == accum - 1, &out));
    }
    ddpc_engine_step_info info;
    DDPC_TRY(ddpc_engine_update(t->engine, &info));
    if (!ddpc_engine_deferred(t->engine))
        return DDPC_OK;
    /* A GPU step's losses, unused here, read so that the next step has room (the pending
     * buffers hold a step's passes at least). */
    size_t n;
    double norm;
    return ddpc_engine_read(t->engine, t->pend.outs, &n, &norm);
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of v (n >= 1); sorts v. */
static double median_of(double *v, int64_t n)
{
    qsort(v, (size_t)n, sizeof *v, compare_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double mean_of(const double *v, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += v[i];
    return s / (double)n;
}

/* Gathers rows perm[0..n) of the train split into *batch: images and token streams into the
 * trainer's buffers, sentence pairs into `pairs` (3 arrays of n x pair_len ids: source, decoder
 * input, targets) at the widths of their longest rows. */
static ddpc_status gather(ddpc_trainer *t, const int64_t *perm, int64_t n, int32_t *pairs,
                          int64_t pair_len, ddpc_batch *batch)
{
    const ddpc_dataset *d = t->data.task[0].train;
    if (t->buf.ftargets) { /* a loss on float targets: the images and their targets */
        DDPC_TRY(ddpc_dataset_get_batch(d, perm, n, t->buf.x, NULL, NULL));
        return ddpc_dataset_get_float_targets(d, perm, n, t->buf.ftargets);
    }
    if (!pairs)
        return ddpc_dataset_get_batch(d, perm, n, t->buf.x, t->buf.tokens, t->buf.targets);
    int64_t S, T, cap = n * pair_len;
    DDPC_TRY(ddpc_dataset_pair_lengths(d, perm, n, &S, &T));
    *batch = (ddpc_batch){.n = n,
                          .src_tokens = pairs,
                          .tokens = pairs + cap,
                          .targets = pairs + 2 * cap,
                          .src_len = S,
                          .tgt_len = T};
    return ddpc_dataset_get_pairs(d, perm, n, S, T, pairs, pairs + cap, pairs + 2 * cap);
}

/* Runs warmup + steps training steps; for timed step i: wall time dt[i] and the reducer's exposed
 * and comm seconds (exposed[i], comm[i]; 0 on one rank). Every micro-step of a step reuses one
 * gathered batch, and gathering is not timed: the data path is not benchmarked. */
static ddpc_status bench_loop(ddpc_trainer *t, int64_t warmup, int64_t steps, double *dt,
                              double *exposed, double *comm, uint64_t *bytes, int32_t *pairs,
                              int64_t pair_len, double *flops)
{
    /* parallel.mode dp: one batch for all the replicas, which the engine splits */
    int64_t n = t->data.task[0].batch_size * (t->dist.dp_replicas > 0 ? t->dist.dp_replicas : 1);
    int64_t size = ddpc_dataset_size(t->data.task[0].train);
    for (int64_t i = 0; i < size; i++)
        t->buf.perm[i] = i;
    ddpc_rng order = ddpc_rng_make(t->set.seed, 1000);
    ddpc_rng_shuffle(&order, t->buf.perm, size);
    ddpc_batch batch = {.n = n,
                        .x = t->buf.x,
                        .tokens = t->buf.tokens,
                        .targets = t->buf.ftargets ? NULL : t->buf.targets,
                        .float_targets = t->buf.ftargets};
    for (int64_t i = 0; i < warmup + steps; i++) {
        /* Ranks take different samples, as they do in training. */
        int64_t off = ((i * t->dist.world + t->dist.rank) * n) % (size - n + 1);
        DDPC_TRY(gather(t, t->buf.perm + off, n, pairs, pair_len, &batch));
        ddpc_reducer_stats s0 = {0}, s1 = {0};
        if (t->dist.reducer)
            s0 = ddpc_reducer_stats_of(t->dist.reducer);
        uint64_t b0 = ddpc_pg_ring_bytes(t->dist.pg);
        double t0 = ddpc_time_now();
        DDPC_TRY(bench_step(t, &batch));
        double t1 = ddpc_time_now();
        if (i >= warmup) {
            *bytes += ddpc_pg_ring_bytes(t->dist.pg) - b0;
            /* A pair batch costs what its widths cost, not max_len's. */
            *flops += (double)(n * t->set.accum_steps) *
                      (pairs ? ddpc_model_train_flops_pair(t->model, batch.src_len, batch.tgt_len)
                             : ddpc_model_train_flops_per_sample(t->model));
        }
        if (i + 1 == warmup) { /* the timed steps' phases only */
            ddpc_engine_timing drop;
            (void)ddpc_engine_take_timing(t->engine);
            (void)ddpc_engine_take_device_timing(t->engine, &drop);
        }
        if (t->dist.reducer)
            s1 = ddpc_reducer_stats_of(t->dist.reducer);
        if (i >= warmup) {
            dt[i - warmup] = t1 - t0;
            exposed[i - warmup] = s1.exposed_s - s0.exposed_s;
            comm[i - warmup] = s1.comm_s - s0.comm_s;
        }
    }
    return DDPC_OK;
}

ddpc_status ddpc_trainer_bench(ddpc_trainer *t, int64_t warmup, int64_t steps, ddpc_bench_result *r)
{
    if (steps < 1 || steps > 100000)
        return ddpc_errorf(DDPC_EINVAL, "bench steps must be in [1, 100000], got %lld",
                           (long long)steps);
    /* dt (steps), then exposed and comm (steps each), adjacent so one all-reduce averages both. */
    double *buf = ddpc_malloc(3 * (size_t)steps * sizeof(double));
    /* Sentence pairs: their own batch arrays (the trainer's are sized for one id per sample). */
    int64_t pair_len = t->kind->pair_len ? t->kind->pair_len(t) : 0;
    int64_t pair_ids = 3 * t->buf.max_batch * pair_len;
    int32_t *pairs = pair_ids ? ddpc_malloc((size_t)pair_ids * sizeof(int32_t)) : NULL;
    if (!buf || (pair_ids && !pairs)) {
        ddpc_free(buf);
        ddpc_free(pairs);
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for %lld bench timings and batches",
                           (long long)steps);
    }
    double *dt = buf, *exposed = buf + steps, *comm = buf + 2 * steps;
    uint64_t bytes = 0;
    double flops = 0;
    ddpc_status st =
        bench_loop(t, warmup, steps, dt, exposed, comm, &bytes, pairs, pair_len, &flops);
    ddpc_free(pairs);
    /* A synchronised step lasts as long as its slowest rank; communication is averaged. */
    if (st == DDPC_OK && t->dist.world > 1)
        st = ddpc_pg_all_reduce(t->dist.pg, dt, dt, (size_t)steps, DDPC_DTYPE_F64, DDPC_REDUCE_MAX);
    if (st == DDPC_OK && t->dist.world > 1)
        st = ddpc_pg_all_reduce(t->dist.pg, exposed, exposed, 2 * (size_t)steps, DDPC_DTYPE_F64,
                                DDPC_REDUCE_AVG);
    if (st == DDPC_OK) {
        int64_t replicas = t->dist.dp_replicas > 0 ? t->dist.dp_replicas : 1;
        int64_t n = t->data.task[0].batch_size * replicas * t->set.accum_steps;
        int64_t tok = t->buf.tokens_per_sample;
        double med = median_of(dt, steps), w = (double)t->dist.world;
        int64_t micro = t->data.task[0].batch_size;
        bool ckpt = ddpc_model_config_of(t->model)->activation_checkpointing;
        /* Means before medians: median_of sorts in place. */
        double exposed_mean = mean_of(exposed, steps), comm_mean = mean_of(comm, steps);
        const ddpc_kernel_table *kt = ddpc_model_backend(t->model);
        if (kt->kind != DDPC_DEVICE_CPU) /* after the timing: every timed step's spans are in */
            kt->synchronize();
        *r = (ddpc_bench_result){
            .threads = ddpc_kernels_threads(),
            .rank = t->dist.rank,
            .world = t->dist.world,
            .batch = n,
            .steps = steps,
            .median_step_s = med,
            .samples_per_s = (double)n / med,
            .tokens_per_s = tok > 1 ? (double)(n * tok) / med : 0,
            .global_samples_per_s = w * (double)n / med,
            .global_tokens_per_s = tok > 1 ? w * (double)(n * tok) / med : 0,
            .gflops = flops / (double)steps / med * 1e-9,
            .precision = (int)t->set.precision,
            .activation_checkpointing = ckpt,
            .activation_bytes = ddpc_model_activation_bytes(t->model, micro, ckpt),
            .activation_bytes_no_ckpt = ddpc_model_activation_bytes(t->model, micro, false),
            .num_buckets = t->dist.reducer ? ddpc_reducer_stats_of(t->dist.reducer).num_buckets : 0,
            .exposed_mean_s = exposed_mean,
            .comm_mean_s = comm_mean,
            .exposed_median_s = median_of(exposed, steps),
            .comm_median_s = median_of(comm, steps),
            .zero_stage = ddpc_engine_zero_stage(t->engine),
            .comm_bytes = (double)bytes / (double)steps,
            .num_params = ddpc_model_num_params(t->model),
            .replicas = t->dist.dp_replicas,
        };
        ddpc__trainer_matmul_info(t, r->matmul, sizeof r->matmul);
        snprintf(r->device, sizeof r->device, "%s",
                 ddpc_device_describe(ddpc_model_backend(t->model)));
        /* The timed steps' sums, as means per step. */
        ddpc_engine_timing sum = ddpc_engine_take_timing(t->engine);
        ddpc__timing_add(&r->phases, &sum, 1.0 / (double)steps);
        r->gpu_phases = ddpc_engine_take_device_timing(t->engine, &sum);
        if (r->gpu_phases)
            ddpc__timing_add(&r->gpu, &sum, 1.0 / (double)steps);
    }
    ddpc_free(buf);
    return st;
}
