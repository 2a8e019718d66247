// SPDX-License-Identifier: MIT
/* The reducer over two groups, as a model on a GPU uses it (ddpc_reducer_config.host_pg): the
 * model's memory (parameter and buffer broadcasts, gradient buckets, bf16 compression,
 * SyncBatchNorm's double sums) on one group, the host's data (the fingerprint check, a device
 * model's SyncBatchNorm batch size) on the other. Here both groups are shm on the CPU, the second
 * standing in for the device group, and a "device" is the CPU table under kind cuda: 2 ranks of
 * an MLP with BatchNorm and SyncBatchNorm train the same bits with one group or two, on the CPU
 * or the stand-in; each group carries only its own collectives (counted by sequence numbers): on
 * the CPU one per BatchNorm layer in forward (the count travels in the sums) and one in backward,
 * on the stand-in also one batch size per forward on the host group; a host group of other ranks
 * is refused in one line. Ranks are forked processes. */
#include "check.h"
#include "spawn.h"

#include <ddpc/alloc.h>
#include <ddpc/comm.h>
#include <ddpc/data.h>
#include <ddpc/device.h>
#include <ddpc/models.h>
#include <ddpc/nn.h>
#include <ddpc/optim.h>
#include <ddpc/reducer.h>

#include <string.h>

enum { STEPS = 6, BATCH = 8, SAMPLES = 96 };

/* In a forked rank: says what failed and marks the rank failed (check.h counts per process). */
#define EXPECT(cond)                                                                               \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: rank %d: expected %s\n", __FILE__, __LINE__, rank, #cond);     \
            fail = 1;                                                                              \
        }                                                                                          \
    } while (0)

/* The CPU's kernels under kind cuda: the model keeps device buffers apart from its host copies
 * and its BatchNorm takes the device path (the sums stay in the table's memory). */
static ddpc_kernel_table standin;

static ddpc_model *make_model(const ddpc_kernel_table *k)
{
    ddpc_model_config c = ddpc_model_config_default();
    ddpc_mlp_config own = ddpc_mlp_config_default();
    c.type_config = &own;
    strcpy(c.type, "mlp");
    c.in_channels = 1, c.in_height = 6, c.in_width = 6, c.num_classes = 5;
    own.hidden[0] = 12, own.hidden[1] = 9, own.n_hidden = 2;
    own.batchnorm = true;
    c.seed = 11;
    c.backend = k;
    ddpc_model *m = NULL;
    return ddpc_model_create(&m, &c) == DDPC_OK ? m : NULL;
}

/* The spawned job's environment with a run id, as `ddpc run` gives one (named shm rendezvous);
 * the second group's is the trainer's: the same id + ".cuda" (train/trainer_gpus.c). */
static ddpc_status job_env(ddpc_comm_env *env, bool second)
{
    DDPC_TRY(ddpc_comm_env_discover(env));
    snprintf(env->run_id, sizeof env->run_id, "test-reducer-groups-%d%s", env->master_port,
             second ? ".cuda" : "");
    return DDPC_OK;
}

/* A second group of the job: the same ranks, its own shm segment. */
static ddpc_status second_group(ddpc_pg **out)
{
    ddpc_comm_env env;
    DDPC_TRY(job_env(&env, true));
    ddpc_pg_config pc = ddpc_pg_config_default();
    pc.timeout_s = 30;
    return ddpc_pg_create(&env, &pc, out);
}

/* STEPS SGD steps of BATCH rows (rank 1: BATCH - 3) on table k (NULL: the CPU's), with bf16
 * buckets and SyncBatchNorm; the final parameters and running statistics into params/buffers.
 * Returns 0 on success. */
