// SPDX-License-Identifier: MIT
/* Tests for mha.c: forward against a naive double multi-head attention with a key padding mask,
 * causal or not, tq != tk (cross-attention) and strided q/k/v views of packed buffers; masked keys
 * get probability exactly 0 and changing them changes nothing; a query with every key masked gives
 * zeros (not NaN); batch strides (a key/value cache) give the packed layout's bits; backward
 * against central finite differences for q, k and v; backward overwrites; one and two threads agree
 * bit for bit. */
#include "kernels_testutil.h"

typedef struct {
    float *out, *att, *q, *k, *v, *r;
    uint8_t *pad;
    ddpc_mha_shape s;
} mha_ctx;

static double mha_loss(void *p)
{
    mha_ctx *a = p;
    ddpc_mha_forward(DDPC_PREC_FP32, a->out, a->att, a->q, a->k, a->v, a->pad, &a->s, NULL);
    return tu_dot(a->out, a->r, a->s.b * a->s.tq * a->s.c);
}

/* max |out - reference| and |att - reference| from the definition, in double. */
static double naive_max_err(const mha_ctx *a)
{
    const ddpc_mha_shape *s = &a->s;
    int64_t hs = s->c / s->nh;
    double err = 0.0, *p = malloc((size_t)s->tk * sizeof(double));
    for (int64_t bi = 0; bi < s->b; bi++)
        for (int64_t h = 0; h < s->nh; h++)
            for (int64_t i = 0; i < s->tq; i++) {
                const float *q = a->q + (bi * s->tq + i) * s->ldq + h * hs;
                double mx = -1e300, sum = 0.0;
                for (int64_t j = 0; j < s->tk; j++) {
                    int ok = !(a->pad && a->pad[bi * s->tk + j]) && !(s->causal && j > i);
                    const float *k = a->k + (bi * s->tk + j) * s->ldk + h * hs;
                    double sc = 0.0;
                    for (int64_t d = 0; d < hs; d++)
                        sc += (double)q[d] * k[d];
                    p[j] = ok ? sc / sqrt((double)hs) : -INFINITY;
                    mx = fmax(mx, p[j]);
                }
                for (int64_t j = 0; j < s->tk; j++)
                    sum += (p[j] = isinf(p[j]) ? 0.0 : exp(p[j] - mx));
                const float *att_row = a->att + ((bi * s->nh + h) * s->tq + i) * s->tk;
                for (int64_t j = 0; j < s->tk; j++) {
                    p[j] = sum > 0.0 ? p[j] / sum : 0.0;
                    err = fmax(err, fabs(p[j] - att_row[j]));
                }
                for (int64_t d = 0; d < hs; d++) {
                    double o = 0.0;
                    for (int64_t j = 0; j < s->tk; j++)
                        o += p[j] * a->v[(bi * s->tk + j) * s->ldk + h * hs + d];
                    err = fmax(err, fabs(o - a->out[(bi * s->tq + i) * s->c + h * hs + d]));
                }
            }
    free(p);
    return err;
}

/* q in a (b, tq, ldq) buffer, k and v in one (b, tk, ldk) buffer as kv (ldk >= 2c), or, for
 * self-attention, q, k, v columns of one qkv buffer (ldq = ldk = 3c). pad_every: key j of batch
 * row bi is padded when (j + bi) % pad_every == pad_every - 1 (0: no mask). */
