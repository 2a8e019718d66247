// SPDX-License-Identifier: MIT
/* Sharded checkpoints (src/ckpt/checkpoint_shard_save.c, checkpoint_reshard.c,
 * checkpoint_manifest.c) on a small real mlp and optimizer: 3 forked ranks each save their chunk
 * of two "buckets" (the reducer's partition) with ddpc_ckpt_save_sharded, and the loader gives
 * back every parameter and the optimizer state of any ranges bit for bit, from the sharded and
 * from the full format; export consolidates; a rank's bad arguments fail every rank alike; a torn
 * shard and manifests with a gap or an overlap are refused naming the culprit, loading nothing. */
#include <ddpc/alloc.h>
#include <ddpc/checkpoint.h>
#include <ddpc/comm.h>
#include <ddpc/weights.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "ckpt_testutil.h"
#include "spawn.h"
#include "ckpt/checkpoint_impl.h"

#define WORLD 3

static char root[256];

/* The reference: a model and a full AdamW after 3 steps (the same on every process). */
static void reference(ddpc_model **m, ddpc_optim **o)
{
    *m = ckpt_small_model(1);
    *o = ckpt_make_optim(DDPC_OPTIM_ADAMW, ddpc_model_num_params(*m));
    ckpt_train(*m, *o, 3, 7);
}

/* Rank r's chunk of two buckets [0, h) and [h, np), as ddpc_reducer_shard partitions them. */
static size_t partition(size_t np, int rank, int world, ddpc_range *out)
{
    size_t h = np / 2, bounds[3] = {0, h, np};
    for (int b = 0; b < 2; b++) {
        size_t len = bounds[b + 1] - bounds[b], chunk = (len + (size_t)world - 1) / (size_t)world;
        size_t lo = bounds[b] + (size_t)rank * chunk;
        lo = lo < bounds[b + 1] ? lo : bounds[b + 1];
        size_t hi = lo + chunk < bounds[b + 1] ? lo + chunk : bounds[b + 1];
        out[b] = (ddpc_range){lo, hi - lo};
    }
    return 2;
}

/* An optimizer holding o's state of the ranges (their elements in order), o's step count. */
static ddpc_optim *slice(ddpc_optim *o, const ddpc_range *r, size_t n)
{
    size_t owned = 0;
    for (size_t i = 0; i < n; i++)
        owned += r[i].len;
    ddpc_optim *s = ckpt_make_optim(ddpc_optim_config_of(o)->type, owned ? owned : 1);
    for (size_t k = 0; k < ddpc_optim_num_state(o); k++) {
        float *dst = ddpc_optim_state(s, k, NULL);
        for (size_t i = 0, at = 0; i < n; at += r[i].len, i++)
            memcpy(dst + at, ddpc_optim_state(o, k, NULL) + r[i].lo, r[i].len * sizeof(float));
    }
    ddpc_optim_set_step_count(s, ddpc_optim_step_count(o));
    return s;
}

typedef struct {
    char dir[400];
    int bad_rank;  /* this rank passes a NULL optimizer; -1: none */
    int dead_rank; /* this rank leaves before the save (as if killed); -1: none */
    ddpc_status want;
} save_job;

static int save_rank(int rank, int world, void *ctx)
{
    const save_job *j = ctx;
    ddpc_comm_env env;
    ddpc_pg *pg = NULL;
    ddpc_pg_config pc = ddpc_pg_config_default();
    pc.timeout_s = j->dead_rank >= 0 ? 3 : 30;
    if (ddpc_comm_env_discover(&env) != DDPC_OK || ddpc_pg_create(&env, &pc, &pg) != DDPC_OK)
        return 1;
    if (rank == j->dead_rank)
        _exit(0);
    ddpc_model *m;
    ddpc_optim *o;
    reference(&m, &o);
    ddpc_range r[2];
    size_t n = partition(ddpc_model_num_params(m), rank, world, r);
    ddpc_optim *mine = slice(o, r, n);
    ddpc_ckpt_state s = ckpt_state_for(3, "model: {type: mlp}\n");
    s.zero_stage = 2;
    char path[600];
    ddpc_status st = ddpc_ckpt_save_sharded(j->dir, pg, m, rank == j->bad_rank ? NULL : mine, r, n,
                                            &s, 0, path, sizeof path);
    int rc = j->dead_rank >= 0 ? st == DDPC_OK : st != j->want;
    if (rc)
        fprintf(stderr, "rank %d: save returned %d (%s)\n", rank, st, ddpc_last_error());
    if (st == DDPC_OK)
        rc |= strstr(path, "/step-00000003") == NULL;
    else if (j->dead_rank < 0) /* the failing rank's message, on every rank */
        rc |= strstr(ddpc_last_error(), "optimizer") == NULL;
    ddpc_optim_destroy(mine);
    ddpc_optim_destroy(o);
    ddpc_model_destroy(m);
    ddpc_pg_destroy(pg);
    return rc;
}

