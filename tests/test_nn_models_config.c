// SPDX-License-Identifier: MIT
/* Tests for the built-in types' own configs (ddpc/models.h) as docs/extending.md describes them:
 * a NULL type_config is the type's defaults, the model keeps its own copy, the _of accessors
 * answer only for their type; each type's read_config reads its keys under the prefix it is
 * given, with its defaults and named errors; seq2seq's data door sets the vocabularies and reads
 * max_len with the data's as default and least value. */
#include <ddpc/model_ops.h>
#include <ddpc/models.h>

#include "check.h"

#include <string.h>

static ddpc_model_config images(const char *type)
{
    ddpc_model_config c = ddpc_model_config_default();
    snprintf(c.type, sizeof c.type, "%s", type);
    c.in_channels = 1, c.in_height = 8, c.in_width = 8, c.num_classes = 3;
    return c;
}

/* Whether a and b have the same tensors (names and shapes) and the same initial parameters. */
static bool same_model(ddpc_model *a, ddpc_model *b)
{
    if (ddpc_model_num_tensors(a) != ddpc_model_num_tensors(b) ||
        ddpc_model_num_params(a) != ddpc_model_num_params(b))
        return false;
    for (size_t i = 0; i < ddpc_model_num_tensors(a); i++) {
        const ddpc_param *p = ddpc_model_tensor(a, i), *q = ddpc_model_tensor(b, i);
        if (strcmp(p->name, q->name) != 0 || p->ndim != q->ndim ||
            memcmp(p->shape, q->shape, sizeof p->shape) != 0)
            return false;
    }
    return memcmp(ddpc_model_params(a), ddpc_model_params(b),
                  ddpc_model_num_params(a) * sizeof(float)) == 0;
}

static void test_null_is_the_defaults(void)
{
    ddpc_mlp_config mlp = ddpc_mlp_config_default();
    ddpc_cnn_config cnn = ddpc_cnn_config_default();
    const char *types[] = {"mlp", "cnn"};
    const void *owns[] = {&mlp, &cnn};
    for (int i = 0; i < 2; i++) {
        ddpc_model_config c = images(types[i]);
        ddpc_model *plain = NULL, *given = NULL;
        CHECK_EQ_INT(ddpc_model_create(&plain, &c), DDPC_OK);
        c.type_config = owns[i];
        CHECK_EQ_INT(ddpc_model_create(&given, &c), DDPC_OK);
        if (plain && given)
            CHECK(same_model(plain, given));
        ddpc_model_destroy(plain);
        ddpc_model_destroy(given);
    }
    CHECK_EQ_INT(mlp.n_hidden, 2);
    CHECK_EQ_INT(mlp.hidden[0], 256);
    CHECK_EQ_INT(cnn.n_channels, 2);
    CHECK_EQ_INT(cnn.channels[1], 64);
    CHECK_EQ_INT(ddpc_gpt_config_default().n_layer, 4);
    CHECK_EQ_INT(ddpc_seq2seq_config_default().d_model, 512);
    CHECK_EQ_INT(ddpc_seq2seq_config_default().max_len, 256);
}

