// SPDX-License-Identifier: MIT
/* The CUDA table's marks (src/kernels/cuda/marks.cu: CUDA events, the step's phases in device
 * time): a span around 2048^3 fp32 products reads as positive device time once the device has
 * passed it, longer than a span around nothing; a read before then either says not yet or gives
 * that same time, and never waits (the host-wait counter does not move); re-recording a mark
 * moves it; marks allocate no device memory. Skips (exit 77) without a GPU; the engine's use of
 * them is test_engine_clock's (a fake device) and train_checks.sh's (ddpc train on a GPU). */
#include "backend_testutil.h"

enum { N = 2048, REPS = 8 };

static void test_spans(void)
{
    const ddpc_kernel_table *gpu = bt_cuda_or_skip();
    float *a = bt_poison(gpu, (int64_t)N * N), *b = bt_poison(gpu, (int64_t)N * N);
    float *c = bt_poison(gpu, (int64_t)N * N);
    gpu->fill_f32(a, 0.5f, (int64_t)N * N);
    gpu->fill_f32(b, 0.25f, (int64_t)N * N);
    gpu->synchronize();
    const uint64_t allocs = gpu->alloc_count();
    void *ms = gpu->marks_create(4);
    CHECK(ms != NULL);
    if (!ms)
        return;
    gpu->mark(ms, 0);
    for (int r = 0; r < REPS; r++)
        gpu->gemm(DDPC_PREC_FP32, DDPC_NO_TRANS, DDPC_NO_TRANS, N, N, N, 1.0f, a, N, b, N, 0.0f, c,
                  N);
    gpu->mark(ms, 1);
    gpu->mark(ms, 2);
    gpu->mark(ms, 3); /* 2 -> 3: a span around nothing */
    const uint64_t waits = gpu->host_waits();
    double early = -1.0;
    bool ready = gpu->mark_seconds(ms, 0, 1, &early);
    CHECK_EQ_INT(gpu->host_waits() - waits, 0); /* a read never waits */
    gpu->synchronize();
    double busy = -1.0, idle = -1.0;
    CHECK(gpu->mark_seconds(ms, 0, 1, &busy));
    CHECK(gpu->mark_seconds(ms, 2, 3, &idle));
    printf("  %d products of %d^3: %.3f ms (read before the device passed it: %s); an empty "
           "span: %.4f ms\n",
           REPS, N, 1e3 * busy, ready ? "already done" : "not yet", 1e3 * idle);
    CHECK(busy > 0.0 && busy < 10.0);
    CHECK(idle >= 0.0 && idle < busy);
    if (ready)
        CHECK(early == busy);
    /* Recorded again, mark 1 moves to after another product: the span grows. */
    gpu->gemm(DDPC_PREC_FP32, DDPC_NO_TRANS, DDPC_NO_TRANS, N, N, N, 1.0f, a, N, b, N, 0.0f, c, N);
    gpu->mark(ms, 1);
    gpu->synchronize();
    double moved = -1.0;
    CHECK(gpu->mark_seconds(ms, 0, 1, &moved));
    CHECK(moved > busy);
    CHECK_EQ_INT(gpu->alloc_count() - allocs, 0);
    gpu->marks_destroy(ms);
    gpu->free(a);
    gpu->free(b);
    gpu->free(c);
}

int main(void)
{
    RUN_TEST(test_spans);
    return check_summary();
}
