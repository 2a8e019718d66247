// SPDX-License-Identifier: MIT
/* stage_in, batches through pinned staging on a copy stream: the host arrays are borrowed only
 * during the call (overwritten at once, the device still gets what they held), the two slots keep
 * their own batches, a kernel launched after the call sees the batch (the compute stream waits
 * for the copy), and staging into a slot whose last copy is done makes no host wait; a batch
 * larger than the last grows the staging and still arrives whole; a host far ahead of the device
 * is throttled, not counted as a host wait. Skips (exit 77) without a GPU. */
#include "backend_testutil.h"

static const ddpc_kernel_table *gpu;

/* Stages x (n floats) and t (n int32) into slot s's buffers. */
static void stage(int s, float *dx, int32_t *dt, const float *x, const int32_t *t, int64_t n)
{
    void *dst[2] = {dx, dt};
    const void *src[2] = {x, t};
    size_t bytes[2] = {(size_t)n * sizeof(float), (size_t)n * sizeof(int32_t)};
    gpu->stage_in(s, dst, src, bytes, 2);
}

static void test_two_slots(void)
{
    enum { N = 100003 };
    float *xa = tu_rand(N, -1, 1, 1), *xb = tu_rand(N, -1, 1, 2), *xc = tu_rand(N, -1, 1, 3);
    float *keep_a = tu_rand(N, -1, 1, 1);
    int32_t *ta = ddpc_calloc(N, sizeof(int32_t)), *tb = ddpc_calloc(N, sizeof(int32_t));
    for (int64_t i = 0; i < N; i++)
        ta[i] = (int32_t)i, tb[i] = (int32_t)(N - i);
    float *dx[2] = {bt_poison(gpu, N), bt_poison(gpu, N)};
    int32_t *dt[2] = {gpu->alloc(N * sizeof(int32_t)), gpu->alloc(N * sizeof(int32_t))};
    float *sum = bt_poison(gpu, N);

    stage(0, dx[0], dt[0], xa, ta, N);
    for (int64_t i = 0; i < N; i++) /* borrowed during the call only */
        xa[i] = NAN, ta[i] = -1;
    gpu->add_f32(sum, dx[0], dx[0], N); /* queued after the copy: must see it */
    stage(1, dx[1], dt[1], xb, tb, N);
    CHECK(bt_err(gpu, "slot 0 x", dx[0], keep_a, N) == 0.0);
    CHECK(bt_err(gpu, "slot 1 x", dx[1], xb, N) == 0.0);
    float *twice = tu_alloc(N);
    for (int64_t i = 0; i < N; i++)
        twice[i] = keep_a[i] + keep_a[i];
    CHECK(bt_err(gpu, "kernel after staging", sum, twice, N) == 0.0);
    int32_t *back = ddpc_calloc(N, sizeof(int32_t));
    gpu->to_host(back, dt[1], N * sizeof(int32_t));
    CHECK(memcmp(back, tb, N * sizeof(int32_t)) == 0);

    /* Both copies are done (the reads above waited): staging again waits for nothing. */
    uint64_t w0 = gpu->host_waits();
    stage(0, dx[0], dt[0], xc, tb, N);
    CHECK_EQ_INT(gpu->host_waits(), w0);
    CHECK(bt_err(gpu, "slot 0 again", dx[0], xc, N) == 0.0);

    /* A larger batch grows the staging. */
    enum { M = 3 * N };
    float *big = tu_rand(M, -1, 1, 4), *dbig = bt_poison(gpu, M);
    int32_t *tbig = ddpc_calloc(M, sizeof(int32_t)), *dtbig = gpu->alloc(M * sizeof(int32_t));
    stage(1, dbig, dtbig, big, tbig, M);
    CHECK(bt_err(gpu, "larger batch", dbig, big, M) == 0.0);

    float *dev[] = {dx[0], dx[1], sum, dbig};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        gpu->free(dev[i]);
    gpu->free(dt[0]);
    gpu->free(dt[1]);
    gpu->free(dtbig);
    float *host[] = {xa, xb, xc, keep_a, twice, big};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++)
        ddpc_free(host[i]);
    ddpc_free(ta);
    ddpc_free(tb);
    ddpc_free(back);
    ddpc_free(tbig);
}

/* The host far ahead of the device (a queue of slow kernels after each batch): staging then
 * waits for its slot's last copy as a throttle, never as a host wait, and every batch still
 * reaches the kernel queued after it intact (acc sums them in the host's order). */
static void test_host_ahead(void)
{
    enum { N = 4099, BUSY = 1 << 24, BATCHES = 12, SLOW = 40 };
    float *busy = bt_poison(gpu, BUSY), *acc = bt_poison(gpu, N);
    float *dx[2] = {bt_poison(gpu, N), bt_poison(gpu, N)};
    int32_t *dt[2] = {gpu->alloc(N * sizeof(int32_t)), gpu->alloc(N * sizeof(int32_t))};
    float *x = tu_alloc(N), *want = tu_alloc(N);
    int32_t *t = ddpc_calloc(N, sizeof(int32_t));
    gpu->fill_f32(acc, 0.0f, N);
    uint64_t w0 = gpu->host_waits(), th0 = gpu->host_throttles();
    for (int k = 0; k < BATCHES; k++) {
        for (int64_t i = 0; i < N; i++)
            x[i] = (float)(k * N + i) * 0.25f, want[i] += x[i];
        stage(k & 1, dx[k & 1], dt[k & 1], x, t, N);
        gpu->add_f32(acc, acc, dx[k & 1], N);
        for (int j = 0; j < SLOW; j++)
            gpu->add_f32(busy, busy, busy, BUSY);
    }
    uint64_t waits = gpu->host_waits() - w0, throttles = gpu->host_throttles() - th0;
    printf("  %d batches: %llu host waits, %llu throttles\n", BATCHES, (unsigned long long)waits,
           (unsigned long long)throttles);
    CHECK_EQ_INT(waits, 0);
    CHECK(bt_err(gpu, "every batch summed", acc, want, N) == 0.0);
    float *dev[] = {busy, acc, dx[0], dx[1]};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        gpu->free(dev[i]);
    gpu->free(dt[0]);
    gpu->free(dt[1]);
    ddpc_free(x);
    ddpc_free(want);
    ddpc_free(t);
}

int main(void)
{
    gpu = bt_cuda_or_skip();
    CHECK(gpu->stage_in != NULL);
    RUN_TEST(test_two_slots);
    RUN_TEST(test_host_ahead);
    return check_summary();
}
