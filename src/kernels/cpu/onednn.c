// SPDX-License-Identifier: MIT
/* ddpc_gemm_onednn: row-major products on oneDNN's matmul primitive (fp32, or bf16 inputs with
 * fp32 accumulation and output).
 * Invariant: each thread keeps its own table of primitives keyed by everything a primitive bakes
 * in (type, transposes, sizes, strides, alpha, beta), each with its three memory objects, and its
 * own stream. A product seen before only re-points the memory objects and executes: warm steps
 * create and allocate nothing, and no lock is taken (oneDNN runs single-threaded when called from
 * inside our parallel regions, on the calling thread's table). bf16 inputs are converted into the
 * thread's scratch first, packed so their leading dimension is their width. */
#include <ddpc/half.h>
#include <ddpc/kernels.h>

#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_impl.h"

typedef struct {
    int32_t dt, ta, tb;
    uint32_t alpha_bits, beta_bits;
    int32_t
        zero; /* fills the hole before the 64-bit fields: keys are hashed and compared as bytes */
    int64_t m, n, k, lda, ldb, ldc;
} product_key;

typedef struct {
    product_key key;
    dnnl_primitive_t prim; /* NULL: empty slot */
    dnnl_memory_t a, b, c;
} cached_product;

typedef struct {
    cached_product *slots;
    size_t cap, used;
    dnnl_stream_t stream;
    uint16_t *half; /* bf16 copies of a and b */
    size_t half_cap;
} thread_cache;

static _Thread_local thread_cache *tl_cache;

static pthread_once_t engine_once = PTHREAD_ONCE_INIT;
static dnnl_engine_t engine; /* process lifetime: primitives of every thread refer to it */
static bool engine_ok, bf16_ok;

static bool probe_bf16(void)
{
    dnnl_memory_desc_t a, b, c;
    dnnl_dims_t d = {16, 16};
    dnnl_memory_desc_init_by_tag(&a, 2, d, dnnl_bf16, dnnl_ab);
    dnnl_memory_desc_init_by_tag(&b, 2, d, dnnl_bf16, dnnl_ab);
    dnnl_memory_desc_init_by_tag(&c, 2, d, dnnl_f32, dnnl_ab);
    dnnl_matmul_desc_t md;
    dnnl_primitive_desc_t pd;
    if (dnnl_matmul_desc_init(&md, &a, &b, NULL, &c) != dnnl_success ||
        dnnl_primitive_desc_create(&pd, &md, NULL, engine, NULL) != dnnl_success)
        return false;
    dnnl_primitive_desc_destroy(pd);
    return true;
}

static void engine_init(void)
{
    engine_ok = dnnl_engine_create(&engine, dnnl_cpu, 0) == dnnl_success;
    bf16_ok = engine_ok && probe_bf16();
}

bool ddpc__onednn_has_bf16(void)
{
    pthread_once(&engine_once, engine_init);
    return bf16_ok;
}

static const char *isa_name(dnnl_cpu_isa_t isa)
{
    switch (isa) {
    case dnnl_cpu_isa_sse41:
        return "sse41";
    case dnnl_cpu_isa_avx:
        return "avx";
    case dnnl_cpu_isa_avx2:
        return "avx2";
    case dnnl_cpu_isa_avx2_vnni:
        return "avx2_vnni";
    case dnnl_cpu_isa_avx512_mic:
        return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops:
        return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core:
        return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni:
        return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16:
        return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx:
        return "avx512_core_amx";
    default:
        return "baseline";
    }
}

const char *ddpc__onednn_isa(void)
{
    return isa_name(dnnl_get_effective_cpu_isa());
}

const char *ddpc_kernels_onednn_info(void)
{
    static _Thread_local char info[96];
    const dnnl_version_t *v = dnnl_version();
    const char *rt = v->cpu_runtime == DNNL_RUNTIME_OMP   ? "openmp"
                     : v->cpu_runtime == DNNL_RUNTIME_SEQ ? "sequential"
                                                          : "threadpool";
    snprintf(info, sizeof info, "oneDNN %d.%d.%d (%s), ISA %s", v->major, v->minor, v->patch, rt,
             ddpc__onednn_isa());
    return info;
}

