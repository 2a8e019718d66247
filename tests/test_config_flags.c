// SPDX-License-Identifier: MIT
/* Tests for src/core/config_flags.c: flags by a key's last name applied as the getters ask, an
 * ambiguous name refused naming every key (present in the file or asked for later), bare flags
 * for bool keys only, argument order against key=value, unknown flags with a suggestion, and the
 * failing allocator. */
#include <ddpc/alloc.h>
#include <ddpc/config.h>
#include <ddpc/status.h>

#include <stdio.h>

#include "check.h"

#define CHECK_STR_EQ(a, b)                                                                         \
    do {                                                                                           \
        const char *check_sa_ = (a), *check_sb_ = (b);                                             \
        if (!check_sa_ || strcmp(check_sa_, check_sb_) != 0) {                                     \
            fprintf(stderr, "%s:%d: \"%s\" != \"%s\"\n", __FILE__, __LINE__,                       \
                    check_sa_ ? check_sa_ : "(null)", check_sb_);                                  \
            check_failures_in_test++;                                                              \
        }                                                                                          \
    } while (0)

/* The call fails with `code` and exactly `msg`. */
#define CHECK_ERR(expr, code, msg)                                                                 \
    do {                                                                                           \
        ddpc_status check_s_ = (expr);                                                             \
        CHECK_EQ_INT(check_s_, code);                                                              \
        CHECK_STR_EQ(ddpc_last_error(), msg);                                                      \
    } while (0)

static const char *const SAMPLE = "model:\n"
                                  "  type: seq2seq\n"
                                  "  d_model: 128\n"
                                  "  hidden: [4]\n"
                                  "data:\n"
                                  "  type: translation\n"
                                  "  max_len: 24\n"
                                  "tasks:\n"
                                  "  - weight: 1\n"
                                  "  - weight: 2\n";

static ddpc_config *sample(void)
{
    ddpc_config *c = NULL;
    CHECK_EQ_INT(ddpc_config_parse(&c, SAMPLE, "x.yaml"), DDPC_OK);
    return c;
}

/* by last name: the flag waits for the getter, sets the key, and the dump holds its value */
static void test_last_name(void)
{
    ddpc_config *c = sample();
    CHECK_EQ_INT(ddpc_config_set_flag(c, "d-model", true, "64", "--d-model", 2), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_set_flag(c, "num_heads", true, "2", "--num_heads", 4), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_set_flag(c, "hidden", true, "[8, 16]", "--hidden", 6), DDPC_OK);
    CHECK(ddpc_config_unmatched_flag(c, NULL, NULL) != NULL); /* nothing asked yet */
    int64_t v = 0, list[4];
    size_t n = 0;
    CHECK_EQ_INT(ddpc_config_int(c, "model.d_model", 512, 1, 4096, &v), DDPC_OK);
    CHECK_EQ_INT(v, 64);
    CHECK_EQ_INT(ddpc_config_int(c, "model.num_heads", 8, 1, 64, &v), DDPC_OK); /* not in file */
    CHECK_EQ_INT(v, 2);
    CHECK_EQ_INT(ddpc_config_int_list(c, "model.hidden", NULL, 0, 1, 99, list, 4, &n), DDPC_OK);
    CHECK_EQ_INT(n, 2);
    CHECK_EQ_INT(list[1], 16);
    const char *near = "x";
    CHECK(ddpc_config_unmatched_flag(c, NULL, &near) == NULL);
    CHECK(near == NULL);
    char buf[256];
    ddpc_config_dump(c, buf, sizeof buf);
    CHECK_STR_EQ(buf, "model.d_model: 64\nmodel.num_heads: 2\nmodel.hidden: [8, 16]\n");
    CHECK_ERR(ddpc_config_check_unused(c), DDPC_EINVAL,
              "x.yaml:2: unknown key 'model.type'"); /* the file's keys still count */
    CHECK(!ddpc_config_flag_failed(c));
    ddpc_config_destroy(c);
}

