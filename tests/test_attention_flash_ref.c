// SPDX-License-Identifier: MIT
/* The CUDA flash attention's algorithm (kernels/cuda/attention_flash.cu; FlashAttention-2, Dao
 * 2023) run on the CPU, tile by tile in the kernels' order, against the CPU attention kernel:
 * forward with online softmax keeping only each row's logsumexp, the D = rowsum(dO * O) pre-pass,
 * dK/dV per key tile over the query tiles that see it, dQ per query tile over key tiles. fp32
 * within 1e-5; with the tensor-core operands rounded to bf16/fp16 as the kernels round them,
 * within 1e-2 of the CPU kernel at that precision. T = 1, 17, 64, 129; head dims 32/64/128. */
#include <ddpc/half.h>

#include "kernels_testutil.h"

typedef enum { RND_NONE, RND_BF16, RND_FP16 } rnd_mode;

/* The value a 16-bit store and load give: the tensor cores' operands. */
static float rnd(rnd_mode m, float x)
{
    if (m == RND_BF16)
        return ddpc_bf16_to_f32(ddpc_f32_to_bf16(x));
    if (m == RND_FP16)
        return ddpc_f16_to_f32(ddpc_f32_to_f16(x));
    return x;
}

enum { MAX_TILE = 64, MAX_HS = 128 };

typedef struct {
    rnd_mode mode;
    int64_t b, t, c, nh, hs, tile;
    float scale;
} flash_shape;

/* Rows r0.. r0+tile of one head's part (0 q, 1 k, 2 v) of qkv, rounded, into tile (tile, hs);
 * rows at or past T are zero, as the kernels' shared-memory loads make them. */
static void load_tile(const flash_shape *s, float *tile, const float *qkv, int64_t bi, int64_t h,
                      int part, int64_t r0)
{
    for (int64_t r = 0; r < s->tile; r++)
        for (int64_t d = 0; d < s->hs; d++) {
            const int64_t i = r0 + r;
            tile[r * s->hs + d] =
                i < s->t
                    ? rnd(s->mode, qkv[(bi * s->t + i) * 3 * s->c + part * s->c + h * s->hs + d])
                    : 0.0f;
        }
}

/* Rows of dout (B, T, C) for one head, like load_tile. */
static void load_dout(const flash_shape *s, float *tile, const float *dout, int64_t bi, int64_t h,
                      int64_t r0)
{
    for (int64_t r = 0; r < s->tile; r++)
        for (int64_t d = 0; d < s->hs; d++) {
            const int64_t i = r0 + r;
            tile[r * s->hs + d] =
                i < s->t ? rnd(s->mode, dout[(bi * s->t + i) * s->c + h * s->hs + d]) : 0.0f;
        }
}

static float dot(const float *a, const float *b, int64_t n)
{
    float acc = 0.0f;
    for (int64_t d = 0; d < n; d++)
        acc += a[d] * b[d];
    return acc;
}

