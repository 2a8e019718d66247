// SPDX-License-Identifier: MIT
/* gpu_step_profile: where one GPT-2 124M training step's time goes on the GPU (bf16 products,
 * batch B x 1024, AdamW). Part 1 times the step's phases through the public API (median of 5 warm
 * steps); part 2 times every kernel-table member the step calls at the step's exact shapes, on
 * fresh random data, each checked finite once, and ranks them by time x calls per step; part 3
 * times cuBLAS alone on the LM head's three products, on operands already rounded to bf16, and
 * the biased linear layers' members as they ran before their 16-bit passes were fused (reference
 * rows "before: ...", against which the "linear_forward/backward qkv/fc" rows show the gain).
 * Every timing is (synchronize; t0; R calls; synchronize; t1): the host clock, device work only.
 * This file: part 1, the timing loop, the ranked table; the members and their rows (parts 2 and 3)
 * are bench/gpu_profile_ops.c's, the buffers and checks bench/gpu_profile_data.c's.
 * usage: gpu_step_profile [batch]   (default 16; exit 77 without a GPU) */
#include "gpu_profile.h"

#include <ddpc/alloc.h>
#include <ddpc/engine.h>
#include <ddpc/models.h>
#include <ddpc/rng.h>
#include <ddpc/status.h>
#include <ddpc/timer.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static const ddpc_kernel_table *K;

/* ---- part 1: the step's phases through the public API ---- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct {
    double zero, fwd, bwd, upd, step;
} phases;

/* GPT-2 124M in bf16 products on K, no dropout, seed 1337. */
static ddpc_model *step_model(void)
{
    ddpc_model_config cfg = ddpc_model_config_default();
    ddpc_gpt_config own = ddpc_gpt_config_default();
    cfg.type_config = &own;
    snprintf(cfg.type, sizeof cfg.type, "gpt");
    own.n_layer = L;
    own.n_head = NH;
    own.n_embd = C;
    own.block_size = T;
    cfg.num_classes = V;
    cfg.precision = DDPC_PREC_BF16;
    cfg.dropout = 0.0f;
    cfg.backend = K;
    cfg.seed = 1337;
    ddpc_model *m = NULL;
    if (ddpc_model_create(&m, &cfg) != DDPC_OK)
        die_status("building GPT-2 124M on the GPU");
    return m;
}

/* AdamW (lr 6e-4, weight decay 0.1, betas 0.9 and 0.95), gradients clipped at norm 1. */
static ddpc_engine *step_engine(ddpc_model *m)
{
    ddpc_engine_config ec = ddpc_engine_config_default();
    ec.optim.type = DDPC_OPTIM_ADAMW;
    ec.optim.lr = 6e-4f;
    ec.optim.weight_decay = 0.1f;
    ec.optim.beta1 = 0.9f;
    ec.optim.beta2 = 0.95f;
    ec.optim.eps = 1e-8f;
    ec.grad_clip = 1.0f;
    ddpc_engine *e = NULL;
    if (ddpc_engine_create(m, NULL, 0, 1, &ec, &e) != DDPC_OK)
        die_status("creating the engine");
    return e;
}

/* Medians of 5 warm steps (after 3 warm-up steps) of each phase; *n_params = the model's. */
static phases step_phases(int64_t B, size_t *n_params)
{
    ddpc_model *m = step_model();
    *n_params = ddpc_model_num_params(m);
    ddpc_engine *e = step_engine(m);
    size_t bt = (size_t)B * T;
    int32_t *tok = ddpc_malloc((bt + 1) * sizeof *tok);
    if (!tok)
        die_status("host tokens");
    ddpc_rng r = ddpc_rng_make(7, 0);
    for (size_t i = 0; i <= bt; i++)
        tok[i] = (int32_t)ddpc_rng_below(&r, V);
    ddpc_model_input in = {.n = B, .tokens = tok, .targets = tok + 1};
    double t[4][5];
    for (int s = 0; s < 8; s++) {
        ddpc_model_output out;
        ddpc_engine_step_info info;
        K->synchronize();
        double t0 = ddpc_time_now();
        ddpc_engine_zero_grad(e);
        K->synchronize();
        double t1 = ddpc_time_now();
        ddpc_model_expect_backward(m, 1.0f); /* as the engine does: the fused cross-entropy */
        if (ddpc_model_forward(m, &in, true, &out) != DDPC_OK)
            die_status("forward");
        K->synchronize();
        double t2 = ddpc_time_now();
        if (ddpc_model_backward(m, 1.0f) != DDPC_OK)
            die_status("backward");
        K->synchronize();
        double t3 = ddpc_time_now();
        if (ddpc_engine_update(e, &info) != DDPC_OK)
            die_status("update");
        K->synchronize();
        double t4 = ddpc_time_now();
        printf("step %d: loss %.4f grad norm %.4f  %.1f ms%s\n", s, (double)out.loss,
               info.grad_norm, (t4 - t0) * 1e3, s < 3 ? " (warm-up)" : "");
        if (!isfinite(out.loss) || !isfinite(info.grad_norm)) {
            fprintf(stderr, "gpu_step_profile: the step's loss or gradient norm is not finite\n");
            exit(1);
        }
        if (s >= 3) {
            double d[4] = {t1 - t0, t2 - t1, t3 - t2, t4 - t3};
            for (int p = 0; p < 4; p++)
                t[p][s - 3] = d[p];
        }
    }
    double med[4];
    for (int p = 0; p < 4; p++) {
        qsort(t[p], 5, sizeof t[p][0], cmp_double);
        med[p] = t[p][2];
    }
    ddpc_free(tok);
    ddpc_engine_destroy(e);
    ddpc_model_destroy(m);
    K->synchronize();
    return (phases){med[0], med[1], med[2], med[3], med[0] + med[1] + med[2] + med[3]};
}

