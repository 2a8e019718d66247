// SPDX-License-Identifier: MIT
/* seq2seq through a device's kernel table, on the CPU: a stand-in device (the CPU table with kind
 * cuda) whose memory is told from the host's, and whose members CHECK that every array they get
 * lies in it (a pass that read or wrote host memory, or handed the host's to a kernel, would break
 * on a GPU). Training steps (dropout on, with and without activation checkpointing) give the CPU
 * table's losses, counts, gradients and parameters bit for bit, greedy and beam translation the
 * same tokens (a repeat allocating no device memory), and a loss sink gets the loss back exactly:
 * with the no-wait members, from a step that waits for nothing. ddpc_model_reserve's room covers
 * batches up to max_len wide.
 * tests/test_cuda_seq2seq.c checks the CUDA table's members against the CPU's on a GPU. */
#include <ddpc/alloc.h>
#include <ddpc/device.h>
#include <ddpc/kernels.h>
#include <ddpc/models.h>
#include <ddpc/nn.h>
#include <ddpc/rng.h>

#include "check.h"
#include "standin_memory_testutil.h"

enum { B = 3, S = 5, T = 6, STEPS = 4, MAX_OUT = 7 };

static const ddpc_kernel_table *cpu;
static ddpc_kernel_table standin;

static uint64_t strays; /* arrays a member got from outside the stand-in's memory */
static uint64_t waits;  /* read-backs and returned values: each a host wait on a GPU */

/* Counts (and names, the first few times) an array p of `bytes` outside the stand-in's memory;
 * NULL is fine (an optional argument). */
static void held(const char *member, const char *what, const void *p, size_t bytes)
{
    if (!p || !bytes)
        return;
    if (standin_holds(p, bytes))
        return;
    if (strays++ < 8)
        fprintf(stderr, "  %s: %s (%zu bytes) is not the device's memory\n", member, what, bytes);
}
#define HOLD(p, count) held(__func__, #p, (p), (size_t)(count) * sizeof *(p))

/* ---- members that check their arrays, then run the CPU's ---- */
/* The floats b batch rows of t rows (ld apart, batch rows `stride` apart) span. */
static size_t rows_of(const ddpc_mha_shape *s, int64_t t, int64_t ld, int64_t stride)
{
    return (size_t)((s->b - 1) * stride + (t - 1) * ld + s->c);
}

static void si_mha_forward(ddpc_precision prec, float *out, float *att, const float *q,
                           const float *k, const float *v, const uint8_t *key_pad,
                           const ddpc_mha_shape *s, float *ws)
{
    HOLD(out, s->b * s->tq * s->c);
    HOLD(att, s->b * s->nh * s->tq * s->tk);
    HOLD(q, rows_of(s, s->tq, s->ldq, ddpc_mha_q_batch_stride(s)));
    HOLD(k, rows_of(s, s->tk, s->ldk, ddpc_mha_kv_batch_stride(s)));
    HOLD(v, rows_of(s, s->tk, s->ldk, ddpc_mha_kv_batch_stride(s)));
    HOLD(key_pad, s->b * s->tk);
    HOLD(ws, cpu->mha_workspace_floats(s)); /* a device's forward may take it (CUDA's does) */
    cpu->mha_forward(prec, out, att, q, k, v, key_pad, s, ws);
}

static void si_mha_backward(ddpc_precision prec, float *dq, float *dk, float *dv, const float *dout,
                            const float *q, const float *k, const float *v, const float *att,
                            const ddpc_mha_shape *s, float *ws)
{
    HOLD(dq, rows_of(s, s->tq, s->ldq, ddpc_mha_q_batch_stride(s)));
    HOLD(dk, rows_of(s, s->tk, s->ldk, ddpc_mha_kv_batch_stride(s)));
    HOLD(dv, rows_of(s, s->tk, s->ldk, ddpc_mha_kv_batch_stride(s)));
    HOLD(dout, s->b * s->tq * s->c);
    HOLD(q, rows_of(s, s->tq, s->ldq, ddpc_mha_q_batch_stride(s)));
    HOLD(k, rows_of(s, s->tk, s->ldk, ddpc_mha_kv_batch_stride(s)));
    HOLD(v, rows_of(s, s->tk, s->ldk, ddpc_mha_kv_batch_stride(s)));
    HOLD(att, s->b * s->nh * s->tq * s->tk);
    HOLD(ws, cpu->mha_workspace_floats(s));
    cpu->mha_backward(prec, dq, dk, dv, dout, q, k, v, att, s, ws);
}