static uint64_t key_hash(const product_key *k)
{
    const unsigned char *p = (const unsigned char *)k;
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < sizeof *k; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static cached_product *slot_for(cached_product *slots, size_t cap, const product_key *k)
{
    size_t i = (size_t)key_hash(k) & (cap - 1);
    while (slots[i].prim && memcmp(&slots[i].key, k, sizeof *k) != 0)
        i = (i + 1) & (cap - 1);
    return &slots[i];
}

static void product_destroy(cached_product *p)
{
    dnnl_memory_destroy(p->a);
    dnnl_memory_destroy(p->b);
    dnnl_memory_destroy(p->c);
    dnnl_primitive_destroy(p->prim);
}

void ddpc__onednn_release_thread(void)
{
    thread_cache *t = tl_cache;
    if (!t)
        return;
    for (size_t i = 0; i < t->cap; i++)
        if (t->slots[i].prim)
            product_destroy(&t->slots[i]);
    free(t->slots);
    free(t->half);
    if (t->stream)
        dnnl_stream_destroy(t->stream);
    free(t);
    tl_cache = NULL;
}

static thread_cache *cache_get(void)
{
    if (tl_cache)
        return tl_cache;
    thread_cache *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->cap = 64;
    t->slots = calloc(t->cap, sizeof *t->slots);
    if (!t->slots ||
        dnnl_stream_create(&t->stream, engine, dnnl_stream_default_flags) != dnnl_success) {
        free(t->slots);
        free(t);
        return NULL;
    }
    tl_cache = t;
    return t;
}

/* Doubles the table when half full, so probes stay short. False when out of memory. */
static bool cache_reserve(thread_cache *t)
{
    if (2 * (t->used + 1) <= t->cap)
        return true;
    size_t cap = 2 * t->cap;
    cached_product *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return false;
    for (size_t i = 0; i < t->cap; i++)
        if (t->slots[i].prim)
            *slot_for(slots, cap, &t->slots[i].key) = t->slots[i];
    free(t->slots);
    t->slots = slots;
    t->cap = cap;
    return true;
}

/* Builds the primitive for k into p; a failing status when oneDNN has no matmul for it on this
 * CPU (the caller then rounds inputs for sgemm instead). */
static dnnl_status_t product_create(cached_product *p, const product_key *k)
{
    dnnl_data_type_t in = k->dt == DDPC_PREC_BF16 ? dnnl_bf16 : dnnl_f32;
    dnnl_dims_t da = {k->m, k->k}, db = {k->k, k->n}, dc = {k->m, k->n};
    dnnl_dims_t sa = {k->ta ? 1 : k->lda, k->ta ? k->lda : 1};
    dnnl_dims_t sb = {k->tb ? 1 : k->ldb, k->tb ? k->ldb : 1}, sc = {k->ldc, 1};
    dnnl_memory_desc_t ma, mb, mc;
    dnnl_matmul_desc_t md;
    dnnl_status_t s;
    if ((s = dnnl_memory_desc_init_by_strides(&ma, 2, da, in, sa)) != dnnl_success ||
        (s = dnnl_memory_desc_init_by_strides(&mb, 2, db, in, sb)) != dnnl_success ||
        (s = dnnl_memory_desc_init_by_strides(&mc, 2, dc, dnnl_f32, sc)) != dnnl_success ||
        (s = dnnl_matmul_desc_init(&md, &ma, &mb, NULL, &mc)) != dnnl_success)
        return s;
    dnnl_primitive_attr_t attr;
    if ((s = dnnl_primitive_attr_create(&attr)) != dnnl_success)
        return s;
    float alpha, beta;
    memcpy(&alpha, &k->alpha_bits, sizeof alpha);
    memcpy(&beta, &k->beta_bits, sizeof beta);
    if (alpha != 1.0f)
        s = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha);
    if (s == dnnl_success && beta != 0.0f) { /* c = alpha a b + beta c: a sum post-op */
        dnnl_post_ops_t po;
        if ((s = dnnl_post_ops_create(&po)) == dnnl_success) {
            s = dnnl_post_ops_append_sum(po, beta);
            if (s == dnnl_success)
                s = dnnl_primitive_attr_set_post_ops(attr, po);
            dnnl_post_ops_destroy(po);
        }
    }
    dnnl_primitive_desc_t pd = NULL;
    if (s == dnnl_success)
        s = dnnl_primitive_desc_create(&pd, &md, attr, engine, NULL);
    dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success)
        return s;
    *p = (cached_product){.key = *k};
    s = dnnl_primitive_create(&p->prim, pd);
    dnnl_primitive_desc_destroy(pd);
    if (s == dnnl_success &&
        (s = dnnl_memory_create(&p->a, &ma, engine, DNNL_MEMORY_NONE)) == dnnl_success &&
        (s = dnnl_memory_create(&p->b, &mb, engine, DNNL_MEMORY_NONE)) == dnnl_success)
        s = dnnl_memory_create(&p->c, &mc, engine, DNNL_MEMORY_NONE);
    if (s != dnnl_success) {
        if (p->prim)
            product_destroy(p);
        *p = (cached_product){0};
    }
    return s;
}

