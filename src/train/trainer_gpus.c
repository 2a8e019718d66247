// SPDX-License-Identifier: MIT
/* Several ranks on GPUs. Every rank's resolved device must be of one kind, agreed over the host
 * group before anything is written; then a model on a GPU gets a second process group, on device
 * buffers (nccl, or host staging), which the reducer moves gradients, parameters and buffers over,
 * while the host group keeps metrics, evaluation sums, fingerprints, barriers and checkpoints'
 * agreement. Rank 0 keeps every rank's start-up line ("rank 1/2: <GPU>, <how buffers travel>"). */
#include "train/trainer_impl.h"

#include "train/trainer_device.h"

#include <ddpc/alloc.h>
#include <ddpc/device.h>

#include <stdio.h>
#include <string.h>

enum { LINE_CAP = 384 }; /* one rank's start-up line, exchanged as int32 words */

/* Every rank's device kind over the host group, then ddpc__device_agree: the same verdict on
 * every rank, so a mix stops all of them with the same line. */
static ddpc_status agree(ddpc_trainer *t, const ddpc_kernel_table *k)
{
    int32_t mine = (int32_t)k->kind, *kinds = ddpc_calloc((size_t)t->dist.world, sizeof *kinds);
    if (!kinds)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for %d ranks' devices", t->dist.world);
    ddpc_status st = ddpc_pg_all_gather(t->dist.pg, &mine, kinds, 1, DDPC_DTYPE_I32);
    if (st == DDPC_OK)
        st = ddpc__device_agree(kinds, t->dist.world);
    ddpc_free(kinds);
    return st;
}

/* The device group joins as a second group of the same job: its run id gets ".cuda", so its shm
 * segment and its store keys are its own and the two rendezvous never meet. */
static ddpc_status create_device_pg(ddpc_trainer *t)
{
    ddpc_comm_env env;
    DDPC_TRY(ddpc_comm_env_discover(&env));
    char base[sizeof env.run_id];
    snprintf(base, sizeof base, "%s", env.run_id[0] ? env.run_id : "job");
    snprintf(env.run_id, sizeof env.run_id, "%.100s.cuda", base);
    env.backend = DDPC_BACKEND_AUTO; /* the asked backend travels in the config below */
    ddpc_pg_config pc = ddpc_pg_config_default();
    pc.backend = t->dist.gpu_backend;
    pc.timeout_s = ddpc_pg_timeout(t->dist.pg);
    pc.cuda = true;
    DDPC_TRY(ddpc_pg_create(&env, &pc, &t->dist.device_pg));
    bool flight;
    DDPC_TRY(ddpc_config_bool(t->cfg, "flight.enabled", true, &flight));
    if (!flight)
        return DDPC_OK;
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/flight/device", t->set.run_dir);
    return ddpc_pg_set_flight_dir(t->dist.device_pg, dir);
}

/* "rank 1/2: NVIDIA H200 (GPU 0 of 1, ...), local rank 1; host staging over shm: ..." from
 * every rank, gathered on the host group; rank 0 keeps them for the start of the log. */
static ddpc_status gather_lines(ddpc_trainer *t, const ddpc_kernel_table *k)
{
    int world = t->dist.world;
    int32_t mine[LINE_CAP / 4] = {0};
    const char *note = ddpc_pg_device_note(t->dist.device_pg);
    snprintf((char *)mine, LINE_CAP, "rank %d/%d: %s, local rank %d; %s\n", t->dist.rank, world,
             ddpc_device_describe(k), ddpc_pg_local_rank(t->dist.pg),
             note && note[0] ? note : ddpc_backend_name(ddpc_pg_backend(t->dist.device_pg)));
    int32_t *all = ddpc_calloc((size_t)world, LINE_CAP);
    if (!all)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for %d ranks' start-up lines", world);
    ddpc_status st = ddpc_pg_all_gather(t->dist.pg, mine, all, LINE_CAP / 4, DDPC_DTYPE_I32);
    if (st == DDPC_OK && t->dist.rank == 0) {
        t->dist.gpu_lines = ddpc_calloc((size_t)world, LINE_CAP);
        if (!t->dist.gpu_lines)
            st = ddpc_errorf(DDPC_ENOMEM, "out of memory for %d ranks' start-up lines", world);
        for (int r = 0; st == DDPC_OK && r < world; r++) {
            char *line = (char *)all + (size_t)r * LINE_CAP;
            line[LINE_CAP - 1] = '\0';
            strcat(t->dist.gpu_lines, line);
        }
    }
    ddpc_free(all);
    return st;
}

/* Whether the asked backend can run with the model where it is. */
static ddpc_status check_run(const ddpc_trainer *t, bool gpu)
{
    if (!gpu && t->dist.gpu_backend == DDPC_BACKEND_NCCL)
        return ddpc_errorf(DDPC_EINVAL,
                           "dist.backend nccl moves GPU buffers, and this run's model is on the "
                           "CPU (use backend shm, gloo or mpi, or device: cuda)");
    return DDPC_OK;
}

ddpc_status ddpc__trainer_init_gpus(ddpc_trainer *t)
{
    const ddpc_kernel_table *k = ddpc_model_backend(t->model);
    if (t->dist.world > 1)
        DDPC_TRY(agree(t, k));
    bool gpu = k->kind != DDPC_DEVICE_CPU;
    DDPC_TRY(check_run(t, gpu));
    if (!gpu || t->dist.world == 1)
        return DDPC_OK;
    DDPC_TRY(create_device_pg(t));
    return gather_lines(t, k);
}

void ddpc__trainer_fini_gpus(ddpc_trainer *t)
{
    ddpc_pg_destroy(t->dist.device_pg);
    t->dist.device_pg = NULL;
    ddpc_free(t->dist.gpu_lines);
    t->dist.gpu_lines = NULL;
}
