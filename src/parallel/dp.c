/* DataParallel replicas (dp_impl.h): torch.nn.DataParallel's replicate / scatter / parallel_apply /
 * gather / reduce_add, with one OpenMP thread per replica in place of one GPU per replica. As in
 * torch, the caller's thread does the serial parts (replicate, scatter, gather, reduce) and only
 * forward and backward run in parallel. Invariant: replica k's input buffers hold at least the rows
 * of the largest pass seen, so a step after the first allocates nothing. */
#include "parallel/dp_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/engine.h>
#include <ddpc/kernels.h>
#include <ddpc/timer.h>

#include <omp.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    ddpc_model *model; /* replica 0: the caller's (borrowed); the others owned */
    float *x;          /* (cap, sizes.x) this replica's rows of the batch */
    int32_t *tokens;   /* (cap, sizes.tokens) */
    int32_t *targets;  /* (cap, sizes.targets) */
    int64_t cap;       /* rows the buffers hold */
    ddpc_model_input in;
    ddpc_model_output out;
    float dloss;
    ddpc_status st;
    char err[512]; /* the replica thread's ddpc_last_error() when st != DDPC_OK */
    double forward_s, backward_s;
} replica;

struct ddpc__dp {
    int n;
    ddpc_sample_sizes sizes; /* per row */
    replica *r;              /* (n) */
    ddpc__dp_timing spent;
};

static void free_buffers(replica *r)
{
    ddpc_free(r->x);
    ddpc_free(r->tokens);
    ddpc_free(r->targets);
    r->x = NULL, r->tokens = r->targets = NULL;
    r->cap = 0;
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
    dp->sizes = ddpc_model_sample_sizes(m);
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
    const float *src = ddpc_model_params(dp->r[0].model);
    size_t bytes = ddpc_model_num_params(dp->r[0].model) * sizeof(float);
    for (int k = 1; k < dp->n; k++)
        memcpy(ddpc_model_params(dp->r[k].model), src, bytes);
    dp->spent.replicate_s += ddpc_time_now() - t0;
}

/* Grows replica r's buffers to `rows` rows (the first pass of a larger batch only). */
static ddpc_status reserve(const ddpc__dp *dp, replica *r, int64_t rows)
{
    if (rows <= r->cap)
        return DDPC_OK;
    const ddpc_sample_sizes *s = &dp->sizes;
    free_buffers(r);
    r->x = s->x ? ddpc_malloc((size_t)(rows * s->x) * sizeof(float)) : NULL;
    r->tokens = s->tokens ? ddpc_malloc((size_t)(rows * s->tokens) * sizeof(int32_t)) : NULL;
    r->targets = ddpc_malloc((size_t)(rows * s->targets) * sizeof(int32_t));
    if ((s->x && !r->x) || (s->tokens && !r->tokens) || !r->targets) {
        free_buffers(r);
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for a DataParallel replica's %lld rows",
                           (long long)rows);
    }
    r->cap = rows;
    return DDPC_OK;
}

/* Replica k's input: rows k, k + N, ... of in, copied (torch's scatter copies each chunk to its
 * device); with one replica, in itself. */
static ddpc_status scatter(ddpc__dp *dp, const ddpc_model_input *in, const uint64_t *streams,
                           float dloss)
{
    const ddpc_sample_sizes *s = &dp->sizes;
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
        DDPC_TRY(reserve(dp, r, rows));
        r->in.x = in->x ? r->x : NULL;
        r->in.tokens = in->tokens ? r->tokens : NULL;
        r->in.targets = r->targets;
        for (int64_t i = 0; i < rows; i++) {
            int64_t src = k + i * n;
            if (in->x)
                memcpy(r->x + i * s->x, in->x + src * s->x, (size_t)s->x * sizeof(float));
            if (in->tokens)
                memcpy(r->tokens + i * s->tokens, in->tokens + src * s->tokens,
                       (size_t)s->tokens * sizeof(int32_t));
            memcpy(r->targets + i * s->targets, in->targets + src * s->targets,
                   (size_t)s->targets * sizeof(int32_t));
        }
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
    double t0 = ddpc_time_now();
    r->st = ddpc_model_forward(r->model, &r->in, true, &r->out);
    double t1 = ddpc_time_now();
    if (r->st == DDPC_OK)
        r->st = ddpc_model_backward(r->model, r->dloss);
    r->forward_s = t1 - t0;
    r->backward_s = ddpc_time_now() - t1;
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

ddpc_status ddpc__dp_pass(ddpc__dp *dp, const ddpc_model_input *in, const uint64_t *streams,
                          float dloss, ddpc_model_output *out)
{
    if (in->n < 1 || !in->targets)
        return ddpc_errorf(DDPC_EINVAL, "a DataParallel pass needs a batch of at least 1 row "
                           "with targets, got %lld rows%s", (long long)in->n,
                           in->targets ? "" : " and no targets");
    double t0 = ddpc_time_now();
    DDPC_TRY(scatter(dp, in, streams, dloss));
    double t1 = ddpc_time_now();
    if (dp->n == 1)
        run_replica(&dp->r[0]);
    else
        parallel_apply(dp);
    double t2 = ddpc_time_now();
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
    dp->spent.reduce_s += ddpc_time_now() - t0;
}

ddpc__dp_timing ddpc__dp_take_timing(ddpc__dp *dp)
{
    ddpc__dp_timing t = dp->spent;
    dp->spent = (ddpc__dp_timing){0};
    return t;
}