/* saved = lse (B, NH, T) then a copy of out (B, T, C): the CUDA table's `att`. */
static void flash_forward(const flash_shape *s, float *out, float *saved, const float *qkv)
{
    static float q[MAX_TILE * MAX_HS], k[MAX_TILE * MAX_HS], v[MAX_TILE * MAX_HS];
    static float o[MAX_TILE * MAX_HS], sc[MAX_TILE];
    const int64_t tiles = (s->t + s->tile - 1) / s->tile;
    for (int64_t bh = 0; bh < s->b * s->nh; bh++)
        for (int64_t qt = 0; qt < tiles; qt++) {
            const int64_t bi = bh / s->nh, h = bh % s->nh, q0 = qt * s->tile;
            float m[MAX_TILE], l[MAX_TILE];
            load_tile(s, q, qkv, bi, h, 0, q0);
            for (int64_t r = 0; r < s->tile; r++) {
                m[r] = -INFINITY;
                l[r] = 0.0f;
                for (int64_t d = 0; d < s->hs; d++)
                    o[r * s->hs + d] = 0.0f;
            }
            for (int64_t kt = 0; kt <= qt; kt++) { /* causal: key tiles up to the diagonal */
                const int64_t k0 = kt * s->tile;
                load_tile(s, k, qkv, bi, h, 1, k0);
                load_tile(s, v, qkv, bi, h, 2, k0);
                for (int64_t r = 0; r < s->tile; r++) {
                    const int64_t i = q0 + r;
                    float mt = -INFINITY;
                    for (int64_t j = 0; j < s->tile; j++) {
                        const int64_t kj = k0 + j;
                        const float x = s->scale * dot(q + r * s->hs, k + j * s->hs, s->hs);
                        sc[j] = kj <= i && kj < s->t ? x : -INFINITY;
                        mt = fmaxf(mt, sc[j]);
                    }
                    /* A row with no key yet keeps its -inf maximum; exp then gives 0, not NaN. */
                    const float mn = fmaxf(m[r], mt), base = mn == -INFINITY ? 0.0f : mn;
                    const float alpha = expf(m[r] - base);
                    float sum = 0.0f;
                    for (int64_t j = 0; j < s->tile; j++) {
                        sc[j] = expf(sc[j] - base);
                        sum += sc[j];
                    }
                    m[r] = mn;
                    l[r] = l[r] * alpha + sum;
                    for (int64_t d = 0; d < s->hs; d++) {
                        float acc = o[r * s->hs + d] * alpha;
                        for (int64_t j = 0; j < s->tile; j++)
                            acc += rnd(s->mode, sc[j]) * v[j * s->hs + d];
                        o[r * s->hs + d] = acc;
                    }
                }
            }
            for (int64_t r = 0; r < s->tile && q0 + r < s->t; r++) {
                const int64_t i = q0 + r;
                const float inv = 1.0f / l[r];
                for (int64_t d = 0; d < s->hs; d++) {
                    const int64_t at = (bi * s->t + i) * s->c + h * s->hs + d;
                    out[at] = o[r * s->hs + d] * inv;
                    saved[s->b * s->nh * s->t + at] = out[at];
                }
                saved[bh * s->t + i] = m[r] + logf(l[r]);
            }
        }
}

/* dd (B, NH, T) = rowsum(dout * out) per head, out read from saved's copy. */
static void flash_backward_d(const flash_shape *s, float *dd, const float *dout, const float *saved)
{
    const float *o = saved + s->b * s->nh * s->t;
    for (int64_t bh = 0; bh < s->b * s->nh; bh++)
        for (int64_t i = 0; i < s->t; i++) {
            const int64_t at = ((bh / s->nh) * s->t + i) * s->c + (bh % s->nh) * s->hs;
            dd[bh * s->t + i] = dot(dout + at, o + at, s->hs);
        }
}

/* P and dS of key j of a tile against query i: P = exp(scale q.k - lse), 0 where masked;
 * dS = scale P (dO.v - D). */
static void p_ds(const flash_shape *s, float qk, float dov, int64_t i, int64_t j, float lse,
                 float dd, float *p, float *ds)
{
    const bool ok = j <= i && i < s->t && j < s->t;
    *p = ok ? expf(s->scale * qk - lse) : 0.0f;
    *ds = s->scale * *p * (dov - dd);
}

/* dK and dV of each key tile, over the query tiles at or after it (the others see none of it). */
static void flash_backward_dkdv(const flash_shape *s, float *dqkv, const float *dout,
                                const float *qkv, const float *saved, const float *dd)
{
    static float q[MAX_TILE * MAX_HS], k[MAX_TILE * MAX_HS], v[MAX_TILE * MAX_HS];
    static float g[MAX_TILE * MAX_HS], dk[MAX_TILE * MAX_HS], dv[MAX_TILE * MAX_HS];
    const int64_t tiles = (s->t + s->tile - 1) / s->tile;
    for (int64_t bh = 0; bh < s->b * s->nh; bh++)
        for (int64_t kt = 0; kt < tiles; kt++) {
            const int64_t bi = bh / s->nh, h = bh % s->nh, k0 = kt * s->tile;
            load_tile(s, k, qkv, bi, h, 1, k0);
            load_tile(s, v, qkv, bi, h, 2, k0);
            memset(dk, 0, sizeof dk);
            memset(dv, 0, sizeof dv);
            for (int64_t qt = kt; qt < tiles; qt++) {
                const int64_t q0 = qt * s->tile;
                load_tile(s, q, qkv, bi, h, 0, q0);
                load_dout(s, g, dout, bi, h, q0);
                for (int64_t j = 0; j < s->tile; j++)
                    for (int64_t r = 0; r < s->tile; r++) {
                        const int64_t i = q0 + r;
                        const float lse = i < s->t ? saved[bh * s->t + i] : 0.0f;
                        const float di = i < s->t ? dd[bh * s->t + i] : 0.0f;
                        float p, ds;
                        p_ds(s, dot(k + j * s->hs, q + r * s->hs, s->hs),
                             dot(v + j * s->hs, g + r * s->hs, s->hs), i, k0 + j, lse, di, &p, &ds);
                        const float rp = rnd(s->mode, p), rds = rnd(s->mode, ds);
                        for (int64_t d = 0; d < s->hs; d++) {
                            dv[j * s->hs + d] += rp * g[r * s->hs + d];
                            dk[j * s->hs + d] += rds * q[r * s->hs + d];
                        }
                    }
            }
            for (int64_t j = 0; j < s->tile && k0 + j < s->t; j++)
                for (int64_t d = 0; d < s->hs; d++) {
                    float *row = dqkv + (bi * s->t + k0 + j) * 3 * s->c + h * s->hs + d;
                    row[s->c] = dk[j * s->hs + d];
                    row[2 * s->c] = dv[j * s->hs + d];
                }
        }
}

