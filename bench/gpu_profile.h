// SPDX-License-Identifier: MIT
/* gpu_step_profile's shared parts: GPT-2 124M's sizes, the device buffers every member reads and
 * writes (struct bench), one table row per kernel-table member (struct row) and the members'
 * numbering. The enum's order is the timing order: each op's inputs were written by the ops
 * before it, so a new member goes where its inputs are ready (see bench/gpu_profile_ops.c). */
#ifndef DDPC_BENCH_GPU_PROFILE_H
#define DDPC_BENCH_GPU_PROFILE_H

#include <ddpc/device.h>

#include <cublas_v2.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define L 12
#define NH 12
#define C 768
#define T 1024
#define V 50257

typedef struct {
    const ddpc_kernel_table *k;
    int64_t B, BT;
    size_t n_params;
    /* (BT, 4C) covers every activation shape a block uses */
    float *x, *y, *dy, *dx, *res;
    float *mean, *rstd;           /* (BT) */
    float *lnw, *lnb;             /* (C) */
    float *w, *dw;                /* (V, C): every linear's weight is a prefix of it; also wte */
    float *bias, *db;             /* (4C) */
    float *qkv, *dqkv, *att, *ws; /* (BT, 3C), (BT, 3C), attention's saved state, workspace */
    float *wpe, *dwpe;            /* (T, C) */
    float *logits, *dlogits;      /* (BT, V) */
    float *losses;                /* (BT) */
    double *sums; /* (3) the fused cross-entropy's loss sum, valid rows (and head16's hits) */
    int32_t *tokens, *targets; /* (BT) */
    int64_t n_valid;
    float *p, *g, *m, *v;       /* (n_params) AdamW */
    uint8_t *mask;              /* (n_params) */
    uint16_t *x16, *w16, *dl16; /* bf16 copies for cuBLAS alone: (BT, C), (V, C), (BT, V) */
    float *a16; /* (BT, 4C) floats: the act16 members' 16-bit activation (device.h's x16) */
    cublasHandle_t blas;
    bool bad; /* a result was not finite */
} bench;

typedef struct {
    const char *name, *shape;
    double calls, bytes, flops, s_per_call;
} row;

enum {
    OP_FILL_GRADS,
    OP_EMB_FWD,
    OP_LN_FWD,
    OP_LIN_QKV,
    OP_ATT_FWD,
    OP_LIN_PROJ,
    OP_LIN_FC,
    OP_GELU_FWD,
    OP_LIN_FCPROJ,
    OP_LIN_HEAD,
    OP_ARGMAX,
    OP_CE_FWD,
    OP_FILL_DLOGITS,
    OP_CE_BWD,
    OP_CE_FUSED,
    OP_FILL_C,
    OP_FILL_4C,
    OP_LINB_HEAD,
    OP_LN_BWD,
    OP_LINB_FCPROJ,
    OP_GELU_BWD,
    OP_LINB_FC,
    OP_LINB_PROJ,
    OP_ATT_BWD,
    OP_LINB_QKV,
    OP_EMB_BWD,
    OP_SUMSQ,
    OP_SCALE,
    OP_ADAMW,
    OP_GEMM_HEAD_FWD,
    OP_GEMM_HEAD_DX,
    OP_GEMM_HEAD_DW,
    OP_BLAS_HEAD_FWD,
    OP_BLAS_HEAD_DX,
    OP_BLAS_HEAD_DW,
    OP_SEED_GEMM_QKV,
    OP_SEED_GEMM_FC,
    OP_TWO_GEMMS_QKV,
    OP_TWO_GEMMS_FC,
    OP_LN_FWD16,
    OP_LIN16_QKV,
    OP_LIN16_FC,
    OP_GELU_FWD16,
    OP_LIN16_FCPROJ,
    OP_LINB16_FCPROJ,
    OP_LINB16_FC,
    OP_LINB16_QKV,
    OP_HEAD16_FWD,
    OP_HEAD16_BWD,
    OP_COUNT
};

/* ---- gpu_profile_data.c: buffers, random fills, checks; every failure exits ---- */

/* Prints what and ddpc_last_error() after the program's name, and exits 1. */
void die_status(const char *what);
/* Allocates b's device buffers (b->k, B, BT and n_params set) and fills them with random data. */
void bench_alloc(bench *b);
/* Sets b->bad (and says which element) if src (n, device) holds a non-finite value. */
void check_finite(bench *b, const char *what, const float *src, size_t n);
/* Sets b->bad (and says so) unless lo <= v <= hi. */
void check_value(bench *b, const char *what, double v, double lo, double hi);
/* Waits for k's work and for every CUDA stream; exits on a CUDA error. */
void sync_all(const ddpc_kernel_table *k);

/* ---- gpu_profile_ops.c: the members ---- */

/* Exits unless s is CUBLAS_STATUS_SUCCESS. */
void blas_check(cublasStatus_t s, const char *what);
/* Whether the table's attention is the fused (flash) kernels: it saves no (B, NH, T, T). */
bool attention_flash(const bench *b);
/* rows (OP_COUNT) = each member's name, shape, calls per step, least bytes and FLOPs per call. */
void rows_init(row *rows, const bench *b);
/* One call of op at the step's shapes. */
void op_run(bench *b, int op);
/* Checks finite what op writes (after its first call); name is op's row name. */
void op_check(bench *b, int op, const char *name);

#endif
