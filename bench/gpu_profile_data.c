// SPDX-License-Identifier: MIT
/* gpu_step_profile's data: the bench's device buffers, filled once from fixed random streams (the
 * same stream numbers give the same values on every run), and the checks that a member's output
 * is finite. Every failure here prints a line naming the program and exits: this is a program. */
#include "gpu_profile.h"

#include <ddpc/alloc.h>
#include <ddpc/half.h>
#include <ddpc/rng.h>
#include <ddpc/status.h>

#include <cuda_runtime_api.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define CHUNK ((size_t)1 << 22) /* floats per host staging chunk */

void die_status(const char *what)
{
    fprintf(stderr, "gpu_step_profile: %s: %s\n", what, ddpc_last_error());
    exit(1);
}

static void *dev(const ddpc_kernel_table *k, size_t bytes)
{
    void *p = k->alloc(bytes);
    if (!p) {
        fprintf(stderr, "gpu_step_profile: cannot allocate %.2f GiB on the GPU\n",
                (double)bytes / (1 << 30));
        exit(1);
    }
    return p;
}

/* dst (n) = uniform in [lo, hi): one random host chunk (per call) tiled over dst. */
static void fill_random(const ddpc_kernel_table *k, float *dst, size_t n, float lo, float hi,
                        uint64_t stream)
{
    static float *h;
    if (!h && !(h = ddpc_malloc(CHUNK * sizeof *h)))
        die_status("host staging");
    ddpc_rng r = ddpc_rng_make(1337, stream);
    for (size_t i = 0; i < CHUNK; i++)
        h[i] = lo + (hi - lo) * ddpc_rng_uniform(&r);
    for (size_t i = 0; i < n; i += CHUNK)
        k->to_device(dst + i, h, (n - i < CHUNK ? n - i : CHUNK) * sizeof *h);
}

/* dst (n) = bf16 of uniform [lo, hi), tiled as fill_random. */
static void fill_random16(const ddpc_kernel_table *k, uint16_t *dst, size_t n, float lo, float hi,
                          uint64_t stream)
{
    static uint16_t *h;
    if (!h && !(h = ddpc_malloc(CHUNK * sizeof *h)))
        die_status("host staging");
    ddpc_rng r = ddpc_rng_make(1337, stream);
    for (size_t i = 0; i < CHUNK; i++)
        h[i] = ddpc_f32_to_bf16(lo + (hi - lo) * ddpc_rng_uniform(&r));
    for (size_t i = 0; i < n; i += CHUNK)
        k->to_device(dst + i, h, (n - i < CHUNK ? n - i : CHUNK) * sizeof *h);
}

static void fill_ids(const ddpc_kernel_table *k, int32_t *dst, size_t n, int32_t below,
                     uint64_t stream)
{
    int32_t *h = ddpc_malloc(n * sizeof *h);
    if (!h)
        die_status("host ids");
    ddpc_rng r = ddpc_rng_make(1337, stream);
    for (size_t i = 0; i < n; i++)
        h[i] = (int32_t)ddpc_rng_below(&r, (uint64_t)below);
    k->to_device(dst, h, n * sizeof *h);
    ddpc_free(h);
}

/* Whether src (n, device) is all finite; arrays past 64M floats are checked at their start,
 * middle and end (16M floats each), which covers every row kind a kernel writes. */
void check_finite(bench *b, const char *what, const float *src, size_t n)
{
    static float *h;
    if (!h && !(h = ddpc_malloc(CHUNK * 4 * sizeof *h)))
        die_status("host check buffer");
    size_t span = CHUNK * 4, starts[3] = {0, n / 2, n > span ? n - span : 0};
    int parts = n > 4 * span ? 3 : 1;
    for (int p = 0; p < parts; p++) {
        size_t lo = parts == 1 ? 0 : starts[p], hi = parts == 1 ? n : lo + span;
        for (size_t i = lo; i < hi; i += span) {
            size_t len = hi - i < span ? hi - i : span;
            b->k->to_host(h, src + i, len * sizeof *h);
            for (size_t j = 0; j < len; j++)
                if (!isfinite(h[j])) {
                    fprintf(stderr, "NOT FINITE: %s element %zu is %g\n", what, i + j,
                            (double)h[j]);
                    b->bad = true;
                    return;
                }
        }
    }
}

void check_value(bench *b, const char *what, double v, double lo, double hi)
{
    if (!(v >= lo && v <= hi)) {
        fprintf(stderr, "BAD VALUE: %s returned %g, outside [%g, %g]\n", what, v, lo, hi);
        b->bad = true;
    }
}

void sync_all(const ddpc_kernel_table *k)
{
    k->synchronize();
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        fprintf(stderr, "gpu_step_profile: CUDA error %s\n", cudaGetErrorString(e));
        exit(1);
    }
}