/* rows x cols of x (leading dimension ld) into dst (rows, cols) as bf16. Large operands are
 * split over the threads, as the matmul that follows is (serial packing kept bf16 steps from
 * scaling past one thread); inside our parallel regions the caller already owns one thread. */
static void pack_bf16(uint16_t *dst, const float *x, int64_t rows, int64_t cols, int64_t ld)
{
#pragma omp parallel for schedule(static) if (rows * cols >= 4 * DDPC__PAR_MIN_WORK && !omp_in_parallel())
    for (int64_t r = 0; r < rows; r++)
        ddpc_f32_to_half_array(dst + r * cols, x + r * ld, (size_t)cols, 1);
}

bool ddpc_gemm_onednn(ddpc_precision p, ddpc_transpose ta, ddpc_transpose tb, int64_t m, int64_t n,
                      int64_t k, float alpha, const float *a, int64_t lda, const float *b,
                      int64_t ldb, float beta, float *c, int64_t ldc)
{
    pthread_once(&engine_once, engine_init);
    if (!engine_ok || (p != DDPC_PREC_FP32 && p != DDPC_PREC_BF16) ||
        (p == DDPC_PREC_BF16 && !bf16_ok))
        return false;
    if (m <= 0 || n <= 0 || k <= 0) { /* nothing oneDNN needs to do: sgemm's edge handling */
        ddpc_gemm_f32(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return true;
    }
    thread_cache *t = cache_get();
    if (!t)
        return false;
    const void *ha = a, *hb = b;
    if (p == DDPC_PREC_BF16) {
        int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
        size_t need = (size_t)(ar * ac + br * bc);
        if (need > t->half_cap) {
            uint16_t *h = realloc(t->half, need * sizeof *h);
            if (!h)
                return false;
            t->half = h;
            t->half_cap = need;
            ddpc__count_scratch_grow();
        }
        pack_bf16(t->half, a, ar, ac, lda);
        pack_bf16(t->half + ar * ac, b, br, bc, ldb);
        ha = t->half;
        hb = t->half + ar * ac;
        lda = ac;
        ldb = bc;
    }
    product_key key = (product_key){.dt = (int32_t)p,
                                    .ta = ta == DDPC_TRANS,
                                    .tb = tb == DDPC_TRANS,
                                    .m = m,
                                    .n = n,
                                    .k = k,
                                    .lda = lda,
                                    .ldb = ldb,
                                    .ldc = ldc};
    memcpy(&key.alpha_bits, &alpha, sizeof alpha);
    memcpy(&key.beta_bits, &beta, sizeof beta);
    if (!cache_reserve(t))
        return false;
    cached_product *slot = slot_for(t->slots, t->cap, &key);
    if (!slot->prim) {
        if (product_create(slot, &key) != dnnl_success)
            return false;
        t->used++;
        ddpc__count_primitive();
    }
    dnnl_memory_set_data_handle(slot->a, (void *)ha);
    dnnl_memory_set_data_handle(slot->b, (void *)hb);
    dnnl_memory_set_data_handle(slot->c, c);
    dnnl_exec_arg_t args[3] = {
        {DNNL_ARG_SRC, slot->a}, {DNNL_ARG_WEIGHTS, slot->b}, {DNNL_ARG_DST, slot->c}};
    if (dnnl_primitive_execute(slot->prim, t->stream, 3, args) != dnnl_success)
        return false;
    return dnnl_stream_wait(t->stream) == dnnl_success;
}
