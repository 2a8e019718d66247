// SPDX-License-Identifier: MIT
/* Where a model takes the kernel table's head16 members (the LM head and its loss with 16-bit
 * logits; NULL in the CPU table), checked on the CPU through a test table: the CPU's, plus
 * head16 members made of CPU kernels (the product, its logits rounded to 16 bits, the fused loss
 * and argmax, the gradient stored in 16 bits; the backward's products from it), and the no-wait
 * loss members so that a loss sink applies. A gpt takes them only in a training forward announced
 * by ddpc_model_expect_backward, with targets, where the member accepts; a declining member
 * leaves today's path, bit for bit the CPU table's; evaluation, an unannounced forward and one
 * without targets never ask. The loss sink gets what the read-back returns, bit for bit; a
 * second backward of one forward runs the head's backward again, another dloss is refused; the
 * loss and gradients stay within bf16's tolerance of the fp32-logits path. */
#include <ddpc/alloc.h>
#include <ddpc/device.h>
#include <ddpc/half.h>
#include <ddpc/kernels.h>
#include <ddpc/models.h>
#include <ddpc/nn.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static ddpc_kernel_table fake;
static const ddpc_kernel_table *cpu;
static int forwards, backwards; /* head16 calls */
static bool accept = true;

static uint16_t narrow(ddpc_precision p, float x)
{
    return p == DDPC_PREC_BF16 ? ddpc_f32_to_bf16(x) : ddpc_f32_to_f16(x);
}

static float widen(ddpc_precision p, uint16_t h)
{
    return p == DDPC_PREC_BF16 ? ddpc_bf16_to_f32(h) : ddpc_f16_to_f32(h);
}

/* The member's contract on the CPU, at a row stride of v. */
static bool fake_forward(ddpc_precision p, double *sums, void *logits, size_t bytes, float *losses,
                         const float *x, const float *w, const int32_t *targets, int64_t n,
                         int64_t c, int64_t v, int32_t ignore_index, float dloss)
{
    forwards++;
    if (!accept || (p != DDPC_PREC_BF16 && p != DDPC_PREC_FP16) ||
        bytes < (size_t)(n * v) * sizeof(uint16_t))
        return false;
    float *t = ddpc_malloc((size_t)(n * v) * sizeof(float));
    if (!t)
        abort();
    cpu->linear_forward(p, t, x, w, NULL, n, c, v);
    for (int64_t i = 0; i < n * v; i++)
        t[i] = widen(p, narrow(p, t[i]));
    sums[2] = (double)cpu->argmax_correct(t, targets, n, v, ignore_index);
    cpu->cross_entropy_fused(sums, t, losses, t, targets, n, v, ignore_index, dloss);
    uint16_t *h = logits;
    for (int64_t i = 0; i < n * v; i++)
        h[i] = narrow(p, t[i]);
    ddpc_free(t);
    return true;
}

static void fake_backward(ddpc_precision p, float *dx, float *dw, const void *dlogits,
                          const float *x, const float *w, int64_t n, int64_t c, int64_t v)
{
    backwards++;
    float *t = ddpc_malloc((size_t)(n * v) * sizeof(float));
    if (!t)
        abort();
    const uint16_t *h = dlogits;
    for (int64_t i = 0; i < n * v; i++)
        t[i] = widen(p, h[i]);
    cpu->linear_backward(p, dx, dw, NULL, t, x, w, n, c, v);
    ddpc_free(t);
}

/* The no-wait members, so that a loss sink applies (the CPU table has none). */
static void fake_forward_into(double *sums, float *probs, float *losses, const float *logits,
                              const int32_t *targets, int64_t n, int64_t v, int32_t ignore_index)
{
    int64_t nv = 0;
    float *l = ddpc_malloc((size_t)n * sizeof(float));
    if (!l)
        abort();
    cpu->cross_entropy_forward(probs, l, logits, targets, n, v, ignore_index, &nv);
    sums[0] = 0.0;
    for (int64_t i = 0; i < n; i++)
        sums[0] += (double)l[i];
    sums[1] = (double)nv;
    if (losses)
        memcpy(losses, l, (size_t)n * sizeof(float));
    ddpc_free(l);
}

