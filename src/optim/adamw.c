/* AdamW (Loshchilov & Hutter, "Decoupled Weight Decay Regularization", 2019) as torch.optim.AdamW
 * (PyTorch 1.13, _single_tensor_adamw, amsgrad off). Scalars are computed in double like Python's
 * and rounded to float where torch hands them to an fp32 kernel; add/addcmul are fused on CPU.
 * Invariant: o->step is the new step count t >= 1, used for the bias corrections 1 - beta^t.
 * GCC vectorises the loop only with -fno-math-errno (sqrtf's errno branch); results are the same. */
#include "optim/optim_impl.h"

#include <math.h>

void ddpc__adamw_update(ddpc_optim *o, float *params, const float *grads,
                        const uint8_t *decay_mask, float lr)
{
    const ddpc_optim_config *c = &o->cfg;
    const double t = (double)o->step;
    const double bc1 = 1.0 - pow((double)c->beta1, t);
    const double bc2 = 1.0 - pow((double)c->beta2, t);
    const float decay = (float)(1.0 - (double)lr * (double)c->weight_decay);
    const float b1 = c->beta1, b2 = c->beta2, eps = c->eps;
    const float a1 = (float)(1.0 - (double)b1); /* alpha=1 - beta1 */
    const float a2 = (float)(1.0 - (double)b2); /* value=1 - beta2 */
    const float neg_step = (float)(-((double)lr / bc1));
    const float bc2_sqrt = (float)sqrt(bc2);
    float *m = o->state[0]; /* exp_avg (n) */
    float *v = o->state[1]; /* exp_avg_sq (n) */
    const int64_t n = (int64_t)o->n;

#pragma omp parallel for schedule(static) if (n >= DDPC_OPTIM_PARALLEL_MIN)
    for (int64_t i = 0; i < n; i++) {
        const float g = grads[i];
        /* param.mul_(1 - lr * wd); a masked element (torch: a group with wd 0) is multiplied by
         * 1, exactly as torch does, which keeps the loop free of branches */
        const float p = params[i] * ((!decay_mask || decay_mask[i]) ? decay : 1.0f);
        const float mi = fmaf(g, a1, m[i] * b1); /* exp_avg.mul_(b1).add_(g, alpha=1-b1) */
        const float vi = fmaf(a2 * g, g, v[i] * b2); /* exp_avg_sq.mul_(b2).addcmul_(g, g, 1-b2) */
        m[i] = mi;
        v[i] = vi;
        const float denom = sqrtf(vi) / bc2_sqrt + eps; /* (v.sqrt() / bc2_sqrt).add_(eps) */
        const float upd = neg_step * mi;                /* addcdiv: value * t1 / t2 */
        params[i] = p + upd / denom;
    }
}