/* a value error names the flag as typed */
static void test_value_error(void)
{
    ddpc_config *c = sample();
    CHECK_EQ_INT(ddpc_config_set_flag(c, "d_model", true, "abc", "--d_model", 1), DDPC_OK);
    int64_t v = 0;
    CHECK_ERR(ddpc_config_int(c, "model.d_model", 512, 1, 4096, &v), DDPC_EINVAL,
              "command line '--d_model abc': key 'model.d_model' must be an integer in "
              "[1, 4096], got 'abc'");
    CHECK(!ddpc_config_flag_failed(c)); /* a wrong value, not a misused flag */
    ddpc_config_destroy(c);
}

/* two keys in the file end in the name: the first getter refuses, listing both */
static void test_ambiguous_present(void)
{
    ddpc_config *c = sample();
    CHECK_EQ_INT(ddpc_config_set_flag(c, "type", true, "adamw", "--type", 1), DDPC_OK);
    const char *s = NULL;
    CHECK_ERR(ddpc_config_string(c, "model.type", NULL, &s), DDPC_EINVAL,
              "flag '--type' is ambiguous: it could set 'model.type' or 'data.type'; give the "
              "full key instead, as in '--model.type'");
    CHECK(ddpc_config_flag_failed(c));
    ddpc_config_destroy(c);
    c = sample();
    CHECK_EQ_INT(ddpc_config_set_flag(c, "weight", true, "3", "--weight", 1), DDPC_OK);
    double f = 0;
    CHECK_ERR(ddpc_config_float(c, "tasks.1.weight", 1, 0, 9, &f), DDPC_EINVAL,
              "flag '--weight' is ambiguous: it could set 'tasks.1.weight' or 'tasks.0.weight'; "
              "give the full key instead, as in '--tasks.1.weight'");
    ddpc_config_destroy(c);
}

/* only defaults end in the name: the flag sets the first key asked, and the second asked fails */
static void test_ambiguous_asked(void)
{
    ddpc_config *c = sample();
    CHECK_EQ_INT(ddpc_config_set_flag(c, "enabled", true, "false", "--enabled", 1), DDPC_OK);
    bool b = true;
    CHECK_EQ_INT(ddpc_config_bool(c, "flight.enabled", true, &b), DDPC_OK);
    CHECK(!b);
    CHECK_EQ_INT(ddpc_config_bool(c, "flight.enabled", true, &b), DDPC_OK); /* asked again */
    CHECK_ERR(ddpc_config_bool(c, "loss_scale.enabled", true, &b), DDPC_EINVAL,
              "flag '--enabled' is ambiguous: it could set 'flight.enabled' or "
              "'loss_scale.enabled'; give the full key instead, as in '--flight.enabled'");
    CHECK(ddpc_config_flag_failed(c));
    ddpc_config_destroy(c);
}

/* a bare flag is true for a bool and refused by every other getter */
static void test_bare(void)
{
    ddpc_config *c = sample();
    CHECK_EQ_INT(ddpc_config_set_flag(c, "use_checkpoint", false, NULL, "--use_checkpoint", 1),
                 DDPC_OK); /* an alias's full key... */
    CHECK_EQ_INT(ddpc_config_set_flag(c, "shuffle", true, NULL, "--shuffle", 2), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_set_flag(c, "max_len", true, NULL, "--max_len", 3), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_set_flag(c, "epochs", false, NULL, "--epochs", 4), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_set_flag(c, "run_dir", true, NULL, "--run-dir", 5), DDPC_OK);
    bool b = false;
    CHECK_EQ_INT(ddpc_config_bool(c, "use_checkpoint", false, &b), DDPC_OK);
    CHECK(b);
    b = false;
    CHECK_EQ_INT(ddpc_config_bool(c, "data.shuffle", false, &b), DDPC_OK);
    CHECK(b);
    CHECK(!ddpc_config_flag_failed(c));
    int64_t v = 0;
    CHECK_ERR(ddpc_config_int(c, "data.max_len", 9, 1, 99, &v), DDPC_EINVAL,
              "flag '--max_len' needs a value: key 'data.max_len' is not a true/false switch "
              "that the flag alone turns on");
    CHECK(ddpc_config_flag_failed(c));
    CHECK_ERR(ddpc_config_int(c, "epochs", 1, 1, 99, &v), DDPC_EINVAL,
              "flag '--epochs' needs a value: key 'epochs' is not a true/false switch that the "
              "flag alone turns on");
    const char *s = NULL;
    CHECK_ERR(ddpc_config_string(c, "run_dir", "runs", &s), DDPC_EINVAL,
              "flag '--run-dir' needs a value: key 'run_dir' is not a true/false switch that the "
              "flag alone turns on");
    CHECK(s == NULL); /* never the text "true" */
    char buf[128];
    ddpc_config_dump(c, buf, sizeof buf);
    CHECK_STR_EQ(buf, "use_checkpoint: true\ndata.shuffle: true\ndata.max_len: true\nepochs: "
                      "true\nrun_dir: true\n");
    ddpc_config_destroy(c);
}