/* A sharded checkpoint of the reference in root/<name>; its step directory into path. */
static void save_sharded(const char *name, char *path, size_t cap)
{
    save_job j = {.bad_rank = -1, .dead_rank = -1, .want = DDPC_OK};
    snprintf(j.dir, sizeof j.dir, "%s/%s", root, name);
    CHECK_EQ_INT(spawn_ranks(WORLD, 60.0, save_rank, &j), 0);
    snprintf(path, cap, "%s/step-00000003", j.dir);
}

/* Loads path with the ranges into a fresh model and optimizer and compares with the reference. */
static void expect_load(const char *path, const ddpc_range *r, size_t n)
{
    ddpc_model *ref, *m = ckpt_small_model(5);
    ddpc_optim *o;
    reference(&ref, &o);
    ddpc_optim *want = r ? slice(o, r, n) : o;
    ddpc_optim *got = ckpt_make_optim(DDPC_OPTIM_ADAMW, ddpc_optim_numel(want));
    ddpc_ckpt_state s;
    CHECK_EQ_INT(ddpc_ckpt_load_shard(path, m, got, r, n, &s), DDPC_OK);
    CHECK(ckpt_same_params(m, ref));
    CHECK(ckpt_same_optim(got, want));
    CHECK_EQ_INT(s.step, 3);
    ddpc_ckpt_state_fini(&s);
    if (want != o)
        ddpc_optim_destroy(want);
    ddpc_optim_destroy(got);
    ddpc_optim_destroy(o);
    ddpc_model_destroy(m);
    ddpc_model_destroy(ref);
}

static void test_save_and_reshard(void)
{
    char path[600];
    save_sharded("reshard", path, sizeof path);
    CHECK_EQ_INT(ddpc_ckpt_verify(path), DDPC_OK);
    int stage = -1;
    ddpc_ckpt_shard_info *sh = NULL;
    size_t n = 0;
    CHECK_EQ_INT(ddpc_ckpt_layout(path, &stage, &sh, &n), DDPC_OK);
    CHECK_EQ_INT(stage, 2);
    CHECK_EQ_INT(n, WORLD);
    ddpc_model *m = ckpt_small_model(1);
    uint64_t total = 0;
    for (size_t i = 0; sh && i < n; i++) {
        char want[64];
        snprintf(want, sizeof want, "shard-%05zu-of-%05d.safetensors", i, WORLD);
        CHECK(strcmp(sh[i].file, want) == 0);
        CHECK_EQ_INT(sh[i].n_ranges, 2);
        total += sh[i].floats;
    }
    CHECK_EQ_INT(total, ddpc_model_num_params(m));
    ddpc_free(sh);

    expect_load(path, NULL, 0); /* one rank, everything */
    size_t np = ddpc_model_num_params(m);
    ddpc_range odd[3] = {{0, 1}, {5, 17}, {np / 2 - 3, np / 2}}; /* across files and buckets */
    expect_load(path, odd, 3);
    for (int r = 0; r < 2; r++) { /* the partition of 2 ranks */
        ddpc_range p[2];
        expect_load(path, p, partition(np, r, 2, p));
    }
    ddpc_range none[1] = {{7, 0}};
    expect_load(path, none, 1);

    /* The full format reshards the same way. */
    char dir[500], full[600];
    ddpc_model *ref;
    ddpc_optim *o;
    reference(&ref, &o);
    snprintf(dir, sizeof dir, "%s/full", root);
    ddpc_ckpt_state s = ckpt_state_for(3, NULL);
    CHECK_EQ_INT(ddpc_ckpt_save(dir, ref, o, &s, 0, full, sizeof full), DDPC_OK);
    expect_load(full, odd, 3);
    CHECK_EQ_INT(ddpc_ckpt_layout(full, &stage, &sh, &n), DDPC_OK);
    CHECK(stage == 0 && n == 0 && sh == NULL);

    /* Export consolidates the shards: the same parameters and file as the full export. */
    char a[600], b[600], cmd[1400];
    snprintf(a, sizeof a, "%s/sharded.safetensors", root);
    snprintf(b, sizeof b, "%s/full.safetensors", root);
    CHECK_EQ_INT(ddpc_ckpt_export(path, a), DDPC_OK);
    CHECK_EQ_INT(ddpc_ckpt_export(full, b), DDPC_OK);
    CHECK_EQ_INT(ddpc_weights_load(m, a), DDPC_OK);
    CHECK(ckpt_same_params(m, ref));
    snprintf(cmd, sizeof cmd, "cmp -s '%s' '%s'", a, b);
    CHECK_EQ_INT(system(cmd), 0);
    ddpc_optim_destroy(o);
    ddpc_model_destroy(ref);
    ddpc_model_destroy(m);
}

