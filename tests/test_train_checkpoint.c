// SPDX-License-Identifier: MIT
/* Checkpoints (src/ckpt/checkpoint_*.c): bitwise round trips for SGD with momentum and AdamW and
 * a bit-exact step after resume, latest and keep pruning, torn files (each file truncated, flipped
 * or missing in turn), leftover temporaries, re-saving a step, all-or-nothing load, export, the
 * failing allocator, and PyTorch reading model.safetensors and optimizer.safetensors. */
#include <ddpc/alloc.h>
#include <ddpc/checkpoint.h>
#include <ddpc/fs.h>
#include <ddpc/safetensors.h>
#include <ddpc/weights.h>

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "ckpt_testutil.h"

static char root[256];
static const char *config = "model:\n  type: mlp\tname: \"q\\uote\" caf\xc3\xa9 \x01 end\n";

/* A fresh empty directory root/<name>. */
static void fresh_dir(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", root, name);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", out);
    CHECK_EQ_INT(system(cmd), 0);
}

static bool exists(const char *dir, const char *name)
{
    char p[600];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return stat(p, &st) == 0;
}

static void round_trip(ddpc_optim_type type)
{
    char dir[400], path[600];
    fresh_dir(dir, sizeof dir, type == DDPC_OPTIM_SGD ? "rt_sgd" : "rt_adamw");
    ddpc_model *m = ckpt_small_model(1);
    ddpc_optim *o = ckpt_make_optim(type, ddpc_model_num_params(m));
    ckpt_train(m, o, 3, 7);
    ddpc_ckpt_state s = ckpt_state_for(3, config);
    CHECK_EQ_INT(ddpc_ckpt_save(dir, m, o, &s, 0, path, sizeof path), DDPC_OK);
    CHECK_STR_CONTAINS(path, "/step-00000003");
    CHECK(ddpc_ckpt_is_dir(path));
    CHECK(!ddpc_ckpt_is_dir(dir));

    ddpc_model *m2 = ckpt_small_model(99);
    ddpc_optim *o2 = ckpt_make_optim(type, ddpc_model_num_params(m2));
    CHECK(!ckpt_same_params(m, m2));
    ddpc_ckpt_state r;
    CHECK_EQ_INT(ddpc_ckpt_load(path, m2, o2, &r), DDPC_OK);
    CHECK(ckpt_same_params(m, m2));
    CHECK(ckpt_same_optim(o, o2));
    CHECK_EQ_INT(ddpc_optim_step_count(o2), 3);
    CHECK_EQ_INT(r.step, 3);
    CHECK_EQ_INT(r.epoch, 0);
    CHECK_EQ_INT(r.epoch_step, 3);
    CHECK_EQ_INT(r.samples_seen, 96);
    CHECK_EQ_INT(r.global_batch, 32);
    CHECK_EQ_INT(r.world, 2);
    CHECK(r.seed == 18446744073709551615ull);
    CHECK_EQ_INT(r.skipped_steps, 0);
    CHECK(r.config && strcmp(r.config, config) == 0);
    CHECK(strcmp(r.version, DDPC_VERSION) == 0);
    ddpc_ckpt_state_fini(&r);
    CHECK(r.config == NULL);

    /* Resume is bit-exact: one more step on each gives the same bits. */
    ckpt_train(m, o, 2, 8);
    ckpt_train(m2, o2, 2, 8);
    CHECK(ckpt_same_params(m, m2));
    CHECK(ckpt_same_optim(o, o2));

    /* Load without an optimizer touches only the model; the state may be NULL. */
    ddpc_model *m3 = ckpt_small_model(5);
    CHECK_EQ_INT(ddpc_ckpt_load(path, m3, NULL, NULL), DDPC_OK);
    ddpc_model_destroy(m3);
    ddpc_optim_destroy(o2);
    ddpc_model_destroy(m2);
    ddpc_optim_destroy(o);
    ddpc_model_destroy(m);
}

static void test_round_trip_sgd(void)
{
    round_trip(DDPC_OPTIM_SGD);
}

static void test_round_trip_adamw(void)
{
    round_trip(DDPC_OPTIM_ADAMW);
}

/* The loss scaler's state (fp16 runs) round-trips exactly, a float that is no power of two
 * included; a run without loss scaling writes none and reads back none. */
