// SPDX-License-Identifier: MIT
/* The memory plan's arithmetic and the refusal of a plan that does not fit. Invariant: total is
 * the sum of the items, and every figure is per rank and a function of the input alone, so every
 * rank (and `ddpc plan` on a laptop) computes the same plan for the same config. */
#include "parallel/reducer_impl.h" /* the sizes of ZeRO's buffer pools */

#include <ddpc/memplan.h>

#include <stdio.h>

static const char *const item_names[DDPC_MEM_ITEMS] = {"parameters", "gradients", "optimizer state",
                                                       "activations", "communication"};

const char *ddpc_memplan_item_name(ddpc_memplan_item i)
{
    return (unsigned)i < DDPC_MEM_ITEMS ? item_names[i] : "?";
}

/* Floats rank 0 owns (chunk 0 of every bucket) and the largest bucket padded to a multiple of W
 * (the size of every ZeRO buffer: reduce-scatter slots, gradient pool, parameter slots). */
static void shard_sizes(const ddpc_memplan_input *in, size_t *owned, size_t *maxpad)
{
    size_t w = (size_t)in->world, top = 0;
    *owned = 0;
    for (size_t b = 0; b < in->n_buckets; b++) {
        size_t len = in->bucket_len[b];
        *owned += (len + w - 1) / w;
        top = len > top ? len : top;
    }
    *maxpad = (top + w - 1) / w * w;
}

/* The reducer's buffers of maxpad floats: two reduce-scatter slots from stage 1, the pool where
 * stage 2 sums gradients (f32 communication), the slots where stage 3 keeps gathered buckets. */
static uint64_t zero_buffers(int stage, ddpc_dtype comm)
{
    return 2 + (stage >= 2 && comm == DDPC_DTYPE_F32 ? DDPC__GPOOL : 0) +
           (stage == 3 ? DDPC__PSLOTS : 0);
}

ddpc_status ddpc_memplan_compute(const ddpc_memplan_input *in, ddpc_memplan *out)
{
    if (in->world < 1 || in->stage < 0 || in->stage > DDPC_MEMPLAN_MAX_STAGE ||
        in->optim_states < 0)
        return ddpc_errorf(DDPC_EINVAL,
                           "memory plan: world %d, zero.stage %d and %d optimizer state buffers "
                           "(need world >= 1, stage 0..%d, buffers >= 0)",
                           in->world, in->stage, in->optim_states, DDPC_MEMPLAN_MAX_STAGE);
    *out = (ddpc_memplan){.stage = in->world > 1 ? in->stage : 0, .owned = in->n};
    uint64_t n = in->n, k = (uint64_t)in->optim_states, *b = out->bytes;
    size_t owned, maxpad, bucketed = 0;
    shard_sizes(in, &owned, &maxpad);
    for (size_t i = 0; i < in->n_buckets; i++)
        bucketed += in->bucket_len[i];
    int s = out->stage;
    if (s > 0)
        out->owned = owned, out->max_bucket_padded = maxpad;
    b[DDPC_MEM_PARAMS] = s == 3 ? 4 * (uint64_t)owned : 4 * n;
    b[DDPC_MEM_GRADS] = s >= 2 ? 4 * (uint64_t)owned : 4 * n;
    b[DDPC_MEM_OPTIM] = 4 * k * (uint64_t)out->owned;
    b[DDPC_MEM_ACTIVATIONS] = in->act_bytes[in->checkpointing];
    out->activations_other = in->act_bytes[!in->checkpointing];
    /* DataParallel: one process (stage 0), every replica a whole model with its arena */
    uint64_t r = in->replicas > 1 ? (uint64_t)in->replicas : 1;
    out->replicas = (int)r;
    b[DDPC_MEM_PARAMS] *= r;
    b[DDPC_MEM_GRADS] *= r;
    b[DDPC_MEM_ACTIVATIONS] *= r;
    out->activations_other *= r;
    if (in->world > 1 && s == 0)
        b[DDPC_MEM_COMM] = in->comm_dtype == DDPC_DTYPE_F32 ? 0 : 2 * (uint64_t)bucketed;
    else if (s > 0)
        b[DDPC_MEM_COMM] = 4 * (uint64_t)maxpad * zero_buffers(s, in->comm_dtype);
    for (int i = 0; i < DDPC_MEM_ITEMS; i++)
        out->total += b[i];
    return DDPC_OK;
}

ddpc_memplan_item ddpc_memplan_largest(const ddpc_memplan *p)
{
    ddpc_memplan_item best = DDPC_MEM_PARAMS;
    for (int i = 1; i < DDPC_MEM_ITEMS; i++)
        if (p->bytes[i] > p->bytes[best])
            best = (ddpc_memplan_item)i;
    return best;
}