/* dQ of each query tile, over the key tiles up to the diagonal. The kernels store dS in the dK/dV
 * pass and read it here; recomputing it gives the same values (the same products, same order). */
static void flash_backward_dq(const flash_shape *s, float *dqkv, const float *dout,
                              const float *qkv, const float *saved, const float *dd)
{
    static float q[MAX_TILE * MAX_HS], k[MAX_TILE * MAX_HS], v[MAX_TILE * MAX_HS];
    static float g[MAX_TILE * MAX_HS], dq[MAX_TILE * MAX_HS];
    const int64_t tiles = (s->t + s->tile - 1) / s->tile;
    for (int64_t bh = 0; bh < s->b * s->nh; bh++)
        for (int64_t qt = 0; qt < tiles; qt++) {
            const int64_t bi = bh / s->nh, h = bh % s->nh, q0 = qt * s->tile;
            load_tile(s, q, qkv, bi, h, 0, q0);
            load_dout(s, g, dout, bi, h, q0);
            memset(dq, 0, sizeof dq);
            for (int64_t kt = 0; kt <= qt; kt++) {
                const int64_t k0 = kt * s->tile;
                load_tile(s, k, qkv, bi, h, 1, k0);
                load_tile(s, v, qkv, bi, h, 2, k0);
                for (int64_t r = 0; r < s->tile; r++) {
                    const int64_t i = q0 + r;
                    const float lse = i < s->t ? saved[bh * s->t + i] : 0.0f;
                    const float di = i < s->t ? dd[bh * s->t + i] : 0.0f;
                    for (int64_t j = 0; j < s->tile; j++) {
                        float p, ds;
                        p_ds(s, dot(q + r * s->hs, k + j * s->hs, s->hs),
                             dot(g + r * s->hs, v + j * s->hs, s->hs), i, k0 + j, lse, di, &p, &ds);
                        const float rds = rnd(s->mode, ds);
                        for (int64_t d = 0; d < s->hs; d++)
                            dq[r * s->hs + d] += rds * k[j * s->hs + d];
                    }
                }
            }
            for (int64_t r = 0; r < s->tile && q0 + r < s->t; r++)
                for (int64_t d = 0; d < s->hs; d++)
                    dqkv[(bi * s->t + q0 + r) * 3 * s->c + h * s->hs + d] = dq[r * s->hs + d];
        }
}