static void check_mha(int64_t b, int64_t tq, int64_t tk, int64_t c, int64_t nh, bool causal,
                      bool packed_self, int pad_every)
{
    ddpc_mha_shape s = {.b = b, .tq = tq, .tk = tk, .c = c, .nh = nh, .causal = causal};
    float *qbuf, *kvbuf;
    if (packed_self) {
        s.ldq = s.ldk = 3 * c;
        qbuf = tu_rand(b * tq * 3 * c, -1.5f, 1.5f, 1);
        kvbuf = qbuf + c;
    } else {
        s.ldq = c + 3; /* a strided view: the extra columns are never touched */
        s.ldk = 2 * c + 1;
        qbuf = tu_rand(b * tq * s.ldq, -1.5f, 1.5f, 1);
        kvbuf = tu_rand(b * tk * s.ldk, -1.5f, 1.5f, 2);
    }
    uint8_t *pad = NULL;
    if (pad_every) {
        pad = calloc((size_t)(b * tk), 1);
        for (int64_t bi = 0; bi < b; bi++)
            for (int64_t j = 0; j < tk; j++)
                pad[bi * tk + j] = (j + bi) % pad_every == pad_every - 1;
    }
    int64_t nout = b * tq * c, natt = b * nh * tq * tk;
    mha_ctx a = {tu_alloc(nout), tu_alloc(natt),          qbuf, kvbuf,
                 kvbuf + c,      tu_rand(nout, -1, 1, 3), pad,  s};
    ddpc_fill_f32(a.att, 7.0f, natt);
    mha_loss(&a);
    CHECK(naive_max_err(&a) < 1e-5);
    for (int64_t i = 0; pad && i < natt; i++) { /* masked keys: probability exactly 0 */
        int64_t j = i % tk, bi = i / (nh * tq * tk);
        if (pad[bi * tk + j])
            CHECK(a.att[i] == 0.0f);
    }
    /* Masked keys carry no information: changing their k and v changes no output bit. */
    if (pad) {
        float *before = tu_alloc(nout);
        memcpy(before, a.out, (size_t)nout * 4);
        for (int64_t bi = 0; bi < b; bi++)
            for (int64_t j = 0; j < tk; j++)
                if (pad[bi * tk + j])
                    for (int64_t d = 0; d < c; d++) {
                        a.k[(bi * tk + j) * s.ldk + d] += 0.75f;
                        a.v[(bi * tk + j) * s.ldk + d] -= 0.5f;
                    }
        mha_loss(&a);
        CHECK(memcmp(before, a.out, (size_t)nout * 4) == 0);
        ddpc_free(before);
    }
    /* Backward: dq, dk, dv in buffers shaped like q and kv; NaN where backward must not write. */
    int64_t nq = packed_self ? b * tq * 3 * c : b * tq * s.ldq, nkv = b * tk * s.ldk;
    float *dqbuf = tu_alloc(nq), *dkvbuf = packed_self ? dqbuf + c : tu_alloc(nkv);
    float *ws = tu_alloc((int64_t)ddpc_mha_workspace_floats(&s));
    ddpc_fill_f32(dqbuf, NAN, nq);
    if (!packed_self)
        ddpc_fill_f32(dkvbuf, NAN, nkv);
    mha_loss(&a);
    ddpc_mha_backward(DDPC_PREC_FP32, dqbuf, dkvbuf, dkvbuf + c, a.r, a.q, a.k, a.v, a.att, &s, ws);
    /* Only the first c columns of each q row (and 2c of each kv row) are written; zero the rest. */
    int untouched = 0, expected = 0;
    for (int64_t i = 0; !packed_self && i < nq; i++)
        if (i % s.ldq >= c) {
            untouched += isnan(dqbuf[i]) != 0, expected++;
            dqbuf[i] = 0.0f;
        }
    for (int64_t i = 0; !packed_self && i < nkv; i++)
        if (i % s.ldk >= 2 * c) {
            untouched += isnan(dkvbuf[i]) != 0, expected++;
            dkvbuf[i] = 0.0f;
        }
    CHECK_EQ_INT(untouched, expected);
    int nans = 0; /* every element backward owns was overwritten */
    for (int64_t i = 0; i < nq; i++)
        nans += isnan(dqbuf[i]) != 0;
    for (int64_t i = 0; !packed_self && i < nkv; i++)
        nans += isnan(dkvbuf[i]) != 0;
    CHECK_EQ_INT(nans, 0);
    CHECK(tu_grad_check("mha dq", a.q, dqbuf, nq, nq > 2000 ? 5 : 1, 1e-2f, mha_loss, &a) < 1e-2);
    if (!packed_self)
        CHECK(tu_grad_check("mha dkv", a.k, dkvbuf, nkv, nkv > 2000 ? 5 : 1, 1e-2f, mha_loss, &a) <
              1e-2);
    ddpc_free(qbuf);
    if (!packed_self)
        ddpc_free(kvbuf), ddpc_free(dkvbuf);
    float *bufs[] = {a.out, a.att, a.r, dqbuf, ws};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        ddpc_free(bufs[i]);
    free(pad);
}

static void test_self_attention(void)
{
    check_mha(1, 1, 1, 4, 1, false, true, 0);
    check_mha(2, 5, 5, 6, 3, false, true, 0);
    check_mha(2, 5, 5, 6, 2, false, true, 3); /* encoder: key padding */
    check_mha(3, 7, 7, 8, 2, true, true, 4);  /* decoder: causal and key padding */
}

static void test_cross_attention(void)
{
    check_mha(2, 4, 9, 6, 2, false, false, 0);
    check_mha(3, 6, 5, 8, 4, false, false, 3);
    check_mha(2, 9, 3, 4, 1, false, false, 2);
}

