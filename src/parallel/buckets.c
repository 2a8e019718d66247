// SPDX-License-Identifier: MIT
/* Bucket assignment for the reducer, after PyTorch's compute_bucket_assignment_by_size: tensors
 * in reverse registration order (the order backward finishes them) fill buckets up to a byte cap,
 * with a smaller first bucket so the first all-reduce starts early in backward. Because the model
 * lays tensors out contiguously, each bucket is one contiguous range of the gradient buffer. */
#include "parallel/reducer_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/device.h>

static ddpc_status alloc_tables(ddpc_reducer *r, size_t nt)
{
    r->n_tensors = nt;
    r->bucket_of = ddpc_calloc(nt ? nt : 1, sizeof *r->bucket_of);
    r->ready = ddpc_calloc(nt ? nt : 1, 1);
    r->buckets = ddpc_calloc(nt ? nt : 1, sizeof *r->buckets);
    if (!r->bucket_of || !r->ready || !r->buckets)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for the reducer's bucket tables");
    return DDPC_OK;
}

size_t ddpc_reducer_assign_buckets(const ddpc_model *m, const ddpc_reducer_config *cfg,
                                   size_t *bucket_of, size_t *len)
{
    size_t nb = 0, lo = 0, hi = 0;
    double cap = cfg->first_bucket_mb * 1048576.0;
    for (size_t k = ddpc_model_num_tensors(m); k-- > 0;) {
        const ddpc_param *p = ddpc_model_tensor(m, k);
        bool fits = nb > 0 && (double)(hi - p->offset) * sizeof(float) <= cap;
        /* Tensors are contiguous: a bucket grows downwards from its first (last-registered) one. */
        if (!fits || p->offset + p->numel != lo) {
            if (nb > 0) /* after the first bucket, the regular cap applies */
                cap = cfg->bucket_cap_mb * 1048576.0;
            hi = p->offset + p->numel;
            nb++;
        }
        lo = p->offset;
        bucket_of[k] = nb - 1;
        if (len)
            len[nb - 1] = hi - lo;
    }
    return nb;
}

ddpc_status ddpc__reducer_build_buckets(ddpc_reducer *r)
{
    size_t nt = ddpc_model_num_tensors(r->model);
    DDPC_TRY(alloc_tables(r, nt));
    r->n_buckets = ddpc_reducer_assign_buckets(r->model, &r->cfg, r->bucket_of, NULL);
    for (size_t k = nt; k-- > 0;) {
        const ddpc_param *p = ddpc_model_tensor(r->model, k);
        ddpc__bucket *b = &r->buckets[r->bucket_of[k]];
        if (b->n_tensors++ == 0) /* its last-registered tensor comes first */
            b->hi = p->offset + p->numel;
        b->lo = p->offset;
    }
    /* ZeRO stages in slots. The 16-bit copies live beside the gradients, on the model's device,
     * where the conversions run. */
    const ddpc_kernel_table *k = ddpc_model_backend(r->model);
    if (r->cfg.comm_dtype != DDPC_DTYPE_F32 && r->cfg.zero_stage < 1) {
        for (size_t i = 0; i < r->n_buckets; i++) {
            r->buckets[i].comm = k->alloc((r->buckets[i].hi - r->buckets[i].lo) * 2 + 2);
            if (!r->buckets[i].comm)
                return ddpc_errorf(DDPC_ENOMEM, "out of memory (%s) for the reducer's %s buffers",
                                   k->name, ddpc_dtype_name(r->cfg.comm_dtype));
        }
    }
    return DDPC_OK;
}
