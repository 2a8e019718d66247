// SPDX-License-Identifier: MIT
/* Model <-> safetensors (src/ckpt/weights.c): strict loading refuses with one message naming the
 * missing, unexpected and mismatched tensors; non-strict loading copies the matching tensors,
 * leaves the others and reports the rest; a checkpoint directory is accepted as the source. */
#include <ddpc/weights.h>

#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "ckpt_testutil.h"

static char root[256], file[300];

static bool same_range(ddpc_model *a, ddpc_model *b, const char *name)
{
    for (size_t i = 0; i < ddpc_model_num_tensors(a); i++) {
        const ddpc_param *p = ddpc_model_tensor(a, i);
        if (strcmp(p->name, name) != 0)
            continue;
        for (size_t j = 0; j < ddpc_model_num_tensors(b); j++) {
            const ddpc_param *q = ddpc_model_tensor(b, j);
            if (strcmp(q->name, name) == 0)
                return p->numel == q->numel &&
                       memcmp(ddpc_model_params(a) + p->offset, ddpc_model_params(b) + q->offset,
                              p->numel * sizeof(float)) == 0;
        }
    }
    return false;
}

/* A two-head model's file into a one-head model: fc.0 matches, fc.1 is missing, heads.* are
 * unexpected. */
static void test_missing_and_unexpected(void)
{
    const int64_t hidden[] = {8}, heads[] = {3, 2};
    ddpc_model *src = ckpt_make_model(hidden, 1, 3, heads, 2, 11);
    ddpc_model *dst = ckpt_small_model(12), *ref = ckpt_small_model(12);
    CHECK_EQ_INT(ddpc_weights_save(src, ddpc_model_params(src), file), DDPC_OK);

    CHECK_EQ_INT(ddpc_weights_load(dst, file), DDPC_EFORMAT);
    CHECK_STR_CONTAINS(ddpc_last_error(), "missing: fc.1.weight, fc.1.bias");
    CHECK_STR_CONTAINS(ddpc_last_error(),
                       "unexpected: heads.0.weight, heads.0.bias, heads.1.weight, heads.1.bias");
    CHECK(ckpt_same_params(dst, ref)); /* refused: untouched */

    char report[256] = "junk";
    CHECK_EQ_INT(ddpc_weights_load_opts(dst, file, false, report, sizeof report), DDPC_OK);
    CHECK(strcmp(report, "missing: fc.1.weight, fc.1.bias; unexpected: heads.0.weight, "
                         "heads.0.bias, heads.1.weight, heads.1.bias") == 0);
    CHECK(same_range(dst, src, "fc.0.weight") && same_range(dst, src, "fc.0.bias"));
    CHECK(same_range(dst, ref, "fc.1.weight") && same_range(dst, ref, "fc.1.bias"));

    /* A short report buffer is truncated with "...". */
    char tiny[24];
    CHECK_EQ_INT(ddpc_weights_load_opts(dst, file, false, tiny, sizeof tiny), DDPC_OK);
    CHECK(strlen(tiny) == sizeof tiny - 1 && strcmp(tiny + sizeof tiny - 4, "...") == 0);
    ddpc_model_destroy(ref);
    ddpc_model_destroy(dst);
    ddpc_model_destroy(src);
}

/* Same names, other shapes: strict names them with both shapes; non-strict skips them. */
static void test_shape_mismatch(void)
{
    const int64_t wide[] = {12};
    ddpc_model *src = ckpt_make_model(wide, 1, 3, NULL, 0, 3);
    ddpc_model *dst = ckpt_small_model(4), *ref = ckpt_small_model(4);
    CHECK_EQ_INT(ddpc_weights_save(src, ddpc_model_params(src), file), DDPC_OK);
    CHECK_EQ_INT(ddpc_weights_load_opts(dst, file, true, NULL, 0), DDPC_EFORMAT);
    CHECK_STR_CONTAINS(ddpc_last_error(), "shape mismatch: fc.0.weight (file (12, 16), model (8, "
                                          "16)), fc.0.bias (file (12), model (8)), fc.1.weight "
                                          "(file (3, 12), model (3, 8))");
    /* fc.1.bias (3) matches: the only tensor loaded. */
    char report[256];
    CHECK_EQ_INT(ddpc_weights_load_opts(dst, file, false, report, sizeof report), DDPC_OK);
    CHECK(strcmp(report, "shape mismatch: fc.0.weight (file (12, 16), model (8, 16)), fc.0.bias "
                         "(file (12), model (8)), fc.1.weight (file (3, 12), model (3, 8))") == 0);
    CHECK(same_range(dst, src, "fc.1.bias"));
    CHECK(same_range(dst, ref, "fc.0.weight"));
    ddpc_model_destroy(ref);
    ddpc_model_destroy(dst);
    ddpc_model_destroy(src);
}