static float si_ce_smooth_forward(float *probs, float *losses, const float *logits,
                                  const int32_t *targets, int64_t n, int64_t v,
                                  int32_t ignore_index, float eps, int64_t *n_valid)
{
    HOLD(probs, n * v);
    HOLD(losses, n);
    HOLD(logits, n * v);
    HOLD(targets, n);
    waits++;
    return cpu->cross_entropy_smooth_forward(probs, losses, logits, targets, n, v, ignore_index,
                                             eps, n_valid);
}

/* The no-wait forms, from the CPU's kernels as kernels/cuda computes them: the row losses'
 * sum in double, then the count. */
static void si_ce_smooth_into(double *sums, float *probs, float *losses, const float *logits,
                              const int32_t *targets, int64_t n, int64_t v, int32_t ignore_index,
                              float eps)
{
    HOLD(sums, 2);
    HOLD(losses, n);
    int64_t valid = 0;
    si_ce_smooth_forward(probs, losses, logits, targets, n, v, ignore_index, eps, &valid);
    waits--; /* the device keeps the values: no read */
    double total = 0.0;
    for (int64_t i = 0; i < n; i++)
        total += losses[i];
    sums[0] = total;
    sums[1] = (double)valid;
}

static void si_ce_smooth_backward_from(float *dlogits, const float *probs, const int32_t *targets,
                                       int64_t n, int64_t v, int32_t ignore_index, float eps,
                                       const double *sums, float dloss)
{
    HOLD(sums, 2);
    standin.cross_entropy_smooth_backward(dlogits, probs, targets, n, v, ignore_index, eps,
                                          (int64_t)sums[1], dloss);
}

static void si_argmax_into(double *correct, const float *scores, const int32_t *targets, int64_t n,
                           int64_t v, int32_t ignore_index)
{
    HOLD(correct, 1);
    *correct = (double)standin.argmax_correct(scores, targets, n, v, ignore_index);
    waits--;
}

static void si_ce_smooth_backward(float *dlogits, const float *probs, const int32_t *targets,
                                  int64_t n, int64_t v, int32_t ignore_index, float eps,
                                  int64_t n_valid, float dloss)
{
    HOLD(dlogits, n * v);
    HOLD(probs, n * v);
    HOLD(targets, n);
    cpu->cross_entropy_smooth_backward(dlogits, probs, targets, n, v, ignore_index, eps, n_valid,
                                       dloss);
}

static void si_positions(float *pe, int64_t t, int64_t c)
{
    HOLD(pe, t * c);
    cpu->sinusoidal_positions(pe, t, c);
}

static void si_embed_forward(float *y, const int32_t *tokens, const float *w, float scale,
                             const float *pe, int64_t b, int64_t t, int64_t c)
{
    HOLD(y, b * t * c);
    HOLD(tokens, b * t);
    HOLD(w, c);
    HOLD(pe, t * c);
    cpu->embedding_scaled_forward(y, tokens, w, scale, pe, b, t, c);
}

static void si_embed_backward(float *dw, const float *dy, const int32_t *tokens, float scale,
                              int64_t b, int64_t t, int64_t c)
{
    HOLD(dw, c);
    HOLD(dy, b * t * c);
    HOLD(tokens, b * t);
    cpu->embedding_scaled_backward(dw, dy, tokens, scale, b, t, c);
}

static void si_pad_mask(uint8_t *mask, const int32_t *tokens, int64_t n, int32_t pad)
{
    HOLD(mask, n);
    HOLD(tokens, n);
    cpu->pad_mask(mask, tokens, n, pad);
}

static void si_copy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                      size_t height)
{
    held(__func__, "dst", dst, (height - 1) * dpitch + width);
    held(__func__, "src", src, (height - 1) * spitch + width);
    cpu->copy2d(dst, dpitch, src, spitch, width, height);
}

static void si_copy(void *dst, const void *src, size_t bytes)
{
    held(__func__, "dst", dst, bytes);
    held(__func__, "src", src, bytes);
    cpu->copy(dst, src, bytes);
}

