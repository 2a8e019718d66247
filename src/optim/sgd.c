// SPDX-License-Identifier: MIT
/* SGD with momentum, dampening, Nesterov and L2 weight decay, as torch.optim.SGD (PyTorch 1.13,
 * _single_tensor_sgd). Each torch op is reproduced with its fp32 rounding: Tensor.add(x, alpha=a)
 * is one fused multiply-add on CPU (fmaf), scalars from Python doubles are rounded to float once.
 * Invariant: the momentum buffer is only read after the first step, which copies the gradient. */
#include "core/simd_dispatch.h"
#include "optim/optim_impl.h"

#include <math.h>

void DDPC_SIMD(ddpc__sgd_update)(ddpc_optim *o, size_t off, size_t count, float *params,
                                 const float *grads, const uint8_t *decay_mask, float lr)
{
    const ddpc_sgd_coef k = ddpc__sgd_coef_of(o, lr);
    const float wd = k.wd, mom = k.momentum, keep = k.keep, neg_lr = k.neg_lr;
    const bool nesterov = k.nesterov, first = k.first;
    float *buf = o->state[0] + off; /* (count) */
    const int64_t n = (int64_t)count;

#pragma omp parallel for schedule(static) if (n >= DDPC_OPTIM_PARALLEL_MIN)
    for (int64_t i = 0; i < n; i++) {
        float p = params[i];
        float d = grads[i];
        if (wd != 0.0f && (!decay_mask || decay_mask[i]))
            d = fmaf(p, wd, d); /* d_p = d_p.add(param, alpha=wd) */
        if (mom != 0.0f) {
            /* buf = clone(d_p) on the first step, else buf.mul_(mom).add_(d_p, alpha=1-damp) */
            float b = first ? d : fmaf(d, keep, buf[i] * mom);
            buf[i] = b;
            d = nesterov ? fmaf(b, mom, d) : b; /* d_p.add(buf, alpha=mom) */
        }
        params[i] = fmaf(d, neg_lr, p); /* param.add_(d_p, alpha=-lr) */
    }
}
DDPC_SIMD_DISPATCH_VOID(ddpc__sgd_update,
                        (ddpc_optim * o, size_t off, size_t count, float *params,
                         const float *grads, const uint8_t *decay_mask, float lr),
                        (o, off, count, params, grads, decay_mask, lr))