/* argument order: the later of a flag and a key=value for the same key wins */
static void test_order(void)
{
    int64_t v = 0;
    ddpc_config *c = sample();
    CHECK_EQ_INT(ddpc_config_set(c, "model.d_model=32", 1), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_set_flag(c, "d_model", true, "64", "--d_model", 2), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_int(c, "model.d_model", 512, 1, 4096, &v), DDPC_OK);
    CHECK_EQ_INT(v, 64);
    ddpc_config_destroy(c);
    c = sample();
    CHECK_EQ_INT(ddpc_config_set_flag(c, "d_model", true, "64", "--d_model", 1), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_set(c, "model.d_model=32", 3), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_int(c, "model.d_model", 512, 1, 4096, &v), DDPC_OK);
    CHECK_EQ_INT(v, 32);
    ddpc_config_destroy(c);
    c = sample(); /* a mapping given later holds the key too */
    CHECK_EQ_INT(ddpc_config_set_flag(c, "d_model", true, "64", "--d_model", 1), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_set(c, "model={d_model: 16}", 3), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_int(c, "model.d_model", 512, 1, 4096, &v), DDPC_OK);
    CHECK_EQ_INT(v, 16);
    ddpc_config_destroy(c);
    c = sample(); /* the same flag twice, spelled two ways: the later */
    CHECK_EQ_INT(ddpc_config_set_flag(c, "d_model", true, "64", "--d_model", 1), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_set_flag(c, "d-model", true, "48", "--d-model", 3), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_int(c, "model.d_model", 512, 1, 4096, &v), DDPC_OK);
    CHECK_EQ_INT(v, 48);
    CHECK(ddpc_config_unmatched_flag(c, NULL, NULL) == NULL);
    ddpc_config_destroy(c);
}

