// SPDX-License-Identifier: MIT
/* The cuBLASLt product with the bias added in its epilogue, for gemm.cu's 16-bit linear forward:
 * the bias costs no pass over the output of its own (cuBLAS's beta = 1 read it back from y), and
 * a residual c comes in as cuBLASLt's C with beta = 1 (no seeding pass).
 * Invariant: a shape's descriptors and algorithm are made once and kept for the process (as the
 * handles are), so a warm call allocates nothing and asks no heuristic; the workspace is the one
 * device.cu set for cuBLAS. The cache is guarded by a mutex: kernels may be reached from several
 * host threads, and the bias pointer is set on a shared descriptor just before each call. */
#include "kernels/cuda/cuda_impl.h"

#include <mutex>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* GPT-2 has two biased forward shapes per batch size (qkv, fc); an MLP or a CNN a few more. Past
 * this, shapes run on descriptors made and freed per call (correct, only slower). */
#define PLANS 64

typedef struct {
    cudaDataType_t type;
    cublasOperation_t opa, opb;
    int m, n, k, lda, ldb, ldd;
    unsigned align_a, align_b, align_d, align_bias; /* bytes, powers of two up to 256 */
    unsigned align_c;                               /* 0: no residual (beta = 0) */
} plan_key;

typedef struct {
    plan_key key;
    bool ok; /* false: cuBLASLt offered no algorithm (remembered, so it is asked once) */
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulAlgo_t algo;
} plan;

static std::mutex plans_lock;
static plan plans[PLANS];
static int n_plans;

/* The largest power of two up to 256 dividing p's address: the heuristic must not pick a kernel
 * that assumes more alignment than the pointers have (its default preference is 256 bytes). */
static unsigned align_of(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    unsigned al = 256;
    while (al > 1 && a % al != 0)
        al /= 2;
    return al;
}

static bool same_key(const plan_key *x, const plan_key *y)
{
    return x->type == y->type && x->opa == y->opa && x->opb == y->opb && x->m == y->m &&
           x->n == y->n && x->k == y->k && x->lda == y->lda && x->ldb == y->ldb &&
           x->ldd == y->ldd && x->align_a == y->align_a && x->align_b == y->align_b &&
           x->align_d == y->align_d && x->align_bias == y->align_bias && x->align_c == y->align_c;
}

static void plan_free(plan *p)
{
    if (p->ld)
        cublasLtMatrixLayoutDestroy(p->ld);
    if (p->lb)
        cublasLtMatrixLayoutDestroy(p->lb);
    if (p->la)
        cublasLtMatrixLayoutDestroy(p->la);
    if (p->desc)
        cublasLtMatmulDescDestroy(p->desc);
}

/* Descriptors for k's shape (column-major, as cuBLASLt sees it: a is (m, k) after opa, stored
 * (rows, cols) before it) and the heuristic's first algorithm; bias is any pointer with the
 * alignment the calls will have (the heuristic reads its address, never its data). */
static void plan_make(plan *p, const plan_key *k, const float *bias)
{
    *p = plan{};
    p->key = *k;
    const cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
    const cudaDataType_t scale = CUDA_R_32F, bias_type = CUDA_R_32F;
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    DDPC_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->desc, compute, scale));
    DDPC_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &k->opa,
                                                     sizeof k->opa));
    DDPC_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &k->opb,
                                                     sizeof k->opb));
    DDPC_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    DDPC_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                     &bias_type, sizeof bias_type));
    DDPC_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                     &bias, sizeof bias));
    const int ra = k->opa == CUBLAS_OP_N ? k->m : k->k, ca = k->opa == CUBLAS_OP_N ? k->k : k->m;
    const int rb = k->opb == CUBLAS_OP_N ? k->k : k->n, cb = k->opb == CUBLAS_OP_N ? k->n : k->k;
    DDPC_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->la, k->type, ra, ca, k->lda));
    DDPC_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->lb, k->type, rb, cb, k->ldb));
    DDPC_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->ld, CUDA_R_32F, k->m, k->n, k->ldd));

    cublasLtMatmulPreference_t pref = nullptr;
    DDPC_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    size_t ws_bytes = 0;
    (void)ddpc__cuda_blas_workspace(&ws_bytes);
    const uint64_t ws = ws_bytes;
    const uint32_t al[4] = {k->align_a, k->align_b, k->align_c ? k->align_c : k->align_d,
                            k->align_d}; /* without a residual, c is d */
    const cublasLtMatmulPreferenceAttributes_t which[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    DDPC_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    for (int i = 0; i < 4; i++)
        DDPC_CUBLAS_CHECK(
            cublasLtMatmulPreferenceSetAttribute(pref, which[i], &al[i], sizeof al[i]));
    cublasLtMatmulHeuristicResult_t r = {};
    int found = 0;
    cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(ddpc__cuda_blas_lt(), p->desc, p->la, p->lb,
                                                      p->ld, p->ld, pref, 1, &r, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    /* NOT_SUPPORTED (no algorithm for this shape) is an answer, not a failure. */
    if (s != CUBLAS_STATUS_NOT_SUPPORTED)
        DDPC_CUBLAS_CHECK(s);
    p->ok = s == CUBLAS_STATUS_SUCCESS && found > 0 && r.state == CUBLAS_STATUS_SUCCESS;
    p->algo = r.algo;
}

extern "C" bool ddpc__cuda_lt_bias_gemm(cudaDataType_t type, cublasOperation_t opa,
                                        cublasOperation_t opb, int m, int n, int k, const void *a,
                                        int lda, const void *b, int ldb, const float *bias,
                                        const float *c, float *d, int ldd)
{
    plan_key key = {};
    key.type = type, key.opa = opa, key.opb = opb;
    key.m = m, key.n = n, key.k = k, key.lda = lda, key.ldb = ldb, key.ldd = ldd;
    key.align_a = align_of(a), key.align_b = align_of(b), key.align_d = align_of(d);
    key.align_bias = align_of(bias), key.align_c = c ? align_of(c) : 0u;
    std::lock_guard<std::mutex> hold(plans_lock);
    plan *p = nullptr, once;
    for (int i = 0; i < n_plans && !p; i++)
        if (same_key(&plans[i].key, &key))
            p = &plans[i];
    if (!p) {
        p = n_plans < PLANS ? &plans[n_plans++] : &once;
        plan_make(p, &key, bias);
    }
    bool ran = false;
    if (p->ok) {
        const float alpha = 1.0f, beta = c ? 1.0f : 0.0f;
        size_t ws_bytes = 0;
        void *ws = ddpc__cuda_blas_workspace(&ws_bytes);
        DDPC_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                         &bias, sizeof bias));
        /* Without a residual, beta = 0 and C (given as d) is not read. C shares D's layout, so
         * c may be d (cuBLASLt's in-place case). */
        DDPC_CUBLAS_CHECK(cublasLtMatmul(ddpc__cuda_blas_lt(), p->desc, &alpha, a, p->la, b, p->lb,
                                         &beta, c ? c : d, p->ld, d, p->ld, &p->algo, ws, ws_bytes,
                                         ddpc__cuda_stream()));
        ran = true;
    }
    if (p == &once)
        plan_free(&once);
    return ran;
}