static void test_loss_scale_round_trip(void)
{
    char dir[400], path[600];
    fresh_dir(dir, sizeof dir, "rt_scale");
    ddpc_model *m = ckpt_small_model(1);
    ddpc_optim *o = ckpt_make_optim(DDPC_OPTIM_ADAMW, ddpc_model_num_params(m));
    ddpc_ckpt_state s = ckpt_state_for(4, config);
    s.loss_scaling = true;
    s.loss_scale = 12345.678f;
    s.loss_scale_growth_tracker = 17;
    CHECK_EQ_INT(ddpc_ckpt_save(dir, m, o, &s, 0, path, sizeof path), DDPC_OK);
    ddpc_ckpt_state r;
    CHECK_EQ_INT(ddpc_ckpt_read_state(path, &r), DDPC_OK);
    CHECK(r.loss_scaling && r.loss_scale == 12345.678f);
    CHECK_EQ_INT(r.loss_scale_growth_tracker, 17);
    /* state_crc is the file's own "state_crc32": the checkpoint's identity for the ranks. */
    char sp[700], *text = NULL, *at;
    size_t len = 0;
    snprintf(sp, sizeof sp, "%s/state.json", path);
    CHECK_EQ_INT(ddpc_read_file(sp, NULL, 0, NULL, &text, &len), DDPC_OK);
    at = text ? strstr(text, "\"state_crc32\": \"") : NULL;
    CHECK(at != NULL);
    if (at)
        CHECK_EQ_INT(r.state_crc, (uint32_t)strtoul(at + 16, NULL, 16));
    ddpc_free(text);
    ddpc_ckpt_state_fini(&r);
    s = ckpt_state_for(5, config);
    CHECK_EQ_INT(ddpc_ckpt_save(dir, m, o, &s, 0, path, sizeof path), DDPC_OK);
    CHECK_EQ_INT(ddpc_ckpt_read_state(path, &r), DDPC_OK);
    CHECK(!r.loss_scaling);
    ddpc_ckpt_state_fini(&r);
    ddpc_optim_destroy(o);
    ddpc_model_destroy(m);
}

static void test_latest_and_keep(void)
{
    char dir[400], path[600], found_path[600];
    bool found = true;
    fresh_dir(dir, sizeof dir, "keep");
    CHECK_EQ_INT(ddpc_ckpt_find_latest(dir, found_path, sizeof found_path, &found), DDPC_OK);
    CHECK(!found); /* a missing directory is not an error */
    ddpc_model *m = ckpt_small_model(1);
    ddpc_optim *o = ckpt_make_optim(DDPC_OPTIM_ADAMW, ddpc_model_num_params(m));
    for (int step = 1; step <= 5; step++) {
        ckpt_train(m, o, 1, (uint32_t)step);
        ddpc_ckpt_state s = ckpt_state_for(step * 10, NULL);
        CHECK_EQ_INT(ddpc_ckpt_save(dir, m, o, &s, 2, path, sizeof path), DDPC_OK);
    }
    CHECK(!exists(dir, "step-00000010") && !exists(dir, "step-00000030"));
    CHECK(exists(dir, "step-00000040") && exists(dir, "step-00000050"));
    CHECK_EQ_INT(ddpc_ckpt_find_latest(dir, found_path, sizeof found_path, &found), DDPC_OK);
    CHECK(found && strcmp(found_path, path) == 0);
    ddpc_ckpt_entry *e = NULL;
    size_t n = 0;
    CHECK_EQ_INT(ddpc_ckpt_list(dir, &e, &n), DDPC_OK);
    CHECK_EQ_INT(n, 2);
    if (n == 2) {
        CHECK(e[0].step == 40 && e[1].step == 50 && e[0].ok && e[1].ok);
        CHECK(!e[0].latest && e[1].latest);
        CHECK(e[1].epoch == 5 && e[1].world == 2 && e[1].bytes > 1000);
    }
    ddpc_free(e);
    /* keep 0 keeps everything; an older step saved later becomes latest. */
    ddpc_ckpt_state s = ckpt_state_for(20, NULL);
    CHECK_EQ_INT(ddpc_ckpt_save(dir, m, o, &s, 0, path, sizeof path), DDPC_OK);
    CHECK(exists(dir, "step-00000040") && exists(dir, "step-00000020"));
    CHECK_EQ_INT(ddpc_ckpt_find_latest(dir, found_path, sizeof found_path, &found), DDPC_OK);
    CHECK_STR_CONTAINS(found_path, "step-00000020");
    /* keep 1 after that: the new one and what latest names stay, the others go. */
    s.step = 60;
    CHECK_EQ_INT(ddpc_ckpt_save(dir, m, o, &s, 1, path, sizeof path), DDPC_OK);
    CHECK(exists(dir, "step-00000060") && !exists(dir, "step-00000050") &&
          !exists(dir, "step-00000020"));
    ddpc_optim_destroy(o);
    ddpc_model_destroy(m);
}