static int train(ddpc_pg *pg, ddpc_pg *host, const ddpc_kernel_table *k, int rank, float *params,
                 float *buffers)
{
    ddpc_model *m = make_model(k);
    ddpc_dataset *ds = NULL;
    ddpc_optim_config oc = ddpc_optim_config_default();
    oc.type = DDPC_OPTIM_SGD, oc.lr = 0.1f, oc.momentum = 0.9f;
    ddpc_optim *o = NULL;
    if (!m || ddpc_dataset_synthetic_images_create(&ds, SAMPLES, 1, 6, 6, 5, 3, true) != DDPC_OK ||
        ddpc_optim_create(&o, &oc, ddpc_model_num_params(m)) != DDPC_OK)
        return 1;
    ddpc_model_params(m)[0] += (float)rank; /* the broadcast must equalise the replicas */
    if (ddpc_model_to_device(m) != DDPC_OK)
        return 1;
    bool device = k == &standin;
    ddpc_reducer_config rc = ddpc_reducer_config_default();
    rc.comm_dtype = DDPC_DTYPE_BF16;
    rc.bucket_cap_mb = rc.first_bucket_mb = 0.0005; /* several buckets */
    rc.sync_batchnorm = true;
    rc.fingerprint = "model: mlp";
    rc.host_pg = host;
    ddpc_pg *hp = host ? host : pg;
    uint64_t s0 = ddpc_pg_seq(pg), h0 = ddpc_pg_seq(hp);
    ddpc_reducer *red = NULL;
    int fail = ddpc_reducer_create(pg, m, &rc, &red) != DDPC_OK;
    if (!fail && host) { /* the fingerprint on the host group, both broadcasts on the other */
        EXPECT(ddpc_pg_seq(pg) - s0 == 2);
        EXPECT(ddpc_pg_seq(hp) - h0 >= 2);
        EXPECT(ddpc_reducer_pg(red) == host && ddpc_reducer_device_pg(red) == pg);
    }
    float x[BATCH * 36];
    int32_t y[BATCH];
    for (int step = 0; step < STEPS && !fail; step++) {
        uint64_t s1 = ddpc_pg_seq(pg), h1 = ddpc_pg_seq(hp);
        /* Uneven batches (8 rows and 5): the device path's count is every rank's batch summed
         * times hw, as the CPU's sums[2c] is. */
        int64_t idx[BATCH], rows = BATCH - 3 * rank;
        for (int64_t i = 0; i < rows; i++)
            idx[i] = (step * 2 * BATCH + rank * BATCH + i) % SAMPLES;
        ddpc_model_input in = {.n = rows, .x = x, .targets = y};
        ddpc_model_output out;
        ddpc_model_zero_grad(m);
        ddpc_reducer_prepare(red, true);
        fail |= ddpc_dataset_get_batch(ds, idx, rows, x, NULL, y) != DDPC_OK;
        fail |= ddpc_model_forward(m, &in, true, &out) != DDPC_OK;
        fail |= ddpc_model_backward(m, 1.0f) != DDPC_OK;
        fail |= ddpc_reducer_finish(red) != DDPC_OK;
        /* The buckets and the BatchNorm sums on the model's group: 2 layers, one collective
         * each in forward (on the CPU with the count in it) and one in backward. */
        uint64_t on_pg = ddpc_pg_seq(pg) - s1, buckets = ddpc_reducer_stats_of(red).num_buckets;
        if (on_pg != buckets + 4 || buckets < 2) {
            fprintf(stderr, "rank %d (%s, %s): %llu collectives on the model's group in a step "
                    "of %llu buckets, expected buckets + 4\n", rank, device ? "stand-in" : "cpu",
                    host ? "two groups" : "one group", (unsigned long long)on_pg,
                    (unsigned long long)buckets);
            fail = 1;
        }
        /* On the host group: nothing on the CPU, one batch size per forward on a device. */
        if (host && ddpc_pg_seq(hp) - h1 != (device ? 1u : 0u)) {
            fprintf(stderr, "rank %d (%s): %llu collectives on the host group in a step, "
                    "expected %d\n", rank, device ? "stand-in" : "cpu",
                    (unsigned long long)(ddpc_pg_seq(hp) - h1), device ? 1 : 0);
            fail = 1;
        }
        ddpc_optim_step(o, ddpc_model_device_params(m), ddpc_model_device_grads(m),
                        ddpc_model_device_decay_mask(m), oc.lr);
    }
    ddpc_model_to_host(m);
    if (fail)
        fprintf(stderr, "rank %d: %s\n", rank, ddpc_last_error());
    memcpy(params, ddpc_model_params(m), ddpc_model_num_params(m) * sizeof(float));
    memcpy(buffers, ddpc_model_buffer_data(m), ddpc_model_num_buffer_floats(m) * sizeof(float));
    ddpc_reducer_destroy(red);
    ddpc_optim_destroy(o);
    ddpc_dataset_destroy(ds);
    ddpc_model_destroy(m);
    return fail;
}

