// SPDX-License-Identifier: MIT
/* ZeRO on "device" buffers without a GPU: a stand-in kernel table (the CPU's kernels on host
 * memory, but of kind cuda, with its own allocation counter and plain loops for the optimizer and
 * norm members the CPU table leaves NULL) makes the model keep device buffers apart from its host
 * copies, as on a GPU, so every path ZeRO takes there (slots, pool, gathers and releases through
 * the table, the optimizer on the shard's ranges, the norm of the shards) runs here. The checks
 * are zero_device_testutil.h's, on 2 and 3 forked shm ranks; the same on a real GPU is
 * tests/test_cuda_zero.c.
 * The model's flat buffers are reserved as a GPU's are (vmem.c's granules, as memory_vmm.cu uses
 * them), over mmap'd pages: a released granule is PROT_NONE, so any kernel, copy or collective
 * (the shm backend's comm thread included) that touches a range ZeRO did not back first faults,
 * and the rank fails saying where. The stand-in's driver fails a map or an unmap on demand: the
 * step returns the error, naming it, and nothing crashes. */
#define _DEFAULT_SOURCE
#include "check.h"
#include "kernels/vmem.h"
#include "spawn.h"
#include "zero_device_testutil.h"

#include <ddpc/pages.h>

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

enum { FAKE_REGIONS = 8 };
static ddpc__vmem regions[FAKE_REGIONS];

static size_t fake_granule(void)
{
    return 2 * (size_t)sysconf(_SC_PAGESIZE); /* not the page: vmem's granule logic is tested */
}

static ddpc__vmem *find_region(const void *p)
{
    for (int i = 0; i < FAKE_REGIONS; i++)
        if (regions[i].base && ddpc__vmem_contains(&regions[i], p))
            return &regions[i];
    return NULL;
}

/* The driver's calls counted, and the one (counted from 0) to refuse; -1: none. */
static long maps, unmaps, fail_map_at = -1, fail_unmap_at = -1;

static ddpc_status map_pages(void *ctx, char *at, size_t bytes, size_t first)
{
    (void)ctx;
    if (maps++ == fail_map_at)
        return ddpc_errorf(DDPC_EIO, "fake-gpu: cuMemMap of granule %zu refused", first);
    if (mprotect(at, bytes, PROT_READ | PROT_WRITE) != 0)
        return ddpc_errorf(DDPC_ENOMEM, "fake-gpu: mprotect of granule %zu failed", first);
    return DDPC_OK;
}

static ddpc_status unmap_pages(void *ctx, char *at, size_t bytes, size_t first)
{
    (void)ctx;
    if (unmaps++ == fail_unmap_at)
        return ddpc_errorf(DDPC_EIO, "fake-gpu: cuMemUnmap of granule %zu refused", first);
    madvise(at, bytes, MADV_DONTNEED); /* zero-filled when mapped again */
    mprotect(at, bytes, PROT_NONE);
    return DDPC_OK;
}

static void zero_bytes(void *ctx, char *at, size_t bytes)
{
    (void)ctx;
    memset(at, 0, bytes);
}

static const ddpc__vmem_ops fake_ops = {NULL, map_pages, unmap_pages, zero_bytes};

static uint64_t fake_allocs;

static void *fake_reserve(size_t bytes)
{
    size_t g = fake_granule(), size = (bytes + g - 1) / g * g;
    for (int i = 0; i < FAKE_REGIONS; i++) {
        if (regions[i].base)
            continue;
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return NULL;
        if (ddpc__vmem_init(&regions[i], p, size, g) != DDPC_OK) {
            munmap(p, size);
            return NULL;
        }
        fake_allocs++;
        return p;
    }
    return NULL;
}

static ddpc_status fake_release(void *p, size_t bytes)
{
    ddpc__vmem *v = find_region(p);
    if (v)
        return ddpc__vmem_release(v, &fake_ops, p, bytes);
    ddpc_pages_release(p, bytes);
    return DDPC_OK;
}

static ddpc_status fake_back(void *p, size_t bytes)
{
    ddpc__vmem *v = find_region(p);
    return v ? ddpc__vmem_back(v, &fake_ops, p, bytes) : DDPC_OK;
}

static size_t fake_backed_bytes(void)
{
    size_t sum = 0;
    for (int i = 0; i < FAKE_REGIONS; i++)
        sum += regions[i].base ? regions[i].n_backed * regions[i].granule : 0;
    return sum;
}

static void plain_copy(void *dst, const void *src, size_t n)
{
    memcpy(dst, src, n);
}

static void fake_to_host(void *dst, const void *src, size_t bytes)
{
    ddpc__vmem *v = bytes ? find_region(src) : NULL;
    if (v)
        ddpc__vmem_read(v, dst, src, bytes, plain_copy);
    else if (bytes)
        memcpy(dst, src, bytes);
}

static void fake_free(void *p)
{
    ddpc__vmem *v = p ? find_region(p) : NULL;
    if (!v) {
        ddpc_free(p);
        return;
    }
    munmap(v->base, v->bytes);
    ddpc__vmem_fini(v);
    v->base = NULL;
}

