// SPDX-License-Identifier: MIT
/* The trainer's distributed side: the process group (from the launcher's environment and the
 * `dist` keys), the DDP reducer (the `ddp` keys) and cross-rank statistics. With one process the
 * group is trivial and no reducer exists, so single-process runs take the same code path. */
#include "train/trainer_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/kernels.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const backends[] = {"auto", "shm", "mpi", "gloo", "nccl", NULL};
static const char *const parallel_modes[] = {"ddp", "dp", NULL};

/* parallel.mode and parallel.replicas. dp is one process by definition: launched as one of
 * several ranks it is refused, since the ranks would each run their own replicas of a job that
 * was asked to be a single process. */
static ddpc_status read_parallel(ddpc_trainer *t, int world, const ddpc_comm_env *env)
{
    ddpc_config *c = t->cfg;
    int mode;
    int64_t replicas;
    DDPC_TRY(ddpc_config_choice(c, "parallel.mode", "ddp", parallel_modes, &mode));
    DDPC_TRY(ddpc_config_int(c, "parallel.replicas", 0, 0, DDPC_ENGINE_MAX_REPLICAS, &replicas));
    if (mode == 0) {
        /* The default (0) is accepted: config.yaml writes every key, and must run again. */
        if (replicas != 0)
            return ddpc_errorf(DDPC_EINVAL, "parallel.replicas is for parallel.mode: dp (one "
                               "process); with ddp the launcher's --nproc-per-node sets the ranks");
        return DDPC_OK;
    }
    if (world > 1 && !env)
        return ddpc_errorf(DDPC_EINVAL,
                           "ddpc plan --nproc %d plans %d DDP ranks, but parallel.mode is dp (one "
                           "process); plan it without --nproc, its replicas set by "
                           "parallel.replicas",
                           world, world);
    if (world > 1)
        return ddpc_errorf(DDPC_EINVAL,
                           "parallel.mode: dp runs its replicas as threads of one process, but "
                           "this is rank %d of %d started by a launcher (%s variables); run `ddpc "
                           "train` without one, or "
                           "use parallel.mode: ddp for several processes",
                           env->rank, world, ddpc_comm_source_name(env->source));
    /* Default: one replica per kernel thread (num_threads, else OMP_NUM_THREADS, else cores). */
    t->dist.dp_replicas = replicas > 0 ? (int)replicas : ddpc_kernels_threads();
    return DDPC_OK;
}

static const char *const comm_dtypes[] = {"f32", "bf16", "f16", NULL};

ddpc_status ddpc__trainer_init_dist(ddpc_trainer *t)
{
    ddpc_config *c = t->cfg;
    ddpc_comm_env env;
    DDPC_TRY(ddpc_comm_env_discover(&env));
    ddpc_pg_config pc = ddpc_pg_config_default();
    int backend;
    DDPC_TRY(ddpc_config_choice(c, "dist.backend", "auto", backends, &backend));
    pc.backend = (ddpc_backend)backend; /* the table follows ddpc_backend's order */
    /* nccl moves GPU buffers only: it is the device group's (trainer_gpus.c), and this group, for
     * the host's data, follows the host rule. A run that cannot use it is refused there. */
    t->dist.gpu_backend = pc.backend != DDPC_BACKEND_AUTO ? pc.backend : env.backend;
    if (t->dist.gpu_backend == DDPC_BACKEND_NCCL)
        pc.backend = env.backend = DDPC_BACKEND_AUTO;
    /* Unset: the launcher's --collective-timeout, else 300 s (ddpc_pg_create decides). */
    DDPC_TRY(ddpc_config_float(c, "dist.timeout_s", 0.0, 0.0, 1e7, &pc.timeout_s));
    bool flight; /* the hang recorder's files: on by default, the ring itself always */
    DDPC_TRY(ddpc_config_bool(c, "flight.enabled", true, &flight));
    if (t->dist.plan_world > 0) { /* `ddpc plan`: a job of plan_world ranks, seen from rank 0 */
        t->dist.world = t->dist.plan_world;
        t->dist.local_world = t->dist.plan_world;
        return read_parallel(t, t->dist.plan_world, NULL);
    }
    DDPC_TRY(read_parallel(t, env.world_size > 0 ? env.world_size : 1, &env));
    DDPC_TRY(ddpc_pg_create(&env, &pc, &t->dist.pg));
    if (flight) {
        char dir[1100];
        snprintf(dir, sizeof dir, "%s/flight", t->set.run_dir);
        DDPC_TRY(ddpc_pg_set_flight_dir(t->dist.pg, dir));
    }
    t->dist.rank = ddpc_pg_rank(t->dist.pg);
    t->dist.world = ddpc_pg_world_size(t->dist.pg);
    t->dist.local_world = ddpc_pg_local_world_size(t->dist.pg); /* gloo may have counted them */
    t->pos.restart_count = env.restart_count;
    ddpc__trainer_split_threads(t, &env);
    return DDPC_OK;
}