/* Total of `in` changed to `stage`, `ckpt` and `world`. */
static uint64_t total_with(const ddpc_memplan_input *in, int stage, bool ckpt, int world)
{
    ddpc_memplan_input v = *in;
    v.stage = stage, v.checkpointing = ckpt, v.world = world;
    if (world != in->world) /* several ranks: DDP, one model each */
        v.replicas = 0;
    ddpc_memplan p = {.total = UINT64_MAX};
    return ddpc_memplan_compute(&v, &p) == DDPC_OK ? p.total : UINT64_MAX;
}

/* The first change that fits, as a phrase and its total; false when none does. */
static bool cheapest_fix(const ddpc_memplan_input *in, uint64_t limit, char *what, size_t cap,
                         uint64_t *total)
{
    bool ck = in->checkpointing || in->can_checkpoint;
    if (!in->checkpointing && in->can_checkpoint &&
        (*total = total_with(in, in->stage, true, in->world)) <= limit) {
        snprintf(what, cap, "model.activation_checkpointing true");
        return true;
    }
    for (int s = in->stage + 1; in->world > 1 && s <= DDPC_MEMPLAN_MAX_STAGE; s++)
        if ((*total = total_with(in, s, in->checkpointing, in->world)) <= limit) {
            snprintf(what, cap, "zero.stage %d", s);
            return true;
        }
    /* More ranks, at the lowest stage that fits there (stage 3's gathered buckets can outweigh
     * its savings on a model with one large tensor). */
    for (int w = in->world < 2 ? 2 : 2 * in->world; w <= (1 << 20); w *= 2)
        for (int s = 1; s <= DDPC_MEMPLAN_MAX_STAGE; s++)
            if ((*total = total_with(in, s, ck, w)) <= limit) {
                snprintf(what, cap, "zero.stage %d%s on %d ranks", s,
                         ck != in->checkpointing ? " with model.activation_checkpointing true" : "",
                         w);
                return true;
            }
    return false;
}

ddpc_status ddpc_memplan_check(const ddpc_memplan_input *in, uint64_t limit, const char *limit_what)
{
    ddpc_memplan p;
    DDPC_TRY(ddpc_memplan_compute(in, &p));
    if (p.total <= limit)
        return DDPC_OK;
    ddpc_memplan_item big = ddpc_memplan_largest(&p);
    char need[32], item[32], fix_bytes[32], fix[96];
    ddpc_memplan_format_bytes(p.total, need, sizeof need);
    ddpc_memplan_format_bytes(p.bytes[big], item, sizeof item);
    uint64_t fix_total = 0;
    if (cheapest_fix(in, limit, fix, sizeof fix, &fix_total))
        return ddpc_errorf(DDPC_ENOMEM,
                           "the plan needs %s per rank (largest: %s %s) but %s; %s would need "
                           "%s per rank",
                           need, ddpc_memplan_item_name(big), item, limit_what, fix,
                           ddpc_memplan_format_bytes(fix_total, fix_bytes, sizeof fix_bytes));
    /* The least any stage and world needs (padding buckets to a multiple of a huge world grows
     * the staging buffers again, and stage 3's gathered buckets can outweigh its savings). */
    ddpc_memplan_input v = *in;
    v.checkpointing = in->checkpointing || in->can_checkpoint;
    ddpc_memplan floor = {.total = UINT64_MAX}, at;
    for (v.stage = 0; v.stage <= DDPC_MEMPLAN_MAX_STAGE; v.stage++)
        for (v.world = in->world; v.world <= (1 << 20); v.world *= 2)
            if (ddpc_memplan_compute(&v, &at) == DDPC_OK && at.total < floor.total)
                floor = at;
    ddpc_memplan_item left = ddpc_memplan_largest(&floor);
    return ddpc_errorf(DDPC_ENOMEM,
                       "the plan needs %s per rank (largest: %s %s) but %s; no zero.stage, "
                       "activation checkpointing or number of ranks fits (the least is %s per "
                       "rank, mostly %s): lower the batch size per rank%s",
                       need, ddpc_memplan_item_name(big), item, limit_what,
                       ddpc_memplan_format_bytes(floor.total, fix_bytes, sizeof fix_bytes),
                       ddpc_memplan_item_name(left),
                       left == DDPC_MEM_ACTIVATIONS ? "" : " or ddp.bucket_cap_mb");
}

const char *ddpc_memplan_format_bytes(uint64_t bytes, char *buf, size_t cap)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024.0 && u < 5)
        v /= 1024.0, u++;
    if (u == 0)
        snprintf(buf, cap, "%llu B", (unsigned long long)bytes);
    else
        snprintf(buf, cap, "%.*f %s", v >= 100.0 ? 0 : v >= 10.0 ? 1 : 2, v, units[u]);
    return buf;
}