/* One shape at one precision: the tiled algorithm against ddpc_attention_*. */
static void check_flash_amp(int64_t b, int64_t t, int64_t c, int64_t nh, int64_t tile,
                            rnd_mode mode, float amp)
{
    static const ddpc_precision precs[] = {DDPC_PREC_FP32, DDPC_PREC_BF16, DDPC_PREC_FP16};
    const ddpc_precision prec = precs[mode];
    const double tol = mode == RND_NONE ? 1e-5 : 1e-2;
    const flash_shape s = {mode, b, t, c, nh, c / nh, tile, 1.0f / sqrtf((float)(c / nh))};
    const int64_t nqkv = b * t * 3 * c, nout = b * t * c;
    printf(" flash ref b %lld t %lld c %lld nh %lld tile %lld %s amp %g\n", (long long)b,
           (long long)t, (long long)c, (long long)nh, (long long)tile, ddpc_precision_name(prec),
           amp);
    float *qkv = tu_rand(nqkv, -amp, amp, 21 + (uint64_t)t);
    float *dout = tu_rand(nout, -1.0f, 1.0f, 22 + (uint64_t)t);
    float *out = tu_alloc(nout), *att = tu_alloc(b * nh * t * t), *dqkv = tu_alloc(nqkv);
    float *ws = tu_alloc((int64_t)ddpc_attention_workspace_floats(b, t, c, nh));
    ddpc_attention_forward(prec, out, att, qkv, b, t, c, nh, ws);
    ddpc_attention_backward(prec, dqkv, dout, qkv, att, b, t, c, nh, ws);

    float *fout = tu_alloc(nout), *saved = tu_alloc(b * nh * t + nout), *dd = tu_alloc(b * nh * t);
    float *fdqkv = tu_alloc(nqkv);
    for (int64_t i = 0; i < nout; i++)
        fout[i] = NAN; /* an element the tiles miss fails the comparison */
    for (int64_t i = 0; i < nqkv; i++)
        fdqkv[i] = NAN;
    flash_forward(&s, fout, saved, qkv);
    flash_backward_d(&s, dd, dout, saved);
    flash_backward_dkdv(&s, fdqkv, dout, qkv, saved, dd);
    flash_backward_dq(&s, fdqkv, dout, qkv, saved, dd);

    double e_out = tu_rel_err(fout, out, nout, 1e-6), e_dqkv = tu_rel_err(fdqkv, dqkv, nqkv, 1e-6);
    int64_t nan = 0;
    for (int64_t i = 0; i < nqkv; i++)
        nan += !isfinite(fdqkv[i]) || (i < nout && !isfinite(fout[i]));
    /* The saved logsumexp against the CPU's probabilities: P(i, 0) = exp(s(i, 0) - lse(i)). */
    double e_lse = 0.0;
    for (int64_t bh = 0; bh < b * nh; bh++)
        for (int64_t i = 0; i < t; i++) {
            const int64_t bi = bh / nh, h = bh % nh;
            const float *q = qkv + (bi * t + i) * 3 * c + h * s.hs, *k = qkv + bi * t * 3 * c + c;
            double x = 0.0;
            for (int64_t d = 0; d < s.hs; d++)
                x += (double)rnd(mode, q[d]) * rnd(mode, k[h * s.hs + d]);
            const double p0 = exp(s.scale * x - saved[bh * t + i]);
            e_lse = fmax(e_lse, fabs(p0 - att[(bh * t + i) * t]));
        }
    printf("  out rel err %.3g, dqkv rel err %.3g, P(i, 0) from lse abs err %.3g\n", e_out, e_dqkv,
           e_lse);
    CHECK_EQ_INT(nan, 0);
    CHECK(e_out <= tol);
    CHECK(e_dqkv <= tol);
    CHECK(e_lse <= tol);
    float *bufs[] = {qkv, dout, out, att, dqkv, ws, fout, saved, dd, fdqkv};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        ddpc_free(bufs[i]);
}

static void check_flash(int64_t b, int64_t t, int64_t c, int64_t nh, int64_t tile, rnd_mode mode)
{
    check_flash_amp(b, t, c, nh, tile, mode, 1.0f);
}

/* The kernels' tile (64): one partial tile, exactly one, two with a 1-row tail. */
static void test_flash_ref_fp32(void)
{
    check_flash(2, 1, 64, 1, 64, RND_NONE);    /* T = 1: the row attends to itself only */
    check_flash(2, 17, 64, 2, 64, RND_NONE);   /* head dim 32 */
    check_flash(1, 64, 128, 2, 64, RND_NONE);  /* head dim 64 */
    check_flash(1, 129, 256, 2, 64, RND_NONE); /* head dim 128, three tiles */
}

/* Smaller tiles: many off-diagonal tiles, so the online softmax rescales often. */
static void test_flash_ref_small_tiles(void)
{
    check_flash(1, 129, 64, 2, 16, RND_NONE);
    check_flash(2, 37, 64, 1, 16, RND_NONE);
}

static void test_flash_ref_half(void)
{
    check_flash(2, 17, 64, 2, 64, RND_BF16);
    check_flash(1, 129, 128, 2, 64, RND_BF16);
    check_flash(1, 129, 128, 2, 16, RND_FP16);
    check_flash(1, 64, 256, 2, 64, RND_FP16);
    /* Peaky softmax: the running maximum moves across tiles (test_cuda_flash's shape). */
    check_flash_amp(1, 200, 128, 2, 64, RND_NONE, 2.5f);
    check_flash_amp(1, 200, 128, 2, 64, RND_BF16, 2.5f);
    check_flash_amp(1, 200, 128, 2, 64, RND_FP16, 2.5f);
}

int main(void)
{
    RUN_TEST(test_flash_ref_fp32);
    RUN_TEST(test_flash_ref_small_tiles);
    RUN_TEST(test_flash_ref_half);
    return check_summary();
}
