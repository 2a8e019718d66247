// SPDX-License-Identifier: MIT
/* The deferred engine on the GPU (engine_defer_check.h): read at every other step, an MLP's
 * per-pass losses and counts, norms and parameters equal, bit for bit, those of the engine that
 * reads every pass; its steps make no host wait and a read makes one; a NaN loss stops at the
 * read. Then the no-wait members against the waiting ones on the same inputs: the same bits.
 * Skips (exit 77) without a GPU. */
#include "backend_testutil.h"
#include "engine_defer_check.h"

static const ddpc_kernel_table *gpu;

static void test_engine_deferred(void)
{
    dc_check_same_as_undeferred(gpu);
    dc_check_stop_at_read(gpu);
    dc_check_full(gpu);
}

/* cross_entropy_forward_into + argmax_correct_into + backward_from give what the waiting members
 * give, and make no host wait. */
static void test_loss_members(void)
{
    enum { N = 37, V = 1000 };
    int32_t tg[N];
    for (int i = 0; i < N; i++)
        tg[i] = i == 5 ? -1 : (i * 97) % V; /* one ignored row */
    float *logits = tu_rand(N * V, -4.0f, 4.0f, 61);
    int32_t *d_tg = bt_up_bytes(gpu, tg, sizeof tg);
    float *a = bt_up(gpu, logits, N * V), *b = bt_up(gpu, logits, N * V);
    double *sums = gpu->alloc(3 * sizeof(double));
    int64_t nv = 0;
    int64_t correct = gpu->argmax_correct(a, d_tg, N, V, -1);
    float loss = gpu->cross_entropy_forward(a, NULL, a, d_tg, N, V, -1, &nv);
    uint64_t w0 = gpu->host_waits();
    gpu->argmax_correct_into(sums + 2, b, d_tg, N, V, -1);
    gpu->cross_entropy_forward_into(sums, b, NULL, b, d_tg, N, V, -1);
    float *da = bt_poison(gpu, N * V), *db = bt_poison(gpu, N * V);
    gpu->fill_f32(da, 0.0f, N * V);
    gpu->fill_f32(db, 0.0f, N * V);
    gpu->cross_entropy_backward(da, a, d_tg, N, V, -1, nv, 0.75f);
    gpu->cross_entropy_backward_from(db, b, d_tg, N, V, -1, sums, 0.75f);
    CHECK_EQ_INT(gpu->host_waits(), w0);
    double h[3];
    gpu->to_host(h, sums, sizeof h);
    float deferred = (float)(h[0] / h[1]);
    printf("  loss %.9g / %.9g, valid %lld / %.0f, correct %lld / %.0f\n", loss, deferred,
           (long long)nv, h[1], (long long)correct, h[2]);
    CHECK(memcmp(&loss, &deferred, sizeof loss) == 0);
    CHECK_EQ_INT((int64_t)h[1], nv);
    CHECK_EQ_INT((int64_t)h[2], correct);
    float *ga = bt_down(gpu, da, N * V), *gb = bt_down(gpu, db, N * V);
    CHECK(memcmp(ga, gb, (size_t)(N * V) * sizeof(float)) == 0);
    gpu->free(d_tg);
    gpu->free(a);
    gpu->free(b);
    gpu->free(da);
    gpu->free(db);
    gpu->free(sums);
    ddpc_free(logits);
    ddpc_free(ga);
    ddpc_free(gb);
}

/* grad_norm_clip: norm[0] is sumsq's value, norm[1] accumulates, and the clipped gradients equal
 * the host's coefficient applied with `scale`; no host wait. */
static void test_grad_norm_clip(void)
{
    const int64_t sizes[] = {1, 1000, 300001};
    for (size_t t = 0; t < sizeof sizes / sizeof sizes[0]; t++) {
        int64_t n = sizes[t];
        float *g = tu_rand(n, -1.0f, 1.0f, 71 + (uint64_t)t);
        float *da = bt_up(gpu, g, n), *db = bt_up(gpu, g, n);
        double *norm = gpu->alloc(2 * sizeof(double));
        double sumsq = gpu->sumsq(da, n);
        float max_norm = (float)(0.5 * sqrt(sumsq)); /* clips by about one half */
        float coef = ddpc_grad_clip_coef(sqrt(sumsq), max_norm);
        gpu->scale(da, n, coef);
        uint64_t w0 = gpu->host_waits();
        gpu->grad_norm_clip(norm, db, n, max_norm);
        gpu->grad_norm_clip(norm, db, n, 0.0f); /* no clipping: the norm of the clipped */
        CHECK_EQ_INT(gpu->host_waits(), w0);
        double h[2];
        gpu->to_host(h, norm, sizeof h);
        double clipped = gpu->sumsq(db, n);
        printf("  n %lld: sumsq %.17g, clipped %.17g, running %.17g\n", (long long)n, sumsq,
               h[0], h[1]);
        CHECK(memcmp(&h[0], &clipped, sizeof clipped) == 0);
        CHECK(h[1] == sumsq + clipped);
        float *ha = bt_down(gpu, da, n), *hb = bt_down(gpu, db, n);
        CHECK(memcmp(ha, hb, (size_t)n * sizeof(float)) == 0);
        gpu->free(da);
        gpu->free(db);
        gpu->free(norm);
        ddpc_free(g);
        ddpc_free(ha);
        ddpc_free(hb);
    }
}

int main(void)
{
    gpu = bt_cuda_or_skip();
    RUN_TEST(test_engine_deferred);
    RUN_TEST(test_loss_members);
    RUN_TEST(test_grad_norm_clip);
    return check_summary();
}