ddpc_status ddpc__trainer_zero_stage(ddpc_config *c, int *stage)
{
    int64_t s;
    DDPC_TRY(ddpc_config_int(c, "zero.stage", 0, 0, 3, &s));
    *stage = (int)s;
    return DDPC_OK;
}

ddpc_status ddpc__trainer_read_ddp(ddpc_trainer *t)
{
    ddpc_config *c = t->cfg;
    ddpc_reducer_config *rc = &t->dist.reducer_cfg;
    int dtype;
    bool sync_bn = rc->sync_batchnorm; /* model.sync_batchnorm, read with the model */
    *rc = ddpc_reducer_config_default();
    rc->sync_batchnorm = sync_bn;
    int stage;
    DDPC_TRY(ddpc__trainer_zero_stage(c, &stage));
    rc->zero_stage = stage;
    if (stage > 0 && t->dist.dp_replicas > 0)
        return ddpc_errorf(DDPC_EINVAL,
                           "zero.stage %lld shards across processes; parallel.mode: "
                           "dp is one process, whose replicas each hold the whole model",
                           (long long)stage);
    DDPC_TRY(ddpc_config_float(c, "ddp.bucket_cap_mb", 25.0, 1e-6, 1e6, &rc->bucket_cap_mb));
    DDPC_TRY(ddpc_config_float(c, "ddp.first_bucket_mb", 1.0, 1e-6, 1e6, &rc->first_bucket_mb));
    DDPC_TRY(ddpc_config_bool(c, "ddp.find_unused_parameters", false, &rc->find_unused_parameters));
    DDPC_TRY(ddpc_config_bool(c, "ddp.broadcast_buffers", true, &rc->broadcast_buffers));
    DDPC_TRY(ddpc_config_choice(c, "ddp.comm_dtype", "f32", comm_dtypes, &dtype));
    rc->comm_dtype = dtype == 0 ? DDPC_DTYPE_F32 : dtype == 1 ? DDPC_DTYPE_BF16 : DDPC_DTYPE_F16;
    return DDPC_OK;
}

ddpc_status ddpc__trainer_init_ddp(ddpc_trainer *t)
{
    ddpc_config *c = t->cfg;
    ddpc_reducer_config rc = t->dist.reducer_cfg;
    if (t->dist.world == 1)
        return DDPC_OK;
    /* Every rank must run the same config: compare it line by line (the dump is canonical). */
    size_t need = ddpc_config_dump(c, NULL, 0) + 1;
    char *dump = ddpc_malloc(need);
    if (!dump)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for the config fingerprint");
    ddpc_config_dump(c, dump, need);
    rc.fingerprint = dump;
    if (t->dist.device_pg) /* the model's memory on the GPUs' group, the rest on the host's */
        rc.host_pg = t->dist.pg;
    ddpc_pg *pg = t->dist.device_pg ? t->dist.device_pg : t->dist.pg;
    ddpc_status st = ddpc_reducer_create(pg, t->model, &rc, &t->dist.reducer);
    ddpc_free(dump);
    return st;
}

ddpc_status ddpc__trainer_sum(ddpc_trainer *t, double *values, size_t n)
{
    if (t->dist.world == 1)
        return DDPC_OK;
    return ddpc_pg_all_reduce(t->dist.pg, values, values, n, DDPC_DTYPE_F64, DDPC_REDUCE_SUM);
}

float ddpc__trainer_lr_scale(const ddpc_trainer *t)
{
    double k = (double)(ddpc__trainer_dp_degree(t) * t->set.accum_steps);
    switch (t->set.lr_scale) {
    case LR_SCALE_LINEAR:
        return (float)k;
    case LR_SCALE_SQRT:
        return (float)sqrt(k);
    default:
        return 1.0f;
    }
}

void ddpc__trainer_fini_dist(ddpc_trainer *t)
{
    ddpc_reducer_destroy(t->dist.reducer);
    t->dist.reducer = NULL;
    ddpc__trainer_fini_gpus(t);
    ddpc_pg_destroy(t->dist.pg);
    t->dist.pg = NULL;
}