/* A GPU kernel's own scratch (a 16-bit product's rounded operands) grows with the largest rows
 * it has seen, an allocation each time: the stand-in's linear layers count such growths. */
static int64_t scratch_rows;
static uint64_t scratch_growths;
static void scratch_for(int64_t rows)
{
    if (rows > scratch_rows) {
        scratch_rows = rows;
        scratch_growths++;
    }
}

static void si_linear_forward(ddpc_precision prec, float *y, const float *x, const float *w,
                              const float *b, int64_t n, int64_t in, int64_t out)
{
    scratch_for(n);
    HOLD(y, n * out);
    HOLD(x, n * in);
    HOLD(w, in * out);
    HOLD(b, out);
    cpu->linear_forward(prec, y, x, w, b, n, in, out);
}

static void si_linear_backward(ddpc_precision prec, float *dx, float *dw, float *db,
                               const float *dy, const float *x, const float *w, int64_t n,
                               int64_t in, int64_t out)
{
    HOLD(dx, n * in);
    scratch_for(n);
    HOLD(dw, in * out);
    HOLD(db, out);
    HOLD(dy, n * out);
    HOLD(x, n * in);
    HOLD(w, in * out);
    cpu->linear_backward(prec, dx, dw, db, dy, x, w, n, in, out);
}

static void si_layernorm_forward(float *y, float *mean, float *rstd, const float *x, const float *w,
                                 const float *b, int64_t rows, int64_t c)
{
    HOLD(y, rows * c);
    HOLD(mean, rows);
    HOLD(rstd, rows);
    HOLD(x, rows * c);
    HOLD(w, c);
    HOLD(b, c);
    cpu->layernorm_forward(y, mean, rstd, x, w, b, rows, c);
}

static int64_t si_argmax_correct(const float *scores, const int32_t *targets, int64_t n, int64_t v,
                                 int32_t ignore_index)
{
    HOLD(scores, n * v);
    HOLD(targets, n);
    waits++;
    return cpu->argmax_correct(scores, targets, n, v, ignore_index);
}

static void si_dropout_forward(float *y, const float *x, int64_t n, float p, uint64_t seed,
                               uint64_t stream)
{
    HOLD(y, n);
    HOLD(x, n);
    cpu->dropout_forward(y, x, n, p, seed, stream);
}

static void si_to_host(void *dst, const void *src, size_t bytes)
{
    waits++;
    cpu->to_host(dst, src, bytes);
}

static void si_fill(float *x, float value, int64_t n)
{
    HOLD(x, n);
    cpu->fill_f32(x, value, n);
}

static void standin_init(void)
{
    cpu = ddpc_kernel_table_cpu();
    standin = *cpu;
    standin.name = "standin";
    standin.kind = DDPC_DEVICE_CUDA;
    standin.alloc = standin_alloc;
    standin.alloc_count = standin_alloc_count;
    standin.free = standin_free;
    standin.copy = si_copy;
    standin.mha_forward = si_mha_forward;
    standin.mha_backward = si_mha_backward;
    standin.cross_entropy_smooth_forward = si_ce_smooth_forward;
    standin.cross_entropy_smooth_backward = si_ce_smooth_backward;
    standin.sinusoidal_positions = si_positions;
    standin.embedding_scaled_forward = si_embed_forward;
    standin.embedding_scaled_backward = si_embed_backward;
    standin.pad_mask = si_pad_mask;
    standin.copy2d = si_copy2d;
    standin.linear_forward = si_linear_forward;
    standin.linear_backward = si_linear_backward;
    standin.layernorm_forward = si_layernorm_forward;
    standin.argmax_correct = si_argmax_correct;
    standin.dropout_forward = si_dropout_forward;
    standin.fill_f32 = si_fill;
    standin.to_host = si_to_host;
}

/* ---- the model and its batch ---- */
static ddpc_model *make(const ddpc_kernel_table *k, bool ckpt)
{
    ddpc_model_config c = ddpc_model_config_default();
    ddpc_seq2seq_config own = ddpc_seq2seq_config_default();
    c.type_config = &own;
    strcpy(c.type, "seq2seq");
    own.d_model = 8, own.num_heads = 2, own.num_encoder_layers = 2, own.num_decoder_layers = 2;
    own.d_ff = 12, own.max_len = 8, own.src_vocab = 9, own.tgt_vocab = 11;
    own.label_smoothing = 0.1f;
    c.dropout = 0.1f;
    c.seed = 3;
    c.activation_checkpointing = ckpt;
    c.backend = k;
    ddpc_model *m = NULL;
    if (ddpc_model_create(&m, &c) != DDPC_OK)
        fprintf(stderr, "create failed: %s\n", ddpc_last_error());
    return m;
}

