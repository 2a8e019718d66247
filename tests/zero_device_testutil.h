// SPDX-License-Identifier: MIT
/* ZeRO on a model whose buffers are device memory, for two tests: test_parallel_zero_device.c (a
 * stand-in table of host memory, on every machine) and test_cuda_zero.c (the GPU's table, the
 * reducer's group moving device buffers and a host group beside it). Each forked rank (spawn.h)
 * trains an MLP STEPS steps with AdamW, clipping and loss scaling (when asked, with gradient
 * accumulation: no_sync micro-batches summed in the flat buffer) at stages 0 to 3 and checks:
 * stage 1 ends with stage 0's bits, stages 2 and 3 within 1e-6 relative (the sharded norm differs
 * in summation order only); the host copies, poisoned with NaN once training starts, are never
 * read (only ddpc_model_to_host at the end fills them); outside the rank's chunks the device
 * gradients (stage 2 up, without accumulation) and parameters (stage 3) read zero between steps;
 * warm steps make no device allocation. With bf16 communication (converted on the device), the
 * same checks, stages 1 to 3 within 1e-2 of stage 0 (bf16's rounding). After every step the
 * table's backed_bytes (the model's reserved flat buffers still mapped) is printed; given the
 * granule (zdev_setup.granule), it must be at most what the owned chunks touch (stage 2: plus the
 * whole parameter buffer; stages 0 and 1 keep both buffers whole).
 * Header-only, for tests. */
#ifndef DDPC_TESTS_ZERO_DEVICE_TESTUTIL_H
#define DDPC_TESTS_ZERO_DEVICE_TESTUTIL_H

#include <ddpc/alloc.h>
#include <ddpc/comm.h>
#include <ddpc/data.h>
#include <ddpc/device.h>
#include <ddpc/engine.h>
#include <ddpc/models.h>
#include <ddpc/nn.h>
#include <ddpc/optim.h>
#include <ddpc/reducer.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { ZDEV_BATCH = 8, ZDEV_STEPS = 4 };

typedef struct {
    /* This rank's table, called in the child (a GPU is chosen after the fork). */
    const ddpc_kernel_table *(*table)(int local_rank);
    /* 0: one host group does everything. Else the port of a second group, with cuda=true, that
     * the reducer moves the model's buffers over (the first becomes its host_pg). */
    int device_port;
    int accum; /* micro-batches per step (no_sync before the last); 0 means 1 */
    bool bf16; /* gradients communicated as bf16 (ddp.comm_dtype), else f32 */
    size_t granule; /* the table's release granule: backed_bytes is checked; 0: only printed */
} zdev_setup;

typedef struct {
    const ddpc_kernel_table *k;
    ddpc_pg *host, *dev; /* dev == host without a device group */
    int rank, world, accum;
    bool bf16;
    size_t granule;
} zdev_rank;

/* Bytes of the granules the engine's shard touches (an upper bound on what stays backed). */
static size_t zdev_shard_granule_bytes(const ddpc_engine *e, size_t granule)
{
    const ddpc_range *sh;
    size_t nr, sum = 0;
    ddpc_engine_shard(e, &sh, &nr);
    for (size_t i = 0; i < nr; i++) {
        if (!sh[i].len)
            continue;
        size_t a = sh[i].lo * sizeof(float), b = (sh[i].lo + sh[i].len) * sizeof(float);
        sum += ((b + granule - 1) / granule - a / granule) * granule;
    }
    return sum;
}

/* After a step: the reserved buffers' backed bytes within the bound of the stage. */
static int zdev_check_backed(const zdev_rank *z, const ddpc_engine *e, int stage, int step,
                             size_t n)
{
    size_t backed = z->k->backed_bytes(), whole = n * sizeof(float);
    if (!z->granule) {
        if (z->rank == 0 && step == ZDEV_STEPS - 1)
            printf("     stage %d: %zu bytes of the flat buffers backed (2 x %zu reserved)\n",
                   stage, backed, whole);
        return 0;
    }
    size_t rounded = (whole + z->granule - 1) / z->granule * z->granule;
    size_t shard = zdev_shard_granule_bytes(e, z->granule);
    size_t bound = stage < 2 ? 2 * rounded : stage == 2 ? rounded + shard : 2 * shard;
    if (z->rank == 0 && step == ZDEV_STEPS - 1)
        printf("     stage %d%s: %zu bytes backed after a step (bound %zu, unsharded %zu)\n",
               stage, z->accum > 1 ? " with accumulation" : "", backed, bound, 2 * rounded);
    if (backed <= bound)
        return 0;
    fprintf(stderr, "rank %d stage %d step %d: %zu bytes of the flat buffers backed, above the "
            "bound %zu\n", z->rank, stage, step, backed, bound);
    return 1;
}