static void test_own_copy_and_accessors(void)
{
    ddpc_model_config c = images("cnn");
    ddpc_cnn_config own = ddpc_cnn_config_default();
    own.channels[0] = 4, own.n_channels = 1, own.hidden[0] = 5;
    c.type_config = &own;
    ddpc_model *m = NULL;
    CHECK_EQ_INT(ddpc_model_create(&m, &c), DDPC_OK);
    if (!m)
        return;
    own.channels[0] = 99; /* the model keeps its own copy */
    const ddpc_cnn_config *kept = ddpc_cnn_config_of(m);
    CHECK(kept != NULL && kept != &own);
    if (kept)
        CHECK_EQ_INT(kept->channels[0], 4);
    CHECK(ddpc_model_type_config(m) == kept);
    CHECK(ddpc_model_config_of(m)->type_config == kept);
    CHECK_EQ_INT(ddpc_model_tensor(m, 0)->shape[0], 4); /* conv.0.weight (4, 1, 3, 3) */
    CHECK(ddpc_mlp_config_of(m) == NULL);
    CHECK(ddpc_gpt_config_of(m) == NULL);
    CHECK(ddpc_seq2seq_config_of(m) == NULL);
    ddpc_model_destroy(m);
    ddpc_model_config g = ddpc_model_config_default();
    ddpc_gpt_config gpt = {.n_layer = 1, .n_head = 2, .n_embd = 8, .block_size = 4};
    strcpy(g.type, "gpt");
    g.num_classes = 11, g.type_config = &gpt;
    CHECK_EQ_INT(ddpc_model_create(&m, &g), DDPC_OK);
    if (!m)
        return;
    CHECK(ddpc_gpt_config_of(m) != NULL && ddpc_gpt_config_of(m)->block_size == 4);
    CHECK(ddpc_cnn_config_of(m) == NULL);
    ddpc_model_destroy(m);
}

/* Reads `yaml` through the type's read_config under `prefix` into own (its defaults first, as the
 * trainer does); checks every key was read. */
static ddpc_status read_type(const char *type, const char *yaml, const char *prefix, void *own)
{
    const ddpc_model_ops *ops = ddpc_model_lookup(type);
    CHECK(ops != NULL && ops->read_config != NULL && ops->default_config != NULL);
    if (!ops || !ops->read_config || !ops->default_config)
        return DDPC_EINTERNAL;
    memcpy(own, ops->default_config, ops->config_size);
    ddpc_config *cfg = NULL;
    DDPC_TRY(ddpc_config_parse(&cfg, yaml, "t.yaml"));
    ddpc_status s = ops->read_config(cfg, prefix, own);
    if (s == DDPC_OK)
        s = ddpc_config_check_unused(cfg);
    ddpc_config_destroy(cfg);
    return s;
}

static void test_read_config(void)
{
    ddpc_mlp_config mlp;
    CHECK_EQ_INT(read_type("mlp", "model:\n  hidden: [7, 5, 3]\n  batchnorm: true\n", "model",
                           &mlp),
                 DDPC_OK);
    CHECK_EQ_INT(mlp.n_hidden, 3);
    CHECK_EQ_INT(mlp.hidden[2], 3);
    CHECK(mlp.batchnorm);
    CHECK_NEAR(mlp.bn_momentum, 0.1, 1e-7);
    ddpc_cnn_config cnn;
    CHECK_EQ_INT(read_type("cnn", "other:\n  kernel_size: 5\n", "other", &cnn), DDPC_OK);
    CHECK_EQ_INT(cnn.kernel_size, 5);
    CHECK_EQ_INT(cnn.n_channels, 2);
    CHECK_EQ_INT(cnn.hidden[0], 128);
    ddpc_gpt_config gpt;
    CHECK_EQ_INT(read_type("gpt", "model:\n  n_head: 2000\n", "model", &gpt), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "t.yaml:2: key 'model.n_head'");
    CHECK_EQ_INT(read_type("gpt", "model:\n  n_embd: 64\n", "model", &gpt), DDPC_OK);
    CHECK_EQ_INT(gpt.n_embd, 64);
    CHECK_EQ_INT(gpt.block_size, 128);
    ddpc_seq2seq_config s2s;
    CHECK_EQ_INT(read_type("seq2seq", "model:\n  d_model: 32\n  hidden: [4]\n", "model", &s2s),
                 DDPC_EINVAL); /* mlp's key: seq2seq does not read it */
    CHECK_STR_CONTAINS(ddpc_last_error(), "model.hidden");
}

/* No keys: every type's YAML defaults are its _default() struct, the values docs/extending.md
 * lists. */
