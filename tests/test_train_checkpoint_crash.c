// SPDX-License-Identifier: MIT
/* Checkpoints under SIGKILL: a child saves over and over (re-saving steps, pruning to 2) while the
 * parent kills it after a random number of microseconds, 30 times. After each kill the latest
 * checkpoint must verify and hold exactly one save's contents: every parameter and optimizer
 * value is derived from a generation number recorded in state.json's samples_seen. */
#include <ddpc/alloc.h>
#include <ddpc/checkpoint.h>

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "ckpt_testutil.h"

static char root[256];

static float value(int64_t gen, size_t i, int buffer)
{
    return (float)gen + (float)(i % 97) * 0.01f + (float)buffer * 0.5f;
}

/* Fills the parameters and every optimizer buffer from gen and saves it as step gen % 5. */
static ddpc_status save_generation(ddpc_model *m, ddpc_optim *o, int64_t gen)
{
    size_t n = ddpc_model_num_params(m);
    for (size_t i = 0; i < n; i++)
        ddpc_model_params(m)[i] = value(gen, i, 0);
    for (size_t k = 0; k < ddpc_optim_num_state(o); k++)
        for (size_t i = 0; i < n; i++)
            ddpc_optim_state(o, k, NULL)[i] = value(gen, i, 1 + (int)k);
    ddpc_optim_set_step_count(o, gen);
    ddpc_ckpt_state s = {.step = gen % 5, .samples_seen = gen, .world = 1, .config = "x: 1\n"};
    return ddpc_ckpt_save(root, m, o, &s, 2, NULL, 0);
}

/* Compares the tensors' ranges only: the buffers may have alignment gaps between tensors. */
static bool holds_generation(ddpc_model *m, ddpc_optim *o, int64_t gen)
{
    for (size_t t = 0; t < ddpc_model_num_tensors(m); t++) {
        const ddpc_param *p = ddpc_model_tensor(m, t);
        for (size_t i = p->offset; i < p->offset + p->numel; i++) {
            if (ddpc_model_params(m)[i] != value(gen, i, 0))
                return false;
            for (size_t k = 0; k < ddpc_optim_num_state(o); k++)
                if (ddpc_optim_state(o, k, NULL)[i] != value(gen, i, 1 + (int)k))
                    return false;
        }
    }
    return ddpc_optim_step_count(o) == gen;
}

static ddpc_model *big_model(void)
{
    const int64_t hidden[] = {256, 64}; /* ~22k parameters: a save takes a few hundred us */
    return ckpt_make_model(hidden, 2, 10, NULL, 0, 1);
}

static void test_kill_during_saves(void)
{
    ddpc_model *m = big_model();
    ddpc_optim *o = ckpt_make_optim(DDPC_OPTIM_ADAMW, ddpc_model_num_params(m));
    CHECK_EQ_INT(save_generation(m, o, 1), DDPC_OK);
    srand((unsigned)time(NULL));
    int64_t next = 2;
    int verified = 0;
    for (int round = 0; round < 30; round++) {
        int64_t first = next;
        next += 1000;
        pid_t child = fork();
        if (child == 0) {
            for (int64_t g = first;; g++)
                if (save_generation(m, o, g) != DDPC_OK) {
                    fprintf(stderr, "child: %s\n", ddpc_last_error());
                    _exit(3);
                }
        }
        struct timespec wait = {0, (long)(rand() % 20000) * 1000};
        nanosleep(&wait, NULL);
        kill(child, SIGKILL);
        int status = 0;
        waitpid(child, &status, 0);
        CHECK(WIFSIGNALED(status)); /* killed, not failed */
        char path[600];
        bool found = false;
        CHECK_EQ_INT(ddpc_ckpt_find_latest(root, path, sizeof path, &found), DDPC_OK);
        CHECK(found);
        if (!found)
            continue;
        ddpc_model *m2 = big_model();
        ddpc_optim *o2 = ckpt_make_optim(DDPC_OPTIM_ADAMW, ddpc_model_num_params(m2));
        ddpc_ckpt_state s;
        CHECK_EQ_INT(ddpc_ckpt_load(path, m2, o2, &s), DDPC_OK);
        if (ddpc_last_error()[0])
            fprintf(stderr, "%s\n", ddpc_last_error());
        CHECK(holds_generation(m2, o2, s.samples_seen));
        CHECK_EQ_INT(s.step, s.samples_seen % 5);
        verified += s.samples_seen >= first;
        ddpc_ckpt_state_fini(&s);
        ddpc_optim_destroy(o2);
        ddpc_model_destroy(m2);
    }
    printf("    %d of 30 kills left a checkpoint of the killed child\n", verified);
    /* The next save removes what the dead children left. */
    CHECK_EQ_INT(save_generation(m, o, next), DDPC_OK);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "test -z \"$(ls -A '%s' | grep '^\\.tmp-')\"", root);
    CHECK_EQ_INT(system(cmd), 0);
    ddpc_optim_destroy(o);
    ddpc_model_destroy(m);
}

int main(void)
{
    snprintf(root, sizeof root, "/tmp/ddpc_ckpt_crash_XXXXXX");
    if (!mkdtemp(root)) {
        fprintf(stderr, "mkdtemp failed\n");
        return 1;
    }
    RUN_TEST(test_kill_during_saves);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", root);
    return check_summary();
}