/* src (B, S) and decoder input / targets (B, T), padded at the ends. */
static int32_t src[B * S], tok[B * T], tgt[B * T];

static void make_batch(void)
{
    static const int src_len[B] = {5, 3, 4}, tgt_len[B] = {6, 4, 2};
    ddpc_rng r = ddpc_rng_make(21, 0);
    for (int i = 0; i < B; i++) {
        for (int j = 0; j < S; j++)
            src[i * S + j] = j < src_len[i] ? 4 + (int32_t)ddpc_rng_below(&r, 5) : 0;
        for (int j = 0; j < T; j++)
            tok[i * T + j] = tgt[i * T + j] = 0;
        tok[i * T] = 1;
        for (int j = 0; j < tgt_len[i] - 1; j++)
            tgt[i * T + j] = tok[i * T + j + 1] = 4 + (int32_t)ddpc_rng_below(&r, 7);
        tgt[i * T + tgt_len[i] - 1] = 2;
    }
}

/* One training step: forward and backward, then p -= lr * g through the model's own table. */
static void step(ddpc_model *m, int s, ddpc_model_output *out)
{
    ddpc_model_input in = {.n = B,
                           .src_tokens = src,
                           .tokens = tok,
                           .targets = tgt,
                           .src_len = S,
                           .tgt_len = T,
                           .rng_stream = (uint64_t)s};
    ddpc_model_zero_grad(m);
    CHECK_EQ_INT(ddpc_model_forward(m, &in, true, out), DDPC_OK);
    CHECK_EQ_INT(ddpc_model_backward(m, 1.0f), DDPC_OK);
    const ddpc_kernel_table *k = ddpc_model_backend(m);
    k->axpy_f32(ddpc_model_device_params(m), -0.5f, ddpc_model_device_grads(m),
                (int64_t)ddpc_model_num_params(m));
}

/* The table's grads (n) read back into a host copy. */
static float *grads_of(ddpc_model *m)
{
    size_t n = ddpc_model_num_params(m);
    float *g = ddpc_malloc(n * sizeof(float));
    ddpc_model_backend(m)->to_host(g, ddpc_model_device_grads(m), n * sizeof(float));
    return g;
}

static void check_training(bool ckpt)
{
    printf("  activation checkpointing %s\n", ckpt ? "on" : "off");
    make_batch();
    ddpc_model *a = make(cpu, ckpt), *b = make(&standin, ckpt);
    CHECK(a && b);
    if (!a || !b)
        return;
    uint64_t strays0 = strays;
    size_t n = ddpc_model_num_params(a);
    for (int s = 0; s < STEPS; s++) {
        ddpc_model_output oa, ob;
        step(a, s, &oa);
        step(b, s, &ob);
        printf("  step %d: loss %.9g (cpu %.9g), valid %lld, correct %lld\n", s, ob.loss, oa.loss,
               (long long)ob.n_valid, (long long)ob.n_correct);
        CHECK(memcmp(&oa.loss, &ob.loss, sizeof oa.loss) == 0);
        CHECK_EQ_INT(oa.n_valid, ob.n_valid);
        CHECK_EQ_INT(oa.n_correct, ob.n_correct);
        float *ga = grads_of(a), *gb = grads_of(b);
        CHECK(memcmp(ga, gb, n * sizeof(float)) == 0);
        ddpc_free(ga);
        ddpc_free(gb);
    }
    ddpc_model_to_host(b);
    CHECK(memcmp(ddpc_model_params(a), ddpc_model_params(b), n * sizeof(float)) == 0);
    CHECK_EQ_INT(strays - strays0, 0);
    ddpc_model_destroy(a);
    ddpc_model_destroy(b);
}

static void test_training_same_bits(void)
{
    check_training(false);
    check_training(true);
}

