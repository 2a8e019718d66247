// SPDX-License-Identifier: MIT
/* Tests for layernorm.c and embedding.c: forward against double references, backward against
 * central finite differences, accumulation, NULL gradients, token scatter with repeated tokens. */
#include "kernels_testutil.h"

typedef struct {
    float *y, *mean, *rstd, *x, *w, *b, *r;
    int64_t rows, c;
} ln_ctx;

static double ln_loss(void *p)
{
    ln_ctx *c = p;
    ddpc_layernorm_forward(c->y, c->mean, c->rstd, c->x, c->w, c->b, c->rows, c->c);
    return tu_dot(c->y, c->r, c->rows * c->c);
}

static void check_layernorm(int64_t rows, int64_t ch, float offset)
{
    int64_t n = rows * ch;
    ln_ctx c = {tu_alloc(n),
                tu_alloc(rows),
                tu_alloc(rows),
                tu_rand(n, -2, 2, 1),
                tu_rand(ch, 0.5f, 1.5f, 2),
                tu_rand(ch, -1, 1, 3),
                tu_rand(n, -1, 1, 4),
                rows,
                ch};
    for (int64_t i = 0; i < n; i++)
        c.x[i] += offset;
    ln_loss(&c);
    double err = 0.0;
    for (int64_t i = 0; i < rows; i++) {
        double m = 0.0, v = 0.0;
        for (int64_t j = 0; j < ch; j++)
            m += c.x[i * ch + j];
        m /= (double)ch;
        for (int64_t j = 0; j < ch; j++)
            v += (c.x[i * ch + j] - m) * (c.x[i * ch + j] - m);
        double rs = 1.0 / sqrt(v / (double)ch + 1e-5);
        CHECK_NEAR(c.mean[i], m, 1e-5);
        CHECK_NEAR(c.rstd[i], rs, 1e-4);
        for (int64_t j = 0; j < ch; j++) {
            double ref = (c.x[i * ch + j] - m) * rs * c.w[j] + c.b[j];
            err = fmax(err, fabs(ref - c.y[i * ch + j]));
        }
    }
    CHECK(err < 1e-4);
    float *dx = tu_alloc(n), *dw = tu_alloc(ch), *db = tu_alloc(ch);
    ddpc_layernorm_backward(dx, dw, db, c.r, c.x, c.w, c.mean, c.rstd, rows, ch);
    int64_t step = n > 2000 ? 97 : 1;
    CHECK(tu_grad_check("ln dx", c.x, dx, n, step, 1e-2f, ln_loss, &c) < 1e-2);
    CHECK(tu_grad_check("ln dw", c.w, dw, ch, 1, 1e-2f, ln_loss, &c) < 1e-2);
    CHECK(tu_grad_check("ln db", c.b, db, ch, 1, 1e-2f, ln_loss, &c) < 1e-2);
    /* Twice accumulates to double; NULL dx/dw skip while db still accumulates. */
    float *dw2 = tu_alloc(ch), *db3 = tu_alloc(ch);
    memcpy(dw2, dw, (size_t)ch * 4);
    memcpy(db3, db, (size_t)ch * 4);
    ln_loss(&c);
    ddpc_layernorm_backward(NULL, dw, NULL, c.r, c.x, c.w, c.mean, c.rstd, rows, ch);
    ddpc_layernorm_backward(NULL, NULL, db, c.r, c.x, c.w, c.mean, c.rstd, rows, ch);
    ddpc_layernorm_backward(NULL, NULL, db, c.r, c.x, c.w, c.mean, c.rstd, rows, ch);
    ddpc_axpy_f32(dw2, 1.0f, dw2, ch);
    ddpc_axpy_f32(db3, 2.0f, db3, ch);
    CHECK(tu_rel_err(dw, dw2, ch, 1e-6) < 1e-5);
    CHECK(tu_rel_err(db, db3, ch, 1e-6) < 1e-5);
    float *bufs[] = {c.y, c.mean, c.rstd, c.x, c.w, c.b, c.r, dx, dw, db, dw2, db3};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        ddpc_free(bufs[i]);
}

static void test_layernorm_without_affine(void)
{
    /* w = NULL, b = NULL behave as ones and zeros. */
    int64_t rows = 3, ch = 11;
    float *x = tu_rand(rows * ch, -1, 1, 9), *y = tu_alloc(rows * ch), *y1 = tu_alloc(rows * ch);
    float *ones = tu_alloc(ch), *zeros = tu_alloc(ch), *m = tu_alloc(rows), *rs = tu_alloc(rows);
    ddpc_fill_f32(ones, 1.0f, ch);
    ddpc_layernorm_forward(y, m, rs, x, NULL, NULL, rows, ch);
    ddpc_layernorm_forward(y1, m, rs, x, ones, zeros, rows, ch);
    CHECK(tu_rel_err(y, y1, rows * ch, 1e-6) < 1e-6);
    float *dx = tu_alloc(rows * ch), *dx1 = tu_alloc(rows * ch),
          *dy = tu_rand(rows * ch, -1, 1, 10);
    ddpc_layernorm_backward(dx, NULL, NULL, dy, x, NULL, m, rs, rows, ch);
    ddpc_layernorm_backward(dx1, NULL, NULL, dy, x, ones, m, rs, rows, ch);
    CHECK(tu_rel_err(dx, dx1, rows * ch, 1e-6) < 1e-5);
    float *bufs[] = {x, y, y1, ones, zeros, m, rs, dx, dx1, dy};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        ddpc_free(bufs[i]);
}