static void test_yaml_defaults_are_the_structs(void)
{
    ddpc_mlp_config mlp, mlp_d = ddpc_mlp_config_default();
    ddpc_cnn_config cnn, cnn_d = ddpc_cnn_config_default();
    ddpc_gpt_config gpt, gpt_d = ddpc_gpt_config_default();
    ddpc_seq2seq_config s2s, s2s_d = ddpc_seq2seq_config_default();
    CHECK_EQ_INT(read_type("mlp", "seed: 1\n", "model", &mlp), DDPC_EINVAL); /* seed unread */
    CHECK_EQ_INT(read_type("mlp", "", "model", &mlp), DDPC_OK);
    CHECK(mlp.n_hidden == 2 && mlp.hidden[0] == 256 && mlp.hidden[1] == 128 && !mlp.batchnorm);
    CHECK(mlp.bn_momentum == mlp_d.bn_momentum && mlp.bn_eps == mlp_d.bn_eps);
    CHECK(mlp_d.bn_momentum == 0.1f && mlp_d.bn_eps == 1e-5f);
    CHECK_EQ_INT(read_type("cnn", "", "model", &cnn), DDPC_OK);
    CHECK(cnn.n_channels == 2 && cnn.channels[0] == 32 && cnn.channels[1] == 64);
    CHECK(cnn.kernel_size == 3 && cnn.n_hidden == 1 && cnn.hidden[0] == 128 && !cnn.batchnorm);
    CHECK(cnn.bn_momentum == cnn_d.bn_momentum && cnn.bn_eps == cnn_d.bn_eps);
    CHECK(cnn_d.n_channels == 2 && cnn_d.channels[1] == 64 && cnn_d.kernel_size == 3 &&
          cnn_d.hidden[0] == 128);
    CHECK_EQ_INT(read_type("gpt", "", "model", &gpt), DDPC_OK);
    CHECK(memcmp(&gpt, &gpt_d, sizeof gpt) == 0);
    CHECK(gpt.n_layer == 4 && gpt.n_head == 4 && gpt.n_embd == 256 && gpt.block_size == 128);
    CHECK_EQ_INT(read_type("seq2seq", "", "model", &s2s), DDPC_OK);
    CHECK(s2s.d_model == 512 && s2s.num_heads == 8 && s2s.num_encoder_layers == 6 &&
          s2s.num_decoder_layers == 6 && s2s.d_ff == 2048 && s2s.max_len == 256);
    CHECK(s2s.label_smoothing == 0.1f && s2s_d.label_smoothing == 0.1f && s2s_d.d_ff == 2048);
}

static void test_seq2seq_data(void)
{
    ddpc_seq2seq_data d = {.src_vocab = 9, .tgt_vocab = 11, .src_digest = 0x1234abcd,
                           .tgt_digest = 7, .max_len = 12};
    const char *yamls[] = {"seed: 1\n", "model:\n  max_len: 20\n", "model:\n  max_len: 11\n"};
    const int64_t want[] = {12, 20, -1};
    for (int i = 0; i < 3; i++) {
        ddpc_config *cfg = NULL;
        CHECK_EQ_INT(ddpc_config_parse(&cfg, yamls[i], "t.yaml"), DDPC_OK);
        ddpc_seq2seq_config c = ddpc_seq2seq_config_default();
        ddpc_status s = ddpc_seq2seq_config_read_data(cfg, "model", &d, &c);
        if (want[i] < 0) {
            CHECK_EQ_INT(s, DDPC_EINVAL); /* shorter than the data's sequences */
            CHECK_STR_CONTAINS(ddpc_last_error(), "t.yaml:2: key 'model.max_len'");
        } else {
            CHECK_EQ_INT(s, DDPC_OK);
            CHECK_EQ_INT(c.max_len, want[i]);
            CHECK(c.vocab_digests && c.src_vocab_digest == 0x1234abcd && c.tgt_vocab_digest == 7);
            CHECK(c.src_vocab == 9 && c.tgt_vocab == 11);
        }
        ddpc_config_destroy(cfg);
    }
}

int main(void)
{
    RUN_TEST(test_null_is_the_defaults);
    RUN_TEST(test_own_copy_and_accessors);
    RUN_TEST(test_read_config);
    RUN_TEST(test_yaml_defaults_are_the_structs);
    RUN_TEST(test_seq2seq_data);
    return check_summary();
}