/* One rank's bad argument: every rank returns the same error, and nothing is committed. */
static void test_one_rank_fails_all_fail(void)
{
    save_job j = {.bad_rank = 1, .dead_rank = -1, .want = DDPC_EINVAL};
    snprintf(j.dir, sizeof j.dir, "%s/badrank", root);
    CHECK_EQ_INT(spawn_ranks(WORLD, 60.0, save_rank, &j), 0);
    char found_path[600];
    bool found = true;
    CHECK_EQ_INT(ddpc_ckpt_find_latest(j.dir, found_path, sizeof found_path, &found), DDPC_OK);
    CHECK(!found);
}

/* A rank that dies before the save: the others fail (at the group's timeout at the latest)
 * instead of waiting for it, and nothing is committed. */
static void test_dead_rank_no_hang(void)
{
    for (int dead = 0; dead < WORLD; dead += WORLD - 1) {
        save_job j = {.bad_rank = -1, .dead_rank = dead};
        snprintf(j.dir, sizeof j.dir, "%s/dead%d", root, dead);
        CHECK_EQ_INT(spawn_ranks(WORLD, 30.0, save_rank, &j), 0);
        char found_path[600];
        bool found = true;
        CHECK_EQ_INT(ddpc_ckpt_find_latest(j.dir, found_path, sizeof found_path, &found), DDPC_OK);
        CHECK(!found);
    }
}

/* Loading must fail naming `needle` and leave the model and optimizer as they were. */
static void expect_refused(const char *path, const char *needle)
{
    ddpc_model *m = ckpt_small_model(5), *before = ckpt_small_model(5);
    ddpc_optim *o = ckpt_make_optim(DDPC_OPTIM_ADAMW, ddpc_model_num_params(m));
    CHECK_EQ_INT(ddpc_ckpt_load_shard(path, m, o, NULL, 0, NULL), DDPC_EFORMAT);
    CHECK_STR_CONTAINS(ddpc_last_error(), needle);
    CHECK(ckpt_same_params(m, before));
    CHECK_EQ_INT(ddpc_optim_step_count(o), 0);
    ddpc_optim_destroy(o);
    ddpc_model_destroy(before);
    ddpc_model_destroy(m);
}

static void test_torn_shard(void)
{
    char path[600], file[700];
    save_sharded("torn", path, sizeof path);
    snprintf(file, sizeof file, "%s/shard-00001-of-00003.safetensors", path);
    struct stat st;
    CHECK_EQ_INT(stat(file, &st), 0);
    int fd = open(file, O_RDWR);
    unsigned char c = 0;
    CHECK_EQ_INT(pread(fd, &c, 1, st.st_size - 3), 1);
    c ^= 0x10;
    CHECK_EQ_INT(pwrite(fd, &c, 1, st.st_size - 3), 1);
    close(fd);
    CHECK_EQ_INT(ddpc_ckpt_verify(path), DDPC_EFORMAT);
    CHECK_STR_CONTAINS(ddpc_last_error(), "shard-00001-of-00003.safetensors: CRC-32");
    expect_refused(path, "shard-00001-of-00003.safetensors");
    CHECK_EQ_INT(truncate(file, st.st_size - 1), 0);
    expect_refused(path, "shard-00001-of-00003.safetensors");
}