static void test_layernorm(void)
{
    check_layernorm(1, 1, 0.0f);
    check_layernorm(1, 7, 0.0f);
    check_layernorm(5, 13, 0.0f);
    check_layernorm(3, 100, 50.0f);  /* large mean: two-pass variance stays accurate */
    check_layernorm(300, 130, 0.0f); /* threaded paths, column blocks with a tail */
}

typedef struct {
    float *y, *wte, *wpe, *r;
    int32_t *tok;
    int64_t b, t, c;
} emb_ctx;

static double emb_loss(void *p)
{
    emb_ctx *e = p;
    ddpc_embedding_forward(e->y, e->tok, e->wte, e->wpe, e->b, e->t, e->c);
    return tu_dot(e->y, e->r, e->b * e->t * e->c);
}

static void check_embedding(int64_t b, int64_t t, int64_t c, int64_t v)
{
    int64_t n = b * t * c;
    int32_t *tok = ddpc_malloc((size_t)(b * t) * sizeof(int32_t));
    for (int64_t i = 0; i < b * t; i++)
        tok[i] = (int32_t)((i * 7 + 3) % v); /* repeats when b*t > v */
    emb_ctx e = {tu_alloc(n),
                 tu_rand(v * c, -1, 1, 1),
                 tu_rand((t + 2) * c, -1, 1, 2),
                 tu_rand(n, -1, 1, 3),
                 tok,
                 b,
                 t,
                 c};
    emb_loss(&e);
    int bad = 0;
    for (int64_t i = 0; i < b * t; i++)
        for (int64_t j = 0; j < c; j++)
            bad += e.y[i * c + j] != e.wte[tok[i] * c + j] + e.wpe[(i % t) * c + j];
    CHECK_EQ_INT(bad, 0);
    float *dwte = tu_alloc(v * c), *dwpe = tu_alloc((t + 2) * c);
    ddpc_embedding_backward(dwte, dwpe, e.r, tok, b, t, c);
    CHECK(tu_grad_check("emb dwte", e.wte, dwte, v * c, 1, 1e-2f, emb_loss, &e) < 1e-3);
    CHECK(tu_grad_check("emb dwpe", e.wpe, dwpe, t * c, 1, 1e-2f, emb_loss, &e) < 1e-3);
    CHECK(tu_max_abs(dwpe + t * c, 2 * c) == 0.0); /* positions >= t untouched */
    float *twice = tu_alloc(v * c);
    memcpy(twice, dwte, (size_t)(v * c) * 4);
    ddpc_embedding_backward(dwte, NULL, e.r, tok, b, t, c);
    ddpc_axpy_f32(twice, 1.0f, twice, v * c);
    CHECK(tu_rel_err(dwte, twice, v * c, 1e-6) < 1e-6);
    ddpc_free(tok);
    float *bufs[] = {e.y, e.wte, e.wpe, e.r, dwte, dwpe, twice};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        ddpc_free(bufs[i]);
}

static void test_embedding(void)
{
    check_embedding(1, 1, 1, 1);
    check_embedding(2, 5, 7, 3);
    check_embedding(4, 33, 70, 11); /* threaded, channel blocks with a tail */
}

/* Parameter and embedding gradients sum rows in order per column, so 1, 2 and 3 threads give the
 * same bits; widths cross the 512-column strip and split unevenly between threads. */
static void test_column_sums_threads_agree(void)
{
    int64_t rows = 140, c = 1100, bt = 4, t = 33, v = 5;
    float *x = tu_rand(rows * c, -1, 1, 21), *dy = tu_rand(rows * c, -1, 1, 22);
    float *w = tu_rand(c, -1, 1, 23), *y = tu_alloc(rows * c), *m = tu_alloc(rows),
          *rs = tu_alloc(rows);
    float *dw[3], *db[3], *dwte[3], *dwpe[3];
    int32_t *tok = ddpc_malloc((size_t)(bt * t) * sizeof(int32_t));
    for (int64_t i = 0; i < bt * t; i++)
        tok[i] = (int32_t)((i * 3) % v);
    ddpc_layernorm_forward(y, m, rs, x, w, NULL, rows, c);
    int threads = ddpc_kernels_threads();
    for (int k = 0; k < 3; k++) {
        ddpc_kernels_set_threads(k + 1);
        dw[k] = tu_alloc(c);
        db[k] = tu_alloc(c);
        dwte[k] = tu_alloc(v * c);
        dwpe[k] = tu_alloc(t * c);
        ddpc_layernorm_backward(NULL, dw[k], db[k], dy, x, w, m, rs, rows, c);
        ddpc_embedding_backward(dwte[k], dwpe[k], dy, tok, bt, t, c); /* bt * t <= rows */
    }
    ddpc_kernels_set_threads(threads);
    for (int k = 1; k < 3; k++) {
        CHECK(memcmp(dw[k], dw[0], (size_t)c * 4) == 0);
        CHECK(memcmp(db[k], db[0], (size_t)c * 4) == 0);
        CHECK(memcmp(dwte[k], dwte[0], (size_t)(v * c) * 4) == 0);
        CHECK(memcmp(dwpe[k], dwpe[0], (size_t)(t * c) * 4) == 0);
    }
    for (int k = 0; k < 3; k++) {
        ddpc_free(dw[k]);
        ddpc_free(db[k]);
        ddpc_free(dwte[k]);
        ddpc_free(dwpe[k]);
    }
    float *bufs[] = {x, dy, w, y, m, rs};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        ddpc_free(bufs[i]);
    ddpc_free(tok);
}

int main(void)
{
    RUN_TEST(test_layernorm);
    RUN_TEST(test_layernorm_without_affine);
    RUN_TEST(test_embedding);
    RUN_TEST(test_column_sums_threads_agree);
    return check_summary();
}
