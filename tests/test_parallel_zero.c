// SPDX-License-Identifier: MIT
/* ZeRO in the reducer, on forked shm ranks: the shards of all ranks cover every parameter exactly
 * once; at stage 2 each rank's chunks of the gradient hold exactly the bits a stage-0 all-reduce
 * leaves there, the rest of the gradient buffer reads zero and holds no physical memory (mincore);
 * the parameter gather gives every rank every owner's chunk; a warm stage-2 backward allocates
 * nothing. Several buckets (the staging slots
 * rotate), an odd world (padded chunks), bf16 communication. Also ddpc_optim_step_ranges. */
#include "check.h"
#include "spawn.h"

#include <ddpc/alloc.h>
#include <ddpc/comm.h>
#include <ddpc/data.h>
#include <ddpc/models.h>
#include <ddpc/nn.h>
#include <ddpc/optim.h>
#include <ddpc/pages.h>
#include <ddpc/reducer.h>

#include <string.h>
#include <unistd.h>

typedef struct {
    ddpc_dtype comm;
    double bucket_mb;
} job;

static ddpc_model *make_model(void)
{
    ddpc_model_config c = ddpc_model_config_default();
    ddpc_mlp_config own = ddpc_mlp_config_default();
    c.type_config = &own;
    strcpy(c.type, "mlp");
    c.in_channels = 1, c.in_height = 16, c.in_width = 16, c.num_classes = 10;
    own.hidden[0] = 300, own.n_hidden = 1; /* ~80k parameters: 80 pages of gradients */
    c.seed = 3;
    ddpc_model *m = NULL;
    return ddpc_model_create(&m, &c) == DDPC_OK ? m : NULL;
}

static ddpc_reducer *make_reducer(ddpc_pg *pg, ddpc_model *m, const job *j, int stage)
{
    ddpc_reducer_config c = ddpc_reducer_config_default();
    c.comm_dtype = j->comm;
    c.bucket_cap_mb = c.first_bucket_mb = j->bucket_mb;
    c.zero_stage = stage;
    ddpc_reducer *r = NULL;
    if (ddpc_reducer_create(pg, m, &c, &r) != DDPC_OK)
        fprintf(stderr, "reducer: %s\n", ddpc_last_error());
    return r;
}

/* One forward/backward of this rank's 8 samples into m's gradients, then the reducer's finish. */
static int backward(ddpc_model *m, ddpc_reducer *r, ddpc_dataset *ds, int rank)
{
    float x[8 * 256];
    int32_t y[8];
    int64_t idx[8];
    for (int i = 0; i < 8; i++)
        idx[i] = rank * 8 + i;
    ddpc_model_input in = {.n = 8, .x = x, .targets = y};
    ddpc_model_output out;
    ddpc_reducer_zero_grads(r);
    ddpc_reducer_prepare(r, true);
    int rc = ddpc_dataset_get_batch(ds, idx, 8, x, NULL, y) != DDPC_OK;
    rc |= ddpc_model_forward(m, &in, true, &out) != DDPC_OK;
    rc |= ddpc_model_backward(m, 1.0f) != DDPC_OK;
    rc |= ddpc_reducer_finish(r) != DDPC_OK;
    return rc;
}

/* Every parameter of every tensor is in exactly one rank's shard. */
static int check_cover(ddpc_pg *pg, ddpc_model *m, ddpc_reducer *r)
{
    size_t n = ddpc_model_num_params(m), nr;
    const ddpc_range *sh;
    ddpc_reducer_shard(r, &sh, &nr);
    int32_t *count = ddpc_calloc(n, sizeof *count);
    for (size_t i = 0; i < nr; i++)
        for (size_t k = 0; k < sh[i].len; k++)
            count[sh[i].lo + k]++;
    int rc = ddpc_pg_all_reduce(pg, count, count, n, DDPC_DTYPE_I32, DDPC_REDUCE_SUM) != DDPC_OK;
    for (size_t t = 0; t < ddpc_model_num_tensors(m); t++) {
        const ddpc_param *p = ddpc_model_tensor(m, t);
        for (size_t k = 0; k < p->numel; k++)
            rc |= count[p->offset + k] != 1;
    }
    for (size_t i = 1; i < nr; i++) /* ascending */
        rc |= sh[i].lo < sh[i - 1].lo + sh[i - 1].len;
    ddpc_free(count);
    return rc;
}