/* A tensor of the right shape in another dtype is a mismatch that names the file's dtype. */
static void test_dtype_mismatch(void)
{
    const char header[] = "{\"fc.0.weight\":{\"dtype\":\"BF16\",\"shape\":[8,16],"
                          "\"data_offsets\":[0,256]}}";
    uint64_t n = sizeof header - 1;
    static const uint8_t zeros[256];
    FILE *f = fopen(file, "wb");
    CHECK(f != NULL);
    if (!f)
        return;
    fwrite(&n, sizeof n, 1, f); /* little-endian, as the test machines are */
    fwrite(header, 1, n, f);
    fwrite(zeros, 1, sizeof zeros, f);
    fclose(f);
    ddpc_model *m = ckpt_small_model(1);
    CHECK_EQ_INT(ddpc_weights_load_opts(m, file, true, NULL, 0), DDPC_EFORMAT);
    CHECK_STR_CONTAINS(ddpc_last_error(),
                       "shape mismatch: fc.0.weight (file BF16 (8, 16), model (8, 16))");
    ddpc_model_destroy(m);
}

/* Nothing in common is an error even when not strict; a perfect match reports "". */
static void test_nothing_and_everything(void)
{
    const int64_t hidden[] = {8}, heads[] = {3};
    ddpc_model *src = ckpt_make_model(hidden, 1, 3, heads, 1, 1);
    ddpc_model *dst = ckpt_small_model(2);
    CHECK_EQ_INT(ddpc_weights_save(src, ddpc_model_params(src), file), DDPC_OK);
    const int64_t other[] = {5};
    ddpc_model *none = ckpt_make_model(other, 1, 4, NULL, 0, 1), *ref = ckpt_make_model(other, 1,
                                                                                        4, NULL, 0, 1);
    CHECK_EQ_INT(ddpc_weights_load_opts(none, file, false, NULL, 0), DDPC_EFORMAT);
    CHECK_STR_CONTAINS(ddpc_last_error(), "no tensor matches the model");
    CHECK(ckpt_same_params(none, ref));
    ddpc_model_destroy(ref);
    ddpc_model_destroy(none);
    char report[64] = "junk";
    CHECK_EQ_INT(ddpc_weights_save(dst, ddpc_model_params(dst), file), DDPC_OK);
    CHECK_EQ_INT(ddpc_weights_load_opts(dst, file, false, report, sizeof report), DDPC_OK);
    CHECK(report[0] == '\0');
    ddpc_model_destroy(dst);
    ddpc_model_destroy(src);
}

/* A checkpoint directory stands for its model.safetensors (init_from a checkpoint). */
static void test_checkpoint_dir(void)
{
    ddpc_model *m = ckpt_small_model(1), *m2 = ckpt_small_model(2);
    ddpc_optim *o = ckpt_make_optim(DDPC_OPTIM_SGD, ddpc_model_num_params(m));
    ddpc_ckpt_state s = ckpt_state_for(4, NULL);
    char path[600];
    CHECK_EQ_INT(ddpc_ckpt_save(root, m, o, &s, 0, path, sizeof path), DDPC_OK);
    char report[64];
    CHECK_EQ_INT(ddpc_weights_load_opts(m2, path, false, report, sizeof report), DDPC_OK);
    CHECK(ckpt_same_params(m, m2) && report[0] == '\0');
    ddpc_optim_destroy(o);
    ddpc_model_destroy(m2);
    ddpc_model_destroy(m);
}

int main(void)
{
    snprintf(root, sizeof root, "/tmp/ddpc_weights_XXXXXX");
    if (!mkdtemp(root)) {
        fprintf(stderr, "mkdtemp failed\n");
        return 1;
    }
    snprintf(file, sizeof file, "%s/w.safetensors", root);
    RUN_TEST(test_missing_and_unexpected);
    RUN_TEST(test_shape_mismatch);
    RUN_TEST(test_dtype_mismatch);
    RUN_TEST(test_nothing_and_everything);
    RUN_TEST(test_checkpoint_dir);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", root);
    return check_summary();
}
