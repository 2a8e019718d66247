// SPDX-License-Identifier: MIT
/* DataParallel replicas (dp_impl.h): torch.nn.DataParallel's replicate / scatter / parallel_apply /
 * gather / reduce_add, with one OpenMP thread per replica in place of one GPU per replica. As in
 * torch, the caller's thread does the serial parts (replicate, scatter, gather, reduce) and only
 * forward and backward run in parallel. Invariant: replica k's input buffers hold at least the
 * elements of its share of the largest pass seen, so a step after the first allocates nothing. */
#include "parallel/dp_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/engine.h>
#include <ddpc/kernels.h>
#include <ddpc/timer.h>
#include <ddpc/trace.h>

#include <omp.h>
#include <stdio.h>
#include <string.h>

/* One input array of a replica: its rows of the batch, `cap` elements allocated. */
typedef struct {
    void *p;
    int64_t cap;
} rows_buf;

typedef struct {
    ddpc_model *model;                /* replica 0: the caller's (borrowed); the others owned */
    rows_buf x, tokens, targets, src; /* (rows, sizes.x) floats, the others int32: this replica's
                                         rows of the pass (sizes: ddpc_model_sample_sizes) */
    ddpc_model_input in;
    ddpc_model_output out;
    float dloss;
    ddpc_status st;
    char err[512]; /* the replica thread's ddpc_last_error() when st != DDPC_OK */
    double forward_s, backward_s;
    double t0, t1, t2; /* this pass's forward [t0, t1] and backward [t1, t2] (ddpc_time_now) */
} replica;

struct ddpc__dp {
    int n;
    replica *r; /* (n) */
    ddpc__dp_timing spent;
};

static void free_buffers(replica *r)
{
    rows_buf *b[] = {&r->x, &r->tokens, &r->targets, &r->src};
    for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) {
        ddpc_free(b[i]->p);
        *b[i] = (rows_buf){0};
    }
}

ddpc_status ddpc__dp_create(ddpc_model *m, int replicas, ddpc__dp **out)
{
    *out = NULL;
    if (replicas < 1 || replicas > DDPC_ENGINE_MAX_REPLICAS)
        return ddpc_errorf(DDPC_EINVAL, "parallel.replicas must be in [1, %d], got %d",
                           DDPC_ENGINE_MAX_REPLICAS, replicas);
    ddpc__dp *dp = ddpc_calloc(1, sizeof *dp);
    replica *r = ddpc_calloc((size_t)replicas, sizeof *r);
    if (!dp || !r) {
        ddpc_free(dp);
        ddpc_free(r);
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for %d DataParallel replicas", replicas);
    }
    dp->n = replicas;
    dp->r = r;
    r[0].model = m;
    for (int k = 1; k < replicas; k++) {
        ddpc_status st = ddpc_model_create(&r[k].model, ddpc_model_config_of(m));
        if (st != DDPC_OK) {
            ddpc__dp_destroy(dp);
            return st;
        }
    }
    *out = dp;
    ddpc__dp_replicate(dp);
    return DDPC_OK;
}

void ddpc__dp_destroy(ddpc__dp *dp)
{
    if (!dp)
        return;
    for (int k = 0; k < dp->n; k++) {
        free_buffers(&dp->r[k]);
        if (k > 0)
            ddpc_model_destroy(dp->r[k].model);
    }
    ddpc_free(dp->r);
    ddpc_free(dp);
}

int ddpc__dp_replicas(const ddpc__dp *dp)
{
    return dp->n;
}

int ddpc__dp_kernel_threads(const ddpc__dp *dp)
{
    int per = ddpc_kernels_threads() / dp->n;
    return per > 1 ? per : 1;
}

void ddpc__dp_zero_grad(ddpc__dp *dp)
{
    for (int k = 0; k < dp->n; k++)
        ddpc_model_zero_grad(dp->r[k].model);
}

void ddpc__dp_replicate(ddpc__dp *dp)
{
    double t0 = ddpc_time_now();
    ddpc_model *m = dp->r[0].model;
    size_t bytes = ddpc_model_num_params(m) * sizeof(float);
    size_t buf_bytes = ddpc_model_num_buffer_floats(m) * sizeof(float);
    for (int k = 1; k < dp->n; k++) {
        memcpy(ddpc_model_params(dp->r[k].model), ddpc_model_params(m), bytes);
        /* BatchNorm's running statistics too, as torch's replicate does; replica 0's own
         * updates are the ones kept (DDP's broadcast_buffers keeps rank 0's). */
        if (buf_bytes)
            memcpy(ddpc_model_buffer_data(dp->r[k].model), ddpc_model_buffer_data(m), buf_bytes);
    }
    double t1 = ddpc_time_now();
    dp->spent.replicate_s += t1 - t0;
    ddpc_trace_add(DDPC_TRACE_COMPUTE, "replicate", t0, t1, -1, NULL, 0);
}