/* A touch of an unbacked granule: say where and fail the rank (spawn_ranks reports it). */
static void on_fault(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)uc;
    char line[160];
    ddpc__vmem *v = find_region(si->si_addr);
    int len = snprintf(line, sizeof line, "FAULT: byte %ld of a reserved buffer touched while "
                       "released (not backed)\n",
                       v ? (long)((char *)si->si_addr - v->base) : -1L);
    if (write(2, line, (size_t)len) < 0)
        _exit(3);
    _exit(3);
}

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
    struct sigaction sa = {.sa_sigaction = on_fault, .sa_flags = SA_SIGINFO};
    sigaction(SIGSEGV, &sa, NULL);
    fake = *ddpc_kernel_table_cpu();
    fake.name = "fake-gpu";
    fake.kind = DDPC_DEVICE_CUDA;
    fake.alloc = fake_alloc;
    fake.free = fake_free;
    fake.to_host = fake_to_host;
    fake.reserve = fake_reserve;
    fake.release = fake_release;
    fake.back = fake_back;
    fake.backed_bytes = fake_backed_bytes;
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
    zdev_setup s = {.table = fake_table, .granule = fake_granule()};
    CHECK_EQ_INT(spawn_ranks(2, 120.0, zdev_rank_stages, &s), 0);
    CHECK_EQ_INT(spawn_ranks(3, 120.0, zdev_rank_stages, &s), 0);
    s.accum = 2; /* the pool goes on from what the no_sync pass summed */
    CHECK_EQ_INT(spawn_ranks(2, 120.0, zdev_rank_stages, &s), 0);
}

static void test_bf16_on_device_buffers(void)
{
    zdev_setup s = {.table = fake_table, .bf16 = true, .granule = fake_granule()};
    CHECK_EQ_INT(spawn_ranks(2, 120.0, zdev_rank_stages, &s), 0);
    CHECK_EQ_INT(spawn_ranks(3, 120.0, zdev_rank_stages, &s), 0);
}

/* In a forked rank: ZeRO-2 with bf16 buckets (every step backs each bucket's gradients, then
 * releases what is not this rank's) on the stand-in; after a good first step the driver refuses
 * the next map (ctx NULL) or unmap (ctx non-NULL) on every rank. That step must return the
 * driver's error, saying which call failed, on every rank; nothing may crash. */
static int rank_driver_fails(int rank, int world, void *ctx)
{
    zdev_setup s = {.table = fake_table, .bf16 = true};
    zdev_rank z;
    int fail = zdev_join(&s, rank, world, &z);
    ddpc_dataset *ds = NULL;
    fail |= ddpc_dataset_synthetic_images_create(&ds, ZDEV_BATCH * 2 * world, 1, 16, 16, 10, 3,
                                                 true) != DDPC_OK;
    ddpc_model *m = fail ? NULL : zdev_model(&z);
    ddpc_reducer_config rc = ddpc_reducer_config_default();
    rc.bucket_cap_mb = rc.first_bucket_mb = 0.05;
    rc.zero_stage = 2;
    rc.comm_dtype = DDPC_DTYPE_BF16;
    ddpc_engine_config ec = ddpc_engine_config_default();
    ddpc_reducer *r = NULL;
    ddpc_engine *e = NULL;
    if (!m || ddpc_reducer_create(z.dev, m, &rc, &r) != DDPC_OK ||
        ddpc_engine_create(m, r, rank, world, &ec, &e) != DDPC_OK ||
        zdev_step(e, ds, &z, 0) != DDPC_OK) {
        fprintf(stderr, "rank %d: %s\n", rank, ddpc_last_error());
        fail = 1;
    }
    const char *want = ctx ? "fake-gpu: cuMemUnmap of granule" : "fake-gpu: cuMemMap of granule";
    if (!fail) {
        if (ctx)
            fail_unmap_at = unmaps;
        else
            fail_map_at = maps;
        ddpc_status st = zdev_step(e, ds, &z, 1);
        if (rank == 0)
            printf("     %s refused: the step returns %s: %s\n", ctx ? "unmap" : "map",
                   ddpc_status_name(st), ddpc_last_error());
        if (st != DDPC_EIO || !strstr(ddpc_last_error(), want)) {
            fprintf(stderr, "rank %d: a refused %s gave %s: %s\n", rank,
                    ctx ? "unmap" : "map", ddpc_status_name(st), ddpc_last_error());
            fail = 1;
        }
        fail_map_at = fail_unmap_at = -1;
    }
    ddpc_engine_destroy(e);
    ddpc_reducer_destroy(r);
    ddpc_model_destroy(m);
    ddpc_dataset_destroy(ds);
    zdev_leave(&z);
    return fail;
}

static void test_driver_failures_are_returned(void)
{
    static int unmap = 1;
    CHECK_EQ_INT(spawn_ranks(2, 120.0, rank_driver_fails, NULL), 0);
    CHECK_EQ_INT(spawn_ranks(2, 120.0, rank_driver_fails, &unmap), 0);
}

int main(void)
{
    RUN_TEST(test_stages_on_device_buffers);
    RUN_TEST(test_bf16_on_device_buffers);
    RUN_TEST(test_driver_failures_are_returned);
    return check_summary();
}