static void copy_file(const char *from, const char *to)
{
    char cmd[2000];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", from, to);
    CHECK_EQ_INT(system(cmd), 0);
}

/* Each file of the newest checkpoint torn in turn: verify names it, find_latest falls back and
 * find_usable reports the torn one; with both torn, neither is found and both are reported. */
static void test_torn_checkpoint(void)
{
    char dir[400], good[600], last[600], found_path[600];
    bool found;
    fresh_dir(dir, sizeof dir, "torn");
    ddpc_model *m = ckpt_small_model(1);
    ddpc_optim *o = ckpt_make_optim(DDPC_OPTIM_SGD, ddpc_model_num_params(m));
    ddpc_ckpt_state s = ckpt_state_for(1, config);
    CHECK_EQ_INT(ddpc_ckpt_save(dir, m, o, &s, 0, good, sizeof good), DDPC_OK);
    ckpt_train(m, o, 1, 3);
    s.step = 2;
    CHECK_EQ_INT(ddpc_ckpt_save(dir, m, o, &s, 0, last, sizeof last), DDPC_OK);
    const char *files[] = {"model.safetensors", "optimizer.safetensors", "state.json"};
    for (int f = 0; f < 3; f++) {
        for (int how = 0; how < 4; how++) {
            char p[700], backup[700];
            snprintf(p, sizeof p, "%s/%s", last, files[f]);
            snprintf(backup, sizeof backup, "%s/backup", root);
            copy_file(p, backup);
            struct stat st;
            CHECK_EQ_INT(stat(p, &st), 0);
            if (how == 0) {
                CHECK_EQ_INT(truncate(p, st.st_size - 1), 0);
            } else if (how == 3) {
                CHECK_EQ_INT(unlink(p), 0);
            } else { /* flip a byte: in the middle, or the last one */
                int fd = open(p, O_RDWR);
                off_t at = how == 1 ? st.st_size / 2 : st.st_size - 2;
                unsigned char c = 0;
                CHECK_EQ_INT(pread(fd, &c, 1, at), 1);
                c ^= 0x04;
                CHECK_EQ_INT(pwrite(fd, &c, 1, at), 1);
                close(fd);
            }
            CHECK_EQ_INT(ddpc_ckpt_verify(last), DDPC_EFORMAT);
            CHECK_STR_CONTAINS(ddpc_last_error(), files[f]);
            CHECK_EQ_INT(ddpc_ckpt_find_latest(dir, found_path, sizeof found_path, &found),
                         DDPC_OK);
            CHECK(found && strcmp(found_path, good) == 0);
            ddpc_ckpt_entry *sk = NULL;
            size_t nsk = 0;
            CHECK_EQ_INT(ddpc_ckpt_find_usable(dir, found_path, sizeof found_path, &found, &sk,
                                               &nsk),
                         DDPC_OK);
            CHECK(found && strcmp(found_path, good) == 0 && nsk == 1);
            if (nsk == 1) { /* the torn one, named, with verify's message */
                CHECK(strcmp(sk[0].name, "step-00000002") == 0 && sk[0].step == 2);
                CHECK_STR_CONTAINS(sk[0].problem, files[f]);
            }
            ddpc_free(sk);
            ddpc_model *m2 = ckpt_small_model(1);
            CHECK(ddpc_ckpt_load(last, m2, NULL, NULL) != DDPC_OK);
            ddpc_model_destroy(m2);
            copy_file(backup, p);
            CHECK_EQ_INT(ddpc_ckpt_verify(last), DDPC_OK);
        }
    }
    /* Both torn: none found, both reported (latest's first), which is resume's refusal. */
    char p1[700], p2[700];
    snprintf(p1, sizeof p1, "%s/model.safetensors", good);
    snprintf(p2, sizeof p2, "%s/model.safetensors", last);
    CHECK_EQ_INT(truncate(p1, 10), 0);
    CHECK_EQ_INT(truncate(p2, 10), 0);
    ddpc_ckpt_entry *sk = NULL;
    size_t nsk = 0;
    CHECK_EQ_INT(
        ddpc_ckpt_find_usable(dir, found_path, sizeof found_path, &found, &sk, &nsk), DDPC_OK);
    CHECK(!found && nsk == 2);
    if (nsk == 2)
        CHECK(sk[0].step == 2 && sk[1].step == 1);
    ddpc_free(sk);
    ddpc_optim_destroy(o);
    ddpc_model_destroy(m);
}