/* Stage 2's owned chunks equal stage 0's bits; everything else is zero and mostly not resident. */
static int check_scatter(ddpc_model *m0, ddpc_model *m2, ddpc_reducer *r2, bool residency)
{
    size_t n = ddpc_model_num_params(m2), nr, owned = 0;
    const ddpc_range *sh;
    ddpc_reducer_shard(r2, &sh, &nr);
    const float *g0 = ddpc_model_grads(m0), *g2 = ddpc_model_grads(m2);
    /* Measured before anything reads the buffer: mincore counts a page read back as zeros (the
     * kernel's shared zero page) as resident although it costs no memory. */
    size_t resident = ddpc_pages_resident(g2, n * sizeof(float));
    uint8_t *mine = ddpc_calloc(n, 1);
    int rc = 0;
    for (size_t i = 0; i < nr; i++) {
        owned += sh[i].len;
        memset(mine + sh[i].lo, 1, sh[i].len);
        rc |= memcmp(g0 + sh[i].lo, g2 + sh[i].lo, sh[i].len * sizeof(float)) != 0;
    }
    for (size_t i = 0; i < n; i++)
        rc |= !mine[i] && g2[i] != 0.0f;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    /* The owned chunks, plus the edge pages each chunk shares with released neighbours. */
    size_t limit = owned * sizeof(float) + (2 * nr + 2) * page;
    if (residency && resident > limit) {
        fprintf(stderr, "gradient buffer: %zu bytes resident, owned %zu bytes, limit %zu\n",
                resident, owned * sizeof(float), limit);
        rc = 1;
    }
    ddpc_free(mine);
    return rc;
}

/* Each rank writes f(i) = i/1000 + 0.5 into its own chunks of the parameters only (others keep
 * rank-specific junk); after the gather every rank holds f everywhere in the shards. */
static int check_gather(ddpc_model *m, ddpc_reducer *r, int rank)
{
    float *p = ddpc_model_params(m);
    size_t nr;
    const ddpc_range *sh;
    ddpc_reducer_shard(r, &sh, &nr);
    for (size_t t = 0; t < ddpc_model_num_tensors(m); t++) {
        const ddpc_param *q = ddpc_model_tensor(m, t);
        for (size_t k = 0; k < q->numel; k++)
            p[q->offset + k] = -1.0f - (float)rank;
    }
    for (size_t i = 0; i < nr; i++)
        for (size_t k = sh[i].lo; k < sh[i].lo + sh[i].len; k++)
            p[k] = (float)k / 1000.0f + 0.5f;
    int rc = ddpc_reducer_gather_params(r) != DDPC_OK;
    for (size_t t = 0; t < ddpc_model_num_tensors(m); t++) {
        const ddpc_param *q = ddpc_model_tensor(m, t);
        for (size_t k = q->offset; k < q->offset + q->numel; k++)
            rc |= p[k] != (float)k / 1000.0f + 0.5f;
    }
    return rc;
}

