// SPDX-License-Identifier: MIT
/* ZeRO on "device" buffers without a GPU: a stand-in kernel table (the CPU's kernels on host
 * memory, but of kind cuda, with its own allocation counter and plain loops for the optimizer and
 * norm members the CPU table leaves NULL) makes the model keep device buffers apart from its host
 * copies, as on a GPU, so every path ZeRO takes there (slots, pool, gathers and releases through
 * the table, the optimizer on the shard's ranges, the norm of the shards) runs here. The checks
 * are zero_device_testutil.h's, on 2 and 3 forked shm ranks; the same on a real GPU is
 * tests/test_cuda_zero.c. */
#include "check.h"
#include "spawn.h"
#include "zero_device_testutil.h"

static uint64_t fake_allocs;

static void *fake_alloc(size_t bytes)
{
    fake_allocs++;
    return ddpc_calloc(1, bytes ? bytes : 1);
}

static uint64_t fake_alloc_count(void)
{
    return fake_allocs;
}

/* device.h's element rules for AdamW and SGD, in plain loops. */
static void fake_adamw(float *p, const float *g, float *m, float *v, const uint8_t *mask,
                       int64_t n, const ddpc_adamw_coef *k)
{
    for (int64_t i = 0; i < n; i++) {
        float pi = p[i] * (!mask || mask[i] ? k->decay : 1.0f);
        m[i] = fmaf(g[i], k->a1, m[i] * k->b1);
        v[i] = fmaf(k->a2 * g[i], g[i], v[i] * k->b2);
        p[i] = pi + k->neg_step * m[i] / (sqrtf(v[i]) / k->bc2_sqrt + k->eps);
    }
}

static void fake_sgd(float *p, const float *g, float *buf, const uint8_t *mask, int64_t n,
                     const ddpc_sgd_coef *k)
{
    for (int64_t i = 0; i < n; i++) {
        float d = !mask || mask[i] ? g[i] + p[i] * k->wd : g[i];
        if (buf) {
            buf[i] = k->first ? d : fmaf(d, k->keep, buf[i] * k->momentum);
            d = k->nesterov ? fmaf(buf[i], k->momentum, d) : buf[i];
        }
        p[i] = fmaf(d, k->neg_lr, p[i]);
    }
}

static double fake_sumsq(const float *g, int64_t n)
{
    return ddpc_grad_sumsq(g, (size_t)n);
}

static bool fake_unscale(float *g, int64_t n, float scale)
{
    return ddpc_grad_unscale(g, (size_t)n, scale);
}

static void fake_scale(float *g, int64_t n, float s)
{
    for (int64_t i = 0; i < n; i++)
        g[i] *= s;
}

static ddpc_kernel_table fake;

static const ddpc_kernel_table *fake_table(int local_rank)
{
    (void)local_rank;
    fake = *ddpc_kernel_table_cpu();
    fake.name = "fake-gpu";
    fake.kind = DDPC_DEVICE_CUDA;
    fake.alloc = fake_alloc;
    fake.alloc_count = fake_alloc_count;
    fake.adamw_update = fake_adamw;
    fake.sgd_update = fake_sgd;
    fake.sumsq = fake_sumsq;
    fake.unscale = fake_unscale;
    fake.scale = fake_scale;
    return &fake;
}

static void test_stages_on_device_buffers(void)
{
    zdev_setup s = {.table = fake_table};
    CHECK_EQ_INT(spawn_ranks(2, 120.0, zdev_rank_stages, &s), 0);
    CHECK_EQ_INT(spawn_ranks(3, 120.0, zdev_rank_stages, &s), 0);
    s.accum = 2; /* the pool goes on from what the no_sync pass summed */
    CHECK_EQ_INT(spawn_ranks(2, 120.0, zdev_rank_stages, &s), 0);
}

static void test_bf16_on_device_buffers(void)
{
    zdev_setup s = {.table = fake_table, .bf16 = true};
    CHECK_EQ_INT(spawn_ranks(2, 120.0, zdev_rank_stages, &s), 0);
    CHECK_EQ_INT(spawn_ranks(3, 120.0, zdev_rank_stages, &s), 0);
}

int main(void)
{
    RUN_TEST(test_stages_on_device_buffers);
    RUN_TEST(test_bf16_on_device_buffers);
    return check_summary();
}