/* ---- part 2: each member at the step's shapes ---- */

/* Seconds per call: one call (checked), one timed call to size R for ~0.15 s, then R calls. */
static double time_op(bench *b, int op, const char *name)
{
    op_run(b, op);
    sync_all(K);
    op_check(b, op, name);
    sync_all(K);
    double t0 = ddpc_time_now();
    op_run(b, op);
    sync_all(K);
    double once = ddpc_time_now() - t0;
    int reps = once > 0 ? (int)(0.15 / once) : 50;
    reps = reps < 3 ? 3 : reps > 50 ? 50 : reps;
    t0 = ddpc_time_now();
    for (int i = 0; i < reps; i++)
        op_run(b, op);
    sync_all(K);
    return (ddpc_time_now() - t0) / reps;
}

static int cmp_row(const void *a, const void *b)
{
    const row *x = a, *y = b;
    double p = x->calls * x->s_per_call, q = y->calls * y->s_per_call;
    return (p < q) - (p > q);
}

/* rows (OP_COUNT, ranked) as the table, then their sum against the measured step. */
static void print_rows(const row *rows, const phases *ph)
{
    double sum = 0;
    printf(
        "\n== kernel-table members at one step's shapes (calls 0: reference rows, not summed)\n");
    printf("%-28s %-11s %5s %10s %9s %6s %9s %8s %8s\n", "member", "shape", "calls", "us/call",
           "ms/step", "%step", "MB/call", "GB/s", "TFLOP/s");
    for (int i = 0; i < OP_COUNT; i++) {
        const row *r = &rows[i];
        double ms = r->calls * r->s_per_call * 1e3;
        sum += ms;
        char tf[16] = "-";
        if (r->flops > 0)
            snprintf(tf, sizeof tf, "%.1f", r->flops / r->s_per_call / 1e12);
        printf("%-28s %-11s %5.0f %10.1f %9.2f %6.1f %9.1f %8.0f %8s\n", r->name, r->shape,
               r->calls, r->s_per_call * 1e6, ms, 100 * ms / (ph->step * 1e3), r->bytes / 1e6,
               r->bytes / r->s_per_call / 1e9, tf);
    }
    printf("\nsum of members x calls: %.2f ms; measured step: %.2f ms (forward %.2f, backward "
           "%.2f, update %.2f, zero_grad %.2f); unaccounted: %.2f ms\n",
           sum, ph->step * 1e3, ph->fwd * 1e3, ph->bwd * 1e3, ph->upd * 1e3, ph->zero * 1e3,
           ph->step * 1e3 - sum);
    printf("(bytes: the least each call must read and write in fp32; attention FLOPs count the "
           "full T x T products, causal or not; the cuBLAS-alone rows take operands already in "
           "bf16, so k->gemm minus them is the rounding into scratch)\n");
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* rows reach the log even if a later call aborts */
    int64_t B = argc > 1 ? atoll(argv[1]) : 16;
    if (B < 1 || B > 64) {
        fprintf(stderr, "usage: gpu_step_profile [batch in 1..64]\n");
        return 2;
    }
    if (ddpc_device_select(DDPC_DEVICE_CUDA, 0, &K) != DDPC_OK) {
        printf("gpu_step_profile: SKIPPED: %s\n", ddpc_last_error());
        return 77;
    }
    printf("device: %s\nGPT-2 124M, bf16 products, batch %lld x %d, AdamW\n",
           ddpc_device_describe(K), (long long)B, T);
    double start = ddpc_time_now();
    bench b = {.k = K, .B = B, .BT = B * T};
    phases ph = step_phases(B, &b.n_params);
    printf("\n== phases (median of 5 warm steps, ms): zero_grad %.2f  forward %.2f  backward %.2f"
           "  update %.2f  step (sum of medians) %.2f\n",
           ph.zero * 1e3, ph.fwd * 1e3, ph.bwd * 1e3, ph.upd * 1e3, ph.step * 1e3);

    bench_alloc(&b);
    blas_check(cublasCreate(&b.blas), "Create");
    printf("attention: %s\n", attention_flash(&b) ? "the fused (flash) kernels, bf16 tensor cores"
                                                  : "probabilities materialised (B, NH, T, T)");
    row rows[OP_COUNT];
    rows_init(rows, &b);
    /* In enum order: each op's inputs were written by the ops before it (att by attention
     * forward, probs by cross_entropy_forward, dqkv by attention backward). */
    for (int op = 0; op < OP_COUNT; op++)
        rows[op].s_per_call = time_op(&b, op, rows[op].name);
    qsort(rows, OP_COUNT, sizeof rows[0], cmp_row);
    print_rows(rows, &ph);
    cublasDestroy(b.blas);
    printf("total %.1f s; %s\n", ddpc_time_now() - start,
           b.bad ? "FAILED: a result was not finite (above)" : "every result finite");
    return b.bad ? 1 : 0;
}