static ddpc_model *zdev_model(const zdev_rank *z)
{
    ddpc_model_config c = ddpc_model_config_default();
    ddpc_mlp_config own = ddpc_mlp_config_default();
    c.type_config = &own;
    strcpy(c.type, "mlp");
    c.in_channels = 1, c.in_height = 16, c.in_width = 16, c.num_classes = 10;
    own.hidden[0] = 300, own.n_hidden = 1; /* ~80k parameters: several 0.05 MB buckets */
    c.seed = 3;
    c.backend = z->k;
    c.releasable_flat = true; /* as the trainer asks for ZeRO-2/3 */
    ddpc_model *m = NULL;
    if (ddpc_model_create(&m, &c) != DDPC_OK || ddpc_model_reserve(m, ZDEV_BATCH, 0) != DDPC_OK) {
        fprintf(stderr, "rank %d: model: %s\n", z->rank, ddpc_last_error());
        ddpc_model_destroy(m);
        return NULL;
    }
    return m;
}

/* Whether every float of the device buffer dev (n) outside the engine's shard reads zero. */
static bool zdev_zero_outside(const zdev_rank *z, const ddpc_engine *e, const float *dev,
                              size_t n)
{
    float *h = ddpc_malloc(n * sizeof(float));
    if (!h)
        return false;
    z->k->to_host(h, dev, n * sizeof(float));
    const ddpc_range *sh;
    size_t nr, at = 0;
    bool ok = true;
    ddpc_engine_shard(e, &sh, &nr);
    for (size_t i = 0; i <= nr && ok; i++) {
        size_t end = i < nr ? sh[i].lo : n;
        for (; at < end && ok; at++)
            ok = h[at] == 0.0f;
        if (i < nr)
            at = sh[i].lo + sh[i].len;
    }
    ddpc_free(h);
    return ok;
}

static ddpc_status zdev_step(ddpc_engine *e, ddpc_dataset *ds, const zdev_rank *z, int step)
{
    float x[ZDEV_BATCH * 256];
    int32_t y[ZDEV_BATCH];
    int64_t idx[ZDEV_BATCH];
    ddpc_model_input in = {.n = ZDEV_BATCH, .x = x, .targets = y};
    ddpc_model_output o;
    ddpc_engine_step_info info;
    ddpc_engine_zero_grad(e);
    for (int micro = 0; micro < z->accum; micro++) {
        for (int i = 0; i < ZDEV_BATCH; i++)
            idx[i] = ((step * z->accum + micro) * z->world + z->rank) * ZDEV_BATCH + i;
        DDPC_TRY(ddpc_dataset_get_batch(ds, idx, ZDEV_BATCH, x, NULL, y));
        DDPC_TRY(ddpc_engine_pass(e, &in, micro, 1.0f, micro == z->accum - 1, &o));
    }
    return ddpc_engine_update(e, &info);
}

/* ZDEV_STEPS steps at `stage`; *out (n) gets the final parameters. Nonzero on a failure,
 * printed. */
static int zdev_train(const zdev_rank *z, ddpc_dataset *ds, int stage, float **out, size_t *n)
{
    ddpc_model *m = zdev_model(z);
    if (!m)
        return 1;
    ddpc_reducer_config rc = ddpc_reducer_config_default();
    rc.bucket_cap_mb = rc.first_bucket_mb = 0.05;
    rc.zero_stage = stage;
    rc.comm_dtype = z->bf16 ? DDPC_DTYPE_BF16 : DDPC_DTYPE_F32;
    rc.host_pg = z->dev != z->host ? z->host : NULL;
    ddpc_engine_config ec = ddpc_engine_config_default();
    ec.optim.type = DDPC_OPTIM_ADAMW;
    ec.optim.lr = 0.01f;
    ec.optim.weight_decay = 0.1f;
    ec.grad_clip = 0.5f; /* below the norm: every step clips */
    ec.accum_steps = z->accum;
    ec.loss_scaling = true; /* the shards' unscale on the device (powers of 2: exact) */
    ddpc_reducer *r = NULL;
    ddpc_engine *e = NULL;
    int fail = 0;
    if (ddpc_reducer_create(z->dev, m, &rc, &r) != DDPC_OK ||
        ddpc_engine_create(m, r, z->rank, z->world, &ec, &e) != DDPC_OK) {
        fprintf(stderr, "rank %d stage %d: %s\n", z->rank, stage, ddpc_last_error());
        fail = 1;
    }
    *n = ddpc_model_num_params(m);
    float *hp = ddpc_model_params(m), *hg = ddpc_model_grads(m);
    for (size_t i = 0; i < *n; i++) /* from here on only ddpc_model_to_host may write them */
        hp[i] = hg[i] = NAN;
    uint64_t warm = 0;
    for (int step = 0; step < ZDEV_STEPS && !fail; step++) {
        if (step == 2)
            warm = z->k->alloc_count();
        if (zdev_step(e, ds, z, step) != DDPC_OK) {
            fprintf(stderr, "rank %d stage %d step %d: %s\n", z->rank, stage, step,
                    ddpc_last_error());
            fail = 1;
        } else if (stage >= 2 && z->accum == 1 && /* no_sync passes fill the whole buffer */
                   !zdev_zero_outside(z, e, ddpc_model_device_grads(m), *n)) {
            fprintf(stderr, "rank %d stage %d step %d: device gradients outside the shard are "
                    "not zero\n", z->rank, stage, step);
            fail = 1;
        } else if (stage == 3 && !zdev_zero_outside(z, e, ddpc_model_device_params(m), *n)) {
            fprintf(stderr, "rank %d stage 3 step %d: device parameters outside the shard are "
                    "not zero\n", z->rank, step);
            fail = 1;
        } else {
            fail = zdev_check_backed(z, e, stage, step, *n);
        }
    }
    if (!fail && z->k->alloc_count() != warm) {
        fprintf(stderr, "rank %d stage %d: warm steps made %llu device allocations\n", z->rank,
                stage, (unsigned long long)(z->k->alloc_count() - warm));
        fail = 1;
    }
    if (!fail && ddpc_engine_gather_params(e) != DDPC_OK) {
        fprintf(stderr, "rank %d stage %d: gather: %s\n", z->rank, stage, ddpc_last_error());
        fail = 1;
    }
    ddpc_model_to_host(m);
    *out = ddpc_malloc(*n * sizeof(float));
    if (*out)
        memcpy(*out, hp, *n * sizeof(float));
    if (e)
        ddpc_engine_release_params(e);
    ddpc_engine_destroy(e);
    ddpc_reducer_destroy(r);
    ddpc_model_destroy(m);
    return fail || !*out;
}