static int rank_main(int rank, int world, void *ctx)
{
    (void)ctx;
    ddpc_comm_env env;
    ddpc_pg *pg = NULL, *host = NULL;
    ddpc_pg_config pc = ddpc_pg_config_default();
    pc.timeout_s = 30;
    if (job_env(&env, false) != DDPC_OK || ddpc_pg_create(&env, &pc, &pg) != DDPC_OK ||
        second_group(&host) != DDPC_OK) {
        fprintf(stderr, "rank %d: %s\n", rank, ddpc_last_error());
        return 1;
    }
    float one[2048], two[2048], dev[2048], buf1[256], buf2[256], bufd[256];
    int rc = train(pg, NULL, NULL, rank, one, buf1) | train(pg, host, NULL, rank, two, buf2) |
             train(pg, host, &standin, rank, dev, bufd);
    ddpc_model *m = make_model(NULL);
    size_t n = ddpc_model_num_params(m), nb = ddpc_model_num_buffer_floats(m);
    if (rc == 0 &&
        (memcmp(one, two, n * sizeof(float)) || memcmp(buf1, buf2, nb * sizeof(float)))) {
        fprintf(stderr, "rank %d: two groups trained other bits than one\n", rank);
        rc = 1;
    }
    if (rc == 0 &&
        (memcmp(one, dev, n * sizeof(float)) || memcmp(buf1, bufd, nb * sizeof(float)))) {
        fprintf(stderr, "rank %d: the device path of BatchNorm trained other bits\n", rank);
        rc = 1;
    }
    /* Every rank holds the same bits. */
    uint64_t h = 0, all[2];
    for (size_t i = 0; i < n; i++)
        h = h * 31 + ((const uint32_t *)two)[i];
    rc |= ddpc_pg_all_gather(host, &h, all, 1, DDPC_DTYPE_I64) != DDPC_OK;
    for (int r = 0; r < world; r++)
        rc |= all[r] != h;
    /* A host group of other ranks (here: one rank alone) is refused before anything is sent. */
    ddpc_comm_env single = ddpc_comm_env_single();
    ddpc_pg *alone = NULL;
    ddpc_reducer *red = NULL;
    ddpc_reducer_config rc2 = ddpc_reducer_config_default();
    if (ddpc_pg_create(&single, &pc, &alone) != DDPC_OK)
        rc = 1;
    rc2.host_pg = alone;
    if (ddpc_reducer_create(pg, m, &rc2, &red) != DDPC_EINVAL ||
        !strstr(ddpc_last_error(), "reducer: the host group is rank 0 of 1 but the device group")) {
        fprintf(stderr, "rank %d: a mismatched host group was not refused: %s\n", rank,
                ddpc_last_error());
        rc = 1;
    }
    ddpc_reducer_destroy(red);
    ddpc_pg_destroy(alone);
    ddpc_model_destroy(m);
    ddpc_pg_destroy(host);
    ddpc_pg_destroy(pg);
    return rc;
}

static void test_two_groups_train_the_same_bits(void)
{
    CHECK_EQ_INT(spawn_ranks(2, 60.0, rank_main, NULL), 0);
}

int main(void)
{
    standin = *ddpc_kernel_table_cpu();
    standin.name = "standin";
    standin.kind = DDPC_DEVICE_CUDA;
    RUN_TEST(test_two_groups_train_the_same_bits);
    return check_summary();
}