/* Trains both a step, then translates the batch's sources greedily and with beam 3 (the
 * untrained model emits tokens other than <eos>, so the search runs to max_out and beam search
 * reorders its caches), and again without allocating device memory. */
static void test_translate_same_tokens(void)
{
    make_batch();
    ddpc_model *a = make(cpu, false), *b = make(&standin, false);
    CHECK(a && b);
    if (!a || !b)
        return;
    ddpc_model_output o;
    step(a, 0, &o);
    step(b, 0, &o);
    uint64_t strays0 = strays;
    for (int beam = 1; beam <= 3; beam += 2) {
        int32_t oa[B * MAX_OUT], ob[B * MAX_OUT];
        CHECK_EQ_INT(ddpc_model_translate(a, src, B, S, beam, MAX_OUT, oa), DDPC_OK);
        CHECK_EQ_INT(ddpc_model_translate(b, src, B, S, beam, MAX_OUT, ob), DDPC_OK);
        printf("  beam %d: first row", beam);
        for (int j = 0; j < MAX_OUT; j++)
            printf(" %d", ob[j]);
        printf("\n");
        CHECK(memcmp(oa, ob, sizeof oa) == 0);
        CHECK(ob[0] != 0); /* a token before <eos> */
    }
    CHECK_EQ_INT(strays - strays0, 0);
    /* The search keeps its device memory: the same translation again allocates nothing there. */
    int32_t again[B * MAX_OUT];
    uint64_t allocs = standin.alloc_count();
    CHECK_EQ_INT(ddpc_model_translate(b, src, B, S, 3, MAX_OUT, again), DDPC_OK);
    CHECK_EQ_INT(standin.alloc_count() - allocs, 0);
    ddpc_model_destroy(a);
    ddpc_model_destroy(b);
}

/* A loss sink in the device's memory gets {loss * valid, valid, correct}: loss back exactly. */
static void test_loss_sink(void)
{
    make_batch();
    ddpc_model *m = make(&standin, false);
    CHECK(m != NULL);
    if (!m)
        return;
    double *sink = standin.alloc(3 * sizeof(double)), got[3];
    ddpc_model_set_loss_sink(m, sink);
    ddpc_model_output out;
    step(m, 0, &out);
    ddpc_model_set_loss_sink(m, NULL);
    standin.to_host(got, sink, sizeof got);
    CHECK(out.n_valid > 0);
    CHECK_EQ_INT((int64_t)got[1], out.n_valid);
    CHECK_EQ_INT((int64_t)got[2], out.n_correct);
    float loss = (float)(got[0] / got[1]);
    CHECK(memcmp(&loss, &out.loss, sizeof loss) == 0);
    standin.free(sink);
    ddpc_model_destroy(m);
}

/* With the no-wait members and a sink, a training step waits for nothing: the sink then holds
 * {loss sum, valid, hits} giving the reading step's loss and counts, and the gradients are the
 * reading step's, bit for bit. */
static void test_deferred_loss_never_waits(void)
{
    ddpc_kernel_table deferring = standin;
    deferring.cross_entropy_smooth_forward_into = si_ce_smooth_into;
    deferring.cross_entropy_smooth_backward_from = si_ce_smooth_backward_from;
    deferring.argmax_correct_into = si_argmax_into;
    make_batch();
    ddpc_model *a = make(&standin, false), *b = make(&deferring, false);
    CHECK(a && b);
    if (!a || !b)
        return;
    double *sink = standin.alloc(3 * sizeof(double)), got[3];
    size_t n = ddpc_model_num_params(a);
    for (int s = 0; s < 2; s++) {
        ddpc_model_output oa, ob;
        step(a, s, &oa);
        ddpc_model_set_loss_sink(b, sink);
        uint64_t w0 = waits;
        step(b, s, &ob);
        CHECK_EQ_INT(waits - w0, 0);
        ddpc_model_set_loss_sink(b, NULL);
        CHECK(isnan(ob.loss) && ob.n_valid == -1 && ob.n_correct == -1);
        standin.to_host(got, sink, sizeof got);
        float loss = (float)(got[0] / got[1]);
        printf("  step %d: deferred loss %.9g, read now %.9g\n", s, loss, oa.loss);
        CHECK(memcmp(&loss, &oa.loss, sizeof loss) == 0);
        CHECK_EQ_INT((int64_t)got[1], oa.n_valid);
        CHECK_EQ_INT((int64_t)got[2], oa.n_correct);
        float *ga = grads_of(a), *gb = grads_of(b);
        CHECK(memcmp(ga, gb, n * sizeof(float)) == 0);
        ddpc_free(ga);
        ddpc_free(gb);
    }
    standin.free(sink);
    ddpc_model_destroy(a);
    ddpc_model_destroy(b);
}

