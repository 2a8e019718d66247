// SPDX-License-Identifier: MIT
/* seq2seq model tests: torch.nn.Transformer's parameter names in forward order; the loss's
 * gradient w.r.t. every tensor against central finite differences (padding in source and target,
 * label smoothing, dropout off and on); padding columns change nothing; activation checkpointing
 * gives the same bits; the grad-ready hook reports each tensor once with its final gradient,
 * generator first; no allocation after warm-up; bad inputs and configs are refused. */
#include <ddpc/alloc.h>
#include <ddpc/kernels.h>
#include <ddpc/models.h>
#include <ddpc/nn.h>
#include <ddpc/rng.h>

#include "check.h"
#include "nn_testutil.h"

enum { B = 3, S = 5, T = 6 };

/* The seq2seq config small_config's result points at: reset by every call (tests run one at a
 * time), changed in place by the tests of bad configs. */
static ddpc_seq2seq_config own;

static ddpc_model_config small_config(float dropout)
{
    ddpc_model_config c = ddpc_model_config_default();
    own = ddpc_seq2seq_config_default();
    c.type_config = &own;
    strcpy(c.type, "seq2seq");
    own.d_model = 8, own.num_heads = 2, own.num_encoder_layers = 2, own.num_decoder_layers = 2;
    own.d_ff = 12, own.max_len = 8, own.src_vocab = 9, own.tgt_vocab = 11;
    own.label_smoothing = 0.1f;
    c.dropout = dropout;
    return c;
}

static ddpc_model *make(ddpc_model_config c)
{
    ddpc_model *m = NULL;
    if (ddpc_model_create(&m, &c) != DDPC_OK)
        fprintf(stderr, "create failed: %s\n", ddpc_last_error());
    return m;
}

/* src (B, S) and decoder input / targets (B, T) with padding at the ends: source lengths 5, 3, 4;
 * target lengths (with <bos> / <eos>) 6, 4, 2. */
typedef struct {
    int32_t src[B * S], tok[B * T], tgt[B * T];
} batch;

static void make_batch(batch *b, int64_t src_vocab, int64_t tgt_vocab)
{
    static const int src_len[B] = {5, 3, 4}, tgt_len[B] = {6, 4, 2};
    ddpc_rng r = ddpc_rng_make(21, 0);
    memset(b, 0, sizeof *b);
    for (int i = 0; i < B; i++) {
        for (int j = 0; j < src_len[i]; j++)
            b->src[i * S + j] = 4 + (int32_t)ddpc_rng_below(&r, (uint64_t)(src_vocab - 4));
        b->tok[i * T] = 1; /* <bos> y0 .. y_{n-2} */
        for (int j = 0; j < tgt_len[i] - 1; j++) {
            int32_t y = 4 + (int32_t)ddpc_rng_below(&r, (uint64_t)(tgt_vocab - 4));
            b->tgt[i * T + j] = y;
            b->tok[i * T + j + 1] = y;
        }
        b->tgt[i * T + tgt_len[i] - 1] = 2; /* <eos> */
    }
}

static ddpc_model_input input_of(const batch *b)
{
    return (ddpc_model_input){.n = B,
                              .src_tokens = b->src,
                              .tokens = b->tok,
                              .targets = b->tgt,
                              .src_len = S,
                              .tgt_len = T,
                              .rng_stream = 5};
}

/* Kinks (ReLU): at most one sample in five skipped; every tensor gets a gradient (pad rows of the
 * embeddings aside, no tensor is dead). */
static void check_gradients(ddpc_model *m, const ddpc_model_input *in, int samples, double tol)
{
    CHECK_EQ_INT(nn_check_gradients(m, in, samples, tol, 4), ddpc_model_num_tensors(m));
}

/* FLOPs: at source and decoder width L = max_len, 6 per matrix weight per position (the
 * embeddings are lookups) plus attention's score and value products (3 x 4 L C per position per
 * attention: one in an encoder layer, two in a decoder layer); a pair's FLOPs grow with each
 * width, and max_len's are the per-sample figure. */