static void fake_argmax_into(double *correct, const float *scores, const int32_t *targets,
                             int64_t n, int64_t v, int32_t ignore_index)
{
    *correct = (double)cpu->argmax_correct(scores, targets, n, v, ignore_index);
}

static const ddpc_gpt_config small = {.n_layer = 2, .n_head = 2, .n_embd = 16, .block_size = 8};
enum { B = 3, T = 8, V = 37 };
static int32_t tok[B * T], tgt[B * T];

static ddpc_model *make(const ddpc_kernel_table *k, ddpc_precision p)
{
    ddpc_model_config c = ddpc_model_config_default();
    strcpy(c.type, "gpt");
    c.num_classes = V, c.type_config = &small, c.backend = k, c.precision = p;
    ddpc_model *m = NULL;
    CHECK_EQ_INT(ddpc_model_create(&m, &c), DDPC_OK);
    return m;
}

static ddpc_model_input input(bool targets)
{
    for (int i = 0; i < B * T; i++) {
        tok[i] = (i * 5 + 1) % V;
        tgt[i] = i == 4 ? -1 : (i * 11 + 2) % V;
    }
    return (ddpc_model_input){.n = B, .tokens = tok, .targets = targets ? tgt : NULL};
}

/* One announced training step; returns its output. */
static ddpc_model_output step(ddpc_model *m, bool announce)
{
    ddpc_model_input in = input(true);
    ddpc_model_output out = {0};
    ddpc_model_zero_grad(m);
    if (announce)
        ddpc_model_expect_backward(m, 1.0f);
    CHECK_EQ_INT(ddpc_model_forward(m, &in, true, &out), DDPC_OK);
    CHECK_EQ_INT(ddpc_model_backward(m, 1.0f), DDPC_OK);
    return out;
}

static size_t bits_differ(const float *a, const float *b, size_t n)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    return bad;
}

/* bf16 and fp16 take the members in an announced step, within tolerance of the fp32 logits. */
static void test_takes_path(void)
{
    const ddpc_precision precs[2] = {DDPC_PREC_BF16, DDPC_PREC_FP16};
    for (int p = 0; p < 2; p++) {
        const ddpc_precision prec = precs[p];
        printf(" %s\n", ddpc_precision_name(prec));
        ddpc_model *m = make(&fake, prec), *ref = make(cpu, prec);
        if (!m || !ref)
            return;
        forwards = backwards = 0;
        ddpc_model_output o = step(m, true), r = step(ref, true);
        CHECK_EQ_INT(forwards, 1);
        CHECK_EQ_INT(backwards, 1);
        CHECK(ddpc_model_probs(m) == NULL);
        printf("  loss %.6f (fp32 logits %.6f), correct %lld (%lld)\n", (double)o.loss,
               (double)r.loss, (long long)o.n_correct, (long long)r.n_correct);
        CHECK_EQ_INT(o.n_valid, r.n_valid);
        CHECK(fabsf(o.loss - r.loss) <= 1e-2f * r.loss);
        CHECK(o.n_correct >= 0);
        const size_t np = ddpc_model_num_params(m);
        const float *g = ddpc_model_grads(m), *gr = ddpc_model_grads(ref);
        double mx = 0.0, d = 0.0;
        for (size_t i = 0; i < np; i++) {
            mx = fmax(mx, fabs(gr[i]));
            d = fmax(d, fabs(g[i] - gr[i]));
        }
        printf("  gradients: max diff %.3g of max %.3g\n", d, mx);
        CHECK(mx > 0.0 && d <= 5e-2 * mx);
        /* A second backward of the same forward runs the head's again; another dloss is refused. */
        CHECK_EQ_INT(ddpc_model_backward(m, 1.0f), DDPC_OK);
        CHECK_EQ_INT(backwards, 2);
        CHECK_EQ_INT(ddpc_model_backward(m, 2.0f), DDPC_EINVAL);
        ddpc_model_destroy(m);
        ddpc_model_destroy(ref);
    }
}