static int rank_main(int rank, int world, void *ctx)
{
    const job *j = ctx;
    ddpc_comm_env env;
    ddpc_pg *pg = NULL;
    ddpc_pg_config pc = ddpc_pg_config_default();
    pc.timeout_s = 30;
    if (ddpc_comm_env_discover(&env) != DDPC_OK || ddpc_pg_create(&env, &pc, &pg) != DDPC_OK ||
        ddpc_pg_world_size(pg) != world)
        return 1;
    ddpc_dataset *ds = NULL;
    ddpc_model *m0 = make_model(), *m2 = make_model();
    int rc = ddpc_dataset_synthetic_images_create(&ds, 64, 1, 16, 16, 10, 3, true) != DDPC_OK;
    ddpc_reducer *r0 = make_reducer(pg, m0, j, 0), *r2 = make_reducer(pg, m2, j, 2);
    rc |= !r0 || !r2;
    for (int step = 0; step < 2 && rc == 0; step++) { /* twice: the buffer is reused */
        rc |= backward(m0, r0, ds, rank);
        int64_t allocs = ddpc_alloc_total();
        rc |= backward(m2, r2, ds, rank);
        if (step == 1 && ddpc_alloc_total() != allocs) { /* warm: pool and handles reused */
            fprintf(stderr, "rank %d: a warm stage-2 backward allocated %lld blocks\n", rank,
                    (long long)(ddpc_alloc_total() - allocs));
            rc = 1;
        }
        /* Residency on the first step only: this test then reads the whole buffer, which maps
         * the zero page over the parts it never wrote (the reducer does not zero them again). */
        rc |= check_scatter(m0, m2, r2, step == 0);
        if (rc)
            fprintf(stderr, "rank %d: stage 2 gradients differ (step %d)\n", rank, step);
    }
    rc |= rc == 0 && check_cover(pg, m2, r2);
    rc |= rc == 0 && check_gather(m2, r2, rank);
    ddpc_reducer_destroy(r0);
    ddpc_reducer_destroy(r2);
    ddpc_model_destroy(m0);
    ddpc_model_destroy(m2);
    ddpc_dataset_destroy(ds);
    ddpc_pg_destroy(pg);
    return rc;
}

static void test_stage2_scatter_two_and_three_ranks(void)
{
    job j = {.comm = DDPC_DTYPE_F32, .bucket_mb = 0.05}; /* ~12k floats: several buckets */
    CHECK_EQ_INT(spawn_ranks(2, 60.0, rank_main, &j), 0);
    CHECK_EQ_INT(spawn_ranks(3, 60.0, rank_main, &j), 0);
    j.bucket_mb = 25; /* one bucket */
    CHECK_EQ_INT(spawn_ranks(3, 60.0, rank_main, &j), 0);
}

static void test_stage2_bf16_communication(void)
{
    job j = {.comm = DDPC_DTYPE_BF16, .bucket_mb = 0.05};
    CHECK_EQ_INT(spawn_ranks(2, 60.0, rank_main, &j), 0);
}

/* step_ranges over two ranges equals two independent optimizers stepping each part. */
static void test_optim_step_ranges(void)
{
    enum { N = 100 };
    float p[N], g[N], q[N];
    for (int i = 0; i < N; i++) {
        p[i] = q[i] = (float)i / 17.0f - 2.0f;
        g[i] = (float)((i * 7) % 11) / 5.0f - 1.0f;
    }
    ddpc_optim_config c = ddpc_optim_config_default();
    c.type = DDPC_OPTIM_ADAMW;
    c.weight_decay = 0.1f;
    ddpc_optim *all = NULL, *a = NULL, *b = NULL;
    CHECK_EQ_INT(ddpc_optim_create(&all, &c, 30 + 25), DDPC_OK);
    CHECK_EQ_INT(ddpc_optim_create(&a, &c, 30), DDPC_OK);
    CHECK_EQ_INT(ddpc_optim_create(&b, &c, 25), DDPC_OK);
    ddpc_range r[2] = {{10, 30}, {60, 25}};
    for (int s = 0; s < 3; s++) {
        ddpc_optim_step_ranges(all, p, g, NULL, r, 2, 0.01f);
        ddpc_optim_step(a, q + 10, g + 10, NULL, 0.01f);
        ddpc_optim_step(b, q + 60, g + 60, NULL, 0.01f);
    }
    CHECK(memcmp(p, q, sizeof p) == 0);
    CHECK(memcmp(ddpc_optim_state(all, 1, NULL) + 30, ddpc_optim_state(b, 1, NULL),
                 25 * sizeof(float)) == 0);
    CHECK_EQ_INT(ddpc_optim_step_count(all), 3);
    ddpc_optim_destroy(all);
    ddpc_optim_destroy(a);
    ddpc_optim_destroy(b);
}

int main(void)
{
    RUN_TEST(test_optim_step_ranges);
    RUN_TEST(test_stage2_scatter_two_and_three_ranks);
    RUN_TEST(test_stage2_bf16_communication);
    return check_summary();
}