/* ddpc_model_reserve(m, n, 0) makes room for batches as wide as max_len (8): after it, training
 * on the (S, T) batch and on one padded to max_len on both sides allocates no device memory (a
 * GPU run's warm steps, whose batches are as wide as their longest pair, would otherwise grow the
 * input buffers at the first wider one). */
static void test_reserve_covers_max_len(void)
{
    enum { W = 8 };
    make_batch();
    ddpc_model *m = make(&standin, false);
    CHECK(m != NULL);
    if (!m)
        return;
    scratch_rows = 0;
    CHECK_EQ_INT(ddpc_model_reserve(m, B, 0), DDPC_OK);
    uint64_t allocs = standin.alloc_count(), growths = scratch_growths;
    CHECK_EQ_INT(scratch_rows, B * W); /* the warm-up pass ran at max_len */
    ddpc_model_output out;
    step(m, 0, &out);
    int32_t wsrc[B * W] = {0}, wtok[B * W] = {0}, wtgt[B * W] = {0};
    for (int i = 0; i < B; i++) {
        memcpy(wsrc + i * W, src + i * S, S * sizeof(int32_t));
        memcpy(wtok + i * W, tok + i * T, T * sizeof(int32_t));
        memcpy(wtgt + i * W, tgt + i * T, T * sizeof(int32_t));
    }
    ddpc_model_input in = {.n = B,
                           .src_tokens = wsrc,
                           .tokens = wtok,
                           .targets = wtgt,
                           .src_len = W,
                           .tgt_len = W,
                           .rng_stream = 1};
    CHECK_EQ_INT(ddpc_model_forward(m, &in, true, &out), DDPC_OK);
    CHECK_EQ_INT(ddpc_model_backward(m, 1.0f), DDPC_OK);
    CHECK_EQ_INT(standin.alloc_count() - allocs, 0);
    CHECK_EQ_INT(scratch_growths - growths, 0); /* nor did the kernels' scratch grow */
    ddpc_model_destroy(m);
}

/* Reserving (with its warm-up pass) changes nothing a run computes: after it, training steps
 * give the same losses and parameters, bit for bit, as without it. */
static void test_reserve_leaves_no_trace(void)
{
    make_batch();
    ddpc_model *a = make(&standin, true), *b = make(&standin, true);
    CHECK(a && b);
    if (!a || !b)
        return;
    CHECK_EQ_INT(ddpc_model_reserve(b, B, 0), DDPC_OK);
    for (int i = 0; i < STEPS; i++) {
        ddpc_model_output oa, ob;
        step(a, i, &oa);
        step(b, i, &ob);
        CHECK(memcmp(&oa.loss, &ob.loss, sizeof oa.loss) == 0);
    }
    size_t n = ddpc_model_num_params(a);
    ddpc_model_to_host(a);
    ddpc_model_to_host(b);
    CHECK(memcmp(ddpc_model_params(a), ddpc_model_params(b), n * sizeof(float)) == 0);
    ddpc_model_destroy(a);
    ddpc_model_destroy(b);
}

/* A device table without the seq2seq members is refused, naming the table. */
static void test_table_without_members_refused(void)
{
    ddpc_kernel_table bare = standin;
    bare.name = "bare";
    bare.mha_forward = NULL;
    ddpc_model *m = make(&bare, false);
    CHECK(m == NULL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "does not run on GPUs yet (the bare kernel table");
}

int main(void)
{
    standin_init();
    RUN_TEST(test_training_same_bits);
    RUN_TEST(test_translate_same_tokens);
    RUN_TEST(test_loss_sink);
    RUN_TEST(test_deferred_loss_never_waits);
    RUN_TEST(test_reserve_covers_max_len);
    RUN_TEST(test_reserve_leaves_no_trace);
    RUN_TEST(test_table_without_members_refused);
    return check_summary();
}
