// SPDX-License-Identifier: MIT
/* The trainer through its public API (include/ddpc/train.h), on a CSV of three separable classes
 * the test writes: a config string builds a trainer whose fit learns the classes (the final
 * evaluation counts every held-out row); the same config again gives the same results bit for
 * bit; a `state: test` trainer built from a config file, with the fit's weights, evaluates to the
 * fit's final result exactly; a bad key is refused at create, naming the key, with no trainer
 * and nothing written. */
#include "check.h"

#include <ddpc/config.h>
#include <ddpc/rng.h>
#include <ddpc/train.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { TRAIN_ROWS = 240, VAL_ROWS = 60 };

static char dir[] = "/tmp/ddpc_test_trainer_XXXXXX";

/* rows of x1,x2,x3,y: y = 0, 1, 2 by x1's third of [-1.5, 1.5); x2, x3 are noise. */
static void write_csv(const char *name, int rows, uint64_t stream)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    ddpc_rng r = ddpc_rng_make(11, stream);
    fprintf(f, "x1,x2,x3,y\n");
    for (int i = 0; i < rows; i++) {
        float x1 = 3.0f * ddpc_rng_uniform(&r) - 1.5f;
        float x2 = ddpc_rng_uniform(&r) - 0.5f, x3 = ddpc_rng_uniform(&r) - 0.5f;
        fprintf(f, "%.6f,%.6f,%.6f,%d\n", (double)x1, (double)x2, (double)x3,
                x1 < -0.5f ? 0 : x1 < 0.5f ? 1 : 2);
    }
    fclose(f);
}

/* The config of a run into <dir>/<run>; `extra` adds top-level lines. */
static void config_text(char *buf, size_t cap, const char *run, const char *extra)
{
    snprintf(buf, cap,
             "seed: 5\n"
             "epochs: 6\n"
             "log_every: 15\n"
             "num_threads: 1\n"
             "run_dir: %s/%s\n"
             "%s"
             "model:\n"
             "  type: mlp\n"
             "  hidden: [16]\n"
             "optim:\n"
             "  type: adamw\n"
             "  lr: 0.02\n"
             "data:\n"
             "  type: csv\n"
             "  train: %s/train.csv\n"
             "  val: %s/val.csv\n"
             "  label: y\n"
             "  batch_size: 16\n",
             dir, run, extra, dir, dir);
}

typedef struct {
    ddpc_eval_result eval;
    double train_loss;
} fit_result;

/* Parses the config text, builds a trainer, checks every key was read and runs it. */
static ddpc_status fit(const char *run, const char *extra, fit_result *out)
{
    char text[2048];
    config_text(text, sizeof text, run, extra);
    ddpc_config *c = NULL;
    ddpc_trainer *t = NULL;
    ddpc_status s = ddpc_config_parse(&c, text, "trainer.yaml");
    if (s == DDPC_OK)
        s = ddpc_trainer_create(&t, c, "trainer");
    if (s == DDPC_OK)
        s = ddpc_config_check_unused(c);
    if (s == DDPC_OK)
        s = ddpc_trainer_run(t);
    if (s == DDPC_OK)
        *out = (fit_result){ddpc_trainer_last_eval(t), ddpc_trainer_last_train_loss(t)};
    else
        fprintf(stderr, "fit %s: %s\n", run, ddpc_last_error());
    ddpc_trainer_destroy(t);
    ddpc_config_destroy(c);
    return s;
}

static fit_result first;

static void test_fit_learns_the_classes(void)
{
    char extra[300];
    snprintf(extra, sizeof extra, "weights_out: %s/a.safetensors\n", dir);
    CHECK_EQ_INT(fit("a", extra, &first), DDPC_OK);
    CHECK_EQ_INT(first.eval.samples, VAL_ROWS); /* every held-out row, once */
    CHECK(first.eval.accuracy >= 0.9);          /* chance is 1/3 */
    CHECK(first.eval.loss < 0.5);               /* ln 3 = 1.0986 untrained */
    CHECK(isfinite(first.train_loss) && first.train_loss < 0.6);
    CHECK_EQ_INT(first.eval.rmse, 0); /* classification: no regression errors */
    char path[300];
    snprintf(path, sizeof path, "%s/a.safetensors", dir);
    CHECK(access(path, F_OK) == 0);
    snprintf(path, sizeof path, "%s/a/metrics.jsonl", dir);
    CHECK(access(path, F_OK) == 0);
}

static void test_same_config_same_results(void)
{
    fit_result again;
    CHECK_EQ_INT(fit("b", "", &again), DDPC_OK);
    CHECK(memcmp(&again.eval.loss, &first.eval.loss, sizeof(double)) == 0);
    CHECK(memcmp(&again.eval.accuracy, &first.eval.accuracy, sizeof(double)) == 0);
    CHECK(memcmp(&again.train_loss, &first.train_loss, sizeof(double)) == 0);
}

/* From a file this time: a test run of the fit's weights is the fit's final evaluation. */
static void test_evaluate_saved_weights(void)
{
    char extra[300], text[2048], path[300];
    snprintf(extra, sizeof extra, "state: test\ninit_from: %s/a.safetensors\n", dir);
    config_text(text, sizeof text, "c", extra);
    snprintf(path, sizeof path, "%s/test.yaml", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    fputs(text, f);
    fclose(f);
    ddpc_config *c = NULL;
    ddpc_trainer *t = NULL;
    CHECK_EQ_INT(ddpc_config_load(&c, path), DDPC_OK);
    CHECK_EQ_INT(ddpc_trainer_create(&t, c, "test"), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_check_unused(c), DDPC_OK);
    CHECK_EQ_INT(ddpc_trainer_run(t), DDPC_OK);
    ddpc_eval_result r = ddpc_trainer_last_eval(t);
    CHECK_EQ_INT(r.samples, VAL_ROWS);
    CHECK(memcmp(&r.loss, &first.eval.loss, sizeof(double)) == 0);
    CHECK(memcmp(&r.accuracy, &first.eval.accuracy, sizeof(double)) == 0);
    ddpc_trainer_destroy(t);
    ddpc_config_destroy(c);
}

static void test_bad_key_refused(void)
{
    char text[2048];
    config_text(text, sizeof text, "bad", "max_steps: -1\n");
    ddpc_config *c = NULL;
    CHECK_EQ_INT(ddpc_config_parse(&c, text, "bad.yaml"), DDPC_OK);
    ddpc_trainer *t = (ddpc_trainer *)&t; /* any value: create must set NULL on failure */
    CHECK_EQ_INT(ddpc_trainer_create(&t, c, "bad"), DDPC_EINVAL);
    CHECK(t == NULL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "max_steps");
    char run[300];
    snprintf(run, sizeof run, "%s/bad", dir);
    CHECK(access(run, F_OK) != 0); /* nothing written */
    ddpc_trainer_destroy(NULL);    /* a no-op */
    ddpc_config_destroy(c);
}

int main(void)
{
    if (!mkdtemp(dir))
        return 1;
    write_csv("train.csv", TRAIN_ROWS, 1);
    write_csv("val.csv", VAL_ROWS, 2);
    RUN_TEST(test_fit_learns_the_classes);
    RUN_TEST(test_same_config_same_results);
    RUN_TEST(test_evaluate_saved_weights);
    RUN_TEST(test_bad_key_refused);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        return 1;
    return check_summary();
}