/* Largest |a - b| / max(|b|, 1e-3) over n floats; a NaN anywhere counts as infinity. */
static double zdev_worst_rel(const float *a, const float *b, size_t n)
{
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]) / fmax(fabs((double)b[i]), 1e-3);
        if (!(d <= worst))
            worst = isnan(d) ? INFINITY : d;
    }
    return worst;
}

/* The groups of this rank: the host one from the environment and, with z->device_port, one on
 * device buffers at that port. */
static int zdev_join(const zdev_setup *s, int rank, int world, zdev_rank *z)
{
    *z = (zdev_rank){.k = s->table(rank), .rank = rank, .world = world,
                     .accum = s->accum > 1 ? s->accum : 1, .bf16 = s->bf16,
                     .granule = s->granule};
    ddpc_comm_env env;
    ddpc_pg_config pc = ddpc_pg_config_default();
    pc.timeout_s = 60;
    if (!z->k || ddpc_comm_env_discover(&env) != DDPC_OK ||
        ddpc_pg_create(&env, &pc, &z->host) != DDPC_OK) {
        fprintf(stderr, "rank %d: %s\n", rank, ddpc_last_error());
        return 1;
    }
    z->dev = z->host;
    if (!s->device_port)
        return 0;
    env.master_port = s->device_port;
    pc.cuda = true;
    if (ddpc_pg_create(&env, &pc, &z->dev) != DDPC_OK) {
        fprintf(stderr, "rank %d: device group: %s\n", rank, ddpc_last_error());
        z->dev = z->host;
        return 1;
    }
    if (rank == 0)
        printf("     device group: %s\n", ddpc_pg_device_note(z->dev));
    return 0;
}

static void zdev_leave(zdev_rank *z)
{
    if (z->dev != z->host)
        ddpc_pg_destroy(z->dev);
    ddpc_pg_destroy(z->host);
}

/* spawn_ranks' body: stages 0 to 3 against each other. ctx: a zdev_setup. */
static int zdev_rank_stages(int rank, int world, void *ctx)
{
    zdev_rank z;
    int fail = zdev_join(ctx, rank, world, &z);
    ddpc_dataset *ds = NULL;
    fail |= ddpc_dataset_synthetic_images_create(&ds, ZDEV_BATCH * ZDEV_STEPS * world * z.accum, 1,
                                                 16, 16, 10, 3, true) != DDPC_OK;
    float *w[4] = {NULL};
    size_t n = 0;
    for (int stage = 0; stage < 4 && !fail; stage++)
        fail |= zdev_train(&z, ds, stage, &w[stage], &n);
    if (!fail && !z.bf16 && memcmp(w[1], w[0], n * sizeof(float)) != 0) {
        fprintf(stderr, "rank %d: stage 1's weights are not stage 0's bits (worst %.3g)\n", rank,
                zdev_worst_rel(w[1], w[0], n));
        fail = 1;
    }
    double limit = z.bf16 ? 1e-2 : 1e-6;
    for (int stage = z.bf16 ? 1 : 2; stage < 4 && !fail; stage++) {
        double d = zdev_worst_rel(w[stage], w[0], n);
        if (rank == 0)
            printf("     %s, stage %d against stage 0: worst relative difference %.3g\n",
                   z.bf16 ? "bf16" : "f32", stage, d);
        if (!(d <= limit)) {
            fprintf(stderr, "rank %d: stage %d's weights differ from stage 0's by %.3g (limit "
                    "%g)\n", rank, stage, d, limit);
            fail = 1;
        }
    }
    for (int stage = 0; stage < 4; stage++)
        ddpc_free(w[stage]);
    ddpc_dataset_destroy(ds);
    zdev_leave(&z);
    return fail;
}

#endif
