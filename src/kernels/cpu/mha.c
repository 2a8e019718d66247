// SPDX-License-Identifier: MIT
/* Multi-head attention with a key padding mask, optional causality and different query and key
 * lengths: the core of torch.nn.MultiheadAttention after its input projections (Vaswani et al.
 * 2017), for the encoder's self-attention, the decoder's causal self-attention and its
 * cross-attention on the encoder's output. Every matmul is an sgemm on strided views of q, k, v;
 * one OpenMP job per (batch, head). Invariant: att is exactly 0 at every masked (query, key), so
 * backward needs no mask: the softmax gradient P * (dP - rowsum(P dP)) vanishes there. */
#include <ddpc/kernels.h>

#include <math.h>
#include <omp.h>

#include "kernels/cpu/cpu_impl.h"

size_t ddpc_mha_workspace_floats(const ddpc_mha_shape *s)
{
    return (size_t)ddpc__kernel_slots() * (size_t)(s->tq * s->tk);
}

void ddpc_pad_mask(uint8_t *mask, const int32_t *tokens, int64_t n, int32_t pad)
{
    for (int64_t i = 0; i < n; i++)
        mask[i] = tokens[i] == pad;
}

/* row (tk) holds scaled scores of query i; becomes the softmax over the keys it may see. */
static void masked_softmax_row(float *restrict row, const uint8_t *pad, int64_t i, int64_t tk,
                               bool causal)
{
    int64_t len = causal && i + 1 < tk ? i + 1 : tk; /* keys past len are masked by causality */
    float mx = -INFINITY;
    int any = 0;
    for (int64_t j = 0; j < len; j++)
        if (!pad || !pad[j]) {
            mx = row[j] > mx ? row[j] : mx;
            any = 1;
        }
    if (!any) {
        for (int64_t j = 0; j < tk; j++)
            row[j] = 0.0f;
        return;
    }
    float sum = 0.0f;
    for (int64_t j = 0; j < len; j++) {
        float e = (!pad || !pad[j]) ? ddpc__expf(row[j] - mx) : 0.0f;
        row[j] = e;
        sum += e;
    }
    float inv = 1.0f / sum;
    for (int64_t j = 0; j < len; j++)
        row[j] *= inv;
    for (int64_t j = len; j < tk; j++)
        row[j] = 0.0f;
}

static int parallel_jobs(const ddpc_mha_shape *s, int64_t jobs)
{
    return jobs >= omp_get_max_threads() &&
           jobs * s->tq * s->tk * (s->c / s->nh) >= DDPC__PAR_MIN_MACS;
}

void ddpc_mha_forward(ddpc_precision prec, float *out, float *att, const float *q, const float *k,
                      const float *v, const uint8_t *key_pad, const ddpc_mha_shape *s, float *ws)
{
    (void)ws; /* the CUDA table's forward takes one; this one computes a job's scores in att */
    int64_t hs = s->c / s->nh, jobs = s->b * s->nh, tq = s->tq, tk = s->tk;
    int64_t sq = ddpc_mha_q_batch_stride(s), sk = ddpc_mha_kv_batch_stride(s);
    float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for schedule(static) if (parallel_jobs(s, jobs))
    for (int64_t job = 0; job < jobs; job++) {
        int64_t bi = job / s->nh, h = job % s->nh;
        const float *qh = q + bi * sq + h * hs;
        const float *kh = k + bi * sk + h * hs, *vh = v + bi * sk + h * hs;
        float *p = att + job * tq * tk;
        ddpc_gemm(prec, DDPC_NO_TRANS, DDPC_TRANS, tq, tk, hs, scale, qh, s->ldq, kh, s->ldk, 0.0f,
                  p, tk);
        for (int64_t i = 0; i < tq; i++)
            masked_softmax_row(p + i * tk, key_pad ? key_pad + bi * tk : NULL, i, tk, s->causal);
        ddpc_gemm(prec, DDPC_NO_TRANS, DDPC_NO_TRANS, tq, hs, tk, 1.0f, p, tk, vh, s->ldk, 0.0f,
                  out + bi * tq * s->c + h * hs, s->c);
    }
}

/* In place: dp (tq, tk) becomes dS = scale * P * (dP - rowsum(P * dP)). */
static void softmax_backward(float *dp, const float *p, int64_t tq, int64_t tk, float scale)
{
    for (int64_t i = 0; i < tq; i++) {
        float *restrict d = dp + i * tk;
        const float *restrict pi = p + i * tk;
        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (int64_t j = 0; j < tk; j++)
            dot += pi[j] * d[j];
        for (int64_t j = 0; j < tk; j++)
            d[j] = scale * pi[j] * (d[j] - dot);
    }
}

void ddpc_mha_backward(ddpc_precision prec, float *dq, float *dk, float *dv, const float *dout,
                       const float *q, const float *k, const float *v, const float *att,
                       const ddpc_mha_shape *s, float *ws)
{
    int64_t hs = s->c / s->nh, jobs = s->b * s->nh, tq = s->tq, tk = s->tk;
    int64_t ldq = s->ldq, ldk = s->ldk, c = s->c;
    int64_t sq = ddpc_mha_q_batch_stride(s), sk = ddpc_mha_kv_batch_stride(s);
    float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for schedule(static) if (parallel_jobs(s, jobs))
    for (int64_t job = 0; job < jobs; job++) {
        int64_t bi = job / s->nh, h = job % s->nh;
        int64_t qo = bi * sq + h * hs, ko = bi * sk + h * hs;
        const float *p = att + job * tq * tk, *douth = dout + bi * tq * c + h * hs;
        float *dp = ws + (int64_t)omp_get_thread_num() * tq * tk;
        /* dP = dout v^T; dS in place; dq = dS k; dk = dS^T q; dv = P^T dout. */
        ddpc_gemm(prec, DDPC_NO_TRANS, DDPC_TRANS, tq, tk, hs, 1.0f, douth, c, v + ko, ldk, 0.0f,
                  dp, tk);
        softmax_backward(dp, p, tq, tk, scale);
        ddpc_gemm(prec, DDPC_NO_TRANS, DDPC_NO_TRANS, tq, hs, tk, 1.0f, dp, tk, k + ko, ldk, 0.0f,
                  dq + qo, ldq);
        ddpc_gemm(prec, DDPC_TRANS, DDPC_NO_TRANS, tk, hs, tq, 1.0f, dp, tk, q + qo, ldq, 0.0f,
                  dk + ko, ldk);
        ddpc_gemm(prec, DDPC_TRANS, DDPC_NO_TRANS, tk, hs, tq, 1.0f, p, tk, douth, c, 0.0f, dv + ko,
                  ldk);
    }
}