/* Copies the first `width` of the `stride` elements (of `size` bytes) of rows k, k + n, ... (`rows`
 * of them) of src into b, growing it first when a pass is larger than any before; *out = b's
 * data, or NULL without src. */
static ddpc_status take_rows(rows_buf *b, const void *src, int64_t stride, int64_t width,
                             size_t size, int k, int n, int64_t rows, const void **out)
{
    *out = NULL;
    if (!src || width == 0)
        return DDPC_OK;
    int64_t need = rows * width;
    if (need > b->cap) {
        void *p = ddpc_malloc((size_t)need * size);
        if (!p)
            return ddpc_errorf(DDPC_ENOMEM, "out of memory for a DataParallel replica's %lld rows",
                               (long long)rows);
        ddpc_free(b->p);
        *b = (rows_buf){p, need};
    }
    size_t row = (size_t)width * size, from = (size_t)stride * size;
    for (int64_t i = 0; i < rows; i++)
        memcpy((char *)b->p + (size_t)i * row, (const char *)src + (size_t)(k + i * n) * from, row);
    *out = b->p;
    return DDPC_OK;
}

/* The longest of rows k, k + n, ... (`rows` of `width` tokens, padded with 0) up to its last
 * token that is not padding, at least 1. */
static int64_t unpadded_width(const int32_t *tok, int64_t width, int k, int n, int64_t rows)
{
    int64_t w = 1;
    for (int64_t i = 0; i < rows; i++) {
        const int32_t *row = tok + (k + i * n) * width;
        int64_t j = width;
        while (j > w && row[j - 1] == 0)
            j--;
        w = j > w ? j : w;
    }
    return w;
}

/* Replica k's input: rows k, k + N, ... of in, copied (torch's scatter copies each chunk to its
 * device); with one replica, in itself. */
static ddpc_status scatter(ddpc__dp *dp, const ddpc_model_input *in, const uint64_t *streams,
                           float dloss)
{
    ddpc_sample_sizes s = ddpc_model_sample_sizes(dp->r[0].model, in);
    int n = dp->n;
    for (int k = 0; k < n; k++) {
        replica *r = &dp->r[k];
        int64_t rows = in->n > k ? (in->n - k + n - 1) / n : 0;
        r->st = DDPC_OK;
        r->in = *in;
        r->in.n = rows;
        r->in.rng_stream = streams[k];
        r->out = (ddpc_model_output){0};
        /* A share of rows/(n/N) of the whole batch: 1 for equal shares, exactly. */
        r->dloss = (float)((double)dloss * (double)n * (double)rows / (double)in->n);
        if (n == 1 || rows == 0)
            continue;
        /* Pairs (seq2seq) come padded to the batch's longest row: a replica's rows are cut to
         * their own longest, the widths the rank taking them would have been given. */
        int64_t tw = s.tokens, sw = s.src_tokens;
        if (sw > 0) {
            tw = unpadded_width(in->targets, s.targets, k, n, rows);
            sw = unpadded_width(in->src_tokens, s.src_tokens, k, n, rows);
            r->in.tgt_len = tw, r->in.src_len = sw;
        }
        const void *p;
        DDPC_TRY(take_rows(&r->x, in->x, s.x, s.x, sizeof(float), k, n, rows, &p));
        r->in.x = p;
        DDPC_TRY(take_rows(&r->tokens, in->tokens, s.tokens, tw, sizeof(int32_t), k, n, rows, &p));
        r->in.tokens = p;
        DDPC_TRY(take_rows(&r->targets, in->targets, s.targets, sw > 0 ? tw : s.targets,
                           sizeof(int32_t), k, n, rows, &p));
        r->in.targets = p;
        DDPC_TRY(
            take_rows(&r->src, in->src_tokens, s.src_tokens, sw, sizeof(int32_t), k, n, rows, &p));
        r->in.src_tokens = p;
    }
    return DDPC_OK;
}

/* Forward and backward of one replica, on its thread; records its error message there, since
 * ddpc_last_error() is per thread. */
static void run_replica(replica *r)
{
    r->forward_s = r->backward_s = 0;
    if (r->in.n == 0)
        return;
    r->t0 = ddpc_time_now();
    r->st = ddpc_model_forward(r->model, &r->in, true, &r->out);
    r->t1 = ddpc_time_now();
    if (r->st == DDPC_OK)
        r->st = ddpc_model_backward(r->model, r->dloss);
    r->t2 = ddpc_time_now();
    r->forward_s = r->t1 - r->t0;
    r->backward_s = r->t2 - r->t1;
    if (r->st != DDPC_OK)
        snprintf(r->err, sizeof r->err, "%s", ddpc_last_error());
}