/* Never asked: unannounced, evaluation, no targets. Asked and declining (fp32, or refused):
 * the CPU table's bits. */
static void test_other_forwards(void)
{
    ddpc_model *m = make(&fake, DDPC_PREC_BF16), *ref = make(cpu, DDPC_PREC_BF16);
    if (!m || !ref)
        return;
    forwards = 0;
    step(m, false);
    ddpc_model_input in = input(true), bare = input(false);
    ddpc_model_output out;
    ddpc_model_expect_backward(m, 1.0f);
    CHECK_EQ_INT(ddpc_model_forward(m, &in, false, &out), DDPC_OK);
    ddpc_model_expect_backward(m, 1.0f);
    CHECK_EQ_INT(ddpc_model_forward(m, &bare, true, &out), DDPC_OK);
    CHECK_EQ_INT(forwards, 0);
    accept = false;
    ddpc_model_output o = step(m, true), r = step(ref, true);
    accept = true;
    CHECK_EQ_INT(forwards, 1);
    CHECK(memcmp(&o.loss, &r.loss, sizeof o.loss) == 0);
    const size_t np = ddpc_model_num_params(m);
    CHECK_EQ_INT(bits_differ(ddpc_model_grads(m), ddpc_model_grads(ref), np), 0);
    ddpc_model_destroy(m);
    ddpc_model_destroy(ref);

    m = make(&fake, DDPC_PREC_FP32), ref = make(cpu, DDPC_PREC_FP32);
    if (!m || !ref)
        return;
    o = step(m, true), r = step(ref, true);
    CHECK_EQ_INT(forwards, 2); /* asked, declined */
    CHECK(memcmp(&o.loss, &r.loss, sizeof o.loss) == 0);
    CHECK_EQ_INT(bits_differ(ddpc_model_grads(m), ddpc_model_grads(ref), np), 0);
    ddpc_model_destroy(m);
    ddpc_model_destroy(ref);
}

/* A loss sink gets the read-back's values, bit for bit, and the same gradients. */
static void test_loss_sink(void)
{
    ddpc_model *m = make(&fake, DDPC_PREC_BF16), *ref = make(&fake, DDPC_PREC_BF16);
    if (!m || !ref)
        return;
    double sink[3] = {NAN, NAN, NAN};
    ddpc_model_set_loss_sink(m, sink);
    forwards = backwards = 0;
    ddpc_model_output o = step(m, true), r = step(ref, true);
    CHECK_EQ_INT(forwards, 2);
    CHECK_EQ_INT(backwards, 2);
    CHECK(isnan(o.loss) && o.n_valid == -1 && o.n_correct == -1);
    const float loss = (float)(sink[0] / sink[1]);
    printf(" sink: %.9g over %.0f, %.0f correct; read back %.9g over %lld, %lld\n", sink[0],
           sink[1], sink[2], (double)r.loss, (long long)r.n_valid, (long long)r.n_correct);
    CHECK(memcmp(&loss, &r.loss, sizeof loss) == 0);
    CHECK(sink[1] == (double)r.n_valid);
    CHECK(sink[2] == (double)r.n_correct);
    const size_t np = ddpc_model_num_params(m);
    CHECK_EQ_INT(bits_differ(ddpc_model_grads(m), ddpc_model_grads(ref), np), 0);
    ddpc_model_destroy(m);
    ddpc_model_destroy(ref);
}

int main(void)
{
    cpu = ddpc_kernel_table_cpu();
    CHECK(cpu->head16_forward == NULL && cpu->head16_backward == NULL);
    fake = *cpu;
    fake.head16_forward = fake_forward;
    fake.head16_backward = fake_backward;
    fake.cross_entropy_forward_into = fake_forward_into;
    fake.argmax_correct_into = fake_argmax_into;
    RUN_TEST(test_takes_path);
    RUN_TEST(test_other_forwards);
    RUN_TEST(test_loss_sink);
    return check_summary();
}