/* The causal kernel on packed qkv without a mask equals attention.c's GPT kernel. */
static void test_matches_causal_attention(void)
{
    int64_t b = 2, t = 37, c = 12, nh = 3, nqkv = b * t * 3 * c;
    float *qkv = tu_rand(nqkv, -1, 1, 5), *dout = tu_rand(b * t * c, -1, 1, 6);
    float *o1 = tu_alloc(b * t * c), *o2 = tu_alloc(b * t * c);
    float *a1 = tu_alloc(b * nh * t * t), *a2 = tu_alloc(b * nh * t * t);
    float *d1 = tu_alloc(nqkv), *d2 = tu_alloc(nqkv);
    ddpc_mha_shape s = {
        .b = b, .tq = t, .tk = t, .c = c, .nh = nh, .ldq = 3 * c, .ldk = 3 * c, .causal = true};
    float *ws1 = tu_alloc((int64_t)ddpc_attention_workspace_floats(b, t, c, nh));
    float *ws2 = tu_alloc((int64_t)ddpc_mha_workspace_floats(&s));
    ddpc_attention_forward(DDPC_PREC_FP32, o1, a1, qkv, b, t, c, nh, ws1);
    ddpc_mha_forward(DDPC_PREC_FP32, o2, a2, qkv, qkv + c, qkv + 2 * c, NULL, &s, NULL);
    ddpc_attention_backward(DDPC_PREC_FP32, d1, dout, qkv, a1, b, t, c, nh, ws1);
    ddpc_mha_backward(DDPC_PREC_FP32, d2, d2 + c, d2 + 2 * c, dout, qkv, qkv + c, qkv + 2 * c, a2,
                      &s, ws2);
    CHECK(tu_rel_err(o2, o1, b * t * c, 1e-6) < 1e-5);
    CHECK(tu_rel_err(a2, a1, b * nh * t * t, 1e-6) < 1e-5);
    CHECK(tu_rel_err(d2, d1, nqkv, 1e-6) < 1e-5);
    float *bufs[] = {qkv, dout, o1, o2, a1, a2, d1, d2, ws1, ws2};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        ddpc_free(bufs[i]);
}

/* Every key of batch row 1 padded: its outputs, probabilities and gradients are 0, not NaN. */
static void test_all_keys_masked(void)
{
    int64_t b = 2, tq = 3, tk = 4, c = 4;
    ddpc_mha_shape s = {.b = b, .tq = tq, .tk = tk, .c = c, .nh = 2, .ldq = c, .ldk = 2 * c};
    uint8_t pad[8] = {0, 0, 1, 0, 1, 1, 1, 1};
    float *q = tu_rand(b * tq * c, -1, 1, 7), *kv = tu_rand(b * tk * 2 * c, -1, 1, 8);
    float *out = tu_alloc(b * tq * c), *att = tu_alloc(b * 2 * tq * tk);
    float *dout = tu_rand(b * tq * c, -1, 1, 9), *dq = tu_alloc(b * tq * c);
    float *dkv = tu_alloc(b * tk * 2 * c), *ws = tu_alloc((int64_t)ddpc_mha_workspace_floats(&s));
    ddpc_mha_forward(DDPC_PREC_FP32, out, att, q, kv, kv + c, pad, &s, NULL);
    ddpc_mha_backward(DDPC_PREC_FP32, dq, dkv, dkv + c, dout, q, kv, kv + c, att, &s, ws);
    CHECK(tu_max_abs(out + tq * c, tq * c) == 0.0);
    CHECK(tu_max_abs(att + 2 * tq * tk, 2 * tq * tk) == 0.0);
    CHECK(tu_max_abs(dq + tq * c, tq * c) == 0.0);
    CHECK(tu_max_abs(dkv + tk * 2 * c, tk * 2 * c) == 0.0);
    CHECK(tu_max_abs(out, tq * c) > 0.0); /* row 0 attends to its three keys */
    float *bufs[] = {q, kv, out, att, dout, dq, dkv, ws};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        ddpc_free(bufs[i]);
}

/* Batch strides larger than packed (a key/value cache with room for more positions, queries
 * picked from longer rows) give the bits of the packed layout. */