static void check_flops(ddpc_model *m)
{
    const ddpc_seq2seq_config *c = ddpc_seq2seq_config_of(m);
    double matrix = 0;
    for (size_t i = 0; i < ddpc_model_num_tensors(m); i++) {
        const ddpc_param *p = ddpc_model_tensor(m, i);
        if (p->ndim == 2 && !strstr(p->name, "embed"))
            matrix += (double)p->numel;
    }
    double L = (double)c->max_len, C = (double)c->d_model;
    double want = 6.0 * L * matrix +
                  12.0 * L * L * C * (double)(c->num_encoder_layers + 2 * c->num_decoder_layers);
    double got = ddpc_model_train_flops_pair(m, c->max_len, c->max_len);
    CHECK_NEAR(got, want, 1e-9 * want);
    CHECK(got == ddpc_model_train_flops_per_sample(m));
    CHECK(ddpc_model_train_flops_pair(m, 3, 5) < ddpc_model_train_flops_pair(m, 4, 5));
    CHECK(ddpc_model_train_flops_pair(m, 4, 5) < ddpc_model_train_flops_pair(m, 4, 6));
}

static void test_layout(void)
{
    ddpc_model *m = make(small_config(0));
    if (!m)
        return;
    /* 1 + 2 x 12 + 2 + 1 + 2 x 18 + 2 + 2 */
    CHECK_EQ_INT(ddpc_model_num_tensors(m), 68);
    static const char *names[][2] = {
        {"0", "src_embed.weight"},
        {"1", "encoder.layers.0.self_attn.in_proj_weight"},
        {"2", "encoder.layers.0.self_attn.in_proj_bias"},
        {"3", "encoder.layers.0.self_attn.out_proj.weight"},
        {"5", "encoder.layers.0.norm1.weight"},
        {"7", "encoder.layers.0.linear1.weight"},
        {"9", "encoder.layers.0.linear2.weight"},
        {"11", "encoder.layers.0.norm2.weight"},
        {"25", "encoder.norm.weight"},
        {"27", "tgt_embed.weight"},
        {"28", "decoder.layers.0.self_attn.in_proj_weight"},
        {"32", "decoder.layers.0.norm1.weight"},
        {"34", "decoder.layers.0.multihead_attn.in_proj_weight"},
        {"38", "decoder.layers.0.norm2.weight"},
        {"40", "decoder.layers.0.linear1.weight"},
        {"44", "decoder.layers.0.norm3.weight"},
        {"64", "decoder.norm.weight"},
        {"66", "generator.weight"},
        {"67", "generator.bias"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const ddpc_param *p = ddpc_model_tensor(m, (size_t)atoi(names[i][0]));
        if (strcmp(p->name, names[i][1]) != 0)
            fprintf(stderr, "  tensor %s is '%s', expected '%s'\n", names[i][0], p->name,
                    names[i][1]);
        CHECK(strcmp(p->name, names[i][1]) == 0);
    }
    const ddpc_param *inw = ddpc_model_tensor(m, 34);
    CHECK_EQ_INT(inw->shape[0], 24);
    CHECK_EQ_INT(inw->shape[1], 8);
    CHECK(inw->decay && !ddpc_model_tensor(m, 35)->decay && !ddpc_model_tensor(m, 38)->decay);
    CHECK(ddpc_model_tensor(m, 0)->decay && ddpc_model_tensor(m, 66)->decay);
    CHECK_EQ_INT(ddpc_model_tensor(m, 0)->shape[0], 9);
    CHECK_EQ_INT(ddpc_model_tensor(m, 66)->shape[0], 11);
    CHECK_EQ_INT(ddpc_model_outputs_per_sample(m), 8 * 11);
    check_flops(m);
    CHECK(ddpc_model_can_checkpoint(m));
    CHECK_STR_CONTAINS(ddpc_model_types(), "seq2seq");
    /* torch.nn.Transformer's init: matrices Xavier-uniform (within the bound, spread over it),
     * biases 0, norm weights 1. */
    const float *prm = ddpc_model_params(m);
    for (size_t t = 0; t < ddpc_model_num_tensors(m); t++) {
        const ddpc_param *p = ddpc_model_tensor(m, t);
        const float *w = prm + p->offset;
        float lo = w[0], hi = w[0];
        for (size_t i = 1; i < p->numel; i++)
            lo = w[i] < lo ? w[i] : lo, hi = w[i] > hi ? w[i] : hi;
        if (p->ndim == 2) {
            double bound = sqrt(6.0 / (double)(p->shape[0] + p->shape[1]));
            CHECK(lo >= -bound && hi <= bound && hi - lo > bound);
        } else {
            float want = strstr(p->name, "norm") && strstr(p->name, "weight") ? 1.0f : 0.0f;
            CHECK(lo == want && hi == want);
        }
    }
    ddpc_model_destroy(m);
}

static void test_gradients(void)
{
    for (int d = 0; d < 2; d++) {
        ddpc_model *m = make(small_config(d ? 0.2f : 0.0f));
        if (!m)
            return;
        batch b;
        make_batch(&b, 9, 11);
        ddpc_model_input in = input_of(&b);
        ddpc_model_output out;
        CHECK_EQ_INT(ddpc_model_forward(m, &in, true, &out), DDPC_OK);
        CHECK_EQ_INT(out.n_valid, 6 + 4 + 2);
        check_gradients(m, &in, 3, 3e-2);
        ddpc_model_destroy(m);
    }
}

/* Extra <pad> columns in the source and the target (masked keys, ignored targets) leave the loss
 * and every gradient unchanged up to summation order. */
static void test_padding_is_inert(void)
{
    ddpc_model_config c = small_config(0);
    ddpc_model *m = make(c);
    if (!m)
        return;
    batch b;
    make_batch(&b, 9, 11);
    ddpc_model_input in = input_of(&b);
    size_t np = ddpc_model_num_params(m);
    float *g0 = ddpc_malloc(np * sizeof(float));
    ddpc_model_output o0, o1;
    ddpc_model_zero_grad(m);
    CHECK_EQ_INT(ddpc_model_forward(m, &in, true, &o0), DDPC_OK);
    CHECK_EQ_INT(ddpc_model_backward(m, 1.0f), DDPC_OK);
    memcpy(g0, ddpc_model_grads(m), np * sizeof(float));
    enum { S2 = S + 2, T2 = T + 2 };
    int32_t src[B * S2] = {0}, tok[B * T2] = {0}, tgt[B * T2] = {0};
    for (int i = 0; i < B; i++) {
        memcpy(src + i * S2, b.src + i * S, S * sizeof(int32_t));
        memcpy(tok + i * T2, b.tok + i * T, T * sizeof(int32_t));
        memcpy(tgt + i * T2, b.tgt + i * T, T * sizeof(int32_t));
    }
    ddpc_model_input wide = {
        .n = B, .src_tokens = src, .tokens = tok, .targets = tgt, .src_len = S2, .tgt_len = T2};
    ddpc_model_zero_grad(m);
    CHECK_EQ_INT(ddpc_model_forward(m, &wide, true, &o1), DDPC_OK);
    CHECK_EQ_INT(ddpc_model_backward(m, 1.0f), DDPC_OK);
    CHECK_NEAR(o1.loss, o0.loss, 1e-6);
    CHECK_EQ_INT(o1.n_valid, o0.n_valid);
    CHECK_EQ_INT(o1.n_correct, o0.n_correct);
    const float *g1 = ddpc_model_grads(m);
    double worst = 0.0;
    for (size_t i = 0; i < np; i++)
        worst = fmax(worst, fabs(g1[i] - g0[i]) / (fabs(g0[i]) + 1e-3));
    CHECK(worst < 1e-4);
    ddpc_free(g0);
    ddpc_model_destroy(m);
}

typedef struct {
    size_t order[128];
    size_t n;
    int reports[128];
    ddpc_model *m;
    float *snapshot;
} hook_log;

static void on_ready(void *ctx, size_t tensor)
{
    hook_log *h = ctx;
    const ddpc_param *p = ddpc_model_tensor(h->m, tensor);
    if (h->snapshot)
        memcpy(h->snapshot + p->offset, ddpc_model_grads(h->m) + p->offset,
               p->numel * sizeof(float));
    h->reports[tensor]++;
    if (h->n < 128)
        h->order[h->n++] = tensor;
}

/* With and without activation checkpointing, dropout on, at fp32, bf16 and fp16: the same bits
 * over two steps (SGD in between), and the same grad-ready order; each tensor is reported once
 * with its final gradient, and the order is the reverse of registration. */
static void check_checkpointing_and_hook(ddpc_precision prec)
{
    ddpc_model_config c = small_config(0.1f);
    c.precision = prec;
    own.num_encoder_layers = 3, own.num_decoder_layers = 3;
    ddpc_model *m[2];
    c.activation_checkpointing = false;
    m[0] = make(c);
    c.activation_checkpointing = true;
    m[1] = make(c);
    if (!m[0] || !m[1])
        return;
    CHECK(ddpc_model_activation_bytes(m[1], B, true) < ddpc_model_activation_bytes(m[0], B, false));
    size_t np = ddpc_model_num_params(m[0]), nt = ddpc_model_num_tensors(m[0]);
    CHECK(nt <= 128);
    batch b;
    make_batch(&b, 9, 11);
    ddpc_model_input in = input_of(&b);
    hook_log h[2] = {{.m = m[0]}, {.m = m[1]}};
    h[0].snapshot = ddpc_calloc(np, sizeof(float));
    for (int step = 0; step < 2; step++) {
        ddpc_model_output out[2];
        for (int k = 0; k < 2; k++) {
            h[k].n = 0;
            memset(h[k].reports, 0, sizeof h[k].reports);
            ddpc_model_set_grad_ready_hook(m[k], on_ready, &h[k]);
            ddpc_model_zero_grad(m[k]);
            in.rng_stream = 7 + (uint64_t)step;
            CHECK_EQ_INT(ddpc_model_forward(m[k], &in, true, &out[k]), DDPC_OK);
            CHECK_EQ_INT(ddpc_model_backward(m[k], 1.0f), DDPC_OK);
        }
        CHECK(memcmp(&out[0].loss, &out[1].loss, sizeof(float)) == 0);
        CHECK(memcmp(ddpc_model_grads(m[0]), ddpc_model_grads(m[1]), np * sizeof(float)) == 0);
        CHECK(memcmp(h[0].snapshot, ddpc_model_grads(m[0]), np * sizeof(float)) == 0);
        CHECK_EQ_INT(h[0].n, nt);
        CHECK_EQ_INT(h[1].n, nt);
        CHECK(memcmp(h[0].order, h[1].order, nt * sizeof(size_t)) == 0);
        /* Reverse registration order, up to each (weight, bias) pair reported weight first. */
        int in_reverse = 1;
        for (size_t i = 0; i < nt; i++) {
            CHECK_EQ_INT(h[0].reports[i], 1);
            long long want = (long long)(nt - 1 - i), got = (long long)h[0].order[i];
            in_reverse &= got == want || got == want - 1 || got == want + 1;
            if (got != want && got != want - 1 && got != want + 1)
                fprintf(stderr, "  report %zu: tensor %lld, expected about %lld\n", i, got, want);
        }
        CHECK(in_reverse);
        for (int k = 0; k < 2; k++) {
            float *p = ddpc_model_params(m[k]);
            ddpc_axpy_f32(p, -0.05f, ddpc_model_grads(m[k]), (int64_t)np);
        }
    }
    ddpc_free(h[0].snapshot);
    ddpc_model_destroy(m[0]);
    ddpc_model_destroy(m[1]);
}

static void test_checkpointing_and_hook(void)
{
    check_checkpointing_and_hook(DDPC_PREC_FP32);
    check_checkpointing_and_hook(DDPC_PREC_BF16);
    check_checkpointing_and_hook(DDPC_PREC_FP16);
}

/* Low precision rounds the products' inputs: close to fp32, not equal to it. */
static void test_precision_changes_little(void)
{
    batch b;
    make_batch(&b, 9, 11);
    ddpc_model_input in = input_of(&b);
    float loss[3];
    for (int p = 0; p < 3; p++) {
        ddpc_model_config c = small_config(0);
        c.precision = (ddpc_precision)p;
        ddpc_model *m = make(c);
        if (!m)
            return;
        loss[p] = (float)nn_loss_of(m, &in);
        ddpc_model_destroy(m);
    }
    CHECK(loss[1] != loss[0] && loss[2] != loss[0]);
    CHECK_NEAR(loss[1], loss[0], 2e-2);
    CHECK_NEAR(loss[2], loss[0], 2e-3);
}

static void test_step_allocates_nothing_after_warmup(void)
{
    ddpc_model *m = make(small_config(0.1f));
    if (!m)
        return;
    batch b;
    make_batch(&b, 9, 11);
    ddpc_model_input in = input_of(&b);
    ddpc_model_output out;
    CHECK_EQ_INT(ddpc_model_forward(m, &in, true, &out), DDPC_OK);
    CHECK_EQ_INT(ddpc_model_backward(m, 1.0f), DDPC_OK);
    int64_t before = ddpc_alloc_total();
    for (int i = 0; i < 3; i++) {
        in.src_len = S - i % 2; /* shorter batches reuse the arena */
        ddpc_model_zero_grad(m);
        CHECK_EQ_INT(ddpc_model_forward(m, &in, true, &out), DDPC_OK);
        CHECK_EQ_INT(ddpc_model_backward(m, 1.0f), DDPC_OK);
    }
    CHECK_EQ_INT(ddpc_alloc_total(), before);
    ddpc_model_destroy(m);
}

static void test_rejects_bad_inputs_and_config(void)
{
    ddpc_model *m = make(small_config(0));
    if (!m)
        return;
    batch b;
    make_batch(&b, 9, 11);
    ddpc_model_input in = input_of(&b);
    in.src_len = 9;
    CHECK_EQ_INT(ddpc_model_forward(m, &in, true, NULL), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "max_len 8");
    in = input_of(&b);
    in.src_tokens = NULL;
    CHECK_EQ_INT(ddpc_model_forward(m, &in, true, NULL), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "source tokens");
    in = input_of(&b);
    b.tok[4] = 11;
    CHECK_EQ_INT(ddpc_model_forward(m, &in, true, NULL), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "target token 11 at position 4");
    ddpc_model_destroy(m);
    ddpc_model_config c = small_config(0);
    own.d_model = 10, own.num_heads = 4;
    ddpc_model *bad = NULL;
    CHECK_EQ_INT(ddpc_model_create(&bad, &c), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "num_heads");
    c = small_config(0);
    own.tgt_vocab = 3;
    CHECK_EQ_INT(ddpc_model_create(&bad, &c), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "tgt_vocab 3");
    c = small_config(0);
    own.num_decoder_layers = 0;
    CHECK_EQ_INT(ddpc_model_create(&bad, &c), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "num_decoder_layers");
    c = small_config(0);
    own.label_smoothing = 1.5f;
    CHECK_EQ_INT(ddpc_model_create(&bad, &c), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "label_smoothing");
    CHECK(bad == NULL);
}

int main(void)
{
    ddpc_kernels_set_threads(1);
    RUN_TEST(test_layout);
    RUN_TEST(test_gradients);
    RUN_TEST(test_padding_is_inert);
    RUN_TEST(test_checkpointing_and_hook);
    RUN_TEST(test_precision_changes_little);
    RUN_TEST(test_step_allocates_nothing_after_warmup);
    RUN_TEST(test_rejects_bad_inputs_and_config);
    return check_summary();
}