/* parallel_apply: one thread per replica, each running its kernels on its share of the caller's
 * threads. OpenBLAS's OpenMP build runs single-threaded inside a parallel region, so only our own
 * kernel loops use more than one thread per replica. */
static void parallel_apply(ddpc__dp *dp)
{
    int n = dp->n, per = ddpc__dp_kernel_threads(dp);
    int levels = omp_get_max_active_levels();
    if (per > 1 && levels < 2)
        omp_set_max_active_levels(2);
#pragma omp parallel num_threads(n)
    {
        int team = omp_get_num_threads(); /* fewer than n only if OpenMP is told to limit it */
        omp_set_num_threads(per);
        for (int k = omp_get_thread_num(); k < n; k += team)
            run_replica(&dp->r[k]);
    }
    if (per > 1 && levels < 2)
        omp_set_max_active_levels(levels);
}

/* A recorded trace gets the pass's parts: scatter [t0, t1] and the parallel region [t1, t2] on the
 * compute thread, each replica's forward and backward inside it on its own track. */
static void trace_pass(const ddpc__dp *dp, double t0, double t1, double t2)
{
    if (!ddpc_trace_on())
        return;
    ddpc_trace_add(DDPC_TRACE_COMPUTE, "scatter", t0, t1, -1, NULL, 0);
    ddpc_trace_add(DDPC_TRACE_COMPUTE, "parallel apply", t1, t2, -1, NULL, 0);
    for (int k = 0; k < dp->n; k++) {
        const replica *r = &dp->r[k];
        if (r->in.n == 0)
            continue;
        ddpc_trace_add_replica(k, "forward", r->t0, r->t1);
        ddpc_trace_add_replica(k, "backward", r->t1, r->t2);
    }
}

ddpc_status ddpc__dp_pass(ddpc__dp *dp, const ddpc_model_input *in, const uint64_t *streams,
                          float dloss, ddpc_model_output *out)
{
    if (in->n < 1 || !in->targets)
        return ddpc_errorf(DDPC_EINVAL,
                           "a DataParallel pass needs a batch of at least 1 row "
                           "with targets, got %lld rows%s",
                           (long long)in->n, in->targets ? "" : " and no targets");
    double t0 = ddpc_time_now();
    DDPC_TRY(scatter(dp, in, streams, dloss));
    double t1 = ddpc_time_now();
    if (dp->n == 1)
        run_replica(&dp->r[0]);
    else
        parallel_apply(dp);
    double t2 = ddpc_time_now();
    trace_pass(dp, t0, t1, t2);
    ddpc__dp_timing *sp = &dp->spent;
    sp->scatter_s += t1 - t0;
    sp->forward_s += dp->r[0].forward_s;
    sp->backward_s += dp->r[0].backward_s;
    sp->wait_s += (t2 - t1) - dp->r[0].forward_s - dp->r[0].backward_s;
    /* gather: the loss of the whole batch is the row-weighted mean of the replicas' losses */
    double loss = 0;
    *out = (ddpc_model_output){0};
    for (int k = 0; k < dp->n; k++) {
        const replica *r = &dp->r[k];
        if (r->st != DDPC_OK)
            return dp->n == 1 ? ddpc_errorf(r->st, "%s", r->err)
                              : ddpc_errorf(r->st, "DataParallel replica %d: %s", k, r->err);
        loss += (double)r->out.loss * (double)r->in.n;
        out->n_valid += r->out.n_valid;
        out->n_correct += r->out.n_correct;
    }
    out->loss = (float)(loss / (double)in->n);
    return DDPC_OK;
}

void ddpc__dp_reduce(ddpc__dp *dp)
{
    if (dp->n == 1)
        return;
    double t0 = ddpc_time_now();
    float *g = ddpc_model_grads(dp->r[0].model);
    int64_t np = (int64_t)ddpc_model_num_params(dp->r[0].model);
    for (int k = 1; k < dp->n; k++)
        ddpc_add_f32(g, g, ddpc_model_grads(dp->r[k].model), np);
    /* Divided, not multiplied by 1/N: the collectives' AVG (sum, then divide by N). */
    float n = (float)dp->n;
#pragma omp parallel for schedule(static) if (np >= 65536)
    for (int64_t i = 0; i < np; i++)
        g[i] /= n;
    double t1 = ddpc_time_now();
    dp->spent.reduce_s += t1 - t0;
    ddpc_trace_add(DDPC_TRACE_COMPUTE, "reduce", t0, t1, -1, NULL, 0);
}

ddpc__dp_timing ddpc__dp_take_timing(ddpc__dp *dp)
{
    ddpc__dp_timing t = dp->spent;
    dp->spent = (ddpc__dp_timing){0};
    return t;
}