/* A temporary directory of a dead writer is ignored by readers and removed by the next save; one
 * of a live writer (pid 1) stays. Re-saving a step replaces it. */
static void test_leftover_tmp_and_resave(void)
{
    char dir[400], path[600], found_path[600], dead[700], live[700];
    bool found;
    fresh_dir(dir, sizeof dir, "tmp");
    ddpc_model *m = ckpt_small_model(1);
    ddpc_optim *o = ckpt_make_optim(DDPC_OPTIM_ADAMW, ddpc_model_num_params(m));
    ddpc_ckpt_state s = ckpt_state_for(5, NULL);
    CHECK_EQ_INT(ddpc_ckpt_save(dir, m, o, &s, 0, path, sizeof path), DDPC_OK);
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    waitpid(child, NULL, 0);
    snprintf(dead, sizeof dead, "%s/.tmp-step-00000009-%ld-abcdef", dir, (long)child);
    snprintf(live, sizeof live, "%s/.tmp-step-00000009-1-abcdef", dir);
    CHECK_EQ_INT(mkdir(dead, 0755), 0);
    CHECK_EQ_INT(mkdir(live, 0755), 0);
    char junk[800];
    snprintf(junk, sizeof junk, "%s/state.json", dead);
    FILE *f = fopen(junk, "w");
    fputs("{\"format\": \"ddpc-checkpoint\"", f);
    fclose(f);
    CHECK_EQ_INT(ddpc_ckpt_find_latest(dir, found_path, sizeof found_path, &found), DDPC_OK);
    CHECK(found && strcmp(found_path, path) == 0);

    ckpt_train(m, o, 1, 4); /* re-save step 5 with other contents */
    CHECK_EQ_INT(ddpc_ckpt_save(dir, m, o, &s, 0, path, sizeof path), DDPC_OK);
    struct stat st;
    CHECK(stat(dead, &st) != 0);
    CHECK(stat(live, &st) == 0);
    ddpc_model *m2 = ckpt_small_model(2);
    ddpc_optim *o2 = ckpt_make_optim(DDPC_OPTIM_ADAMW, ddpc_model_num_params(m2));
    CHECK_EQ_INT(ddpc_ckpt_load(path, m2, o2, NULL), DDPC_OK);
    CHECK(ckpt_same_params(m, m2) && ckpt_same_optim(o, o2));
    rmdir(live);
    /* nothing but step-00000005 and latest remains */
    DIR *d = opendir(dir);
    struct dirent *e;
    int others = 0;
    while (d && (e = readdir(d)))
        others += strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
                  strcmp(e->d_name, "step-00000005") && strcmp(e->d_name, "latest");
    closedir(d);
    CHECK_EQ_INT(others, 0);
    ddpc_optim_destroy(o2);
    ddpc_model_destroy(m2);
    ddpc_optim_destroy(o);
    ddpc_model_destroy(m);
}