/* Rewrites state.json of path with range k of the manifest moved by `shift` and grown by `grow`
 * (its own checksum recomputed, so only the manifest check can catch it). */
static void edit_manifest(const char *path, size_t k, long shift, long grow)
{
    ddpc_ckpt_state s;
    ddpc__ckpt_extra x;
    CHECK_EQ_INT(ddpc__ckpt_state_load(path, &s, &x), DDPC_OK);
    x.ranges[k].lo = (size_t)((long)x.ranges[k].lo + shift);
    x.ranges[k].len = (size_t)((long)x.ranges[k].len + grow);
    char *text = NULL, file[700];
    size_t len = 0;
    CHECK_EQ_INT(ddpc__ckpt_state_format(&s, &x, &text, &len), DDPC_OK);
    snprintf(file, sizeof file, "%s/state.json", path);
    FILE *f = fopen(file, "w");
    CHECK(f && fwrite(text, 1, len, f) == len);
    if (f)
        fclose(f);
    ddpc_free(text);
    ddpc__ckpt_extra_fini(&x);
    ddpc_ckpt_state_fini(&s);
}

static void test_manifest_gap_and_overlap(void)
{
    char path[600];
    save_sharded("gap", path, sizeof path);
    edit_manifest(path, 2, 0, -1); /* shard 1's first range one short: a gap */
    CHECK_EQ_INT(ddpc_ckpt_verify(path), DDPC_EFORMAT);
    CHECK_STR_CONTAINS(ddpc_last_error(), "incomplete manifest");
    expect_refused(path, "state.json: the shards hold");
    edit_manifest(path, 2, 0, 2); /* now one too long: overlaps shard 2's */
    expect_refused(path, "overlap");
    edit_manifest(path, 2, 0, -1); /* back as it was */
    CHECK_EQ_INT(ddpc_ckpt_verify(path), DDPC_OK);
    expect_load(path, NULL, 0);
}

/* A checkpoint of another model or optimizer type is refused, naming it. */
static void test_sharded_mismatch(void)
{
    char path[600];
    save_sharded("mismatch", path, sizeof path);
    const int64_t wide[] = {12};
    ddpc_model *other = ckpt_make_model(wide, 1, 3, NULL, 0, 1);
    CHECK_EQ_INT(ddpc_ckpt_load_shard(path, other, NULL, NULL, 0, NULL), DDPC_EFORMAT);
    CHECK_STR_CONTAINS(ddpc_last_error(), "model of");
    ddpc_model *m = ckpt_small_model(1);
    ddpc_optim *sgd = ckpt_make_optim(DDPC_OPTIM_SGD, ddpc_model_num_params(m));
    CHECK_EQ_INT(ddpc_ckpt_load_shard(path, m, sgd, NULL, 0, NULL), DDPC_EFORMAT);
    CHECK_STR_CONTAINS(ddpc_last_error(), "optimizer is adamw, but the run uses sgd");
    ddpc_range beyond[1] = {{0, ddpc_model_num_params(m) + 1}};
    CHECK_EQ_INT(ddpc_ckpt_load_shard(path, m, sgd, beyond, 1, NULL), DDPC_EINVAL);
    ddpc_optim_destroy(sgd);
    ddpc_model_destroy(m);
    ddpc_model_destroy(other);
}

int main(void)
{
    snprintf(root, sizeof root, "/tmp/ddpc_ckpt_shard_XXXXXX");
    if (!mkdtemp(root)) {
        fprintf(stderr, "mkdtemp failed\n");
        return 1;
    }
    RUN_TEST(test_save_and_reshard);
    RUN_TEST(test_one_rank_fails_all_fail);
    RUN_TEST(test_dead_rank_no_hang);
    RUN_TEST(test_torn_shard);
    RUN_TEST(test_manifest_gap_and_overlap);
    RUN_TEST(test_sharded_mismatch);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", root);
    return check_summary();
}