static void test_batch_strides(void)
{
    int64_t b = 3, tq = 2, tk = 5, cap = 8, c = 8, nh = 2;
    ddpc_mha_shape packed = {.b = b, .tq = tq, .tk = tk, .c = c, .nh = nh, .ldq = c, .ldk = 2 * c};
    ddpc_mha_shape strided = packed;
    strided.bsq = (tq + 1) * c, strided.bsk = cap * 2 * c;
    uint8_t pad[3 * 5] = {0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1};
    float *q = tu_rand(b * tq * c, -1, 1, 13), *kv = tu_rand(b * tk * 2 * c, -1, 1, 14);
    float *qs = tu_rand(b * (tq + 1) * c, -1, 1, 15), *kvs = tu_rand(b * cap * 2 * c, -1, 1, 16);
    for (int64_t bi = 0; bi < b; bi++) {
        memcpy(qs + bi * (tq + 1) * c, q + bi * tq * c, (size_t)(tq * c) * 4);
        memcpy(kvs + bi * cap * 2 * c, kv + bi * tk * 2 * c, (size_t)(tk * 2 * c) * 4);
    }
    float *dout = tu_rand(b * tq * c, -1, 1, 17),
          *ws = tu_alloc((int64_t)ddpc_mha_workspace_floats(&packed));
    float *o1 = tu_alloc(b * tq * c), *o2 = tu_alloc(b * tq * c);
    float *a1 = tu_alloc(b * nh * tq * tk), *a2 = tu_alloc(b * nh * tq * tk);
    float *dq1 = tu_alloc(b * tq * c), *dkv1 = tu_alloc(b * tk * 2 * c);
    float *dq2 = tu_alloc(b * (tq + 1) * c), *dkv2 = tu_alloc(b * cap * 2 * c);
    ddpc_mha_forward(DDPC_PREC_FP32, o1, a1, q, kv, kv + c, pad, &packed, NULL);
    ddpc_mha_forward(DDPC_PREC_FP32, o2, a2, qs, kvs, kvs + c, pad, &strided, NULL);
    ddpc_mha_backward(DDPC_PREC_FP32, dq1, dkv1, dkv1 + c, dout, q, kv, kv + c, a1, &packed, ws);
    ddpc_mha_backward(DDPC_PREC_FP32, dq2, dkv2, dkv2 + c, dout, qs, kvs, kvs + c, a2, &strided,
                      ws);
    CHECK(memcmp(o1, o2, (size_t)(b * tq * c) * 4) == 0);
    CHECK(memcmp(a1, a2, (size_t)(b * nh * tq * tk) * 4) == 0);
    for (int64_t bi = 0; bi < b; bi++) {
        CHECK(memcmp(dq1 + bi * tq * c, dq2 + bi * (tq + 1) * c, (size_t)(tq * c) * 4) == 0);
        CHECK(memcmp(dkv1 + bi * tk * 2 * c, dkv2 + bi * cap * 2 * c, (size_t)(tk * 2 * c) * 4) ==
              0);
    }
    float *bufs[] = {q, kv, qs, kvs, dout, ws, o1, o2, a1, a2, dq1, dkv1, dq2, dkv2};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        ddpc_free(bufs[i]);
}

/* Enough (batch, head) jobs to fork: the same bits on one and two threads. */
static void test_threads_agree(void)
{
    int64_t b = 4, tq = 48, tk = 40, c = 64, nh = 4;
    ddpc_mha_shape s = {.b = b, .tq = tq, .tk = tk, .c = c, .nh = nh, .ldq = c, .ldk = 2 * c};
    uint8_t *pad = calloc((size_t)(b * tk), 1);
    for (int64_t i = 0; i < b * tk; i++)
        pad[i] = i % 7 == 3;
    float *q = tu_rand(b * tq * c, -1, 1, 10), *kv = tu_rand(b * tk * 2 * c, -1, 1, 11);
    float *dout = tu_rand(b * tq * c, -1, 1, 12),
          *ws = tu_alloc((int64_t)ddpc_mha_workspace_floats(&s));
    float *o[2], *a[2], *dq[2], *dkv[2];
    int threads = ddpc_kernels_threads();
    for (int t = 0; t < 2; t++) {
        o[t] = tu_alloc(b * tq * c), a[t] = tu_alloc(b * nh * tq * tk);
        dq[t] = tu_alloc(b * tq * c), dkv[t] = tu_alloc(b * tk * 2 * c);
        ddpc_kernels_set_threads(t + 1);
        ddpc_mha_forward(DDPC_PREC_FP32, o[t], a[t], q, kv, kv + c, pad, &s, NULL);
        ddpc_mha_backward(DDPC_PREC_FP32, dq[t], dkv[t], dkv[t] + c, dout, q, kv, kv + c, a[t], &s,
                          ws);
    }
    ddpc_kernels_set_threads(threads);
    CHECK(memcmp(o[0], o[1], (size_t)(b * tq * c) * 4) == 0);
    CHECK(memcmp(a[0], a[1], (size_t)(b * nh * tq * tk) * 4) == 0);
    CHECK(memcmp(dq[0], dq[1], (size_t)(b * tq * c) * 4) == 0);
    CHECK(memcmp(dkv[0], dkv[1], (size_t)(b * tk * 2 * c) * 4) == 0);
    for (int t = 0; t < 2; t++)
        ddpc_free(o[t]), ddpc_free(a[t]), ddpc_free(dq[t]), ddpc_free(dkv[t]);
    float *bufs[] = {q, kv, dout, ws};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        ddpc_free(bufs[i]);
    free(pad);
}

int main(void)
{
    RUN_TEST(test_self_attention);
    RUN_TEST(test_cross_attention);
    RUN_TEST(test_matches_causal_attention);
    RUN_TEST(test_all_keys_masked);
    RUN_TEST(test_batch_strides);
    RUN_TEST(test_threads_agree);
    return check_summary();
}