/* Loading into another optimizer type or another model fails and changes nothing. */
static void test_load_mismatch(void)
{
    char dir[400], path[600];
    fresh_dir(dir, sizeof dir, "mismatch");
    ddpc_model *m = ckpt_small_model(1);
    ddpc_optim *o = ckpt_make_optim(DDPC_OPTIM_SGD, ddpc_model_num_params(m));
    ckpt_train(m, o, 2, 1);
    ddpc_ckpt_state s = ckpt_state_for(2, NULL);
    CHECK_EQ_INT(ddpc_ckpt_save(dir, m, o, &s, 0, path, sizeof path), DDPC_OK);

    ddpc_model *m2 = ckpt_small_model(3), *ref = ckpt_small_model(3);
    ddpc_optim *adam = ckpt_make_optim(DDPC_OPTIM_ADAMW, ddpc_model_num_params(m2));
    CHECK_EQ_INT(ddpc_ckpt_load(path, m2, adam, NULL), DDPC_EFORMAT);
    CHECK_STR_CONTAINS(ddpc_last_error(), "optimizer is sgd, but the run uses adamw");
    CHECK(ckpt_same_params(m2, ref));
    CHECK_EQ_INT(ddpc_optim_step_count(adam), 0);

    const int64_t wide[] = {12};
    ddpc_model *other = ckpt_make_model(wide, 1, 3, NULL, 0, 1);
    CHECK_EQ_INT(ddpc_ckpt_load(path, other, NULL, NULL), DDPC_EFORMAT);
    CHECK_STR_CONTAINS(ddpc_last_error(), "model of");
    ddpc_model_destroy(other);
    ddpc_optim_destroy(adam);
    ddpc_model_destroy(ref);
    ddpc_model_destroy(m2);
    ddpc_optim_destroy(o);
    ddpc_model_destroy(m);
}

static void test_export(void)
{
    char dir[400], path[600], out[600], resolved[600];
    fresh_dir(dir, sizeof dir, "export");
    ddpc_model *m = ckpt_small_model(1);
    ddpc_optim *o = ckpt_make_optim(DDPC_OPTIM_ADAMW, ddpc_model_num_params(m));
    ckpt_train(m, o, 2, 1);
    ddpc_ckpt_state s = ckpt_state_for(7, NULL);
    CHECK_EQ_INT(ddpc_ckpt_save(dir, m, o, &s, 0, path, sizeof path), DDPC_OK);
    CHECK_EQ_INT(ddpc_ckpt_resolve(dir, resolved, sizeof resolved), DDPC_OK);
    CHECK(strcmp(resolved, path) == 0);
    snprintf(out, sizeof out, "%s/exported.safetensors", root);
    CHECK_EQ_INT(ddpc_ckpt_export(path, out), DDPC_OK);
    ddpc_model *m2 = ckpt_small_model(2);
    CHECK_EQ_INT(ddpc_weights_load(m2, out), DDPC_OK);
    CHECK(ckpt_same_params(m, m2));
    ddpc_model *m3 = ckpt_small_model(3); /* init_from a checkpoint directory */
    CHECK_EQ_INT(ddpc_weights_load(m3, path), DDPC_OK);
    CHECK(ckpt_same_params(m, m3));
    unlink(out);
    ddpc_model_destroy(m3);
    ddpc_model_destroy(m2);
    ddpc_optim_destroy(o);
    ddpc_model_destroy(m);
}

/* Every allocation of save and load failing in turn: an error or success, never a torn or
 * half-loaded checkpoint, and nothing leaks. */
static void test_failing_allocator(void)
{
    char dir[400], path[600], found_path[600];
    bool found;
    fresh_dir(dir, sizeof dir, "alloc");
    ddpc_model *m = ckpt_small_model(1);
    ddpc_optim *o = ckpt_make_optim(DDPC_OPTIM_ADAMW, ddpc_model_num_params(m));
    ddpc_ckpt_state s = ckpt_state_for(1, config);
    ckpt_train(m, o, 1, 1); /* sizes the activation arena */
    CHECK_EQ_INT(ddpc_ckpt_save(dir, m, o, &s, 2, path, sizeof path), DDPC_OK);
    int64_t live = ddpc_alloc_live();
    int failures = 0;
    for (int k = 0; k < 200; k++) {
        ckpt_train(m, o, 1, (uint32_t)k);
        s.step = 2 + k;
        ddpc_alloc_fail_after(k);
        ddpc_status r = ddpc_ckpt_save(dir, m, o, &s, 2, path, sizeof path);
        ddpc_alloc_fail_after(-1);
        CHECK(r == DDPC_OK || r == DDPC_ENOMEM);
        failures += r != DDPC_OK;
        CHECK_EQ_INT(ddpc_alloc_live(), live);
        CHECK_EQ_INT(ddpc_ckpt_find_latest(dir, found_path, sizeof found_path, &found), DDPC_OK);
        CHECK(found);
        if (r == DDPC_OK)
            break;
    }
    CHECK(failures > 0);
    ddpc_model *m2 = ckpt_small_model(2), *ref = ckpt_small_model(2);
    ddpc_optim *o2 = ckpt_make_optim(DDPC_OPTIM_ADAMW, ddpc_model_num_params(m2));
    live = ddpc_alloc_live();
    for (int k = 0; k < 200; k++) {
        ddpc_ckpt_state r;
        ddpc_alloc_fail_after(k);
        ddpc_status st = ddpc_ckpt_load(found_path, m2, o2, &r);
        ddpc_alloc_fail_after(-1);
        CHECK(st == DDPC_OK || st == DDPC_ENOMEM);
        if (st == DDPC_OK) {
            CHECK(ckpt_same_params(m, m2) && ckpt_same_optim(o, o2));
            ddpc_ckpt_state_fini(&r);
            break;
        }
        CHECK(ckpt_same_params(m2, ref)); /* all-or-nothing */
        CHECK_EQ_INT(ddpc_alloc_live(), live);
    }
    ddpc_optim_destroy(o2);
    ddpc_model_destroy(ref);
    ddpc_model_destroy(m2);
    ddpc_optim_destroy(o);
    ddpc_model_destroy(m);
}

