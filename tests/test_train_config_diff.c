// SPDX-License-Identifier: MIT
/* Tests for src/train/config_diff.c: the classification table (exact keys, prefixes, "*"
 * components, the refusing default), the differences between two dump texts (numbers equal by
 * value, keys on one side only, the order, the cap and the total), values cut with "...", and
 * reading one value back unquoted. */
#include "check.h"
#include "train/config_diff.h"

static void test_kinds(void)
{
    CHECK_EQ_INT(ddpc__config_key_kind("optim.lr"), DDPC__CHANGE_TRAINING);
    CHECK_EQ_INT(ddpc__config_key_kind("seed"), DDPC__CHANGE_TRAINING);
    CHECK_EQ_INT(ddpc__config_key_kind("model.hidden"), DDPC__CHANGE_TRAINING);
    CHECK_EQ_INT(ddpc__config_key_kind("a.key.nobody.classified"), DDPC__CHANGE_TRAINING);
    CHECK_EQ_INT(ddpc__config_key_kind("data.batch_size"), DDPC__CHANGE_BATCH);
    CHECK_EQ_INT(ddpc__config_key_kind("tasks.1.batch_size"), DDPC__CHANGE_BATCH);
    CHECK_EQ_INT(ddpc__config_key_kind("tasks.1.loss_weight"), DDPC__CHANGE_TRAINING);
    CHECK_EQ_INT(ddpc__config_key_kind("optim.grad_accum_steps"), DDPC__CHANGE_BATCH);
    CHECK_EQ_INT(ddpc__config_key_kind("max_steps"), DDPC__CHANGE_LENGTH);
    CHECK_EQ_INT(ddpc__config_key_kind("epochs"), DDPC__CHANGE_LENGTH);
    CHECK_EQ_INT(ddpc__config_key_kind("zero.stage"), DDPC__CHANGE_RESHARD);
    CHECK_EQ_INT(ddpc__config_key_kind("checkpoint.every_steps"), DDPC__CHANGE_COSMETIC);
    CHECK_EQ_INT(ddpc__config_key_kind("log.tensorboard"), DDPC__CHANGE_COSMETIC);
    CHECK_EQ_INT(ddpc__config_key_kind("log_every"), DDPC__CHANGE_COSMETIC);
    CHECK_EQ_INT(ddpc__config_key_kind("data.num_workers"), DDPC__CHANGE_COSMETIC);
    /* a prefix rule matches whole components only */
    CHECK_EQ_INT(ddpc__config_key_kind("logx"), DDPC__CHANGE_TRAINING);
    CHECK_EQ_INT(ddpc__config_key_kind("checkpoints"), DDPC__CHANGE_TRAINING);
}

static void test_diff(void)
{
    const char *old = "seed: 3\noptim.lr: 0.05\nmodel.hidden: [32]\nlog_every: 5\nold.only: 1\n";
    const char *now = "seed: 3\noptim.lr: 5e-2\nmodel.hidden: [64]\nlog_every: 2\nnew.only: x\n";
    ddpc__config_change c[8];
    size_t n;
    ddpc__config_diff(old, now, c, 8, &n);
    CHECK_EQ_INT(n, 4);
    CHECK(strcmp(c[0].key, "model.hidden") == 0 && strcmp(c[0].old_value, "[32]") == 0 &&
          strcmp(c[0].new_value, "[64]") == 0 && c[0].kind == DDPC__CHANGE_TRAINING &&
          !c[0].one_sided);
    CHECK(strcmp(c[1].key, "log_every") == 0 && c[1].kind == DDPC__CHANGE_COSMETIC);
    CHECK(strcmp(c[2].key, "new.only") == 0 && strcmp(c[2].old_value, "(none)") == 0 &&
          c[2].one_sided);
    CHECK(strcmp(c[3].key, "old.only") == 0 && strcmp(c[3].new_value, "(none)") == 0 &&
          c[3].one_sided);
    ddpc__config_diff(old, now, c, 1, &n); /* the total, whatever the cap */
    CHECK_EQ_INT(n, 4);
    ddpc__config_diff(old, old, c, 8, &n);
    CHECK_EQ_INT(n, 0);
    ddpc__config_diff("", "", c, 8, &n);
    CHECK_EQ_INT(n, 0);
}

static void test_long_value(void)
{
    char now[256];
    snprintf(now, sizeof now, "model.hidden: [%s]\n",
             "1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024");
    ddpc__config_change c[1];
    size_t n;
    ddpc__config_diff("model.hidden: [8]\n", now, c, 1, &n);
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(strlen(c[0].new_value), DDPC__CHANGE_VALUE - 1);
    CHECK(strcmp(c[0].new_value + DDPC__CHANGE_VALUE - 4, "...") == 0);
}

static void test_value(void)
{
    const char *text = "optim.schedule: cosine\npredict.prompt: \"\\n\"\nempty: \n";
    char buf[32];
    CHECK(ddpc__config_text_value(text, "optim.schedule", buf, sizeof buf));
    CHECK(strcmp(buf, "cosine") == 0);
    CHECK(ddpc__config_text_value(text, "predict.prompt", buf, sizeof buf));
    CHECK(strcmp(buf, "\\n") == 0);
    CHECK(!ddpc__config_text_value(text, "optim", buf, sizeof buf));
    CHECK(!ddpc__config_text_value(text, "none", buf, sizeof buf));
}

int main(void)
{
    RUN_TEST(test_kinds);
    RUN_TEST(test_diff);
    RUN_TEST(test_long_value);
    RUN_TEST(test_value);
    return check_summary();
}