static void alloc_buffers(bench *b)
{
    const ddpc_kernel_table *k = b->k;
    size_t BT = (size_t)b->BT, act = BT * 4 * C, f = sizeof(float);
    b->x = dev(k, act * f), b->y = dev(k, act * f), b->dy = dev(k, act * f);
    b->dx = dev(k, act * f), b->res = dev(k, act * f);
    b->mean = dev(k, BT * f), b->rstd = dev(k, BT * f), b->losses = dev(k, BT * f);
    b->sums = dev(k, 3 * sizeof(double));
    b->lnw = dev(k, C * f), b->lnb = dev(k, C * f);
    b->bias = dev(k, 4 * C * f), b->db = dev(k, 4 * C * f);
    b->w = dev(k, (size_t)V * C * f), b->dw = dev(k, (size_t)V * C * f);
    b->qkv = dev(k, BT * 3 * C * f), b->dqkv = dev(k, BT * 3 * C * f);
    b->att = dev(k, k->attention_saved_floats(DDPC_PREC_BF16, b->B, T, C, NH) * f);
    b->ws = dev(k, (k->attention_workspace_floats(DDPC_PREC_BF16, b->B, T, C, NH) + 1) * f);
    b->wpe = dev(k, (size_t)T * C * f), b->dwpe = dev(k, (size_t)T * C * f);
    b->logits = dev(k, BT * V * f), b->dlogits = dev(k, BT * V * f);
    b->tokens = dev(k, BT * sizeof(int32_t)), b->targets = dev(k, BT * sizeof(int32_t));
    size_t n = b->n_params;
    b->p = dev(k, n * f), b->g = dev(k, n * f), b->m = dev(k, n * f), b->v = dev(k, n * f);
    b->mask = dev(k, n);
    b->x16 = dev(k, BT * C * 2), b->w16 = dev(k, (size_t)V * C * 2);
    b->dl16 = dev(k, BT * V * 2);
    b->a16 = dev(k, act * f);
}

void bench_alloc(bench *b)
{
    const ddpc_kernel_table *k = b->k;
    size_t BT = (size_t)b->BT, act = BT * 4 * C, n = b->n_params;
    alloc_buffers(b);

    fill_random(k, b->x, act, -2.0f, 2.0f, 1), fill_random(k, b->dy, act, -1e-3f, 1e-3f, 2);
    fill_random(k, b->res, act, -1.0f, 1.0f, 3), fill_random(k, b->y, act, -1.0f, 1.0f, 4);
    fill_random(k, b->dx, act, -1e-3f, 1e-3f, 5);
    fill_random(k, b->lnw, C, 0.8f, 1.2f, 6), fill_random(k, b->lnb, C, -0.1f, 0.1f, 7);
    fill_random(k, b->bias, 4 * C, -0.02f, 0.02f, 8);
    fill_random(k, b->db, 4 * C, -1e-3f, 1e-3f, 9);
    fill_random(k, b->w, (size_t)V * C, -0.04f, 0.04f, 10);
    fill_random(k, b->dw, (size_t)V * C, -1e-3f, 1e-3f, 11);
    fill_random(k, b->qkv, BT * 3 * C, -2.0f, 2.0f, 12);
    fill_random(k, b->dqkv, BT * 3 * C, -1, 1, 13);
    fill_random(k, b->wpe, (size_t)T * C, -0.02f, 0.02f, 14);
    fill_random(k, b->dwpe, (size_t)T * C, -1e-3f, 1e-3f, 15);
    fill_random(k, b->logits, BT * V, -4.0f, 4.0f, 16);
    fill_random(k, b->dlogits, BT * V, -1e-5f, 1e-5f, 17);
    fill_random(k, b->p, n, -0.05f, 0.05f, 18), fill_random(k, b->g, n, -1e-3f, 1e-3f, 19);
    fill_random(k, b->m, n, -1e-4f, 1e-4f, 20), fill_random(k, b->v, n, 0.0f, 1e-6f, 21);
    fill_random(k, b->mean, BT, -0.1f, 0.1f, 22), fill_random(k, b->rstd, BT, 0.5f, 2.0f, 23);
    fill_ids(k, b->tokens, BT, V, 24), fill_ids(k, b->targets, BT, V, 25);
    uint8_t *h = ddpc_malloc(n);
    if (!h)
        die_status("host mask");
    for (size_t i = 0; i < n; i++)
        h[i] = (uint8_t)(i % 3 != 0);
    k->to_device(b->mask, h, n);
    ddpc_free(h);
    fill_random16(k, b->x16, BT * C, -2.0f, 2.0f, 26);
    fill_random16(k, b->w16, (size_t)V * C, -0.04f, 0.04f, 27);
    fill_random16(k, b->dl16, BT * V, -1e-5f, 1e-5f, 28);
    b->n_valid = (int64_t)BT;
    sync_all(k);
}