static void test_python_reads_checkpoint(void)
{
    if (system("/usr/bin/python3 -c 'import numpy' 2>/dev/null") != 0) {
        fprintf(stderr, "test_python_reads_checkpoint: /usr/bin/python3 with numpy is required "
                        "(install python3-numpy)\n");
        CHECK(!"python3 with numpy available");
        return;
    }
    char dir[400], path[600], out[600], cmd[2000], script[600];
    fresh_dir(dir, sizeof dir, "python");
    ddpc_model *m = ckpt_small_model(1);
    ddpc_optim *o = ckpt_make_optim(DDPC_OPTIM_ADAMW, ddpc_model_num_params(m));
    ckpt_train(m, o, 3, 2);
    ddpc_ckpt_state s = ckpt_state_for(3, config);
    CHECK_EQ_INT(ddpc_ckpt_save(dir, m, o, &s, 0, path, sizeof path), DDPC_OK);
    const char *src = getenv("DDPC_SOURCE_DIR");
    snprintf(script, sizeof script, "%s/tests/safetensors_interop.py", src ? src : "..");
    snprintf(out, sizeof out, "%s/from_python.safetensors", root);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s' ckpt '%s' '%s'", script, path, out);
    CHECK_EQ_INT(system(cmd), 0);
    /* Python wrote back the parameters and the optimizer state it loaded, under the same names:
     * they equal ours bit for bit. */
    ddpc_model *m2 = ckpt_small_model(2);
    CHECK_EQ_INT(ddpc_weights_load_opts(m2, out, false, NULL, 0), DDPC_OK);
    CHECK(ckpt_same_params(m, m2));
    ddpc_safetensors *f = NULL;
    CHECK_EQ_INT(ddpc_safetensors_open(&f, out), DDPC_OK);
    for (size_t i = 0; f && i < ddpc_model_num_tensors(m); i++) {
        const ddpc_param *p = ddpc_model_tensor(m, i);
        char name[128];
        ddpc_st_info info;
        snprintf(name, sizeof name, "%s.exp_avg_sq", p->name);
        CHECK_EQ_INT(ddpc_safetensors_find(f, name, &info), DDPC_OK);
        CHECK(info.nbytes == p->numel * sizeof(float) &&
              memcmp(info.data, ddpc_optim_state(o, 1, NULL) + p->offset, info.nbytes) == 0);
    }
    ddpc_safetensors_close(f);
    unlink(out);
    ddpc_model_destroy(m2);
    ddpc_optim_destroy(o);
    ddpc_model_destroy(m);
}

int main(void)
{
    snprintf(root, sizeof root, "/tmp/ddpc_ckpt_XXXXXX");
    if (!mkdtemp(root)) {
        fprintf(stderr, "mkdtemp failed\n");
        return 1;
    }
    RUN_TEST(test_round_trip_sgd);
    RUN_TEST(test_round_trip_adamw);
    RUN_TEST(test_loss_scale_round_trip);
    RUN_TEST(test_latest_and_keep);
    RUN_TEST(test_torn_checkpoint);
    RUN_TEST(test_leftover_tmp_and_resave);
    RUN_TEST(test_load_mismatch);
    RUN_TEST(test_export);
    RUN_TEST(test_failing_allocator);
    RUN_TEST(test_python_reads_checkpoint);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", root);
    return check_summary();
}