/* a flag no key ends in is reported with the nearest usable name */
static void test_unmatched(void)
{
    ddpc_config *c = sample();
    CHECK_EQ_INT(ddpc_config_set_flag(c, "d_modle", true, "64", "--d_modle", 1), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_set_flag(c, "use-checkpiont", true, NULL, "--use-checkpiont", 2),
                 DDPC_OK);
    int64_t v = 0;
    CHECK_EQ_INT(ddpc_config_int(c, "model.d_model", 512, 1, 4096, &v), DDPC_OK);
    CHECK_EQ_INT(v, 128);
    const char *near = NULL;
    CHECK_STR_EQ(ddpc_config_unmatched_flag(c, NULL, &near), "--d_modle");
    CHECK_STR_EQ(near, "d_model");
    ddpc_config_destroy(c);
    c = sample();
    CHECK_EQ_INT(ddpc_config_set_flag(c, "use-checkpiont", true, NULL, "--use-checkpiont", 2),
                 DDPC_OK);
    static const char *const more[] = {"lr", "use_checkpoint", NULL};
    CHECK_STR_EQ(ddpc_config_unmatched_flag(c, more, &near), "--use-checkpiont");
    CHECK_STR_EQ(near, "use_checkpoint");
    ddpc_config_destroy(c);
    c = sample(); /* two keys share "type": '--type' would be refused, so it is no suggestion */
    CHECK_EQ_INT(ddpc_config_set_flag(c, "tpye", true, "x", "--tpye", 1), DDPC_OK);
    const char *s = NULL;
    CHECK_EQ_INT(ddpc_config_string(c, "model.type", NULL, &s), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_string(c, "data.type", NULL, &s), DDPC_OK);
    CHECK_STR_EQ(ddpc_config_unmatched_flag(c, NULL, &near), "--tpye");
    CHECK(near == NULL);
    ddpc_config_destroy(c);
    c = sample();
    CHECK_EQ_INT(ddpc_config_set_flag(c, "data.typ", true, "x", "--data.typ", 1), DDPC_EINVAL);
    CHECK_EQ_INT(ddpc_config_set_flag(c, "data.tpye", false, "x", "--data.tpye", 1), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_string(c, "data.type", NULL, &s), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_string(c, "model.type", NULL, &s), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_int(c, "model.d_model", 512, 1, 4096, &v), DDPC_OK);
    size_t n = 0;
    CHECK_EQ_INT(ddpc_config_int_list(c, "model.hidden", NULL, 0, 1, 9, &v, 1, &n), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_int(c, "data.max_len", 9, 1, 99, &v), DDPC_OK);
    double f;
    CHECK_EQ_INT(ddpc_config_float(c, "tasks.0.weight", 1, 0, 9, &f), DDPC_OK);
    CHECK_EQ_INT(ddpc_config_float(c, "tasks.1.weight", 1, 0, 9, &f), DDPC_OK);
    CHECK(ddpc_config_unmatched_flag(c, NULL, NULL) == NULL); /* a dotted flag is a key=value */
    CHECK_ERR(ddpc_config_check_unused(c), DDPC_EINVAL,
              "command line '--data.tpye x': unknown key 'data.tpye' (did you mean 'data.type'?)");
    ddpc_config_destroy(c);
}

static void test_failing_allocator(void)
{
    int64_t live = ddpc_alloc_live();
    bool completed = false;
    for (int64_t k = 0; k < 5000 && !completed; k++) {
        ddpc_alloc_fail_after(k);
        ddpc_config *c = NULL;
        ddpc_status s = ddpc_config_parse(&c, SAMPLE, "x.yaml");
        if (s == DDPC_OK)
            s = ddpc_config_set_flag(c, "d_model", true, "64", "--d_model", 1);
        if (s == DDPC_OK)
            s = ddpc_config_set_flag(c, "epochs", false, "3", "--epochs", 2);
        if (s == DDPC_OK)
            s = ddpc_config_set_flag(c, "shuffle", true, NULL, "--shuffle", 3);
        int64_t v = 0;
        bool b = false;
        if (s == DDPC_OK)
            s = ddpc_config_int(c, "model.d_model", 1, 1, 4096, &v);
        if (s == DDPC_OK)
            s = ddpc_config_bool(c, "data.shuffle", false, &b);
        CHECK(s == DDPC_OK || s == DDPC_ENOMEM);
        if (s == DDPC_OK) {
            CHECK_EQ_INT(v, 64);
            CHECK(b);
            CHECK(ddpc_config_unmatched_flag(c, NULL, NULL) == NULL);
            completed = true;
        }
        ddpc_alloc_fail_after(-1);
        ddpc_config_destroy(c);
        CHECK_EQ_INT(ddpc_alloc_live(), live);
    }
    CHECK(completed);
}

int main(void)
{
    RUN_TEST(test_last_name);
    RUN_TEST(test_value_error);
    RUN_TEST(test_ambiguous_present);
    RUN_TEST(test_ambiguous_asked);
    RUN_TEST(test_bare);
    RUN_TEST(test_order);
    RUN_TEST(test_unmatched);
    RUN_TEST(test_failing_allocator);
    return check_summary();
}
