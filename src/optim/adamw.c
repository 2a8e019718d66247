// SPDX-License-Identifier: MIT
/* AdamW (Loshchilov & Hutter, "Decoupled Weight Decay Regularization", 2019) as torch.optim.AdamW
 * (PyTorch 1.13, _single_tensor_adamw, amsgrad off). Scalars are computed in double like Python's
 * and rounded to float where torch hands them to an fp32 kernel; add/addcmul are fused on CPU.
 * Invariant: o->step is the new step count t >= 1, used for the bias corrections 1 - beta^t.
 * The decay mask is split into runs of equal value (one per tensor in practice) so the update loop
 * sees one decay factor per run and vectorises; GCC needs -fno-math-errno for sqrtf there. */
#include "core/simd_dispatch.h"
#include "optim/optim_impl.h"

#include <math.h>
#include <omp.h>
#include <string.h>

/* Elements [i0, i1) of params, exp_avg m and exp_avg_sq v with one decay factor for all of them. */
static void update_run(float *restrict params, const float *restrict grads, float *restrict m,
                       float *restrict v, int64_t i0, int64_t i1, float decay, const ddpc_adamw_coef *k)
{
    const float b1 = k->b1, b2 = k->b2, a1 = k->a1, a2 = k->a2, eps = k->eps;
    const float neg_step = k->neg_step, bc2_sqrt = k->bc2_sqrt;
    for (int64_t i = i0; i < i1; i++) {
        const float g = grads[i];
        const float p = params[i] * decay;           /* param.mul_(1 - lr * wd) */
        const float mi = fmaf(g, a1, m[i] * b1);     /* exp_avg.mul_(b1).add_(g, alpha=1-b1) */
        const float vi = fmaf(a2 * g, g, v[i] * b2); /* exp_avg_sq.mul_(b2).addcmul_(g, g, 1-b2) */
        m[i] = mi;
        v[i] = vi;
        const float denom = sqrtf(vi) / bc2_sqrt + eps; /* (v.sqrt() / bc2_sqrt).add_(eps) */
        const float upd = neg_step * mi;                /* addcdiv: value * t1 / t2 */
        params[i] = p + upd / denom;
    }
}

/* First index in [i, n) whose mask differs in truth from mask[i] (n when none): word-wise, since
 * runs are whole tensors. */
static int64_t run_end(const uint8_t *mask, int64_t i, int64_t n)
{
    const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
    const int on = mask[i] != 0;
    while (i + 8 <= n) {
        uint64_t w;
        memcpy(&w, mask + i, sizeof w);
        /* on: stop at a word with a zero byte; off: stop at a word with a nonzero byte */
        int uniform = on ? ((w - ones) & ~w & highs) == 0 : w == 0;
        if (!uniform)
            break;
        i += 8;
    }
    while (i < n && (mask[i] != 0) == on)
        i++;
    return i;
}

void DDPC_SIMD(ddpc__adamw_update)(ddpc_optim *o, size_t off, size_t count, float *params,
                                   const float *grads, const uint8_t *decay_mask, float lr)
{
    const ddpc_adamw_coef k = ddpc__adamw_coef_of(o, lr);
    const float decay = k.decay;
    float *m = o->state[0] + off; /* exp_avg (count) */
    float *v = o->state[1] + off; /* exp_avg_sq (count) */
    const int64_t n = (int64_t)count;

    /* One fork; each thread walks the runs of its own contiguous chunk. */
#pragma omp parallel if (n >= DDPC_OPTIM_PARALLEL_MIN)
    {
        int64_t nt = omp_get_num_threads(), id = omp_get_thread_num();
        int64_t lo = n * id / nt, hi = n * (id + 1) / nt;
        while (lo < hi) {
            int64_t end = decay_mask ? run_end(decay_mask, lo, hi) : hi;
            float d = !decay_mask || decay_mask[lo] ? decay : 1.0f;
            update_run(params, grads, m, v, lo, end, d, &k);
            lo = end;
        }
    }
}
DDPC_SIMD_DISPATCH_VOID(ddpc__adamw_update,
                        (ddpc_optim * o, size_t off, size_t count, float *params,
                         const float *grads, const uint8_t *decay_mask, float lr),
                        (o, off, count, params, grads, decay_mask, lr))
